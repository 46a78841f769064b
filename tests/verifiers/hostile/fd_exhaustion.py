# property: exhausts file descriptors
# kind: stdio
import os
fds = []
try:
    while True:
        fds.extend(os.pipe())
except OSError:
    pass
print(len(fds))
import time; time.sleep(100)
