# property: closes its stdout and keeps writing
# kind: stdio
import os, sys
os.close(1)
print("hello")
sys.stdout.flush()
