# property: double-forked daemon in a new session outliving the run: killed with the namespace
# kind: stdio
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(300)
        os._exit(0)
    os._exit(0)
