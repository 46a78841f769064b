# property: thread bomb: threads capped, run ends at its deadline
# kind: stdio
import threading, time
while True:
    try:
        threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()
    except Exception:
        pass
