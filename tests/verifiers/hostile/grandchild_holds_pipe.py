# property: a grandchild keeps stdout open after the program exits: run still ends
# kind: stdio
import os, time
if os.fork() == 0:
    if os.fork() == 0:
        time.sleep(300)
    os._exit(0)
print("parent leaves")
