"""Where the milliseconds of one sandboxed execution go, phase by phase, with every layer on.

Runs `--n` MBPP reference programs with their asserts (`assert` mode: program, then the rewritten
test code, as the code verifier runs MBPP) one after another through one `Sandbox` slot with
`RunRequest.trace`, and prints the median and p90 of each phase. Timestamps are CLOCK_MONOTONIC from the
three processes involved (this parent, the fork server, the child). The child of a run was cloned and
prepared while the previous run's program ran, so its phases come in two groups. The critical path adds
up to the whole run:

    request      parent: pipes made, request + fds sent          -> server received it
    prepare      server: cgroup limits (written only when changed)
    handoff      server: fds passed to the waiting child          -> child has them (includes waiting for
                 the child to finish `prepare` when the previous program was quicker than that)
    job+fds      child: fds in place, job read, inherited fds closed
    rlimits      child: setrlimit x 8 (lowered to the job's values)
    compile      child: compile the program
    harness      child: program, test prelude and asserts (the program's own time is in here)
    exit         child exit -> server notices (pidfd)
    reap         server: wait4, cleanup, OOM check, exit report
    report       server report -> parent has the result (output drained, verdict message read)

Off the critical path (the child, while the previous program of the slot runs):

    clone        server: /work tmpfs checked (remounted if the program before left files), clone()
                 with new PID and IPC namespaces -> child running
    chroot       child: new session, inherited fds closed, chroot into the read-only root, cd /work
    uid          child: setgroups/setresgid/setresuid, parent-death signal, signal dispositions
    seccomp      child: no_new_privs + the precompiled BPF filter (one prctl)
    waiting      child ready -> its job arrives

Also printed: a plain `fork()` + `waitpid()` of this process and a `subprocess.run([sys.executable,
"-c", "pass"])`, the two floors the design sits between (a fork from a warm process, a fresh
interpreter), and the load average.

    .venv/bin/python benchmarks/bench_code_phases.py --n 200
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from scalerl.env.contracts.paths import reference_dir
from scalerl.verifiers.code.sandbox import RunRequest, Sandbox, enabled_layers

MBPP = os.path.join(reference_dir(), "mbpp_sanitized_prime", "new_mbpp.json")
PHASES = (
    ("request", "parent_start", "server_received"), ("prepare", "server_received", "server_prepared"),
    ("handoff", "server_prepared", "child_fds"), ("job+fds", "child_fds", "child_job_read"),
    ("rlimits", "child_job_read", "child_rlimits"), ("compile", "child_rlimits", "child_compiled"),
    ("harness", "child_compiled", "child_done"), ("exit", "child_done", "server_exit_seen"),
    ("reap", "server_exit_seen", "server_reaped"), ("report", "server_reaped", "parent_done"),
)
OFF_PATH = (
    ("clone", "server_cloning", "child_started"), ("chroot", "child_started", "child_chroot"),
    ("uid", "child_chroot", "child_uid"), ("seccomp", "child_uid", "child_seccomp"),
    ("waiting", "child_seccomp", "child_fds"),
)


def programs(n: int) -> list[tuple[str, str]]:
    """(program, test code) pairs; task 123 spends 3 s in the program itself and is left out."""
    with open(MBPP) as f:
        rows = [r for r in json.load(f) if r["task_id"] != 123][:n]
    return [(r["code"], "\n".join([*r["test_imports"], *r["test_list"]]) + "\n") for r in rows]


def _table(phases: tuple, traces: list[dict]) -> list[tuple[str, float, float]]:
    rows = []
    for name, a, b in phases:
        ms = [(t[b] - t[a]) / 1e6 for t in traces if a in t and b in t]
        rows.append((name, statistics.median(ms), sorted(ms)[int(0.9 * (len(ms) - 1))]))
    return rows


def floors(reps: int) -> dict[str, float]:
    fork_ms, spawn_ms = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        fork_ms.append((time.perf_counter() - t0) * 1000)
    for _ in range(max(3, reps // 10)):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
        spawn_ms.append((time.perf_counter() - t0) * 1000)
    return {"fork+wait": statistics.median(fork_ms), "python -I -S -c pass": statistics.median(spawn_ms)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200, help="MBPP programs, run one after another")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    layers = enabled_layers("minimal")
    codes = programs(args.n)
    sandbox = Sandbox(layers, slots=1)
    try:
        sandbox.run(RunRequest(mode="stdio", code="pass"))  # start the fork server outside the timing
        traces, totals, failed = [], [], 0
        for code, test in codes:
            token = secrets.token_hex(8)
            t0 = time.perf_counter()
            result = sandbox.run(RunRequest(mode="assert", code=code, test=test, token=token, cpu_s=10, wall_s=31,
                                            trace=True))
            totals.append((time.perf_counter() - t0) * 1000)
            failed += result.exit_code != 0 or result.error is not None or token.encode() not in b"".join(
                result.result_lines)
            traces.append(result.trace)
    finally:
        sandbox.close()
    rows, off = _table(PHASES, traces), _table(OFF_PATH, traces)
    print(f"{len(codes)} MBPP programs, one slot, layers on: {', '.join(sorted(k for k, v in layers.items() if v))}; "
          f"{failed} failed")
    print(f"{'phase':10s} {'p50 ms':>8s} {'p90 ms':>8s}")
    for name, p50, p90 in rows:
        print(f"{name:10s} {p50:8.3f} {p90:8.3f}")
    print(f"{'sum p50':10s} {sum(r[1] for r in rows):8.3f}; whole run p50 {statistics.median(totals):.3f} ms "
          f"= {1000 / statistics.median(totals):.0f} exec/s per slot")
    print("off the critical path (the next child, while this program runs):")
    for name, p50, p90 in off:
        print(f"{name:10s} {p50:8.3f} {p90:8.3f}")
    for name, ms in floors(50).items():
        print(f"floor: {name:22s} {ms:8.3f} ms")
    print(f"load average (1 min) {load_before:.2f} at start, {os.getloadavg()[0]:.2f} at end; "
          f"host cpus {os.cpu_count()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
