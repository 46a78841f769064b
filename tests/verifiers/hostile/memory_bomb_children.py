# property: memory bomb spread over children: the slot's memory cgroup stops it
# kind: stdio
import os, time
for _ in range(8):
    if os.fork() == 0:
        try:
            b = bytearray(180 * 1024 * 1024)  # under the address-space limit: only the cgroup stops 8 of them
            for i in range(0, len(b), 4096):
                b[i] = 1
        except MemoryError:
            pass
        time.sleep(100)
        os._exit(0)
time.sleep(100)
