# property: kills its parent and PID 1: the verifier survives
# kind: stdio
import os, signal
for pid in (os.getppid(), 1, 0):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
