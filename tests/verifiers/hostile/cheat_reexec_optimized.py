# property: cheat: re-exec the interpreter with -O (asserts disabled)
# kind: assert
import os, sys
def add(a, b):
    return 0
try:
    os.execv(sys.executable, [sys.executable, "-O", "-c", "pass"])
except OSError:
    pass
