"""Runs the hostile corpus through a real CodeVerifier; one JSON line per program on stdout.

Meant to run inside a safety net (its own PID, network, IPC and mount namespaces, see
tests/verifiers/test_sandbox_hostile.py) so that a sandbox bug cannot harm the machine running the tests.
Usage: python tests/verifiers/hostile/driver.py [NAME ...]   (default: every program in tests/verifiers/hostile/)
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import secrets
import socket
import struct
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, REPO)

from scalerl.env.contracts.paths import reference_dir
from scalerl.env.contracts.records import VerifyItem
from scalerl.verifiers.code.judge import CodeVerifier
from scalerl.verifiers.verifier_config import CodeConfig

SANDBOX_UID_MIN = 1_000_000
LIMITS = {"time_s": 0.5, "memory_mb": 256}
HONEST = VerifyItem(id="honest", domain="code", completion="a, b = map(int, input().split())\nprint(a + b)",
                    tests={"kind": "stdio", "cases": [{"input": "2 3\n", "output": "5\n"}]})


def corpus(names: list[str]) -> list[str]:
    all_names = sorted(f[:-3] for f in os.listdir(HERE) if f.endswith(".py") and f != "driver.py")
    return names or all_names


def header(src: str) -> dict[str, str]:
    out = {}
    for line in src.splitlines():
        if not line.startswith("# ") or ":" not in line:
            break
        key, value = line[2:].split(":", 1)
        out[key.strip()] = value.strip()
    return out


def bring_loopback_up() -> None:
    """The safety net's network namespace starts with lo down; the socket test needs a listener."""
    s = socket.socket()
    ifreq = struct.pack("16sH14s", b"lo", 0, b"")
    flags = struct.unpack("16sH14s", fcntl.ioctl(s, 0x8913, ifreq))[1]  # SIOCGIFFLAGS
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 1, b""))  # SIOCSIFFLAGS, IFF_UP
    s.close()


def start_listener() -> tuple[int, list]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    accepted: list = []

    def loop() -> None:
        while True:
            conn, _ = srv.accept()
            accepted.append(conn.recv(100))
    threading.Thread(target=loop, daemon=True).start()
    return srv.getsockname()[1], accepted


def make_item(name: str, src: str, kind: str) -> VerifyItem:
    if kind == "assert":
        tests = {"kind": "assert", "code": "assert add(1, 2) == 3\nassert abs(add(-1, -2)) == 3"}
    elif kind == "functional":
        tests = {"kind": "functional", "entry_point": "add", "cases": [{"args": [1, 2], "expected": 3}]}
    else:
        tests = {"kind": "stdio", "cases": [{"input": "", "output": f"expected-{secrets.token_hex(8)}"}]}
    return VerifyItem(id=name, domain="code", completion=src, tests=tests, limits=LIMITS)


def survivors() -> list[int]:
    """Processes still running as a sandbox uid."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as f:
                uid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
        except (OSError, StopIteration, ValueError):
            continue
        if uid >= SANDBOX_UID_MIN:
            found.append(int(pid))
    return found


def main(argv: list[str]) -> int:
    secret = "hostile-secret-" + secrets.token_hex(8)
    os.environ["SCALERL_HOSTILE_SECRET"] = secret
    bring_loopback_up()
    port, accepted = start_listener()
    subs = {"{repo}": REPO, "{reference}": str(reference_dir()), "{port}": str(port)}
    with CodeVerifier(CodeConfig(max_output_bytes=1 << 20)) as verifier:
        for name in corpus(argv[1:]):
            with open(os.path.join(HERE, name + ".py")) as f:
                src = f.read()
            for k, v in subs.items():
                src = src.replace(k, v)
            meta = header(src)
            rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            t0 = time.monotonic()
            verdict = verifier.verify_many([make_item(name, src, meta.get("kind", "stdio"))])[0]
            elapsed = time.monotonic() - t0
            time.sleep(0.05)
            honest = verifier.verify_many([HONEST])[0]
            out = verdict.details.get("stdout_head", "") + verdict.details.get("stderr_tail", "")
            print(json.dumps({
                "name": name, "status": verdict.status.value, "elapsed_s": round(elapsed, 3),
                "survivors": survivors(), "markers_present": [p for p in meta.get("markers", "").split() if
                                                              os.path.exists(p)],
                "leaked": "LEAK" in out or secret in out, "honest": honest.status.value,
                "rss_growth_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0,
                "tests": verdict.details.get("tests"), "out": out[-300:],
            }), flush=True)
        print(json.dumps({"name": "_summary", "listener_received": [a.decode(errors="replace") for a in accepted],
                          "info": verifier.info()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
