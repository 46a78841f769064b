# property: tries mount, unshare, chroot, ptrace, setuid: all denied
# kind: stdio
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(0x10000000) == 0: print("LEAK unshare user")
if libc.mount(b"tmpfs", b"/work", b"tmpfs", 0, None) == 0: print("LEAK mount")
if libc.ptrace(16, 1, 0, 0) == 0: print("LEAK ptrace")
try:
    os.setuid(0); print("LEAK setuid")
except OSError:
    pass
try:
    os.chroot("/"); print("LEAK chroot")
except OSError:
    pass
