# property: ignores every catchable signal and spins: SIGKILL still ends it
# kind: stdio
import signal
for s in range(1, 65):
    try:
        signal.signal(s, signal.SIG_IGN)
    except (OSError, ValueError, RuntimeError):
        pass
while True:
    pass
