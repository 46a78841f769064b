# property: aborts
# kind: stdio
import os
os.abort()
