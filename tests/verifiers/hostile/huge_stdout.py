# property: endless stdout: output cap kills the run, parent memory bounded
# kind: stdio
import sys
chunk = "x" * 65536
while True:
    sys.stdout.write(chunk)
