"""Starting trainer ranks 1..N-1 (rank 0 is the process that runs the training loop).

- `ProcessRanks`: child processes on this machine (`python -m scalerl.trainer.distributed.ranks`, the spec
  as JSON on stdin, the same interpreter and source tree as rank 0). Each dies with its parent (Linux
  `PR_SET_PDEATHSIG`). Output goes to `log_dir/rank-<r>.log`, or to this process's stderr.
- `RayRanks`: Ray actors, one per rank, in a placement group (one bundle per rank, `PACK`, so they
  sit together when they fit on one node and spread across nodes when not). Rank 0 chose the
  rendezvous address (its own node's IP and a free port) before starting them.

Both report a rank that died before joining (`failed()`), so rank 0 does not wait out the whole
rendezvous timeout for a rank that will never come.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from scalerl.trainer.distributed.ranks import RankSpec


class ProcessRanks:
    """Ranks > 0 as child processes of this one."""

    def __init__(self, specs: list[RankSpec], log_dir: Path | None = None) -> None:
        env = dict(os.environ)
        self.procs: list[subprocess.Popen] = []
        self._logs = []
        for spec in specs:
            out = None  # inherit this process's output
            if log_dir is not None:
                log_dir.mkdir(parents=True, exist_ok=True)
                out = open(log_dir / f"rank-{spec.rank}.log", "ab")  # closed in close()
                self._logs.append(out)
            proc = subprocess.Popen([sys.executable, "-m", "scalerl.trainer.distributed.ranks"], stdin=subprocess.PIPE,
                                    stdout=out, stderr=subprocess.STDOUT if out is not None else None, env=env)
            proc.stdin.write(spec.model_dump_json().encode())
            proc.stdin.close()
            self.procs.append(proc)

    def failed(self) -> str | None:
        """A description of the first rank that has exited with an error, or None."""
        for r, p in enumerate(self.procs, start=1):
            if p.poll() not in (None, 0):
                return f"trainer rank {r} (pid {p.pid}) exited with code {p.returncode}"
        return None

    def close(self, timeout_s: float = 30.0) -> None:
        """Wait for the ranks to exit after `stop`; terminate (then kill) those still running."""
        deadline = time.monotonic() + timeout_s
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for f in self._logs:
            f.close()


class RankActor:
    """One rank > 0 inside a Ray actor (wrapped by `ray.remote` in `RayRanks`)."""

    def serve(self, spec_json: str) -> None:
        from scalerl.trainer.distributed.ranks import RankSpec, main_worker

        main_worker(RankSpec.model_validate_json(spec_json))


class RayRanks:
    """Ranks > 0 as Ray actors in a placement group (see the module docstring)."""

    def __init__(self, specs: list[RankSpec], *, num_cpus: float, num_gpus: float,
                 resources: dict[str, float] | None = None) -> None:
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundle = {"CPU": num_cpus, **({"GPU": num_gpus} if num_gpus else {}), **(resources or {})}
        self.pg = placement_group([dict(bundle) for _ in specs], strategy="PACK")
        ray.get(self.pg.ready(), timeout=600)
        actor = ray.remote(RankActor)
        self.actors, self.calls = [], []
        for i, spec in enumerate(specs):
            strategy = PlacementGroupSchedulingStrategy(placement_group=self.pg, placement_group_bundle_index=i)
            a = actor.options(num_cpus=num_cpus, num_gpus=num_gpus, resources=resources or None,
                              max_restarts=0, scheduling_strategy=strategy).remote()
            self.actors.append(a)
            self.calls.append(a.serve.remote(spec.model_dump_json()))

    def failed(self) -> str | None:
        import ray

        done, _ = ray.wait(self.calls, num_returns=len(self.calls), timeout=0)
        for ref in done:
            try:
                ray.get(ref)
            except Exception as exc:  # the actor's error or its death
                return f"trainer rank actor failed: {exc}"
        return None

    def close(self, timeout_s: float = 30.0) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        ray.wait(self.calls, num_returns=len(self.calls), timeout=timeout_s)
        for a in self.actors:
            ray.kill(a)
        remove_placement_group(self.pg)


def node_address(use_ray: bool) -> str:
    """The address ranks > 0 reach rank 0 at: its node's IP under Ray, else loopback."""
    if use_ray:
        import ray

        return ray.util.get_node_ip_address()
    return "127.0.0.1"
