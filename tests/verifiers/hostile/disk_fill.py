# property: fills the disk: size-capped tmpfs and file-size limit; nothing reaches the host
# kind: stdio
import os
i = 0
while True:
    try:
        with open(f"big{i}", "wb") as f:
            while True:
                f.write(b"z" * (1 << 20))
    except OSError:
        i += 1
        if i > 200:
            break
