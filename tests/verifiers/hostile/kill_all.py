# property: kill(-1, SIGKILL): only its own processes can be reached
# kind: stdio
import os, signal
os.kill(-1, signal.SIGKILL)
