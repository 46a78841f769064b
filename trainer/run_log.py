"""The run folder's logs: `metrics.jsonl`, optional W&B / TensorBoard, progress on a terminal.

`metrics.jsonl` holds one JSON object per line with `"kind"`:
- `"step"`: one per optimizer step — `step`, `policy_version`, `time` (unix s), `elapsed_s`,
  `reward/<domain>`, `pass_rate/<domain>` (share of correct samples in the batch), `reward/mean`,
  `effective_batch_fraction` (kept groups / prompts_per_step), `zero_variance_fraction`,
  `retired_count`, `truncation_rate`, `lag/{min,mean,p50,p90,max}` (trainer version − token version
  over trained tokens), `clip_frac`, `tokens_per_s` (sampled tokens per wall second since the last
  step), `generator/idle_fraction`, `compute_device_s`, `compute_flops`, and the loss metrics.
- `"validation"` (the keys `trainer.fit.data` reads): `step`, `policy_version`, `compute_device_s`,
  `compute_flops`, `val: {<domain>: {pass_rate, n[, greedy_pass_rate]}}` (pass rate sampled at
  the training temperature), `validation_s`.
Lines are appended and flushed one at a time, so a killed run leaves a readable file (at most the
last line partial; readers skip a partial last line). On resume, lines of steps after the
checkpoint are dropped.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path
from typing import Any

from trainer.config import LoggingConfig

log = logging.getLogger(__name__)


def read_metrics(path: str | Path, kind: str | None = None) -> list[dict[str, Any]]:
    """All complete records of `metrics.jsonl` (optionally of one kind)."""
    out = []
    p = Path(path)
    if not p.exists():
        return out
    for line in p.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a partial last line of a killed run
        if kind is None or rec.get("kind") == kind:
            out.append(rec)
    return out


def truncate_after(path: Path, step: int) -> None:
    """Keep the records of steps ≤ `step` (resume from a checkpoint at `step`)."""
    keep = [r for r in read_metrics(path) if int(r.get("step", 0)) <= step]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in keep))
    tmp.replace(path)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class RunLog:
    def __init__(self, out: Path, cfg: LoggingConfig, *, total_steps: int, config_dict: dict) -> None:
        self.path = out / "metrics.jsonl"
        self._fh = open(self.path, "a", buffering=1)  # noqa: SIM115 - lives as long as the run, closed in close()
        self.total_steps = total_steps
        self._progress = None
        self._task = None
        self._wandb = self._tb = None
        use_rich = cfg.progress == "rich" or (cfg.progress == "auto" and sys.stderr.isatty())
        if use_rich:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("[bold]train"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
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


class ComputeClock:
    """Consumed compute: device-seconds (generator busy + trainer busy) and FLOPs estimated from tokens.

    FLOPs ≈ 2·N per generated token (forward) + 6·N per trained token (forward + backward), with N the
    number of model parameters (the usual 2N/6N estimate; attention FLOPs are ignored). Validation is
    not counted (it is measurement, not training compute)."""

    def __init__(self, n_params: int, device_s: float = 0.0, flops: float = 0.0) -> None:
        self.n_params = n_params
        self.device_s = device_s
        self.flops = flops
        self._gen_busy_seen = 0.0
        self._gen_tokens_seen = 0

    def add_training(self, seconds: float, tokens: int) -> None:
        self.device_s += seconds
        self.flops += 6.0 * self.n_params * tokens

    def add_generation(self, busy_s_total: float, tokens_total: int) -> None:
        """Engine counters are cumulative for the life of the engine; add what is new since last call."""
        self.device_s += max(0.0, busy_s_total - self._gen_busy_seen)
        self.flops += 2.0 * self.n_params * max(0, tokens_total - self._gen_tokens_seen)
        self._gen_busy_seen, self._gen_tokens_seen = busy_s_total, tokens_total

    def state(self) -> dict[str, float]:
        return {"device_s": self.device_s, "flops": self.flops}
