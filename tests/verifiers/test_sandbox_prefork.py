"""Pre-forked children: each slot clones its next child while a program runs. That child must never be
affected by the program before it (files, processes, SysV IPC), must take its job's limits, must be
reaped by `idle()` and `close()`, and its death while waiting must cost a clone, not a run."""

from __future__ import annotations

import os
import signal
import time

import pytest
from scalerl.verifiers.code.sandbox import RunRequest, Sandbox, enabled_layers

SHM_KEY = 0x5CA1E


@pytest.fixture()
def sandbox():
    sb = Sandbox(enabled_layers("strict"), slots=1)
    yield sb
    sb.close()


def _children(pid: int) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        try:
            with open(f"/proc/{p}/stat") as f:
                if p.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(p))
        except (OSError, IndexError, ValueError):
            pass
    return out


def _uid_procs(uid: int) -> list[int]:
    out = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{p}/status") as f:
                if next(int(line.split()[1]) for line in f if line.startswith("Uid:")) == uid:
                    out.append(int(p))
        except (OSError, StopIteration):
            pass
    return out


def _run(sb: Sandbox, code: str, **kw) -> str:
    res = sb.run(RunRequest(mode="stdio", code=code, **kw))
    assert res.error is None and res.exit_code == 0, (res.error, res.exit_code, res.stderr[-2000:])
    return res.stdout.decode().strip()


LEAVE_BEHIND = f"""
import ctypes, os, time
open("left.txt", "w").write("x")
libc = ctypes.CDLL(None, use_errno=True)
shm = libc.shmget({SHM_KEY}, 4096, 0o1000 | 0o666)  # IPC_CREAT
if os.fork() == 0:
    os.setsid()
    time.sleep(60)
    os._exit(0)
print(os.getuid(), shm)
"""
LOOK = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print(sorted(os.listdir(".")), libc.shmget({SHM_KEY}, 0, 0), os.getuid())
"""


def test_a_program_sees_nothing_of_the_program_before(sandbox: Sandbox) -> None:
    uid, shm = map(int, _run(sandbox, LEAVE_BEHIND).split())
    assert shm >= 0  # the segment existed in that program's IPC namespace
    assert _uid_procs(uid) == []  # its daemon died with its PID namespace
    seen = [_run(sandbox, LOOK) for _ in range(3)]  # the other root, then the same root again, then other
    for line in seen:
        files, shm_id, _ = line.rsplit(" ", 2)
        assert files == "[]" and int(shm_id) == -1, line
    assert {int(line.rsplit(" ", 1)[1]) for line in seen} == {uid, uid + 1}, seen  # both roots were used


def test_each_run_gets_its_own_limits(sandbox: Sandbox) -> None:
    code = ("import os, resource\nst = os.statvfs('.')\n"
            "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], st.f_blocks * st.f_frsize >> 20)")
    assert _run(sandbox, code, nofile=64, disk_mb=8) == "64 8"
    assert _run(sandbox, code, nofile=128, disk_mb=8) == "128 8"
    assert _run(sandbox, code, nofile=64, disk_mb=16) == "64 16"  # the waiting child had an 8 MiB /work
    assert _run(sandbox, code, nofile=64, disk_mb=16) == "64 16"


def test_idle_and_close_reap_the_waiting_child(sandbox: Sandbox) -> None:
    assert _run(sandbox, "print(1)") == "1"
    server = sandbox.server_pids[0]
    deadline = time.monotonic() + 5
    while len(_children(server)) != 1 and time.monotonic() < deadline:  # the next child is cloned after handoff
        time.sleep(0.01)
    spare = _children(server)
    assert len(spare) == 1
    sandbox.idle()
    assert _children(server) == [] and not os.path.exists(f"/proc/{spare[0]}")
    assert _run(sandbox, "print(2)") == "2"  # cloned on demand after idle
    sandbox.close()
    assert not os.path.exists(f"/proc/{server}")
    assert [p for p in spare if os.path.exists(f"/proc/{p}")] == []


def test_a_waiting_child_that_dies_costs_a_clone_not_a_run(sandbox: Sandbox) -> None:
    assert _run(sandbox, "print(1)") == "1"
    server = sandbox.server_pids[0]
    for _ in range(3):
        deadline = time.monotonic() + 5
        while not _children(server) and time.monotonic() < deadline:
            time.sleep(0.01)
        for pid in _children(server):
            os.kill(pid, signal.SIGKILL)
        assert _run(sandbox, "print(2)") == "2"
    assert sandbox.server_pids == [server]  # the server itself never restarted


def test_a_server_started_from_a_thread_that_exits_lives_on(sandbox: Sandbox) -> None:
    import threading

    # The server's death signal is bound to the thread that forked it: started from a caller's
    # short-lived thread it would die with that thread and be restarted on the next run.
    first = threading.Thread(target=lambda: _run(sandbox, "print(1)"))
    first.start()
    first.join()
    server = sandbox.server_pids[0]
    time.sleep(0.2)  # the death signal, if any, is delivered when the thread exits
    assert os.path.exists(f"/proc/{server}")
    assert _run(sandbox, "print(2)") == "2"
    assert sandbox.server_pids == [server]
