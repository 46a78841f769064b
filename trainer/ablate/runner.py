"""Execute the planned runs: one after another in this process (default), or as Ray tasks.

Each run is the real `scalerl train` loop (`scalerl.trainer.run.loop.train`) into its own folder. A run that
raises is recorded as `failed` with the error and the study goes on; the next invocation tries it
again. With Ray (`--ray-address`: `auto` or an address joins a cluster, `local` starts one on this
machine and stops it at the end), every pending run becomes one task (2 CPUs, the CPU default's
engine and trainer threads, plus 1 GPU when the run's `engine.device` is cuda), the study folder
must be on storage every node sees, and the manifest is updated as tasks finish; each run records
the `host:pid` that trained it. Guarantee: a run's folder is only ever written by one process at a
time (this one, or the one task that owns it).
Not guaranteed: equal machine load across runs executed at different times or in parallel; a
wall-time budget buys a run on a busier machine less work (the manifest records the load).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from scalerl.trainer.ablate.study import Manifest, RunEntry, build_run_config, prepare_folder, run_state, write_manifest

log = logging.getLogger(__name__)


def pending(manifest: Manifest, out: Path) -> list[RunEntry]:
    return [r for r in manifest.runs if run_state(out / r.folder) != "finished"]


RunResult = tuple[float, float, int, str]


def train_run(config_json: dict[str, Any], folder: str) -> RunResult:
    """Train one run into `folder` (resuming from its checkpoint when it has one).

    Returns (wall seconds, mean of the 1-minute load average at start and end, optimizer steps,
    `host:pid` of this process)."""
    from scalerl.trainer.config.train import TrainConfig
    from scalerl.trainer.run.loop import train

    cfg = TrainConfig.model_validate(config_json)
    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    resume = prepare_folder(Path(folder))
    summary = train(cfg, folder, resume=resume)
    return (time.perf_counter() - t0, (load0 + os.getloadavg()[0]) / 2, int(summary["steps"]),
            f"{socket.gethostname()}:{os.getpid()}")


def _record(run: RunEntry, result: RunResult) -> None:
    run.wall_s, run.load_avg, run.steps, run.worker = result
    run.status = "finished"


def execute(manifest: Manifest, out: Path) -> None:
    """Run every unfinished run; the manifest on disk is current after each one."""
    todo = pending(manifest, out)
    log.info("ablate: %d of %d runs to do (%d finished, skipped)", len(todo), len(manifest.runs),
             len(manifest.runs) - len(todo))
    if manifest.study.ray_address is not None and todo:
        _execute_ray(manifest, out, todo)
        return
    for run in todo:
        cfg = build_run_config(manifest.study, run.overrides)
        run.status, run.error = "running", None
        write_manifest(manifest, out)
        log.info("ablate: %s seed %d -> %s", run.variant, run.seed, out / run.folder)
        try:
            _record(run, train_run(cfg.model_dump(mode="json"), str(out / run.folder)))
        except Exception as exc:  # one broken variant must not end the study; the manifest says why
            log.exception("ablate: run %s seed %d failed", run.variant, run.seed)
            run.status, run.error = "failed", f"{type(exc).__name__}: {exc}"
        write_manifest(manifest, out)


def _execute_ray(manifest: Manifest, out: Path, todo: list[RunEntry]) -> None:
    import ray

    started_here = not ray.is_initialized()
    ray.init(address=manifest.study.ray_address, ignore_reinit_error=True, log_to_driver=False)
    try:
        refs = {}
        for run in todo:
            cfg = build_run_config(manifest.study, run.overrides)
            gpus = 1.0 if cfg.engine.device.startswith("cuda") else 0.0
            task = ray.remote(num_cpus=2.0, num_gpus=gpus)(train_run)
            refs[task.remote(cfg.model_dump(mode="json"), str((out / run.folder).resolve()))] = run
            run.status, run.error = "running", None
        write_manifest(manifest, out)
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            run = refs.pop(done[0])
            try:
                _record(run, ray.get(done[0]))
            except Exception as exc:  # a task's failure is that run's, not the study's
                run.status, run.error = "failed", f"{type(exc).__name__}: {exc}"
            write_manifest(manifest, out)
    finally:
        if started_here:  # a cluster this call joined or started is left as the caller had it
            ray.shutdown()
