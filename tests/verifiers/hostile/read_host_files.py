# property: reads host files (data sets, repository, secrets): none visible
# kind: stdio
import os
for p in ["/etc/shadow", "/etc/passwd", "/etc/hostname", "/root/.bashrc", "{repo}/pyproject.toml",
          "{reference}/mbpp_sanitized_prime/new_mbpp.json", "/proc/1/environ", "/proc/self/environ",
          "/sys/class/net/lo/address", "/home"]:
    try:
        if os.path.isdir(p):
            print("LEAK", p, os.listdir(p))
        else:
            with open(p, "rb") as f:
                print("LEAK", p, f.read(100))
    except OSError:
        pass
