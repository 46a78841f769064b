"""Disputes an auditor should look at: where two ways of reading the same math item disagree.

`audit(items, config)` returns one `Dispute` per disagreement:
- `extraction`: the default extraction and the strict one (`answer_format="boxed"`) found different
  answers (including: only the default found one), so the reward depends on the format setting;
- `fast_vs_sympy`: the exact fast path decided the pair and math-verify + sympy (`scalerl.verifiers.math.judge`,
  run here in-process) decides it otherwise, or answers neither correct nor wrong.

Guarantees: read-only, in input order, code items skipped. Not guaranteed: speed (sympy runs in this
process without a worker's deadline: audit files you can afford to score twice).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from scalerl.verifiers.math.extract import clean_answer, extract_answer
from scalerl.verifiers.math.fast import fast_verdict
from scalerl.verifiers.verifier_config import MathConfig

AUDITED_DOMAIN = "math"  # the spec scalerl_env/domains/math.py scores with this verifier; others pass through


@dataclass(frozen=True)
class Dispute:
    id: str | None
    kind: str  # extraction | fast_vs_sympy
    first: str  # default extraction, or the fast path's verdict
    second: str  # strict extraction, or the sympy path's verdict (with its rule)
    answer: str

    def as_dict(self) -> dict:
        return asdict(self)


def audit(items: Sequence, config: MathConfig | None = None) -> list[Dispute]:
    """Disputes over `items` (VerifyItem-like: id, domain, completion, answer)."""
    import logging

    from scalerl.verifiers.math.judge import CompareSettings, judge
    from scalerl.verifiers.math.worker import SETTINGS_FIELDS

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its "timeout disabled" warning: no deadline here

    cfg = config or MathConfig()
    settings = CompareSettings(**{name: getattr(cfg, name) for name in SETTINGS_FIELDS})
    out = []
    for item in items:
        if item.domain != AUDITED_DOMAIN:
            continue
        gold = clean_answer(item.answer or "")
        kw = {"max_completion_chars": cfg.max_completion_chars, "max_answer_chars": cfg.max_answer_chars}
        default = extract_answer(item.completion, **kw)
        strict = extract_answer(item.completion, answer_format="boxed", **kw)
        if (default.kind, default.answer) != (strict.kind, strict.answer):
            out.append(Dispute(item.id, "extraction", _shown(default), _shown(strict), gold))
        if default.kind != "answer":
            continue
        fast = fast_verdict(gold, default.answer)
        if fast is None:
            continue
        slow = judge(gold, default.answer, settings)
        if slow.status != ("correct" if fast else "wrong"):
            out.append(Dispute(item.id, "fast_vs_sympy", "correct" if fast else "wrong",
                               f"{slow.status} ({slow.rule or slow.reason})", gold))
    return out


def _shown(found) -> str:
    return f"{found.method}: {found.answer}" if found.kind == "answer" else found.kind
