# property: creates files until inodes run out: inode-capped tmpfs
# kind: stdio
import os
i = 0
while i < 10**6:
    try:
        open(f"f{i}", "w").close()
    except OSError:
        break
    i += 1
import time; time.sleep(100)
