# property: endless stderr: output cap kills the run, parent memory bounded
# kind: stdio
import sys
chunk = "y" * 65536
while True:
    sys.stderr.write(chunk)
