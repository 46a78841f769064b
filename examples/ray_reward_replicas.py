"""The reward service as Ray actors: one ledger owner and N verifier replicas, each a `scalerl-env serve`
process started by an actor that Ray places like any other actor of the job.

    python examples/ray_reward_replicas.py --replicas 4 --cpus-per-replica 8 --ledger runs/ledger.duckdb \\
        --token-file tokens.txt --owner-token-file score-token.txt
    # prints SCALERL_REWARD_URL=http://10.0.0.5:8000,http://10.0.0.6:8000,... and keeps serving until Ctrl-C

From a driver of your own (e.g. a veRL or OpenRLHF launch script on the same Ray cluster):

    owner, replicas, urls = start_reward_service(replicas=4, cpus_per_replica=8, ledger="runs/ledger.duckdb")
    os.environ["SCALERL_REWARD_URL"] = ",".join(urls)   # before the trainer starts its reward workers

Ray schedules the actors (one CPU bundle each: `num_cpus=cpus_per_replica`); the actor's process runs the
server with `--workers cpus_per_replica` and stops it when the actor dies. The owner's ledger path must
be on the node the owner lands on (pin it with `owner_resources`, e.g. a custom resource of that node).
Tokens: pass `token_file=` (and `owner_token_file=` for the replicas' link) as for `scalerl-env serve`;
without them the servers refuse to bind 0.0.0.0 unless `insecure=True` (`--insecure`).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import urllib.request

import ray


@ray.remote
class RewardServer:
    """One `scalerl-env serve` process on the actor's node, on a free port."""

    def __init__(self, *args: str) -> None:
        with socket.socket() as sock:
            sock.bind(("", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://{ray.util.get_node_ip_address()}:{self.port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "scalerl.env.cli", "serve", "--host", "0.0.0.0",
                                      "--port", str(self.port), *args])

    def ready(self, timeout_s: float = 300.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"scalerl-env serve exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2):
                    return self.url
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"{self.url} not ready after {timeout_s} s")

    def stop(self) -> int:
        self.proc.terminate()  # SIGTERM: drain, flush the ledger, exit 0
        return self.proc.wait(timeout=60)


def start_reward_service(replicas: int, cpus_per_replica: int, ledger: str, *, token_file: str | None = None,
                         owner_token_file: str | None = None, owner_resources: dict | None = None,
                         insecure: bool = False):
    """Start the owner, then the replicas pointing at it; returns (owner, replica actors, replica URLs).
    The servers bind every interface, so `serve` wants `token_file`, or `insecure=True` on a trusted network."""
    auth = ("--token-file", token_file) if token_file else ("--insecure",) if insecure else ()
    owner = RewardServer.options(num_cpus=2, resources=owner_resources or {}).remote(
        "--workers", "1", "--ledger", ledger, *auth)
    owner_url = ray.get(owner.ready.remote())
    link = ("--owner-token-file", owner_token_file) if owner_token_file else ()
    actors = [RewardServer.options(num_cpus=cpus_per_replica).remote(
        "--workers", str(cpus_per_replica), "--ledger-owner", owner_url, *auth, *link) for _ in range(replicas)]
    urls = ray.get([a.ready.remote() for a in actors])
    return owner, actors, urls


def stop_reward_service(owner, actors) -> None:
    """Replicas first (their buffered rows go to the owner), then the owner."""
    ray.get([a.stop.remote() for a in actors])
    ray.get(owner.stop.remote())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--cpus-per-replica", type=int, default=2)
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--token-file")
    parser.add_argument("--owner-token-file")
    parser.add_argument("--insecure", action="store_true", help="no tokens: anyone reaching the ports may call")
    parser.add_argument("--serve-s", type=float, default=0, help="stop after this many seconds (0: until Ctrl-C)")
    args = parser.parse_args()
    ray.init()  # joins the node's running cluster (`ray start`, or RAY_ADDRESS), else starts a local one
    owner, actors, urls = start_reward_service(args.replicas, args.cpus_per_replica, args.ledger,
                                               token_file=args.token_file, owner_token_file=args.owner_token_file,
                                               insecure=args.insecure)
    print(f"SCALERL_REWARD_URL={','.join(urls)}", flush=True)
    try:
        time.sleep(args.serve_s or 10**9)
    except KeyboardInterrupt:
        pass
    stop_reward_service(owner, actors)


if __name__ == "__main__":
    main()
