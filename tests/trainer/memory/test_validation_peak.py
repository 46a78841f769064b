"""`validation.min_evaluations_per_domain=5000` on the CPU default stays inside the run's memory plan:
the process's peak resident memory during validation is measured, against the plan's `validation engine`.

Each measurement runs in a fresh child process (`python -c`, so nothing earlier in the test session
raises its peak): it builds the CPU default's model (4 layers, `engine.max_slots=256`,
`engine.max_seq_len=160`, fp32) and the verifier pool, then samples its resident set size
(`/proc/self/statm`, every 2 ms, in a thread) while `evaluate` runs 5,000 evaluations of the math
held-out set. What is asserted: the growth over the RSS before validation is at most the plan's
`validation engine` term (weights + 256 x 160-token KV cache, 160 MiB) plus a fixed 48 MiB for the
interpreter and allocator (arenas of the engine's decode thread, sample objects), and it is within
24 MiB of the growth at 256 evaluations (it does not scale with the count). A cache sized by the
count, as before, would be 5,000 slots: 3.1 GiB. Cost kept low: completions of 2 tokens
(`engine.max_new_tokens=2`, `length.mode=none`), which change what is sampled, not what is allocated
(the KV cache is preallocated for `max_seq_len`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from scalerl.env.contracts.paths import REPO

SLACK = 48 << 20
FLAT = 24 << 20


def child(evaluations: int) -> None:
    """Run in a fresh interpreter: print {"growth", "plan_validation", "kv_at_count", "n"} as JSON."""
    import threading
    import time

    from scalerl.env.contracts.config_loader import load_config
    from scalerl.trainer.config.train import TrainConfig
    from scalerl.trainer.memory.kv import kv_bytes_per_token
    from scalerl.trainer.memory.plan import build_plan
    from scalerl.trainer.memory.shapes import ModelShape
    from scalerl.trainer.rollout.problems import PromptCodec
    from scalerl.trainer.run.data_sources import build_data
    from scalerl.trainer.run.validation import evaluate
    from scalerl.trainer.tiny.model import CharTokenizer, build_tiny_model
    from scalerl.verifiers import VerifierPool

    cfg = load_config(TrainConfig, None, ["engine.device=cpu", f"validation.min_evaluations_per_domain={evaluations}",
                                          "length.mode=none", "engine.max_new_tokens=2",
                                          "data.generated_per_domain=400", "data.holdout_max_prompts=50"])
    holdout = {"math": build_data(cfg)["math"].holdout}
    tok = CharTokenizer()
    model = build_tiny_model(cfg.tiny, tok)
    page = os.sysconf("SC_PAGE_SIZE")

    def rss() -> int:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * page

    with VerifierPool() as verifier:
        before, peak, done = rss(), [0], threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], rss())
                time.sleep(0.002)

        watcher = threading.Thread(target=sample, daemon=True)
        watcher.start()
        out = evaluate(model, PromptCodec(tok), holdout, cfg, verifier, device="cpu", policy_version=0)
        done.set()
        watcher.join()
    c = model.config
    per_token = kv_bytes_per_token(c.num_hidden_layers, c.num_key_value_heads, c.head_dim, cfg.engine.dtype)
    plan = build_plan(ModelShape.from_dict(c.to_dict()), cfg.plan_inputs())
    print(json.dumps({"growth": max(peak[0], rss()) - before, "n": out["heldout/math/n"],
                      "plan_validation": plan.term("validation engine").bytes,
                      "kv_at_count": evaluations * cfg.engine.max_seq_len * per_token}))


def measure(*counts: int) -> list[dict]:
    """One child per count, all at once (each measures only itself)."""
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    procs = [subprocess.Popen([sys.executable, "-c", f"from {__name__} import child; child({n})"], cwd=REPO,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in counts]
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-3000:]
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


@pytest.mark.timeout(900)
def test_5000_evaluations_stay_inside_the_plan():
    small, big = measure(256, 5000)
    assert big["n"] >= 5000 and small["n"] >= 256
    plan = big["plan_validation"]
    assert big["kv_at_count"] > 10 * plan  # the test can tell a count-sized cache from the plan's
    assert big["growth"] <= plan + SLACK, (big, small)
    assert big["growth"] <= small["growth"] + FLAT, (big, small)
