# property: subprocess bomb: execve is denied, so no program can be started
# kind: stdio
import subprocess, sys, os
for _ in range(50):
    try:
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
    except Exception:
        pass
    try:
        os.system("sh -c 'while true; do :; done &'")
    except Exception:
        pass
import time; time.sleep(100)
