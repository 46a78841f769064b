"""Layered sandbox for running untrusted Python programs (model output is hostile input).

Layers (each detected on this host by `detect_layers`, each reported in every code verdict):
- fork server: a small `python -I -S` process forks one child per run (~1-2 ms, against 8-110 ms for a
  fresh interpreter); it holds no models or data. Children run the program in that forked interpreter.
  With `pid_ns`, the next run's child is cloned and given every layer that does not depend on its job
  while the current program runs, then waits for its job (see `_child`); it never shares a working
  directory, uid or IPC namespace with a program that ran before it.
- `pid_ns`: each child is PID 1 of its own PID namespace; when it ends the kernel kills everything it
  left behind (daemons, detached grandchildren, fork bombs). Kill = one SIGKILL.
- `net_ns`, `ipc_ns`, `uts_ns`, `mount_ns`: the fork server's own namespaces: no network interface but
  a down loopback, no host SysV IPC, a private hostname and mount table. With `ipc_ns` each child also
  gets its own IPC namespace, so no SysV object outlives the run that made it.
- `chroot`: each child gets a chroot into a read-only root (in the fork server's private mount namespace)
  holding only /usr, /lib*, /bin and the Python install, with an empty size- and inode-capped tmpfs as
  its working directory (`/work`, also `/tmp`; remounted fresh whenever a run leaves anything in it): no
  host files (data sets, tests, the repository, /root, /home) are visible.
- `uid_drop`: each run is an unprivileged uid of its slot (two per slot, alternating with the two roots;
  no supplementary groups).
- `rlimits`: CPU seconds, address space, processes, file size, open files; no core dumps.
- `seccomp`: a deny-list filter (execve, sockets other than AF_UNIX, ptrace, mount, namespaces, kernel
  modules, bpf, perf, io_uring, keyrings, ...); loaded last, with no_new_privs.
- `cgroup_memory`, `cgroup_pids` (cgroup v1, where available): per-slot RSS and process-count limits.
Always on: own session and process group, scrubbed environment, every inherited fd closed except
stdin/stdout/stderr and the result channel, wall-clock deadline, output byte caps, every child reaped.

Levels (`CodeConfig.sandbox` is the minimum; the verifier refuses to start below it):
`strict` = pid/net/ipc/mount namespaces + chroot + uid_drop + seccomp + rlimits; `standard` = uid_drop +
seccomp + rlimits; `minimal` = rlimits. Every available layer is used whatever the level.

Not protected against: kernel exploits (the filter is a deny-list and the kernel is shared); CPU-cache
or timing side channels; a program slowing concurrent runs by using its full CPU and memory budget;
introspection of the harness inside the same interpreter in `assert` mode (frame, gc, ctypes and signal
routes are blocked by an audit hook, but a route it does not cover would reveal the run's token; `stdio`
and `functional` modes never let expected outputs into the sandbox, so they do not rely on a secret). Without
`pid_ns`, a process that leaves both the process group and the slot's cgroup and uid could survive.
"""

from __future__ import annotations

import functools
import json
import logging
import subprocess
import sys

from scalerl.verifiers.code.sandbox.client import ZYGOTE, RunRequest, RunResult, Sandbox

logger = logging.getLogger(__name__)

LEVELS: dict[str, frozenset[str]] = {
    "minimal": frozenset({"rlimits"}),
    "standard": frozenset({"rlimits", "seccomp", "uid_drop"}),
    "strict": frozenset({"rlimits", "seccomp", "uid_drop", "pid_ns", "net_ns", "ipc_ns", "mount_ns", "chroot"}),
}
LEVEL_ORDER = ("minimal", "standard", "strict")


class SandboxUnavailable(RuntimeError):
    """This host cannot provide the configured minimum isolation level."""


@functools.lru_cache(maxsize=1)
def _probe() -> dict:
    try:
        out = subprocess.run([sys.executable, "-I", "-S", ZYGOTE, "--probe"], capture_output=True,
                             timeout=60, check=True, text=True).stdout
        return json.loads(out)
    except (subprocess.SubprocessError, OSError, ValueError) as exc:
        logger.warning("sandbox layer probe failed: %s", exc)
        return {"layers": {}, "errors": {"probe": str(exc)}}


def best_level(layers: dict[str, bool]) -> str | None:
    """The highest level whose layers are all on, or None."""
    on = {k for k, v in layers.items() if v}
    best = None
    for level in LEVEL_ORDER:
        if LEVELS[level] <= on:
            best = level
    return best


def detect_layers() -> dict:
    """What this host allows: {"layers": {name: bool}, "level": best level or None, "errors": {...}}.

    Probed once per process, in throw-away children of a fresh `python -I -S`.
    """
    probed = _probe()
    layers = dict(probed["layers"])
    return {"layers": layers, "level": best_level(layers), "errors": dict(probed.get("errors", {}))}


def enabled_layers(minimum: str, disable: tuple[str, ...] | list[str] = ()) -> dict[str, bool]:
    """Every available layer minus `disable`; SandboxUnavailable if that is below `minimum`."""
    detected = detect_layers()
    layers = {k: v and k not in disable for k, v in detected["layers"].items()}
    missing = sorted(LEVELS[minimum] - {k for k, v in layers.items() if v})
    if missing:
        raise SandboxUnavailable(
            f"sandbox level {minimum!r} needs layers {missing} which are unavailable or disabled here "
            f"(probe errors: {detected['errors']}); set code.sandbox to a lower level to accept that"
        )
    return layers


__all__ = ["LEVELS", "RunRequest", "RunResult", "Sandbox", "SandboxUnavailable", "best_level",
           "detect_layers", "enabled_layers"]
