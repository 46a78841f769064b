"""Real reward-server processes for the server tests: started on a free loopback port, stopped by signal.

`shared_server(request, name, *args)` starts one server per name per test session (the first test that
asks starts it; `pytest`'s session cleanup sends SIGTERM), so the server tests share start-up costs.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
# Small pools: the test machine has 2 cores shared with other suites.
LEAN = ("--set", "verifier.math.workers=1", "--set", "verifier.code.slots=2")
# A server that is easy to overload: few items in flight, a short deadline, no ledger.
OVERLOAD = ("--set", "limits.max_items_in_flight=8", "--set", "limits.max_batch_items=8",
            "--set", "limits.request_deadline_s=3", "--set", "limits.retry_after_s=1")
_SHARED: dict[str, ServerProcess] = {}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """`scalerl-env serve` in a child process, logging to a temporary file."""

    def __init__(self, *args: str) -> None:
        self.args = list(args)
        self.log_path = Path(tempfile.mkstemp(prefix="scalerl-serve-", suffix=".log")[1])
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.verify: object = True  # httpx's `verify` for the readiness poll (an SSL context for HTTPS)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, ready_timeout_s: float = 120.0, port: int | None = None) -> ServerProcess:
        """Start on `port` (e.g. to restart a server where its clients expect it), else on a free one."""
        for _ in range(3):  # a free port can be taken between probing and binding: try another
            self.port = port or free_port()
            env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "PYTHONUNBUFFERED": "1"}
            cmd = [sys.executable, "-m", "scalerl.env.cli", "serve", "--port", str(self.port), *LEAN, *self.args]
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
            if self._wait_ready(ready_timeout_s):
                return self
            if "address already in use" not in self.log().lower():
                break
        raise RuntimeError(f"server did not become ready:\n{self.log()[-4000:]}")

    def _wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if httpx.get(self.url + "/readyz", timeout=2.0, verify=self.verify).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.proc.kill()
        self.proc.wait()
        return False

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 60.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (children, grandchildren, ...), from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for its parent."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def shared_server(request, name: str, *args: str) -> ServerProcess:
    """One server per `name` for the whole session, stopped at session end."""
    if name not in _SHARED:
        server = ServerProcess(*args).start()
        _SHARED[name] = server
        request.config.add_cleanup(lambda: (server.stop(), _SHARED.pop(name, None)))
    return _SHARED[name]
