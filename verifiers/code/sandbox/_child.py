"""Inside one sandboxed child: apply the isolation layers, then run the program (standard library only).

A child is pre-forked: the fork server clones it before its program exists, and it applies every layer
that does not depend on the job while the previous program of its slot still runs (`prepare`), then blocks
on its control socket. Order is fixed: own session (cgroups: inherited from the slot's server) → every
inherited fd closed but the control socket → chroot into a read-only root whose /work is a tmpfs the server
hands over empty → drop to the uid of that root → parent-death signal → seccomp (which forbids undoing any
of the above) → wait. `receive` then takes the job's fds, reads the job and lowers the rlimits to the job's
values (an unprivileged process can only lower them; the stack's is the memory limit) before any of the
program runs. SIGPIPE is ignored and streams the program closed are skipped at exit, as in `python3`. The environment is
the fork server's, scrubbed once per slot (`_zygote.CHILD_ENV`). A child that failed `prepare` still
waits for its job, so the failure is reported on the job's stderr.

Modes: `stdio` runs the program as `__main__`; `functional` calls `entry_point` per case (each under its own
CPU and wall timer, see `_arm_case_timers`) and writes each result's canonical encoding (see `_canon`) to
fd 3, so the parent compares; `assert` runs the program,
then the test code in a namespace with pristine builtins, with `assert a == b` rewritten to canonical
equality (see `_testcode`), under an audit hook that blocks frame and gc introspection; the per-run token
is written to fd 3 only after the last statement of the test code. Nothing expected (stdio outputs, functional
expectations) ever enters this process.
"""

from __future__ import annotations

import builtins
import json
import mmap
import os
import resource
import signal
import socket
import sys
import time
import types

import _canon
import _libc
import _testcode

RESULT_FD = 3
CTL_FD = 3  # the control socket while the child waits; the job's result channel replaces it
_TRACE = None  # this run's Trace, when the request asked for phase timestamps
_write, _dumps, _exit = os.write, json.dumps, os._exit
_BLOCKED_EVENTS = frozenset({"sys._getframe", "sys._current_frames", "gc.get_objects", "gc.get_referrers",
                             "gc.get_referents", "sys.settrace", "sys.setprofile", "ctypes.dlopen",
                             "ctypes.dlsym", "ctypes.addressof", "ctypes.cdata", "code.__new__",
                             "function.__new__", "sys._getframemodulename"})
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "f_locals",
                          "f_globals", "gi_code", "__code__", "__closure__", "cell_contents"})
# A Python signal handler receives the interrupted frame: a route to the harness the hook cannot see.
_BLOCKED_IMPORTS = frozenset({"signal", "_signal", "faulthandler"})


class Trace:
    """Phase timestamps (CLOCK_MONOTONIC ns) in a page shared by the server and the child it clones, so
    the child's marks reach the server without touching the program's file descriptors. Every child has
    one (a few microseconds); the server reports it only to runs that ask (benchmarks). The program could
    overwrite it, which would only spoil the timings."""

    PHASES = ("server_cloning", "child_started", "child_chroot", "child_uid", "child_seccomp",
              "server_received", "server_prepared", "child_fds", "child_job_read", "child_rlimits",
              "child_compiled", "child_done", "server_exit_seen", "server_reaped")

    def __init__(self) -> None:
        self._page = mmap.mmap(-1, 8 * len(self.PHASES))  # MAP_SHARED | MAP_ANONYMOUS: survives the clone

    def mark(self, phase: str, ns: int | None = None) -> None:
        at = 8 * self.PHASES.index(phase)
        self._page[at:at + 8] = (ns or time.monotonic_ns()).to_bytes(8, "little")

    def marked(self, phase: str) -> bool:
        at = 8 * self.PHASES.index(phase)
        return self._page[at:at + 8] != bytes(8)

    def read(self) -> dict[str, int]:
        values = (int.from_bytes(self._page[8 * i:8 * i + 8], "little") for i in range(len(self.PHASES)))
        return {name: v for name, v in zip(self.PHASES, values) if v}


def _mark(cfg: dict, phase: str) -> None:
    trace = cfg.get("trace")
    if trace is not None:
        trace.mark(phase)


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


def prepare(cfg: dict, seccomp) -> BaseException | None:
    """Every layer that does not depend on the job; returns the failure (reported once a job arrives)."""
    try:
        _mark(cfg, "child_started")
        os.setsid()
        os.dup2(cfg["ctl_fd"], CTL_FD)
        os.closerange(CTL_FD + 1, 1 << 16)
        layers, uid = cfg["layers"], cfg["uid"]
        if layers.get("chroot"):
            os.chroot(cfg["root"])  # the server keeps this root's /work an empty tmpfs for the next child
            os.chdir("/work")
        else:
            os.chdir(cfg["workdir"])
        _mark(cfg, "child_chroot")
        if layers.get("uid_drop"):
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        _libc.prctl(_libc.PR_SET_PDEATHSIG, signal.SIGKILL)
        # As in `python3`: a write to a closed pipe raises BrokenPipeError (SIGPIPE ignored).
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        _mark(cfg, "child_uid")
        if layers.get("seccomp"):
            seccomp.load()
        _mark(cfg, "child_seccomp")
    except BaseException as exc:  # reported on the job's stderr by `receive`
        return exc
    return None


def receive(cfg: dict, failed: BaseException | None) -> dict:
    """Wait for the job's fds, put them in place, read the job, apply its rlimits. Raises on any failure
    (the child then exits 120); exits quietly when the server drops this child without a job."""
    ctl = socket.socket(fileno=CTL_FD)
    try:
        _, fds, _, _ = socket.recv_fds(ctl, 16, 8)
    except OSError:
        fds = []
    if len(fds) != 5:  # dropped (EOF) or a broken request: there is nobody to report to
        _exit(0 if not fds else 120)
    _mark(cfg, "child_fds")
    ctl.detach()
    for target, fd in enumerate(fds[1:]):  # stdin, stdout, stderr, result (over the control socket's fd)
        os.dup2(fd, target)
    if failed is not None:
        raise failed
    job = json.loads(_read_all(fds[0]))
    os.closerange(RESULT_FD + 1, 1 << 16)
    _mark(cfg, "child_job_read")
    if cfg["layers"].get("rlimits"):
        _set_rlimits(job["limits"])
    _mark(cfg, "child_rlimits")
    job["trace"] = cfg.get("trace")
    return job


def _set_rlimits(limits: dict) -> None:
    r = resource

    cpu = int(limits["cpu_s"]) + 1
    mb = 1 << 20
    for res, soft, hard in (
        (r.RLIMIT_CPU, cpu, cpu + 1), (r.RLIMIT_AS, limits["memory_mb"] * mb, limits["memory_mb"] * mb),
        (r.RLIMIT_NPROC, limits["nproc"], limits["nproc"]), (r.RLIMIT_FSIZE, limits["fsize_mb"] * mb,
                                                             limits["fsize_mb"] * mb),
        (r.RLIMIT_NOFILE, limits["nofile"], limits["nofile"]), (r.RLIMIT_CORE, 0, 0),
        (r.RLIMIT_MEMLOCK, 0, 0), (r.RLIMIT_MSGQUEUE, 0, 0),
        # Deep recursion may use the whole memory limit, as contest judges allow (RLIMIT_AS still bounds it).
        (r.RLIMIT_STACK, *[min(limits["memory_mb"] * mb, r.getrlimit(r.RLIMIT_STACK)[1])] * 2),
    ):
        r.setrlimit(res, (soft, hard))


class _Quitter:
    """`exit` / `quit` as `site` defines them (the sandbox's `python -S` never runs `site`)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Use {self.name}() or Ctrl-D (i.e. EOF) to exit"

    def __call__(self, code: object = None) -> None:
        try:
            sys.stdin.close()
        except BaseException:
            pass
        raise SystemExit(code)


def install_site_builtins() -> None:
    builtins.exit, builtins.quit = _Quitter("exit"), _Quitter("quit")


# ---------------------------------------------------------------------------------------------- modes
def run(job: dict) -> None:
    """Run the job's mode and exit; never returns."""
    global _TRACE
    mode, _TRACE = job["mode"], job.pop("trace", None)
    try:
        code = compile(job["code"], "<solution>", "exec", dont_inherit=True, optimize=0)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        _emit({"compile_error": f"{type(exc).__name__}: {exc}"[:2000]})
        _exit(2)
    if _TRACE is not None:
        _TRACE.mark("child_compiled")
    if mode == "assert":
        _run_assert(job, code)
    elif mode == "functional":
        _run_functional(job, code)
    else:
        _run_main(code, _main_namespace())
        _flush_exit(0)


def _emit(obj: dict) -> None:
    try:
        _write(RESULT_FD, (_dumps(obj) + "\n").encode())
    except (OSError, TypeError, ValueError):
        pass


def _main_namespace() -> dict:
    """A fresh `__main__` module for the program (so pickle, dataclasses, multiprocessing find it)."""
    module = types.ModuleType("__main__")
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    return module.__dict__


def _run_main(code, namespace: dict, exit_ok: bool = True) -> None:
    """exec the program; SystemExit(0/None) is a normal end only if `exit_ok`, anything else exits nonzero."""
    try:
        exec(code, namespace)  # running the program is the point
    except SystemExit as exc:
        if not exit_ok or exc.code not in (None, 0):
            if not isinstance(exc.code, int):  # sys.exit("message"): printed, status 1, as Python does
                _print_err(exc.code)
            _flush_exit(exc.code if isinstance(exc.code, int) and exc.code else 1)
    except BaseException:  # the program's own failure: print it like Python would
        etype, exc, tb = sys.exc_info()
        if tb is not None and exc is not None:
            exc.__traceback__ = tb.tb_next  # hide the harness frame
        sys.__excepthook__(etype, exc, exc.__traceback__ if exc is not None else None)
        _flush_exit(1)


def _print_err(message: object) -> None:
    try:
        print(message, file=sys.stderr)
    except BaseException:
        pass


def _flush_exit(status: int) -> None:
    """Flush and exit. Like Python at exit, a stream the program closed is skipped; a stdout whose reader
    is gone (the parent stops reading only past the output cap, judged on its own) does not fail the run:
    what reached the reader is what is judged. Any other flush failure (closed fd, full disk) is status 1."""
    if _TRACE is not None:
        _TRACE.mark("child_done")
    for stream in (sys.stdout, sys.stderr):
        try:
            if not getattr(stream, "closed", False):
                stream.flush()
        except BrokenPipeError:
            pass
        except BaseException:
            status = status or 1
    _exit(status & 0xFF)


def _run_functional(job: dict, code) -> None:
    namespace = _main_namespace()
    _run_main(code, namespace)
    fn = namespace.get(job["entry_point"])
    if fn is None and isinstance(namespace.get("Solution"), type):  # LeetCode style, as the APPS harness does
        try:
            fn = getattr(namespace["Solution"](), job["entry_point"], None)
        except BaseException:
            fn = None
    if not callable(fn):
        _emit({"i": 0, "ok": 0, "err": f"entry point {job['entry_point']!r} not defined"})
        _flush_exit(1)
    case_cpu_s, case_wall_s = job.get("case_limits") or (None, None)
    for i, raw in enumerate(job["cases"]):
        args, kwargs = json.loads(raw)
        t0, w0 = time.process_time(), time.monotonic()
        _arm_case_timers(i, case_cpu_s, case_wall_s)
        try:
            value = _canon.to_json(_canon.canon(fn(*args, **kwargs)))
            _emit({"i": i, "ok": 1, "v": value, "cpu_s": time.process_time() - t0, "wall_s": time.monotonic() - w0})
        except BaseException as exc:  # SystemExit inside the call fails the case too
            _emit({"i": i, "ok": 0, "err": f"{type(exc).__name__}: {exc}"[:500]})
        _arm_case_timers(i, None, None)
    _flush_exit(0)


CASE_TIMEOUT_EXIT = 124


def _arm_case_timers(i: int, cpu_s: float | None, wall_s: float | None) -> None:
    """One case's own limits: a CPU timer (ITIMER_PROF) and a wall timer (ITIMER_REAL) whose handler reports
    the case on the result channel and exits at once (no exception the program could catch). A handler is
    needed: as PID 1 of its namespace the child ignores these signals at their default action. Handlers run
    between bytecodes, so one long C call (or a program that resets the timers) is stopped by the run's
    budget, the outer bound, instead."""
    for which, sig, seconds, kind in ((signal.ITIMER_PROF, signal.SIGPROF, cpu_s, "cpu"),
                                      (signal.ITIMER_REAL, signal.SIGALRM, wall_s, "wall")):
        if seconds:
            signal.signal(sig, lambda *_, kind=kind: (_emit({"i": i, "timeout": kind}), _exit(CASE_TIMEOUT_EXIT)))
        signal.setitimer(which, seconds or 0)


def _run_assert(job: dict, code) -> None:
    token, test_src, packed = job.pop("token"), job.pop("test"), job.pop("test_packed", None)
    pristine = dict(builtins.__dict__)
    try:  # compiled by the parent when it could; else here, where a bad test is reported
        prelude, test_code = _testcode.unpack(packed) if packed else _testcode.compile_test(test_src)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        _emit({"test_error": f"{type(exc).__name__}: {exc}"[:2000]})
        _exit(3)
    namespace = _main_namespace()
    exec(prelude, namespace)  # the test's leading imports, visible to the program (MBPP relies on it)
    # Everything used after the program runs is bound now and the harness modules are unlisted, so a
    # program that patches sys.modules entries cannot change what runs after it.
    run_main, emit, flush_exit, equal = _run_main, _emit, _flush_exit, _canon.equal
    for name in ("_child", "_canon", "_libc", "_testcode", "_zygote", "_probe", *_BLOCKED_IMPORTS):
        sys.modules.pop(name, None)
    sys.addaudithook(_audit)
    run_main(code, namespace)
    # Names shadowing builtins reach the test only as functions the program defined with `def` (MBPP
    # task 126 tests a function called `sum`); aliases and lambdas (`set = lambda x: 1`) do not.
    test_ns = {k: v for k, v in namespace.items() if k not in pristine or (
        type(v) is types.FunctionType and v.__name__ == k)}
    test_ns.update({"__builtins__": pristine, "__name__": "__main__", "__scalerl_eq__": equal})
    run_main(test_code, test_ns, False)  # the test code never ends by SystemExit, not even SystemExit(0)
    emit({"done": token})
    flush_exit(0)


def _audit(event: str, args: tuple) -> None:
    if event in _BLOCKED_EVENTS or (event == "object.__getattr__" and args[1] in _FRAME_ATTRS):
        raise ValueError(f"{event} is not allowed in the sandbox")
    if event == "import" and args[0] in _BLOCKED_IMPORTS:
        raise ImportError(f"module {args[0]!r} is not available in assert tests")
