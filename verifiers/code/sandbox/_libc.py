"""Thin ctypes bindings the fork server needs: namespaces, mounts, clone, prctl and a libseccomp filter.

Standard library only: this module is imported by the fork server, which runs under `python -I -S`
(no site-packages). Python 3.11 has no `os.unshare`, and `os.fork` cannot create a PID namespace in
one step, so `clone_process` calls the raw clone syscall and runs CPython's own before/after-fork hooks
around it, exactly as `os.fork` does.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWCGROUP = 0x02000000
NAMESPACE_FLAGS = (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
                   | CLONE_NEWNET | CLONE_NEWCGROUP)
SIGCHLD = 17
SYS_CLONE = 56  # x86_64

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def umount_detach(target: str) -> None:
    _check(_libc.umount2(target.encode(), 2), f"umount {target}")  # MNT_DETACH


def prctl(option: int, arg: int = 0) -> None:
    _check(_libc.prctl(option, arg, 0, 0, 0), "prctl")


def clone_process(flags: int) -> int:
    """fork(2) with extra clone flags (e.g. CLONE_NEWPID); returns 0 in the child, the pid in the parent."""
    api = ctypes.pythonapi
    api.PyOS_BeforeFork()
    pid = _libc.syscall(SYS_CLONE, ctypes.c_ulong(flags | SIGCHLD), None, None, None, None)
    if pid == 0:
        api.PyOS_AfterFork_Child()
        return 0
    err = ctypes.get_errno()
    api.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(err, f"clone: {os.strerror(err)}")
    return pid


# ---------------------------------------------------------------------------------------------- seccomp
class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_NE, SCMP_CMP_MASKED_EQ = 1, 7
AF_UNIX = 1

# Denied with EPERM: ways out of the sandbox or into the kernel's rarely-hardened corners. execve is
# denied so a program cannot re-exec itself (e.g. with asserts disabled) or start other programs.
# setrlimit stays allowed: hard limits equal soft ones and an unprivileged uid cannot raise them.
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "pidfd_open",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "mount_setattr", "move_mount",
    "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "name_to_handle_at", "open_by_handle_at",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "swapon", "swapoff", "acct", "quotactl", "syslog", "vhangup", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "sethostname", "setdomainname", "bpf", "perf_event_open", "userfaultfd",
    "keyctl", "add_key", "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "personality", "lookup_dcookie", "fanotify_init", "execve", "execveat",
    "iopl", "ioperm", "mbind", "migrate_pages", "move_pages", "set_mempolicy", "memfd_secret",
)


def _seccomp_lib() -> ctypes.CDLL:
    path = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    lib = ctypes.CDLL(path, use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    return lib


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


class SeccompFilter:
    """A deny-list filter built once in the fork server and loaded by each child (`load`)."""

    def __init__(self) -> None:
        self._lib = _seccomp_lib()
        self._ctx = self._lib.seccomp_init(SCMP_ACT_ALLOW)
        if not self._ctx:
            raise OSError(errno.EINVAL, "seccomp_init failed")
        eperm = 0x00050000 | errno.EPERM
        for name in DENIED_SYSCALLS:
            self._rule(eperm, name)
        # clone3 cannot be argument-filtered (flags live in memory): ENOSYS makes glibc fall back to clone.
        self._rule(0x00050000 | errno.ENOSYS, "clone3")
        for flag in (CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
                     CLONE_NEWCGROUP):
            self._rule(eperm, "clone", _ArgCmp(0, SCMP_CMP_MASKED_EQ, flag, flag))
        # Sockets: only AF_UNIX (socketpair, multiprocessing); the network namespace has no route anyway.
        self._rule(eperm, "socket", _ArgCmp(0, SCMP_CMP_NE, AF_UNIX, 0))
        self._compile()

    def _rule(self, action: int, name: str, *cmps: _ArgCmp) -> None:
        nr = self._lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:  # unknown on this kernel/arch: nothing to deny
            return
        arr = (_ArgCmp * max(1, len(cmps)))(*cmps)
        rc = self._lib.seccomp_rule_add_array(self._ctx, action, nr, len(cmps), arr)
        if rc < 0:
            raise OSError(-rc, f"seccomp_rule_add {name}: {os.strerror(-rc)}")

    def _compile(self) -> None:
        """Export the BPF program once; each child then installs it with one prctl (no recompilation)."""
        self._lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
        fd = os.memfd_create("seccomp-bpf")
        try:
            rc = self._lib.seccomp_export_bpf(self._ctx, fd)
            if rc < 0:
                raise OSError(-rc, f"seccomp_export_bpf: {os.strerror(-rc)}")
            size = os.lseek(fd, 0, os.SEEK_END)
            os.lseek(fd, 0, os.SEEK_SET)
            bpf = os.read(fd, size)
        finally:
            os.close(fd)
        self._buf = ctypes.create_string_buffer(bpf, len(bpf))
        self._prog = _SockFprog(len(bpf) // 8, ctypes.addressof(self._buf))

    def load(self) -> None:
        """Install the filter in the calling process (sets no_new_privs first, as it must)."""
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(self._prog), 0, 0),
               "seccomp filter")
