# property: opens sockets to loopback and the internet: denied (seccomp, network namespace)
# kind: stdio
import socket
for addr in [("127.0.0.1", {port}), ("1.1.1.1", 53)]:
    for fam, kind in [(socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_DGRAM)]:
        try:
            s = socket.socket(fam, kind)
            s.settimeout(0.5)
            s.connect(addr)
            s.sendall(b"LEAK")
            print("LEAK connected", addr)
        except OSError:
            pass
