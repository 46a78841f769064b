"""TRL's GRPOTrainer, plain vs with the scalerl curriculum, at equal generated samples (CPU, tiny policy).

    .venv-rl/bin/python -m benchmarks.trl_curriculum_study --seeds 3 --budget 384 --out runs/trl-study.json

The policy is `tests.env.rl_support.tiny_policy` with a learnable difficulty per question: the logit gap
right - wrong after `<qK>` starts at `GAP` (p(right) 0.95, 0.5, 0.076, 0.0001), and training moves
it (only the LM head is trained, so the state stays the question's one-hot). Every prompt of a
question has the same text, so the held-out pass rate is exact and noise-free:
the mean over the four questions of the model's p(right | question), read from its logits (a held-out
set drawn like the training set). Rewards are the known reward of each completion (what
`ScaleRLReward` scores for it, `tests/env/test_adapters_trl.py`), looked up to keep the CPU for training.

Arms: `plain` = TRL's GRPOTrainer (its own shuffled sampler); `curriculum` = CurriculumGRPOTrainer on
a LocalCurriculum with DAPO dynamic sampling (`refill`, 3 rounds), the ledger's retirement (pass rate
>= 0.9 of the latest group) and learnability priority with replacement; `curriculum-shrink` = the same
without refill (zero-variance groups masked, one generation batch per step); `uniform-shrink` = the
curriculum trainer with the masking alone (uniform draws, retirement off), which separates what the
masking does to the loss's token normalization from what retirement and priority do. All stop at the
first step end at or past `--budget` generated samples. The plain seeds run first and the resolution (2 SE of a
difference of two means from their spread) is printed before the curriculum runs.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from tests.env.rl_support import EXPECTED_REWARD, PROBLEMS, VOCAB, tiny_policy, tiny_tokenizer

GAP = {"<q0>": 3.0, "<q1>": 0.0, "<q2>": -2.5, "<q3>": -9.0}
TAG = {p.tag: p for p in PROBLEMS}
GENERATIONS, GROUPS, PER_TAG = 4, 4, 8
LEARNABILITY = {"priority": {"mode": "learnability", "replacement": True}}
# arm -> (zero-variance mode, curriculum.* strategies, retirement on) of the curriculum trainer;
# None: TRL's own GRPOTrainer and sampler
ARMS = {"plain": None, "curriculum": ("refill", LEARNABILITY, True),
        "curriculum-shrink": ("shrink", LEARNABILITY, True), "uniform-shrink": ("shrink", {}, False)}


def study_policy(margin: float = 40.0):
    model = tiny_policy(margin)
    scale = math.sqrt(model.config.hidden_size)
    with torch.no_grad():
        for tag, gap in GAP.items():
            p, t = TAG[tag], VOCAB.index(tag)
            model.lm_head.weight[VOCAB.index(p.right), t] = (margin + gap / 2) / scale
            model.lm_head.weight[VOCAB.index(p.wrong), t] = (margin - gap / 2) / scale
    for name, param in model.named_parameters():  # only the head learns: the one-hot state stays exact
        param.requires_grad_(name.startswith("lm_head"))
    return model


def pass_rates(model, tokenizer) -> dict[str, float]:
    """p(right | question) from the logits after each question's prompt."""
    out = {}
    with torch.no_grad():
        for tag, p in TAG.items():
            ids = torch.tensor([tokenizer(f"solve {tag}")["input_ids"]])
            probs = model(input_ids=ids).logits[0, -1].float().softmax(-1)
            out[tag] = float(probs[VOCAB.index(p.right)])
    return out


def dataset():
    import datasets

    return datasets.Dataset.from_list([
        {"prompt": f"solve {tag}", "answer": TAG[tag].reference_text(), "prompt_id": f"{tag[1:-1]}-{i}",
         "domain": TAG[tag].domain} for tag in TAG for i in range(PER_TAG)])


class Counter:
    """The reward function (known rewards) that also counts generated samples and informative groups."""

    __name__ = "scalerl_reward"

    def __init__(self) -> None:
        self.samples = self.groups = self.informative = 0

    def __call__(self, prompts, completions, **kwargs):
        rewards = [EXPECTED_REWARD.get(c, 0.0) for c in completions]  # anything else (e.g. empty) is wrong
        self.samples += len(rewards)
        for i in range(0, len(rewards), GENERATIONS):
            self.groups += 1
            self.informative += len(set(rewards[i:i + GENERATIONS])) > 1
        return rewards


def run(arm: str, seed: int, budget: int, lr: float, work: Path) -> dict:
    from scalerl.curriculum.ledger.retirement import RetirementConfig
    from scalerl.curriculum.strategy_config import StrategyConfig, ZeroVarianceConfig
    from scalerl.env.adapters.curriculum_source import LocalCurriculum
    from scalerl.env.adapters.trl_curriculum import CurriculumGRPOTrainer, problems_from_dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    data, tokenizer, reward = dataset(), tiny_tokenizer(), Counter()
    curve: list[tuple[int, float]] = []

    class Budget(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            rates = pass_rates(kwargs["model"], tokenizer)
            curve.append((reward.samples, statistics.fmean(rates.values())))
            control.should_training_stop = reward.samples >= budget

    args = GRPOConfig(output_dir=str(work / f"{arm}-{seed}"), use_cpu=True, max_steps=budget, learning_rate=lr,
                      seed=seed, per_device_train_batch_size=GROUPS * GENERATIONS, num_generations=GENERATIONS,
                      max_completion_length=4, logging_steps=1, report_to="none", save_strategy="no", bf16=False,
                      dataloader_num_workers=0, disable_tqdm=True)
    common = dict(model=study_policy(), reward_funcs=[reward], args=args, train_dataset=data,
                  processing_class=tokenizer, callbacks=[Budget()])
    if ARMS[arm] is None:
        trainer = GRPOTrainer(**common)
    else:
        mode, strategies, retire = ARMS[arm]
        source = LocalCurriculum(problems_from_dataset(data), ledger=work / f"{arm}-{seed}.duckdb", seed=seed,
                                 strategies=StrategyConfig.model_validate(strategies),
                                 retirement=RetirementConfig(enabled=retire))
        trainer = CurriculumGRPOTrainer(**common, curriculum=source,
                                        zero_variance=ZeroVarianceConfig(mode=mode, max_refill_rounds=3))
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    initial = statistics.fmean(pass_rates(study_policy(), tokenizer).values())
    return {"arm": arm, "seed": seed, "samples": reward.samples, "steps": trainer.state.global_step,
            "wall_s": round(wall, 2), "informative_share": reward.informative / reward.groups,
            "initial_pass_rate": initial, "curve": curve, "final_pass_rate": at(curve, budget),
            **{f"pass_rate@{n}": at(curve, n) for n in checkpoints(budget)}}


def checkpoints(budget: int) -> list[int]:
    return [budget * k // 4 for k in (1, 2, 3)]


def at(curve: list[tuple[int, float]], samples: int) -> float:
    """The pass rate after the last step that ended at or before `samples` generated samples."""
    return [rate for n, rate in curve if n <= samples][-1]


def summary(runs: list[dict], key: str) -> tuple[float, float]:
    values = [r[key] for r in runs]
    return statistics.fmean(values), statistics.stdev(values) / math.sqrt(len(values))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budget", type=int, default=384, help="generated samples per run")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for arm in ARMS:
            runs[arm] = [run(arm, seed, a.budget, a.lr, Path(tmp)) for seed in range(a.seeds)]
            if arm == "plain":
                s = statistics.stdev(r["final_pass_rate"] for r in runs[arm])
                resolution = 2 * math.sqrt(2 * s * s / a.seeds)
                print(f"resolution (2 SE of a difference of means, from the plain seeds): {resolution:.4f}",
                      flush=True)
    keys = [*(f"pass_rate@{n}" for n in checkpoints(a.budget)), "final_pass_rate", "informative_share", "steps",
            "wall_s"]
    report = {"budget": a.budget, "lr": a.lr, "seeds": a.seeds, "uptime": load, "resolution": resolution,
              "arms": {arm: {k: summary(rs, k) for k in keys} for arm, rs in runs.items()}, "runs": runs}
    for arm, stats in report["arms"].items():
        print(arm, {k: f"{m:.4f} ± {se:.4f}" for k, (m, se) in stats.items()})
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
