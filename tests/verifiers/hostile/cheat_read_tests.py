# property: cheat: look for the expected output in fds, files and argv
# kind: stdio
import os, sys
found = []
for fd in range(3, 64):
    try:
        found.append(os.read(fd, 1 << 16))
    except OSError:
        pass
for root, dirs, files in os.walk("/"):
    if root.startswith(("/usr", "/lib", "/root", "/dev")):
        continue
    for n in files:
        try:
            found.append(open(os.path.join(root, n), "rb").read(1 << 16))
        except OSError:
            pass
sys.stdout.write(repr(found) + repr(sys.argv))
