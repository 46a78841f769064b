"""veRL 0.9.1's own data path draws through the curriculum dataset (`data.custom_cls`).

veRL's `ppo_trainer` config is composed with the documented overrides (docs/curriculum.md); the dataset
comes from `create_rl_dataset`, the sampler from `create_rl_sampler` and batches from a
`StatefulDataLoader` with veRL's `collate_fn`, as veRL's trainer builds them. Each batch's prompts get
four responses as a certain policy would answer them (`<q0>` always right, `<q2>` always wrong,
`<q1>`/`<q3>` half right), scored by the adapter veRL calls (`compute_score`), and the groups are
reported to the dataset's curriculum, as a driver-side loop would. Asserted on veRL's side (the batches
it receives): retired prompts never come back, and each batch mixes the domains 3:1 as weighted.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.env.rl_support import PROBLEMS, require, tiny_tokenizer

require("verl")
pytestmark = [pytest.mark.rl, pytest.mark.timeout(300)]
TAG = {p.tag: p for p in PROBLEMS}
BATCH, SAMPLES, STEPS = 4, 4, 6
RIGHT = {"<q0>": 4, "<q1>": 2, "<q2>": 0, "<q3>": 2}  # right answers of the four samples


def documented_overrides(ledger: Path) -> list[str]:
    """The `key=value` lines of docs/curriculum.md's veRL block, the module path and the ledger resolved."""
    import scalerl.env.adapters.verl_curriculum as dropin

    from tests.support.server_harness import REPO

    doc = (REPO / "docs" / "curriculum.md").read_text()
    block = doc.split("### veRL", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    pairs = re.findall(r"^\s*(\+?[a-z_][\w.]*)=(.+?)\s*\\?$", block, re.M)
    assert pairs, "docs/curriculum.md has no veRL overrides"
    resolved = {"data.custom_cls.path": dropin.__file__, "+data.curriculum.ledger": str(ledger)}
    return [f"{k}={resolved.get(k, v)}" for k, v in pairs]


def write_parquet(path: Path) -> Path:
    import datasets

    layout = {"<q0>": 3, "<q1>": 3, "<q2>": 2, "<q3>": 2}
    rows = [{"data_source": f"scalerl/{TAG[t].domain}", "ability": TAG[t].domain,
             "prompt": [{"role": "user", "content": f"solve {t}"}],
             "reward_model": {"style": "rule", "ground_truth": TAG[t].reference_text()},
             "extra_info": {"index": k, "prompt_id": f"{t[1:-1]}-{i}"}}
            for k, (t, i) in enumerate((t, i) for t, n in layout.items() for i in range(n))]
    datasets.Dataset.from_list(rows).to_parquet(str(path))
    return path


def verl_loader(tmp_path: Path, extra: tuple[str, ...] = ()):
    import verl
    from hydra import compose, initialize_config_dir
    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.trainer.ppo.utils import create_rl_dataset, create_rl_sampler
    from verl.utils.dataset.rl_dataset import collate_fn

    data = write_parquet(tmp_path / "train.parquet")
    overrides = documented_overrides(tmp_path / "curriculum.duckdb")
    if any(o.startswith("+data.curriculum.url=") for o in extra):  # the server's set instead of a local ledger
        overrides = [o for o in overrides if not o.startswith("+data.curriculum.ledger=")]
    overrides += [
        f"data.train_files={data}", f"data.train_batch_size={BATCH}", "data.filter_overlong_prompts=False", *extra]
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer/config"), version_base=None):
        config = compose(config_name="ppo_trainer", overrides=overrides)
    dataset = create_rl_dataset(config.data.train_files, config.data, tiny_tokenizer(), None, is_train=True)
    loader = StatefulDataLoader(dataset, batch_size=config.data.train_batch_size, num_workers=0, drop_last=True,
                                collate_fn=collate_fn, sampler=create_rl_sampler(config.data, dataset))
    return dataset, loader


def score_batch(batch, step: int, dataset) -> list[str]:
    """Four scored responses per prompt of a veRL batch, reported as groups; returns the batch's prompt ids."""
    from scalerl.env.adapters.curriculum_source import GroupOutcome
    from scalerl.env.adapters.verl import compute_score

    ids, groups = [], []
    for messages, truth, info, source in zip(batch["raw_prompt"], batch["reward_model"], batch["extra_info"],
                                             batch["data_source"]):
        tag = messages[-1]["content"].split()[-1]
        answers = [TAG[tag].right] * RIGHT[tag] + [TAG[tag].wrong] * (SAMPLES - RIGHT[tag])
        rewards = [compute_score(source, a, truth["ground_truth"], info)["score"] for a in answers]
        pid = str(info["prompt_id"])
        ids.append(pid)
        groups.append(GroupOutcome(prompt_id=pid, rewards=rewards))
    dataset.curriculum.report(groups, step=step)
    return ids


@pytest.mark.parametrize("where", ["local", "service"])
def test_verl_batches_follow_the_curriculum(where, tmp_path, monkeypatch, request):
    monkeypatch.delenv("SCALERL_REWARD_URL", raising=False)
    extra: tuple[str, ...] = ()
    if where == "service":  # the server's set, the groups reported to it (see docs/curriculum.md on verdicts)
        from tests.support.server_harness import shared_server

        url = shared_server(request, "rl-verl-curriculum", "--ledger", str(tmp_path / "server.duckdb")).url
        extra = (f"+data.curriculum.url={url}", "+data.curriculum.set=verl-dropin", "+data.curriculum.report=true")
    dataset, loader = verl_loader(tmp_path, extra)
    seen: list[str] = []
    batches = (batch for _ in range(STEPS) for batch in loader)  # epochs, as veRL's fit loop walks them
    for step in range(1, STEPS + 1):
        batch = next(batches)
        retired_before = dataset.curriculum.retired()
        ids = score_batch(batch, step, dataset)
        assert len(ids) == BATCH
        assert not set(ids) & retired_before, "a retired prompt reached veRL's batch"
        domains = sorted(TAG[f"<{pid.split('-')[0]}>"].domain for pid in ids)
        assert domains == ["code", "math", "math", "math"], "the batch does not follow the weights 3:1"
        seen += ids
    easy = {f"q0-{i}" for i in range(3)}
    assert easy <= set(seen) and easy <= dataset.curriculum.retired()
    assert all(seen.count(pid) == 1 for pid in easy), "an always-solved prompt came back after retiring"
    assert dataset.drawn == seen  # veRL received exactly what the curriculum drew, in order


def test_dataloader_workers_are_refused(tmp_path):
    import verl
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.utils import create_rl_dataset

    data = write_parquet(tmp_path / "train.parquet")
    overrides = [o for o in documented_overrides(tmp_path / "c.duckdb") if "num_workers" not in o]
    overrides += [f"data.train_files={data}", "data.dataloader_num_workers=2"]
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer/config"), version_base=None):
        config = compose(config_name="ppo_trainer", overrides=overrides)
    with pytest.raises(ValueError, match="dataloader_num_workers"):
        create_rl_dataset(config.data.train_files, config.data, tiny_tokenizer(), None, is_train=True)


def test_validation_files_are_read_row_by_row(tmp_path):
    # veRL builds its validation dataset with the same class and data config: it must not draw.
    from verl.trainer.ppo.utils import create_rl_dataset

    dataset, _ = verl_loader(tmp_path)
    val = write_parquet(tmp_path / "val.parquet")
    held = create_rl_dataset([str(val)], dataset.config, tiny_tokenizer(), None, is_train=False)
    assert held.curriculum is None
    assert [held[i]["extra_info"]["prompt_id"] for i in range(3)] == ["q0-0", "q0-1", "q0-2"]
    assert dataset.drawn == []
