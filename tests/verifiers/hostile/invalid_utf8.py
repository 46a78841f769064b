# property: prints invalid UTF-8
# kind: stdio
import sys
sys.stdout.buffer.write(b"\xff\xfe\x80 \xc3\x28 ok\n")
