"""Parent side of the sandbox: starts the fork servers, sends them runs, drains output, enforces caps.

`Sandbox.run(request)` is thread-safe; at most `slots` runs are in flight, one per slot. Each slot has
its own fork server, uids and cgroups (the server joins its cgroups once; children inherit them) and,
while runs come, a pre-forked child waiting for the next one (`Sandbox.idle()` reaps those between
batches). Assert-mode test code is compiled here, once per test source (`_testcode.pack`). Output is
drained concurrently from stdout, stderr and the result channel with byte caps (over the cap: the run
is killed, reason `output`). The fork server enforces the wall deadline; the parent keeps a backstop
(deadline + grace) after which the server is presumed broken, killed and restarted, and the run
reported as a sandbox error. Every failure of the sandbox itself is a `RunResult.error`, never
something blamed on the program.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import queue
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from concurrent.futures import Future
from dataclasses import dataclass, field

from scalerl.verifiers.code.sandbox._testcode import pack as pack_test

logger = logging.getLogger(__name__)

ZYGOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_zygote.py")
BACKSTOP_GRACE_S = 10.0
_instances = itertools.count()


@dataclass
class RunRequest:
    mode: str  # stdio | functional | assert
    code: str
    stdin: bytes = b""
    test: str | None = None
    entry_point: str | None = None
    cases: list[str] = field(default_factory=list)  # JSON [args, kwargs] per functional case
    token: str | None = None
    cpu_s: float = 2.0  # the whole run's CPU budget (RLIMIT_CPU); the outer bound over every case
    wall_s: float = 6.0
    case_cpu_s: float | None = None  # functional mode: each case's own CPU and wall-clock limit
    case_wall_s: float | None = None
    memory_mb: int = 512
    disk_mb: int = 64
    inodes: int = 4096
    fsize_mb: int = 16
    nproc: int = 32
    nofile: int = 256
    max_output_bytes: int = 1 << 20
    trace: bool = False  # record phase timestamps (benchmarks/bench_code_phases.py); costs a shared page


@dataclass
class RunResult:
    exit_code: int | None = None
    killed: str | None = None  # wall | output | request | shutdown
    oom: bool = False
    cpu_s: float = 0.0
    wall_s: float = 0.0
    stdout: bytes = b""
    stderr: bytes = b""
    result_lines: list[bytes] = field(default_factory=list)
    output_capped: bool = False
    error: str | None = None  # the sandbox failed (not the program)
    trace: dict[str, int] = field(default_factory=dict)  # phase -> CLOCK_MONOTONIC ns, when requested


class _Stream:
    def __init__(self, fd: int, cap: int) -> None:
        self.fd, self.cap, self.buf, self.capped = fd, cap, bytearray(), False


class Sandbox:
    """`slots` fork servers (one per slot: its own uids and cgroups); `close()` is idempotent. `prefork=False`
    clones each child on request instead of while the previous program runs (for comparison)."""

    def __init__(self, layers: dict[str, bool], slots: int = 2, prefork: bool = True) -> None:
        self.layers, self.slots = dict(layers), slots
        n = next(_instances)
        uid_base = 1_000_000 + ((os.getpid() * 131 + n) % 100_000) * 128  # 2 uids per slot, <= 64 slots
        cg_name = f"scalerl-{os.getpid()}-{n}"
        self._servers = [_Server(self.layers, s, uid_base, cg_name, prefork) for s in range(slots)]
        self._free: queue.Queue[int] = queue.Queue()
        for s in range(slots):
            self._free.put(s)
        self._uid_base = uid_base

    def run(self, req: RunRequest) -> RunResult:
        """Run one program in the first free slot (blocks while all slots are busy)."""
        slot = self._free.get()
        try:
            return self._servers[slot].run(req)
        finally:
            self._free.put(slot)

    def idle(self) -> None:
        """Kill and reap the pre-forked children (each slot clones its next child while a run is in flight),
        so a sandbox between batches holds no process but its fork servers; the next run clones anew."""
        for server in self._servers:
            server.idle()

    def close(self) -> None:
        """Kill every fork server and every child; idempotent."""
        for server in self._servers:
            server.close()

    @property
    def server_pids(self) -> list[int]:
        return [s.pid for s in self._servers if s.pid is not None]


class _Server:
    """One fork server serving one slot."""

    def __init__(self, layers: dict[str, bool], slot: int, uid_base: int, cg_name: str, prefork: bool) -> None:
        self.layers, self.slot, self.prefork = layers, slot, prefork
        self._lock, self._send_lock = threading.Lock(), threading.Lock()
        self._jobs = itertools.count(1)
        self._pending: dict[int, queue.Queue] = {}
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._root: str | None = None
        self._closed = False
        self._uid_base, self._cg_name = uid_base, cg_name
        self._finalizer = weakref.finalize(self, _Server._shutdown, self.__dict__)

    # ------------------------------------------------------------------------------------------ server
    def _ensure_server(self) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("sandbox is closed")
            if self._proc is not None and self._proc.poll() is None and self._sock is not None:
                return
            _Server._shutdown(self.__dict__)
            self._start_server()

    def _start_server(self) -> None:
        self._root = tempfile.mkdtemp(prefix="scalerl-sbx-")
        os.chmod(self._root, 0o711)
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cfg = {
            "layers": self.layers, "slot": self.slot, "root": self._root, "uid_base": self._uid_base,
            "sock_fd": child_sock.fileno(), "parent_pid": os.getpid(), "prefork": self.prefork,
            "cgroup_root": {c: f"/sys/fs/cgroup/{c}/{self._cg_name}" for c in ("memory", "pids")},
        }
        # The server's death signal (PR_SET_PDEATHSIG) fires when the *thread* that forked it exits, so
        # it is launched by the thread that then reads its messages for as long as it lives; a server
        # started from a short-lived caller thread would otherwise die with that thread.
        launched: Future[subprocess.Popen] = Future()
        threading.Thread(target=self._launch_and_dispatch, args=(cfg, parent_sock, child_sock, launched),
                         daemon=True, name="sandbox-dispatch").start()
        try:
            self._proc = launched.result()
        except BaseException:
            parent_sock.close()
            raise
        self._sock = parent_sock
        self._closed = False

    def _launch_and_dispatch(self, cfg: dict, parent_sock: socket.socket, child_sock: socket.socket,
                             launched: Future[subprocess.Popen]) -> None:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", ZYGOTE, json.dumps(cfg)], pass_fds=[child_sock.fileno()],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True,
                # No host secrets in the server's memory. Symbols bound at start: children inherit a filled
                # GOT instead of each writing (copying) its pages again on first calls.
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LD_BIND_NOW": "1"},
            )
        except BaseException as exc:  # reported to the caller of _start_server
            launched.set_exception(exc)
            return
        finally:
            child_sock.close()
        launched.set_result(proc)
        self._dispatch(parent_sock)

    def _dispatch(self, sock: socket.socket) -> None:
        """Route the server's messages to the waiting runs; on EOF fail every pending run."""
        while True:
            try:
                data = sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            msg = json.loads(data)
            q = self._pending.get(msg["job"])
            if q is not None:
                q.put(msg)
        for q in list(self._pending.values()):
            q.put({"event": "error", "error": "fork server exited"})

    @staticmethod
    def _shutdown(state: dict) -> None:
        sock, proc, root = state.get("_sock"), state.get("_proc"), state.get("_root")
        state["_sock"] = state["_proc"] = state["_root"] = None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)

    def close(self) -> None:
        """Kill the fork server and every child; idempotent."""
        with self._lock:
            self._closed = True
            _Server._shutdown(self.__dict__)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def idle(self) -> None:
        """Ask a running server to drop its waiting child; returns once it is reaped (or the server is gone)."""
        if self._proc is None or self._proc.poll() is not None:
            return
        job = next(self._jobs)
        q: queue.Queue = queue.Queue()
        self._pending[job] = q
        try:
            self._send({"op": "idle", "job": job})
            q.get(timeout=BACKSTOP_GRACE_S)
        except queue.Empty:
            self._restart()
        finally:
            self._pending.pop(job, None)

    # ------------------------------------------------------------------------------------------ runs
    def run(self, req: RunRequest) -> RunResult:
        try:
            self._ensure_server()
            return self._run(req)
        except (OSError, RuntimeError) as exc:
            return RunResult(error=f"sandbox: {type(exc).__name__}: {exc}")

    def _run(self, req: RunRequest) -> RunResult:
        marks = {"parent_start": time.monotonic_ns()} if req.trace else None
        job = next(self._jobs)
        packed = pack_test(req.test) if req.mode == "assert" and req.test is not None else None
        payload = json.dumps({"mode": req.mode, "code": req.code, "test": req.test, "test_packed": packed,
                              "token": req.token, "entry_point": req.entry_point, "cases": req.cases,
                              "case_limits": [req.case_cpu_s, req.case_wall_s],
                              "limits": _limits(req)}).encode()
        pipes = [os.pipe2(os.O_CLOEXEC) for _ in range(5)]  # job, stdin, stdout, stderr, result
        theirs = [pipes[0][0], pipes[1][0], pipes[2][1], pipes[3][1], pipes[4][1]]
        ours = [pipes[0][1], pipes[1][1], pipes[2][0], pipes[3][0], pipes[4][0]]
        q: queue.Queue = queue.Queue()
        self._pending[job] = q
        try:
            # The job and stdin go into their pipes before the request: the child finds them waiting
            # instead of blocking until this thread is scheduled again (most jobs fit a 64 KiB pipe).
            rest = [_prefill(ours, 0, payload), _prefill(ours, 1, req.stdin)]
            header = json.dumps({"op": "run", "job": job, "limits": _limits(req),
                                 "wall_s": req.wall_s, "trace": req.trace}).encode()
            try:
                with self._send_lock:
                    socket.send_fds(self._sock, [header], theirs)
            finally:
                for fd in theirs:
                    os.close(fd)
            if marks is not None:
                marks["parent_sent"] = time.monotonic_ns()
            result = self._drain(job, req, ours, rest)
            if marks is not None:
                marks["parent_drained"] = time.monotonic_ns()
            result = self._finish(job, req, q, result)
            if marks is not None:
                result.trace = {**marks, **result.trace, "parent_done": time.monotonic_ns()}
            return result
        finally:
            self._pending.pop(job, None)
            for fd in ours:
                if fd >= 0:
                    os.close(fd)

    def _drain(self, job: int, req: RunRequest, ours: list[int], rest: list[bytes]) -> RunResult:
        job_w, stdin_w, out_r, err_r, res_r = ours  # write ends are closed (and set to -1 in ours) when done
        cap = req.max_output_bytes
        streams = {out_r: _Stream(out_r, cap), err_r: _Stream(err_r, cap), res_r: _Stream(res_r, cap)}
        writes = {fd: memoryview(data) for fd, data in zip((job_w, stdin_w), rest) if fd >= 0}
        sel = selectors.DefaultSelector()
        for fd in streams:
            sel.register(fd, selectors.EVENT_READ)
        for fd in writes:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_WRITE)
        backstop = time.monotonic() + req.wall_s + BACKSTOP_GRACE_S
        killed_output = False
        while sel.get_map():
            left = backstop - time.monotonic()
            if left <= 0:
                return RunResult(error="sandbox: fork server missed the deadline")
            for key, _ in sel.select(min(left, 1.0)):
                fd = key.fd
                if fd in writes:
                    if self._write_some(fd, writes):
                        sel.unregister(fd)
                        os.close(fd)
                        ours[ours.index(fd)] = -1
                    continue
                s = streams[fd]
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    sel.unregister(fd)
                    continue
                room = s.cap - len(s.buf)
                s.buf += chunk[:max(room, 0)]
                if len(chunk) > room and not killed_output:
                    s.capped = killed_output = True
                    self._send({"op": "kill", "job": job, "reason": "output"})
        sel.close()
        return RunResult(stdout=bytes(streams[out_r].buf), stderr=bytes(streams[err_r].buf),
                         result_lines=bytes(streams[res_r].buf).splitlines(), output_capped=killed_output)

    @staticmethod
    def _write_some(fd: int, writes: dict) -> bool:
        """Write what the pipe takes; True when done (all written, or the reader is gone)."""
        try:
            n = os.write(fd, writes[fd][: 1 << 16])
        except BlockingIOError:
            return False
        except BrokenPipeError:
            return True
        writes[fd] = writes[fd][n:]
        return not len(writes[fd])

    def _finish(self, job: int, req: RunRequest, q: queue.Queue, result: RunResult) -> RunResult:
        if result.error:
            self._restart()
            return result
        try:
            msg = q.get(timeout=BACKSTOP_GRACE_S)
        except queue.Empty:
            self._restart()
            return RunResult(error="sandbox: no exit report from the fork server")
        if msg["event"] != "exit":
            return RunResult(error=f"sandbox: {msg.get('error', msg)}")
        result.exit_code, result.oom = msg["exit_code"], msg["oom"]
        result.cpu_s, result.wall_s = msg["cpu_s"], msg["wall_s"]
        result.trace = msg.get("trace") or {}
        result.killed = "output" if result.output_capped else msg["killed"]
        if result.exit_code == 120 and b"sandbox setup failed" in result.stderr:
            result.error = "sandbox: " + result.stderr.decode(errors="replace").strip()[-500:]
        return result

    def _send(self, msg: dict) -> None:
        try:
            with self._send_lock:
                self._sock.send(json.dumps(msg).encode())
        except (OSError, AttributeError):
            pass

    def _restart(self) -> None:
        logger.warning("sandbox fork server unresponsive; restarting it")
        with self._lock:
            _Server._shutdown(self.__dict__)


def _prefill(ours: list[int], index: int, data: bytes) -> bytes:
    """Write what the pipe `ours[index]` takes now; close it (and set -1) when all of `data` went in.
    Returns what is left for the drain loop."""
    fd = ours[index]
    os.set_blocking(fd, False)
    try:
        n = os.write(fd, data[: 1 << 16]) if data else 0
    except BlockingIOError:
        n = 0
    if n == len(data):
        os.close(fd)
        ours[index] = -1
    return data[n:]


def _limits(req: RunRequest) -> dict:
    return {"cpu_s": req.cpu_s, "memory_mb": req.memory_mb, "disk_mb": req.disk_mb, "inodes": req.inodes,
            "fsize_mb": req.fsize_mb, "nproc": req.nproc, "nofile": req.nofile}
