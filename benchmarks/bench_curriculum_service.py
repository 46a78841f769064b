"""What the curriculum service costs per draw against `scalerl train`'s own sampler, in one process.

    python -m benchmarks.bench_curriculum_service [--prompts 4000] [--steps 40] [--world 2] [--n 32] [--repeats 3]
        [--curriculum '{"priority.mode": "learnability"}']

Per step, three ways of drawing `world × n` prompts from the same set, on fresh ledgers, each step
followed by a report of every drawn group (4 samples, half right) so pass rates and retirements move:
- baseline: `Sampler.next_batch(world × n)` with its policy (what `scalerl train`'s BatchDrawer calls);
- service: `CurriculumSet.draw` for each rank in turn (the draw, its ledger row, the slices);
- http: every rank's `CurriculumClient.draw` from its own thread against a real `scalerl-env serve`.
Prints the median per-step draw time of each (reports excluded), the ratios to the baseline (median of
`--repeats` alternated runs) and `uptime` before and after. No assertion: a measurement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from scalerl.curriculum.ledger.store import Ledger
from scalerl.curriculum.policy import policy_for
from scalerl.curriculum.sampler import Sampler
from scalerl.curriculum.service import CurriculumService, Member, resolve_settings
from scalerl.curriculum.service_models import DrawRequest, ReportRequest
from scalerl.env.contracts.records import ProblemRecord
from scalerl.env.curriculum_client import CurriculumClient

from tests.support.server_harness import ServerProcess

SETTINGS: dict = {}  # --curriculum JSON: the curriculum.* settings of all three paths


def records(n: int) -> list[ProblemRecord]:
    return [ProblemRecord(prompt_id=f"p{i}", domain="math", source="bench", answer=str(i),
                          prompt=[{"role": "user", "content": f"{i} + 0 = ?"}]) for i in range(n)]


def groups(ids: list[str], step: int) -> list[dict]:
    return [{"prompt_id": pid, "rewards": [1.0, float((step + i) % 2), 0.0, 1.0]} for i, pid in enumerate(ids)]


def baseline(folder: Path, probs: list[ProblemRecord], args) -> float:
    with Ledger(folder / "base.duckdb") as ledger:
        cfg = resolve_settings(SETTINGS)
        sampler = Sampler(probs, weights={"math": 1.0}, seed=0, ledger=ledger, policy=policy_for(cfg, 0))
        service = CurriculumService(ledger)  # only for its report path, the same rows as the others
        service.register("r", [Member(p.prompt_id, p.domain, p.source, "train", p) for p in probs])
        times = []
        for step in range(args.steps):
            start = time.perf_counter()
            ids = [p.prompt_id for p in sampler.next_batch(args.world * args.n)]
            times.append(time.perf_counter() - start)
            service.get("r").report(ReportRequest(groups=groups(ids, step), step=step))
    return statistics.median(times)


def in_process(folder: Path, probs: list[ProblemRecord], args) -> float:
    with Ledger(folder / "service.duckdb") as ledger:
        service = CurriculumService(ledger)
        service.register("s", [Member(p.prompt_id, p.domain, p.source, "train", p) for p in probs],
                         curriculum=SETTINGS)
        times = []
        for step in range(args.steps):
            start = time.perf_counter()
            ids = [p.prompt_id for r in range(args.world) for p in service.get("s").draw(
                DrawRequest(draw_id=step, rank=r, world_size=args.world, n=args.n)).prompts]
            times.append(time.perf_counter() - start)
            service.get("s").report(ReportRequest(groups=groups(ids, step), step=step))
    return statistics.median(times)


def over_http(url: str, probs: list[ProblemRecord], args, name: str) -> float:
    clients = [CurriculumClient(url, name, timeout_s=120) for _ in range(args.world)]
    clients[0].register(records=[{"prompt_id": p.prompt_id, "domain": p.domain, "source": p.source,
                                  "prompt": [m.model_dump() for m in p.prompt], "answer": p.answer} for p in probs],
                        curriculum=SETTINGS)
    times = []
    for step in range(args.steps):
        out: dict[int, list[str]] = {}
        barrier = threading.Barrier(args.world)

        threads = [threading.Thread(target=_rank, args=(clients[r], r, step, args, barrier, out))
                   for r in range(args.world)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        times.append(time.perf_counter() - start)
        clients[0].report(groups([pid for r in range(args.world) for pid in out[r]], step), step=step)
    for c in clients:
        c.close()
    return statistics.median(times)


def _rank(client: CurriculumClient, r: int, step: int, args, barrier: threading.Barrier, out: dict) -> None:
    barrier.wait()
    out[r] = [p.prompt_id for p in client.draw(args.n, draw_id=step, rank=r, world_size=args.world).prompts]


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=4000)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--curriculum", default='{"priority.mode": "learnability"}', help="curriculum.* settings, JSON")
    args = ap.parse_args(argv)
    SETTINGS.update(json.loads(args.curriculum))
    probs = records(args.prompts)
    print("load before:", uptime())
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess("--ledger", str(Path(tmp) / "served.duckdb")).start()
        rows = []
        try:
            for i in range(args.repeats):  # alternated, so drifting load hits all three alike
                folder = Path(tmp) / f"run{i}"
                folder.mkdir()
                rows.append((baseline(folder, probs, args), in_process(folder, probs, args),
                             over_http(server.url, probs, args, f"s{i}")))
                print(f"run {i}: baseline {rows[-1][0] * 1e3:.2f} ms, service {rows[-1][1] * 1e3:.2f} ms, "
                      f"http {rows[-1][2] * 1e3:.2f} ms per step  ({uptime()})")
        finally:
            server.stop()
    base, svc, http = (statistics.median(col) for col in zip(*rows))
    print(f"median per step of {args.world} x {args.n} prompts from {args.prompts}: baseline {base * 1e3:.2f} ms, "
          f"service {svc * 1e3:.2f} ms ({svc / base:.2f}x), http {http * 1e3:.2f} ms ({http / base:.2f}x)")
    print("load after:", uptime())


if __name__ == "__main__":
    sys.exit(main())
