"""No-positive resampling (ScaleRL §3, after Polaris, An et al. 2025): "maintain a history of pass rates
and permanently remove from subsequent epochs any prompt with pass rate ≥ 0.9". Here:
- the pass rate is `passed / scored` over a *window* (`RetirementConfig.window`):
  `"group"` (default) — the samples of the prompt's most recent group, i.e. the samples drawn for it at
  one step; the paper samples each prompt once per epoch, so this is its pass rate in its latest epoch
  and a prompt retires as soon as any one group reaches the threshold.
  `"all"` — every sample the prompt has ever had (a cumulative rate: slower to retire a prompt the
  policy has only recently learned).
- a sample passes when its verdict status is `correct` (shaped rewards never decide retirement).
- retirement is permanent: a later, worse group never brings a retired prompt back.
- a window with fewer than `min_samples` scored samples never retires a prompt (guards against a group
  recorded in pieces retiring on its first few samples).

Samples whose verification *failed* (`status = error`) are not scored: the ledger leaves them out of
the window.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from scalerl.env.contracts.records import Strict


class RetirementConfig(Strict):
    """No-positive resampling settings (ScaleRL: threshold 0.9, retired for good)."""

    enabled: bool = Field(default=True, description="off: nothing is ever retired (the paper's ablation)")
    threshold: float = Field(default=0.9, gt=0.0, le=1.0, description="retire when pass rate >= this")
    window: Literal["group", "all"] = Field(
        default="group", description="'group': the latest group's samples (one epoch); 'all': every sample"
    )
    min_samples: int = Field(default=1, ge=1, description="a window needs this many scored samples")


def passes(correct: int, scored: int, config: RetirementConfig) -> bool:
    """The retirement rule on one window's counts (the ledger applies the same function)."""
    return config.enabled and scored >= config.min_samples and correct / scored >= config.threshold
