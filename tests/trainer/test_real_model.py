"""`scalerl train` with a real pretrained chat model (SmolLM2-135M-Instruct) on real-format data (GSM8K and
MBPP prepared by the data layer), through the full loop on the torch engine, with short budgets.

One run (module fixture; ~1 min on 2 idle cores once the model is converted, ~40 s more the first time on
a machine) feeds several one-property tests: both domains reach the metrics, the ledger holds the files'
prompt ids, rollouts.jsonl holds decoded text, the checkpoint is an HF folder. Two tests outside the
loop check the prompt rendering and that generator and trainer logprobs agree (FP32 head).
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
import torch
from scalerl.env.sources.verl import read_records
from scalerl.trainer.cli import build_app
from scalerl.trainer.run.log import read_metrics
from typer.testing import CliRunner

from tests.support.real_model import prepared_files, require_model

pytestmark = pytest.mark.timeout(900)
LOGPROB_TOL = 2e-3  # fp32 KV-cache decoding vs one packed forward: measured max |diff| 2.7e-5 (2 x 16 tokens)


def short_args(files, out, engine="torch"):
    return ["train", "--preset", "small-cpu", "--data", f"math={files['math']}", "--data", f"code={files['code']}",
            "--engine", engine, "--max-steps", "2", "--out", str(out),
            "pipeline.prompts_per_step=2", "pipeline.samples_per_prompt=2", "pipeline.k=1",
            "pipeline.max_time_s=null", "length.think_budget_min_tokens=24", "length.think_budget_max_tokens=24",
            "length.answer_budget_tokens=8", "validation.every_steps=2", "validation.min_evaluations_per_domain=2",
            "data.holdout_max_prompts=1", "checkpoint.every_steps=2", "logging.progress=lines"]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    require_model()
    folder = tmp_path_factory.mktemp("real")
    files = prepared_files(folder)
    out = folder / "run"
    result = CliRunner().invoke(build_app(), short_args(files, out))
    assert result.exit_code == 0, result.output + repr(result.exception)
    ids = {d: {r.prompt_id for r in read_records(p)[0]} for d, p in files.items()}
    return out, ids


def test_both_domains_reach_the_metrics(real_run):
    out, _ = real_run
    steps = read_metrics(out / "metrics.jsonl", "step")
    assert [r["step"] for r in steps] == [1, 2]
    assert {k for r in steps for k in r if k.startswith("reward/")} >= {"reward/math", "reward/code"}
    assert all("format_failure_rate/math" in r or "format_failure_rate/code" in r for r in steps)
    vals = read_metrics(out / "metrics.jsonl", "validation")
    assert vals and set(vals[-1]["val"]) == {"math", "code"}


def test_ledger_rows_carry_the_files_prompt_ids(real_run):
    out, ids = real_run
    with duckdb.connect(str(out / "ledger.duckdb"), read_only=True) as db:
        rows = db.execute("SELECT prompt_id, domain, status FROM attempts").fetchall()
    assert {d for _, d, _ in rows} == {"math", "code"}
    for prompt_id, domain, _ in rows:
        assert prompt_id in ids[domain]
    assert all(status in {"correct", "wrong", "no_answer", "unparsable", "timeout"} for *_, status in rows)


def test_rollouts_jsonl_holds_decoded_completions(real_run):
    out, ids = real_run
    lines = [json.loads(x) for x in (out / "rollouts.jsonl").read_text().splitlines()]
    assert {r["kind"] for r in lines} == {"train", "validation"}
    assert {r["domain"] for r in lines if r["kind"] == "train"} == {"math", "code"}
    assert all(r["prompt_id"] in ids[r["domain"]] for r in lines)
    assert any(r["completion"].strip() for r in lines)
    assert not any("<|im_end|>" in r["completion"] or "<|im_start|>" in r["completion"] for r in lines)
    assert all(len(r["policy_versions"]) == 2 and r["completion_tokens"] >= 1 for r in lines)


def test_checkpoint_reloads_as_an_hf_folder_with_identical_logits(real_run):
    from scalerl.trainer.core.checkpoint import latest_checkpoint, load_model_weights
    from scalerl.trainer.engines.model_loading import load_hf_policy
    from transformers import AutoModelForCausalLM

    out, _ = real_run
    ckpt = latest_checkpoint(out / "checkpoints")
    reloaded = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    base, tok = load_hf_policy(require_model())
    load_model_weights(ckpt, base)  # the trainer's own loader: the weights it saved
    ids = torch.tensor([tok.encode("Janet's ducks lay 16 eggs per day.")])
    with torch.no_grad():
        assert torch.equal(reloaded(ids).logits, base.eval()(ids).logits)


def test_chat_template_and_instruction_are_applied(tmp_path):
    from scalerl.env.contracts.config_loader import load_config
    from scalerl.trainer.config.presets import preset_values
    from scalerl.trainer.config.train import TrainConfig
    from scalerl.trainer.engines.model_loading import load_tokenizer
    from scalerl.trainer.rollout.prompts import prepare_prompts
    from scalerl.trainer.run.data_sources import build_data

    files = prepared_files(tmp_path, limit=8)
    cfg = load_config(TrainConfig, None, [f"data.sources=[{{domain: math, files: [{files['math']}]}}]",
                                          "domains=[math]", "data.holdout_max_prompts=2"],
                      base=preset_values("small-cpu", data_given=True))  # as with --data: the files replace the mix
    tok = load_tokenizer(require_model())
    codec, pools, skipped = prepare_prompts(cfg, tok, build_data(cfg))
    text = codec.problem_encoder.text(pools["math"].train[0])
    assert text.startswith("<|im_start|>system") and text.endswith("<|im_start|>assistant\n")
    assert text.count("\\boxed{}") == 1  # the prepared record's instruction, not a second one
    assert codec.stop_token_ids == [tok.convert_tokens_to_ids("<|im_end|>")] and skipped == {"math": 0}


def test_generator_and_trainer_logprobs_agree(tmp_path):
    """The torch engine's sampled-token logprobs (KV cache, FP32 head) equal the trainer's recomputation
    (one packed forward, FP32 head) within LOGPROB_TOL at the sampling temperature."""
    from scalerl.env.contracts.config_loader import load_config
    from scalerl.trainer.config.presets import preset_values
    from scalerl.trainer.config.train import TrainConfig
    from scalerl.trainer.core.fp32_head import token_logprobs
    from scalerl.trainer.engines.base import GenerationRequest, SamplingParams
    from scalerl.trainer.engines.factory import build_torch_engine
    from scalerl.trainer.engines.model_loading import load_hf_policy

    cfg = load_config(TrainConfig, None, [], base=preset_values("small-cpu"))
    model, tok = load_hf_policy(require_model())
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is 12+30?"}], add_generation_prompt=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    engine = build_torch_engine(cfg.engine, model, tok.eos_token_id, fp32_head=cfg.optim.fp32_head, device="cpu",
                                policy_version=0, seed=1)
    try:
        engine.submit(GenerationRequest(request_id="0", prompt_token_ids=prompt, samples_per_prompt=2,
                                        sampling=SamplingParams(temperature=cfg.engine.temperature,
                                                                max_new_tokens=16)))
        groups = []
        while not groups:
            groups = engine.poll(timeout_s=1.0)
    finally:
        engine.close()
    worst = 0.0
    for sample in groups[0].samples:
        ids = torch.tensor(prompt + sample.token_ids)
        with torch.no_grad():
            lp = token_logprobs(model, ids, temperature=cfg.engine.temperature, fp32_head=True)[len(prompt):]
        worst = max(worst, float((lp - torch.tensor(sample.logprobs)).abs().max()))
    print(f"max |engine - trainer| logprob: {worst:.2e}")
    assert worst < LOGPROB_TOL, worst


def test_gguf_file_alias_and_folder_resolve_to_one_plain_hf_folder(tmp_path):
    from scalerl.env.contracts.config_loader import ConfigError
    from scalerl.trainer.config.resolve import check_model_path
    from scalerl.trainer.engines.model_loading import alias_file, resolve_model

    folder = resolve_model(require_model())
    assert resolve_model(str(alias_file(require_model()))) == folder  # the .gguf path: same cached conversion
    assert resolve_model(folder) == folder
    config = json.loads((Path(folder) / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    assert (Path(folder) / "model.safetensors").is_file() and (Path(folder) / "tokenizer.json").is_file()
    with pytest.raises(ConfigError, match="no such folder or .gguf file"):
        check_model_path(str(tmp_path / "missing.gguf"))
