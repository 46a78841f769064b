# property: cheat: write fake results to the result channel and exit
# kind: functional
import os, json
for i in range(5):
    os.write(3, (json.dumps({"i": i, "ok": 1, "v": 0}) + "\n").encode())
os._exit(0)
def add(a, b):
    return 0
