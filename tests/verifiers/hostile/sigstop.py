# property: stops itself (SIGSTOP) and its child: the deadline still ends the run
# kind: stdio
import os, signal, time
pid = os.fork()
if pid == 0:
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(0)
os.kill(os.getpid(), signal.SIGSTOP)
os.kill(0, signal.SIGSTOP)
time.sleep(100)
