# property: sleeps forever: wall-clock deadline
# kind: stdio
import time
time.sleep(10**6)
