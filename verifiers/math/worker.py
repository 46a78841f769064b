"""The math worker process: a persistent loop that judges (gold, pred) pairs sent by the parent.

Protocol (one JSON object per line): the worker first writes
`{"ready": pid, "startup_s": ...}` once math-verify is imported and warmed; then for every request
`{"gold": ..., "pred": ...}` it writes `{"status": ..., "reason": ..., "elapsed_s": ...}`. A request with
`"plain": true` is the second opinion (`scalerl.verifiers.second_opinion`): plain math-verify with its
defaults, `verify(parse("$\\boxed{gold}$"), parse(pred))` on the whole completion, under the same timers.
The protocol uses private copies of stdin/stdout; fd 1 is pointed at stderr so that a stray print in a
library cannot corrupt the stream.

Guarantees: a soft timer (`soft_timeout_s`) interrupts pure-Python sympy work and answers `timeout`
without losing the warm process. Work the timer cannot interrupt (big-integer arithmetic in C) is the
parent's to stop: it kills this process at the hard deadline. An address-space limit
(`memory_mb`) turns memory blow-ups into `MemoryError` -> `unparsable` instead of swapping the host.
math-verify's own parse memos are widened to PARSE_CACHE_SIZE in the worker (`_widen_parse_caches`):
a pure memo, so every verdict is the one math-verify gives without it.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import resource
import signal
import sys
import time

# MathConfig fields forwarded to `scalerl.verifiers.math.judge.CompareSettings` (same names in both).
SETTINGS_FIELDS = ("float_rounding", "numeric_precision", "strict", "allow_set_relation_comp",
                   "guard_false_positives", "shape_rules")
# The numeric fallback's share of the soft timeout: soft (0.8 x timeout_s) + 0.15 x soft ends before the
# parent's hard deadline, so the fallback never costs the warm worker.
NUMERIC_BUDGET_FRACTION = 0.15
# LaTeX / expression parses math-verify keeps per worker (math-verify's own: 20), e.g. a prompt's reference and
# the answers its samples repeat; sympy expressions are immutable, so sharing a parse is safe.
PARSE_CACHE_SIZE = 4096


class SoftTimeout(BaseException):
    """Raised by the soft timer; a BaseException so that library `except Exception` cannot eat it."""


def _on_alarm(signum, frame):
    raise SoftTimeout()


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when the thread that spawned it (its pool driver) goes away, so a
    killed server never leaves workers computing. Elsewhere stdin EOF ends the loop instead."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def _limit_memory(memory_mb: int) -> None:
    if memory_mb > 0:
        limit = memory_mb << 20
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ValueError, OSError):  # a lower hard limit already applies; keep it
            pass


def _widen_parse_caches(size: int = PARSE_CACHE_SIZE) -> None:
    """math-verify memoises its LaTeX and expression parses in 20-entry LRU caches: a loop over one prompt's
    samples hits them, a worker serving the interleaved prompts of a batch mostly misses. Its module globals
    are looked up at each call, so a wider cache of the same function replaces them."""
    from math_verify import parser

    for name in ("parse_latex_cached", "parse_expr_cached"):
        original = getattr(getattr(parser, name, None), "__wrapped__", None)
        if original is not None:  # another math-verify layout: keep its own caches
            setattr(parser, name, functools.lru_cache(maxsize=size)(original))


def plain_math_verify(gold: str, completion: str) -> dict:
    """Plain math-verify 0.9.0 with its defaults, as a baseline runs it; math-verify's own signal timers
    are off (the worker's soft timer and the parent's deadline bound it)."""
    from math_verify import parse, verify

    gold_parsed = parse(f"$\\boxed{{{gold}}}$", parsing_timeout=None)
    accepted = bool(gold_parsed) and bool(verify(gold_parsed, parse(completion, parsing_timeout=None),
                                                  timeout_seconds=None))
    return {"status": "correct" if accepted else "wrong", "rule": "plain_math_verify"}


def _answer(settings, gold: str, pred: str, soft_timeout_s: float, plain: bool = False) -> dict:
    from scalerl.verifiers.math.judge import judge

    start = time.perf_counter()
    if soft_timeout_s > 0:  # 0: no soft timer, the parent's hard deadline alone applies
        signal.setitimer(signal.ITIMER_REAL, soft_timeout_s)
    try:
        if plain:
            out = plain_math_verify(gold, pred)
        else:
            result = judge(gold, pred, settings)
            out = {"status": result.status, "reason": result.reason, "rule": result.rule}
    except SoftTimeout:
        out = ({"status": "timeout", "reason": "soft timer fired in the worker"} if plain
               else _after_soft_timeout(settings, gold, pred, soft_timeout_s))
    except Exception as exc:  # the verifier failed: report it, keep serving
        out = {"status": "error", "reason": f"{type(exc).__name__}: {str(exc)[:200]}"}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    out["elapsed_s"] = time.perf_counter() - start
    return out


def _after_soft_timeout(settings, gold: str, pred: str, soft_timeout_s: float) -> dict:
    """Sympy ran out of time: closed-form constants are compared numerically (rule `numeric`) within
    NUMERIC_BUDGET_FRACTION of the soft timeout, which the parent's hard deadline still leaves."""
    from scalerl.verifiers.math.judge import numeric_fallback

    out = {"status": "timeout", "reason": f"soft timer ({soft_timeout_s:.2f}s) fired in the worker"}
    signal.setitimer(signal.ITIMER_REAL, soft_timeout_s * NUMERIC_BUDGET_FRACTION)
    try:
        if numeric_fallback(gold, pred, settings):
            out = {"status": "correct", "reason": "sympy ran out of time; equal at 50 digits", "rule": "numeric"}
    except SoftTimeout:
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return out


def main() -> None:
    """Entry point: `python -c 'from scalerl.verifiers.math.worker import main; main()' SETTINGS_JSON`."""
    _die_with_parent()
    config = json.loads(sys.argv[1])
    proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its "timeout disabled" warning is ours
    start = time.perf_counter()
    from scalerl.verifiers.math.judge import CompareSettings, judge

    _widen_parse_caches()
    settings = CompareSettings(**config["settings"])
    judge("\\frac{1}{2}", "0.5", settings)  # warm the LaTeX parser and sympy caches once
    judge("x^2+1", "1+x^2", settings)
    _limit_memory(int(config.get("memory_mb", 0)))
    signal.signal(signal.SIGALRM, _on_alarm)
    proto_out.write(json.dumps({"ready": os.getpid(), "startup_s": time.perf_counter() - start}) + "\n")
    proto_out.flush()
    soft = float(config["soft_timeout_s"])
    for line in proto_in:
        request = json.loads(line)
        reply = _answer(settings, request["gold"], request["pred"], soft, plain=bool(request.get("plain")))
        proto_out.write(json.dumps(reply) + "\n")
        proto_out.flush()


if __name__ == "__main__":
    main()
