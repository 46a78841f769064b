"""The fork server (zygote): `python -I -S _zygote.py CONFIG_JSON` or `... --probe`.

A small, long-lived, single-threaded process holding no models or data. It re-execs itself once with an
unlimited stack limit (see STACK_ENV) and gives the builtins `exit`/`quit` (`site` never runs). Then it enters its own
network, IPC, UTS and mount namespaces (so every child has no network and cannot see host IPC), builds two
read-only roots (bind mounts of /usr, /lib*, /bin and the Python install, a few /dev nodes, an empty
/work) on private tmpfs, scrubs its environment (inherited by every child), builds a seccomp filter and
moves itself into its slot's cgroups (one server per slot). Then, per request from the parent (over a
SOCK_SEQPACKET socket, file descriptors passed with SCM_RIGHTS), it passes the request's fds to a child
already cloned into fresh PID and IPC namespaces and prepared (see `_child`; with a PID namespace it is
cloned while the previous program runs, alternating between the two roots and the slot's two uids),
clones the next one, watches the running one with a pidfd, kills it at its wall-clock deadline or on
request, reaps it and reports exit status, CPU time and cgroup OOM kills. `idle` kills the waiting child.

Kill semantics: the child is PID 1 of its namespace, so killing it makes the kernel kill every process
left in the namespace (daemons, detached grandchildren, fork bombs); wait4 returns only once they are
all gone. Without a PID namespace, the process group, the slot's cgroup and every process of the slot's
uid are killed instead. If the parent dies, the zygote dies (parent-death signal), and its children
with it.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import selectors
import shutil
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _child
import _libc

NS_LAYERS = {"net_ns": _libc.CLONE_NEWNET, "ipc_ns": _libc.CLONE_NEWIPC, "uts_ns": _libc.CLONE_NEWUTS,
             "mount_ns": _libc.CLONE_NEWNS}  # entered once by the zygote; pid_ns is per child
PRELOAD = ("math", "re", "collections", "heapq", "bisect", "itertools", "functools", "operator", "string",
           "typing", "copy", "random", "decimal", "fractions", "statistics", "datetime", "array", "cmath",
           "dataclasses", "enum", "textwrap", "unicodedata", "struct", "hashlib", "io", "threading")
CHILD_FAIL = 120  # exit status of a child whose isolation setup failed (the verifier's error, not the model's)
CHILD_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/work", "LANG": "C.UTF-8", "TMPDIR": "/work"}
ROOTS = 2  # per slot: the running program's root and the next child's
# Started with an unlimited stack: the kernel then leaves the main thread's stack room to grow (the gap
# below it is fixed at exec from this limit) while glibc keeps its small default thread stack (it would
# size every thread's stack by a finite limit). Each child lowers the limit to its job's memory limit.
STACK_ENV = "SCALERL_SANDBOX_STACK"


def root_path(base: str, side: int) -> str:
    return f"{base}/r{side}"


# ---------------------------------------------------------------------------------------------- setup
def build_root(root: str) -> None:
    """Read-only root on a private tmpfs: the system and Python install, nothing else of the host."""
    ro = _libc.MS_BIND | _libc.MS_REMOUNT | _libc.MS_RDONLY | _libc.MS_NOSUID | _libc.MS_NODEV
    _libc.mount("tmpfs", root, "tmpfs", _libc.MS_NOSUID | _libc.MS_NODEV, "size=1m,mode=0755")
    for path in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", sys.base_prefix):
        if not os.path.lexists(path) or os.path.lexists(root + path):
            continue
        os.makedirs(os.path.dirname(root + path), mode=0o755, exist_ok=True)
        if os.path.islink(path):
            os.symlink(os.readlink(path), root + path)
            continue
        os.makedirs(root + path, mode=0o755)
        _libc.mount(path, root + path, None, _libc.MS_BIND | _libc.MS_REC)
        _libc.mount(None, root + path, None, ro)
    os.makedirs(root + "/dev", mode=0o755)
    for dev in ("null", "zero", "full", "random", "urandom"):
        open(root + "/dev/" + dev, "w").close()
        _libc.mount("/dev/" + dev, root + "/dev/" + dev, None, _libc.MS_BIND)
        _libc.mount(None, root + "/dev/" + dev, None, _libc.MS_BIND | _libc.MS_REMOUNT | _libc.MS_NOSUID)
    os.makedirs(root + "/work", mode=0o755)  # mount point of the per-run tmpfs (Server._prepare_work)
    os.symlink("work", root + "/tmp")
    _libc.mount("tmpfs", root, "tmpfs", _libc.MS_REMOUNT | _libc.MS_RDONLY | _libc.MS_NOSUID | _libc.MS_NODEV)


def _slot_dir(cfg: dict, ctl: str) -> str:
    return os.path.join(cfg["cgroup_root"][ctl], f"slot{cfg['slot']}")


def join_cgroups(cfg: dict) -> None:
    """Create this slot's cgroups and move the server into them once: children inherit them at fork,
    which is far cheaper than migrating every child (a cgroup v1 migration waits for an RCU grace period)."""
    for ctl, base in cfg["cgroup_root"].items():
        if cfg["layers"].get(f"cgroup_{ctl}"):
            _sweep_stale(os.path.dirname(base), os.path.basename(base))
            for attempt in range(3):  # a concurrent sweep may remove our empty directory before we join
                try:
                    os.makedirs(_slot_dir(cfg, ctl), exist_ok=True)
                    with open(os.path.join(_slot_dir(cfg, ctl), "cgroup.procs"), "w") as f:
                        f.write(str(os.getpid()))
                    break
                except FileNotFoundError:
                    if attempt == 2:
                        raise


def _sweep_stale(parent: str, own: str) -> None:
    """Remove cgroups of sandboxes that died uncleanly: a live server always sits in its slot's cgroup,
    so only empty ones go (rmdir refuses a populated cgroup)."""
    for name in os.listdir(parent):
        if not name.startswith("scalerl-") or name == own:
            continue
        path = os.path.join(parent, name)
        try:
            subs = os.listdir(path)
        except OSError:  # another sandbox's sweep or shutdown removed it meanwhile
            continue
        for sub in subs:
            if sub.startswith("slot"):
                try:
                    os.rmdir(os.path.join(path, sub))
                except OSError:
                    pass
        try:
            os.rmdir(path)
        except OSError:
            pass


def leave_cgroups(cfg: dict) -> None:
    for ctl, base in cfg["cgroup_root"].items():
        if cfg["layers"].get(f"cgroup_{ctl}"):
            try:
                with open(os.path.join(os.path.dirname(base), "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
                os.rmdir(_slot_dir(cfg, ctl))
                os.rmdir(base)  # fails while other slots still use it; the last one out removes it
            except OSError:
                pass


def _cg_write(cfg: dict, ctl: str, name: str, value: str) -> None:
    with open(os.path.join(_slot_dir(cfg, ctl), name), "w") as f:
        f.write(value)


class OomCounter:
    """The slot's cumulative OOM-kill count (memory.oom_control), read through one fd kept open."""

    def __init__(self, cfg: dict) -> None:
        self.fd = None
        if cfg["layers"].get("cgroup_memory"):
            try:
                self.fd = os.open(os.path.join(_slot_dir(cfg, "memory"), "memory.oom_control"), os.O_RDONLY)
            except OSError:
                pass

    def read(self) -> int:
        if self.fd is None:
            return 0
        try:
            for line in os.pread(self.fd, 4096, 0).decode().splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0


# ---------------------------------------------------------------------------------------------- server
class Server:
    """One slot's runs, one at a time. With a PID namespace the next child is cloned and prepared (see
    `_child.prepare`) while the current program runs: the slot alternates between two roots, each with its
    own /work tmpfs and uid, so the waiting child never shares a working directory, uid (its process
    count) or IPC namespace with a program that ran or runs. Without one, a child is cloned per request."""

    def __init__(self, cfg: dict, sock: socket.socket) -> None:
        self.cfg, self.sock = cfg, sock
        self.layers = cfg["layers"]
        self.seccomp = _libc.SeccompFilter() if self.layers.get("seccomp") else None
        # A waiting child needs its own PID namespace (it is killed with it, not by uid or cgroup).
        self.prefork = bool(cfg["prefork"] and self.layers.get("pid_ns"))
        self.flags = (_libc.CLONE_NEWPID if self.layers.get("pid_ns") else 0) | (
            _libc.CLONE_NEWIPC if self.layers.get("ipc_ns") else 0)  # per child: no SysV object outlives it
        self.sel = selectors.DefaultSelector()
        self.sel.register(sock, selectors.EVENT_READ, None)
        self.jobs: dict[int, dict] = {}  # pid -> job state
        self.spare: dict | None = None  # the pre-forked child waiting for its job
        self._side = 0  # root (and uid) of the next child
        self._work_opts: list[str | None] = [None] * ROOTS
        self._serial = 0
        self._cg_values: dict[str, str] = {}
        self._oom = OomCounter(cfg)
        self._oom_last = self._oom.read()

    def serve(self) -> None:
        while True:
            deadlines = [j["deadline"] for j in self.jobs.values()]
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            for key, _ in self.sel.select(timeout):
                if key.data is None:
                    if not self._handle_request():
                        return
                else:
                    self._reap(key.data)
            now = time.monotonic()
            for pid, job in list(self.jobs.items()):
                if job["deadline"] <= now and not job["killed"]:
                    self._kill(pid, "wall")

    def _handle_request(self) -> bool:
        try:
            data, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, 8)
        except OSError:
            data, fds = b"", []
        if not data:
            return False
        msg = json.loads(data)
        if msg["op"] == "kill":
            for pid, job in self.jobs.items():
                if job["id"] == msg["job"] and not job["killed"]:
                    self._kill(pid, msg.get("reason", "request"))
        elif msg["op"] == "idle":
            self._drop_spare()
            self._send({"job": msg["job"], "event": "idle"})
        elif msg["op"] == "run":
            self._start_or_report(msg, fds)
        return True

    def _start_or_report(self, msg: dict, fds: list[int]) -> None:
        """Start the run; the job keeps the request's fds until it is reaped (see `_reap`)."""
        try:
            self._start(msg, fds)
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            self._send({"job": msg["job"], "event": "error", "error": f"start failed: {exc}"})

    def _start(self, msg: dict, fds: list[int]) -> None:
        received = time.monotonic_ns()
        limits = msg["limits"]
        if self.layers.get("cgroup_memory"):  # the server's own ~10 MB count too: slack of 32 MiB
            self._cg_set("memory", "memory.limit_in_bytes", str((limits["memory_mb"] + 32) << 20))
        if self.layers.get("cgroup_pids"):  # + the server and the next child
            self._cg_set("pids", "pids.max", str(limits["nproc"] + 2))
        work = (limits["disk_mb"], limits["inodes"])
        for attempt in range(2):
            if self.spare is not None and self.spare["work"] != work:
                self._drop_spare()
            child, self.spare = self.spare or self._clone(work), None
            child["trace"].mark("server_received", received)
            child["trace"].mark("server_prepared")
            try:
                socket.send_fds(child["ctl"], [b"j"], fds)
                break
            except OSError:  # it died waiting (its exit is not reaped yet): drop it, clone another
                self.spare = child
                self._drop_spare()
                if attempt:
                    raise
        child["ctl"].close()
        now = time.monotonic()
        child.update(id=msg["job"], deadline=now + msg["wall_s"], t0=now, want_trace=msg.get("trace"), msg=msg,
                     fds=fds)
        self.jobs[child["pid"]] = child
        if self.prefork:
            self.spare = self._clone(work)

    def _clone(self, work: tuple[int, int]) -> dict:
        """Clone a child that prepares itself, then waits on its control socket for a job."""
        cfg, side = self.cfg, self._side
        self._side = (side + 1) % ROOTS if self.prefork else 0
        uid = cfg["uid_base"] + ROOTS * cfg["slot"] + side
        child_cfg = dict(cfg, uid=uid, trace=_child.Trace())
        if self.layers.get("chroot"):
            child_cfg["root"] = root_path(cfg["root"], side)
            self._prepare_work(side, work, uid)
        else:
            self._serial += 1
            child_cfg["workdir"] = os.path.join(cfg["root"], f"w{self._serial}")
            os.makedirs(child_cfg["workdir"], mode=0o700)
            os.chown(child_cfg["workdir"], uid, uid)
        ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        child_cfg["ctl_fd"] = theirs.fileno()
        child_cfg["trace"].mark("server_cloning")
        pid = _libc.clone_process(self.flags)
        if pid == 0:
            self._child(child_cfg)
        theirs.close()
        pidfd = os.pidfd_open(pid)
        self.sel.register(pidfd, selectors.EVENT_READ, pid)
        return {"pid": pid, "pidfd": pidfd, "ctl": ctl, "work": work, "uid": uid, "trace": child_cfg["trace"],
                "workdir": child_cfg.get("workdir"), "id": None, "killed": None, "deadline": float("inf")}

    def _drop_spare(self) -> None:
        """Kill and reap the waiting child (it never saw a program)."""
        spare, self.spare = self.spare, None
        if spare is None:
            return
        os.kill(spare["pid"], signal.SIGKILL)  # not yet reaped (`_reap_orphans` leaves it): the pid is ours
        os.wait4(spare["pid"], 0)
        self._forget(spare)

    def _forget(self, child: dict) -> None:
        self.sel.unregister(child["pidfd"])
        os.close(child["pidfd"])
        child["ctl"].close()
        for fd in child.get("fds", ()):
            os.close(fd)
        if child["workdir"]:
            shutil.rmtree(child["workdir"], ignore_errors=True)

    def _cg_set(self, ctl: str, name: str, value: str) -> None:
        if self._cg_values.get(name) != value:
            _cg_write(self.cfg, ctl, name, value)
            self._cg_values[name] = value

    def _prepare_work(self, side: int, work: tuple[int, int], uid: int) -> None:
        """A fresh tmpfs on the root's /work unless the mounted one is still empty and sized alike. Only
        called once the root's previous child is reaped."""
        path = root_path(self.cfg["root"], side) + "/work"
        opts = f"size={work[0]}m,nr_inodes={work[1]},mode=0700,uid={uid},gid={uid}"
        if opts == self._work_opts[side] and not os.listdir(path):
            return
        if self._work_opts[side] is not None:
            _libc.umount_detach(path)
        _libc.mount("tmpfs", path, "tmpfs", _libc.MS_NOSUID | _libc.MS_NODEV, opts)
        self._work_opts[side] = opts

    def _child(self, cfg: dict) -> None:
        failed = _child.prepare(cfg, self.seccomp)
        try:
            job = _child.receive(cfg, failed)
        except BaseException as exc:  # report on stderr, exit with the setup-failure code
            try:
                os.write(2, f"sandbox setup failed: {type(exc).__name__}: {exc}\n".encode())
            except OSError:
                pass
            os._exit(CHILD_FAIL)
        _child.run(job)
        os._exit(0)

    def _kill(self, pid: int, reason: str) -> None:
        job = self.jobs[pid]
        job["killed"] = reason
        os.kill(pid, signal.SIGKILL)  # not yet reaped: the pid is still ours
        if not self.layers.get("pid_ns"):
            self._kill_survivors(pid, job)

    def _kill_survivors(self, pid: int, job: dict) -> None:
        """Without a PID namespace: the process group, the slot's cgroup, and the slot uid's processes."""
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        for ctl in ("pids", "memory"):
            if self.layers.get(f"cgroup_{ctl}"):
                with open(os.path.join(_slot_dir(self.cfg, ctl), "cgroup.procs")) as f:
                    for line in f:
                        try:
                            if int(line) != os.getpid():
                                os.kill(int(line), signal.SIGKILL)
                        except OSError:
                            pass
        if self.layers.get("uid_drop"):
            helper = os.fork()
            if helper == 0:
                try:
                    os.setresuid(job["uid"], job["uid"], job["uid"])
                    os.kill(-1, signal.SIGKILL)
                finally:
                    os._exit(0)
            os.waitpid(helper, 0)

    def _reap(self, pid: int) -> None:
        if pid not in self.jobs:
            if self.spare is not None and self.spare["pid"] == pid:  # died waiting: cloned again on demand
                self._drop_spare()
            return  # else already reaped (dropped) earlier in this batch of events
        trace = self.jobs[pid]["trace"]
        trace.mark("server_exit_seen")
        _, status, ru = os.wait4(pid, 0)
        job = self.jobs.pop(pid)
        if not self.layers.get("pid_ns"):
            self._kill_survivors(pid, job)
            self._await_slot_empty()
        if not trace.marked("child_fds") and not job["killed"] and not job["msg"].get("retried"):
            # Killed from outside after the handoff but before taking its fds: the job never started.
            fds, job["fds"] = job["fds"], []
            self._forget(job)
            self._start_or_report(dict(job["msg"], retried=True), fds)
            return
        self._forget(job)
        if not self.layers.get("pid_ns"):  # with one, orphans are reparented to the child and die with it
            self._reap_orphans()
        oom_count = self._oom.read()  # cumulative per slot; one run at a time per slot
        oom, self._oom_last = oom_count > self._oom_last, oom_count
        trace.mark("server_reaped")
        self._send({
            "job": job["id"], "event": "exit", "killed": job["killed"], "oom": oom,
            "exit_code": os.waitstatus_to_exitcode(status), "cpu_s": ru.ru_utime + ru.ru_stime,
            "max_rss_kb": ru.ru_maxrss, "wall_s": time.monotonic() - job["t0"],
            "trace": trace.read() if job["want_trace"] else None,
        })

    def _await_slot_empty(self, timeout_s: float = 1.0) -> None:
        """Without a PID namespace, wait (briefly) until the killed survivors have left the slot's cgroup."""
        ctl = "pids" if self.layers.get("cgroup_pids") else "memory" if self.layers.get("cgroup_memory") else None
        deadline = time.monotonic() + timeout_s
        while ctl is not None and time.monotonic() < deadline:
            self._reap_orphans()
            with open(os.path.join(_slot_dir(self.cfg, ctl), "cgroup.procs")) as f:
                if not [p for p in f.read().split() if int(p) != os.getpid()]:
                    break
            time.sleep(0.002)

    def _reap_orphans(self) -> None:
        """As child subreaper the server inherits orphans (daemons killed without a PID namespace)."""
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None or info.si_pid in self.jobs or (self.spare and info.si_pid == self.spare["pid"]):
                return
            os.waitpid(info.si_pid, 0)

    def _send(self, msg: dict) -> None:
        try:
            self.sock.send(json.dumps(msg).encode())
        except OSError:
            pass

    def shutdown(self) -> None:
        for pid in list(self.jobs):
            try:
                self._kill(pid, "shutdown")
                os.wait4(pid, 0)
            except OSError:
                pass
        try:
            self._drop_spare()
        except OSError:
            pass
        leave_cgroups(self.cfg)


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--probe"]:
        import _probe

        print(json.dumps(_probe.probe(argv[2] if len(argv) > 2 else None)))
        return 0
    _exec_with_unlimited_stack(argv)
    cfg = json.loads(argv[1])
    _child.install_site_builtins()  # exit() and quit(), as `site` would (the sandbox runs python -S)
    _libc.prctl(_libc.PR_SET_PDEATHSIG, signal.SIGKILL)
    _libc.prctl(_libc.PR_SET_CHILD_SUBREAPER, 1)
    if os.getppid() != cfg["parent_pid"]:
        return 1  # the parent died before we set the death signal
    layers = cfg["layers"]
    flags = 0
    for name, flag in NS_LAYERS.items():
        flags |= flag if layers.get(name) else 0
    if flags:
        _libc.unshare(flags)
    if layers.get("chroot"):
        _libc.mount(None, "/", None, _libc.MS_REC | _libc.MS_PRIVATE)
        for side in range(ROOTS):
            os.mkdir(root_path(cfg["root"], side), 0o755)
            build_root(root_path(cfg["root"], side))
    join_cgroups(cfg)
    for name in PRELOAD:  # imported once here, inherited by every child (imports cost 1-10 ms each)
        try:
            __import__(name)
        except ImportError:
            pass
    gc.freeze()  # keep the server's objects out of the children's collections (fewer copy-on-write faults)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sock = socket.socket(fileno=cfg["sock_fd"])
    server = Server(cfg, sock)
    os.environ.clear()  # once per slot: every child inherits exactly this environment
    os.environ.update(CHILD_ENV)
    try:
        server.serve()
    finally:
        server.shutdown()
    return 0


def _exec_with_unlimited_stack(argv: list[str]) -> None:
    """Re-exec once with RLIMIT_STACK unlimited, where the hard limit allows it (the fds stay open)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    if soft == resource.RLIM_INFINITY or hard != resource.RLIM_INFINITY or os.environ.get(STACK_ENV):
        os.environ.pop(STACK_ENV, None)
        return
    resource.setrlimit(resource.RLIMIT_STACK, (hard, hard))
    os.environ[STACK_ENV] = "1"  # one re-exec at most
    os.execv(sys.executable, [sys.executable, "-I", "-S", os.path.abspath(__file__), *argv[1:]])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
