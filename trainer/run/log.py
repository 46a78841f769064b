"""The run folder's logs: `metrics.jsonl`, optional W&B / TensorBoard, progress on a terminal.

`metrics.jsonl` holds one JSON object per line with `"kind"`:
- `"step"`: one per optimizer step — `step`, `policy_version`, `time` (unix s), `elapsed_s`,
  `reward/<domain>`, `pass_rate/<domain>` (share of correct samples in the batch), `reward/mean`,
  `effective_batch_fraction` (kept groups / prompts_per_step), `zero_variance_fraction`,
  `retired_count`, `truncation_rate`, `lag/{min,mean,p50,p90,max}` (trainer version − token version
  over trained tokens), `clip_frac`, `tokens_per_s` (sampled tokens per wall second since the last
  step), `generator/idle_fraction`, `devices`, the `compute_*` counters, and the loss metrics; with
  multi-turn environments, per environment `episode/<env>/{count,turns_mean,turns_max,tool_calls_mean,
  tool_errors_mean,feedback_turns_mean,env_tokens_mean,sampled_tokens_mean,cut_rate}`
  (`scalerl.trainer.rollout.episodes.episode_metrics`).
  Per domain with a second judge (`scalerl.verifiers.second_opinion`): `second_opinion/<domain>/checked`
  (negative verdicts re-checked), `.../accepts` (those the second judge accepts) and `.../fn_rate`
  (accepts / checked, null when none: the running false-negative estimate).
- `"validation"` (the keys `scalerl.trainer.fit.data` reads): `step`, `policy_version`, the `compute_*`
  counters, `val: {<domain>: {pass_rate, n[, greedy_pass_rate]}}` (pass rate sampled at the
  training temperature), `validation_s`.
Compute (`scalerl.trainer.run.compute.ComputeClock`): `compute_device_s` (wall seconds x devices in use, the
paper's GPU-hours in seconds), `compute_samples`, `compute_tokens`, `compute_flops` (=
`compute_gen_flops` + `compute_train_flops`): the axes a budget (`pipeline.budget_axis`) and a fit
can use; `compute_busy_s` is generator busy + trainer busy seconds, which leaves out idle time.
Lines are appended and flushed one at a time, so a killed run leaves a readable file (at most the
last line partial; readers skip a partial last line). On resume, lines of steps after the
checkpoint are dropped.

On the terminal: a legend of the step line (`step_legend`) once at the start, one line per step (or a
progress bar), and at the end which limit stopped the RL phase (`STOPPED_BY`, also `stopped_by` in
summary.json), so a run that ends at `step 191/400` says that the time limit ended it.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scalerl.trainer.config.train import LoggingConfig, PipelineConfig, TrainConfig

log = logging.getLogger(__name__)


def metric_records(path: str | Path, *, strict: bool = False) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) for each non-blank line of a metrics file: the one reader of
    `metrics.jsonl`. A line that is not JSON is skipped (the partial last line of a killed run), or
    with `strict` raises ValueError naming `file:line`."""
    with Path(path).open() as fh:
        for lineno, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                yield lineno, json.loads(text)
            except json.JSONDecodeError as exc:
                if strict:
                    raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc


def read_metrics(path: str | Path, kind: str | None = None) -> list[dict[str, Any]]:
    """All complete records of `metrics.jsonl` (optionally of one kind); [] when there is no file."""
    if not Path(path).exists():
        return []
    return [rec for _, rec in metric_records(path)
            if isinstance(rec, dict) and (kind is None or rec.get("kind") == kind)]


def truncate_after(path: Path, step: int) -> None:
    """Keep the records of steps ≤ `step` (resume from a checkpoint at `step`)."""
    keep = [r for r in read_metrics(path) if int(r.get("step", 0)) <= step]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in keep))
    tmp.replace(path)


STOPPED_BY = {"max_steps": "the step limit (pipeline.max_steps)", "max_time_s": "the time limit (pipeline.max_time_s)",
              "budget": "the compute budget (pipeline.budget)"}
"""What ended the RL phase, by the `pipeline` setting reached (summary.json's `stopped_by`)."""


def step_legend(p: PipelineConfig) -> str:
    """What the step line's fields mean, and the limits that end the RL phase (whichever comes first)."""
    limits = [f"pipeline.max_steps={p.max_steps}"]
    if p.max_time_s is not None:
        limits.append(f"pipeline.max_time_s={p.max_time_s:g} s of RL")
    if p.budget is not None:
        limits.append(f"pipeline.budget={p.budget:g} {p.budget_axis}")
    stops = limits[0] if len(limits) == 1 else ", ".join(limits[:-1]) + f" or {limits[-1]}, whichever comes first"
    return "\n".join([
        "step line: step N/max_steps vN <domain>=R lag≤L eff=F T tok/s",
        "  vN: policy version; <domain>=R: the batch's mean reward in that domain",
        "  lag≤L: the largest lag of a trained token, in policy versions from the one that sampled it to the one "
        f"trained (PipelineRL-k keeps it ≤ k={p.k})",
        "  eff=F: effective batch fraction, groups kept after the zero-variance filter / prompts per step",
        f"  the RL phase stops at {stops}"])


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class RunLog:
    def __init__(self, out: Path, cfg: LoggingConfig, *, total_steps: int, config_dict: dict) -> None:
        self.path = out / "metrics.jsonl"
        self._fh = open(self.path, "a", buffering=1)  # lives as long as the run, closed in close()
        self.total_steps = total_steps
        self._progress = None
        self._task = None
        self._wandb = self._tb = None
        use_rich = cfg.progress == "rich" or (cfg.progress == "auto" and sys.stderr.isatty())
        if use_rich:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("[bold]train"), BarColumn(),
                                      TextColumn("{task.completed}/{task.total}"),
                                      TimeElapsedColumn(), TextColumn("{task.fields[info]}"))
            self._progress.start()
            self._task = self._progress.add_task("train", total=total_steps, info="")
        if cfg.wandb:
            self._wandb = _optional_wandb(out, config_dict)
        if cfg.tensorboard:
            self._tb = _optional_tensorboard(out)

    def write(self, kind: str, record: dict[str, Any]) -> None:
        rec = {"kind": kind, **{k: _clean(v) for k, v in record.items()}}
        self._fh.write(json.dumps(rec) + "\n")
        step = int(record.get("step", 0))
        numeric = {f"{kind}/{k}" if kind != "step" else k: v for k, v in rec.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if self._wandb is not None:
            self._wandb.log(numeric, step=step)
        if self._tb is not None:
            for k, v in numeric.items():
                self._tb.add_scalar(k, v, step)
        if kind == "step":
            self._show(rec)
        else:
            log.info("validation at step %d: %s", step, json.dumps(rec.get("val")))

    def _show(self, rec: dict[str, Any]) -> None:
        rewards = " ".join(f"{k.split('/')[1]}={v:.2f}" for k, v in rec.items()
                           if k.startswith("reward/") and k != "reward/mean" and v is not None)
        info = f"{rewards} lag≤{rec.get('lag/max')} eff={rec.get('effective_batch_fraction', 0):.2f}"
        if self._progress is not None:
            self._progress.update(self._task, completed=rec["step"], info=info)
        else:
            log.info("step %d/%d v%d %s %.0f tok/s", rec["step"], self.total_steps, rec["policy_version"], info,
                     rec.get("tokens_per_s") or 0.0)

    def announce(self, p: PipelineConfig) -> None:
        """The legend of the step line, once, before the first step."""
        log.info("%s", step_legend(p))

    def stopped(self, step: int, stopped_by: str) -> None:
        log.info("stopped at step %d of at most %d: %s reached", step, self.total_steps, STOPPED_BY[stopped_by])

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
        if self._wandb is not None:
            self._wandb.finish()
        if self._tb is not None:
            self._tb.close()
        self._fh.close()


def _optional_wandb(out: Path, config_dict: dict) -> Any:
    try:
        import wandb
    except ImportError:
        log.warning("logging.wandb is on but wandb is not installed (pip install 'scalerl[logging]'); skipped")
        return None
    return wandb.init(project="scalerl", dir=str(out), config=config_dict, name=out.name)


def _optional_tensorboard(out: Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        log.warning("logging.tensorboard is on but tensorboard is not installed; skipped")
        return None
    return SummaryWriter(str(out / "tensorboard"))


def devices_in_use(cfg: TrainConfig) -> float:
    """Devices a run holds, for compute = wall x devices: one in a single process (engine and trainer
    share it); on Ray the GPUs of the generators and the trainer, or one per actor when they have none."""
    if not cfg.ray.enabled:
        return 1.0
    r = cfg.ray
    gpus = r.num_generators * r.generator_num_gpus + r.trainer_num_gpus
    return float(gpus) if gpus > 0 else float(r.num_generators + 1)
