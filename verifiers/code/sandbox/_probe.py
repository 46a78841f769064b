"""Which isolation layers this host allows: each one is tried in a throw-away forked child.

Standard library only (runs inside `python -I -S _zygote.py --probe [CGROUP_PARENT]`). A layer counts
as available only if the exact operation the sandbox performs succeeds here.
"""

from __future__ import annotations

import os
import resource
import tempfile

import _libc

PROBE_UID = 65534


def _try_in_child(fn) -> str | None:
    """None when fn() succeeds in a forked child, else the error text."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            fn()
            os._exit(0)
        except BaseException as exc:
            os.write(w, f"{type(exc).__name__}: {exc}".encode()[:500])
            os._exit(1)
    os.close(w)
    msg = os.read(r, 1000).decode(errors="replace")
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return None if status == 0 else (msg or f"status {status}")


def _pid_ns() -> None:
    pid = _libc.clone_process(_libc.CLONE_NEWPID)
    if pid == 0:
        os._exit(0 if os.getpid() == 1 else 1)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise OSError("child was not pid 1")


def _chroot() -> None:
    _libc.unshare(_libc.CLONE_NEWNS)
    _libc.mount(None, "/", None, _libc.MS_REC | _libc.MS_PRIVATE)
    d = tempfile.mkdtemp()
    try:
        _libc.mount("tmpfs", d, "tmpfs", 0, "size=1m")
        os.chroot(d)
    finally:
        if os.path.isdir(d):
            os.rmdir(d)


def _uid_drop() -> None:
    os.setgroups([])
    os.setresgid(PROBE_UID, PROBE_UID, PROBE_UID)
    os.setresuid(PROBE_UID, PROBE_UID, PROBE_UID)


def _seccomp() -> None:
    _libc.SeccompFilter().load()
    try:
        os.execv("/bin/true", ["/bin/true"])
    except PermissionError:
        return
    raise OSError("execve was not denied")


def _rlimits() -> None:
    resource.setrlimit(resource.RLIMIT_NPROC, (64, 64))
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _cgroup(ctl: str, knob: str, parent: str | None):
    def fn() -> None:
        base = f"/sys/fs/cgroup/{ctl}"
        d = os.path.join(base, parent or "", f"scalerl-probe-{os.getpid()}")
        os.makedirs(d)
        try:
            if not os.path.exists(os.path.join(d, knob)):
                raise OSError(f"{base} is not a cgroup v1 {ctl} hierarchy")
            with open(os.path.join(d, knob), "w") as f:
                f.write("1000000000" if ctl == "memory" else "64")
        finally:
            os.rmdir(d)
    return fn


def probe(cgroup_parent: str | None = None) -> dict:
    checks = {
        "pid_ns": _pid_ns,
        "net_ns": lambda: _libc.unshare(_libc.CLONE_NEWNET),
        "ipc_ns": lambda: _libc.unshare(_libc.CLONE_NEWIPC),
        "uts_ns": lambda: _libc.unshare(_libc.CLONE_NEWUTS),
        "mount_ns": lambda: _libc.unshare(_libc.CLONE_NEWNS),
        "chroot": _chroot,
        "uid_drop": _uid_drop,
        "seccomp": _seccomp,
        "rlimits": _rlimits,
        "cgroup_memory": _cgroup("memory", "memory.limit_in_bytes", cgroup_parent),
        "cgroup_pids": _cgroup("pids", "pids.max", cgroup_parent),
    }
    layers, errors = {}, {}
    for name, fn in checks.items():
        err = _try_in_child(fn)
        layers[name] = err is None
        if err:
            errors[name] = err
    return {"layers": layers, "errors": errors}
