# property: fork bomb: processes capped (rlimit, pids cgroup), all killed with the PID namespace
# kind: stdio
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
