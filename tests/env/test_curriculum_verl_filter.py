"""veRL 0.9.1's v1 DAPO group filter (`algorithm.filter_groups`, metric `acc`) over the curriculum dataset.

veRL's v1 sync trainer keeps rollouts in TransferQueue and samples training batches through its
`ReplayBuffer`, which evicts finished groups whose metric is the same for every sample and refills
them through `refill_fn` (the trainer's `_add_prompts_to_generate`: the train dataloader, so our
`CurriculumRLHFDataset`). Here the real pieces run: a local Ray with TransferQueue's controller and
one storage unit, veRL's `ppo_trainer` config composed with the documented overrides plus
`algorithm.filter_groups.enable=true algorithm.filter_groups.metric=acc`, and `PPOTrainer`'s own
`_init_dataloader`, `_build_replay_buffer`, `prepare_step`, `_add_prompts_to_generate` and
`ReplayBuffer.sample`. Only the rollout is stood in for: each prompt gets four responses as a known
policy answers them (`<q0>` always right, `<q2>` always wrong, `<q1>`/`<q3>` half right), scored by
the adapter veRL calls (`compute_score`), written to TransferQueue as veRL's agent loop writes them
(`reward_extra_info` as veRL's reward manager builds it) and reported to the curriculum.
Asserted: no zero-variance group reaches the sampled batch (what the loss gets), every refill is a
curriculum draw (the prompts dispatched are exactly the dataset's draws, in order), the batch is full.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.env.rl_support import require, tiny_tokenizer

require("verl")
require("transfer_queue")
from tests.env.test_curriculum_verl import RIGHT, SAMPLES, TAG, documented_overrides, write_parquet  # noqa: E402

pytestmark = [pytest.mark.rl, pytest.mark.timeout(300)]
BATCH, STEPS = 4, 3


@pytest.fixture(scope="module")
def transfer_queue():
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
        yield tq
    finally:
        tq.close()
        ray.shutdown()


class Rollout:
    """Stands in for veRL's `AgentLoopManagerTQ`: writes each prompt's group to TransferQueue as
    `AgentLoopWorkerTQ` does (trajectories `{uid}_{session}_0`, then the prompt's status `finished`)."""

    def __init__(self, tq, tokenizer, dataset):
        self.tq, self.tokenizer, self.dataset = tq, tokenizer, dataset
        self.submitted: list[list[str]] = []  # prompt ids of each submission (prepare_step, then refills)
        self.pid_of: dict[str, str] = {}  # uid -> prompt id
        self.acc_of: dict[str, list[float]] = {}  # uid -> the group's acc values

    def generate_sequences(self, batch) -> None:
        import torch
        from scalerl.env.adapters.curriculum_source import GroupOutcome
        from scalerl.env.adapters.verl import compute_score
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        ids, groups = [], []
        retired = self.dataset.curriculum.retired()
        for i in range(len(batch)):
            uid = str(batch["uid"][i])
            messages, truth = batch["raw_prompt"][i], batch["reward_model"][i]
            info, source = batch["extra_info"][i], batch["data_source"][i]
            tag = messages[-1]["content"].split()[-1]
            answers = [TAG[tag].right] * RIGHT[tag] + [TAG[tag].wrong] * (SAMPLES - RIGHT[tag])
            keys, fields, tags = [], [], []
            for session, answer in enumerate(answers):
                result = compute_score(source, answer, truth["ground_truth"], info)
                # veRL's reward manager (experimental/reward_loop/reward_manager/naive.py): a dict result's
                # items become reward_extra_info, which the agent loop stores in extra_fields.
                keys.append(f"{uid}_{session}_0")
                fields.append({"responses": torch.tensor(self.tokenizer.encode(answer), dtype=torch.int64),
                               "rm_scores": torch.tensor([float(result["score"])]),
                               "extra_fields": {"reward_extra_info": dict(result)}})
                tags.append({"status": "success", "global_steps": int(batch["global_steps"])})
            self.tq.kv_batch_put(keys=keys, fields=list_of_dict_to_tensordict(fields), tags=tags,
                                 partition_id="train")
            self.tq.kv_put(key=uid, partition_id="train", tag={"status": "finished"})
            pid = str(info["prompt_id"])
            self.pid_of[uid] = pid
            self.acc_of[uid] = [float(f["extra_fields"]["reward_extra_info"]["acc"]) for f in fields]
            ids.append(pid)
            groups.append(GroupOutcome(prompt_id=pid, rewards=[float(f["rm_scores"][0]) for f in fields]))
        assert not set(ids) & retired, "a retired prompt was dispatched to the rollout"
        self.dataset.curriculum.report(groups, step=int(batch["global_steps"]))
        self.submitted.append(ids)


def v1_trainer(tmp_path: Path, tq):
    """veRL's `PPOTrainer` methods on a driver holding only what they read (no workers, no models)."""
    import verl
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    class Driver:
        _init_dataloader = PPOTrainer._init_dataloader
        _build_replay_buffer = PPOTrainer._build_replay_buffer
        _resolve_filter_groups_metric = PPOTrainer._resolve_filter_groups_metric
        prepare_step = PPOTrainer.prepare_step
        _add_batch_to_generate = PPOTrainer._add_batch_to_generate
        _add_prompts_to_generate = PPOTrainer._add_prompts_to_generate
        _next_train_batch = PPOTrainer._next_train_batch
        _fetch_one_gen_batch = PPOTrainer._fetch_one_gen_batch
        _submit_batch_to_rollout = PPOTrainer._submit_batch_to_rollout

    train = write_parquet(tmp_path / "train.parquet")
    val = write_parquet(tmp_path / "val.parquet")
    overrides = documented_overrides(tmp_path / "curriculum.duckdb") + [
        f"data.train_files={train}", f"data.val_files={val}", f"data.train_batch_size={BATCH}",
        "data.filter_overlong_prompts=False", f"actor_rollout_ref.rollout.n={SAMPLES}",
        "algorithm.filter_groups.enable=true", "algorithm.filter_groups.metric=acc"]
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer/config"), version_base=None):
        config = compose(config_name="ppo_trainer", overrides=overrides)
    driver = Driver()
    driver.config, driver.tokenizer, driver.processor = config, tiny_tokenizer(), None
    driver.trainer_mode = config.trainer.v1.trainer_mode
    driver.parameter_sync_step, driver.global_steps = 1, 1
    driver._init_dataloader()
    driver.replay_buffer = driver._build_replay_buffer()
    driver.agent_loop_manager = Rollout(tq, driver.tokenizer, driver.train_dataset)
    return driver


def test_filter_groups_keeps_zero_variance_groups_from_the_loss(transfer_queue, tmp_path, monkeypatch):
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    monkeypatch.delenv("SCALERL_REWARD_URL", raising=False)
    tq = transfer_queue
    driver = v1_trainer(tmp_path, tq)
    buffer, rollout, dataset = driver.replay_buffer, driver.agent_loop_manager, driver.train_dataset
    assert type(buffer) is ReplayBuffer and buffer.filter_groups_metric == "acc"
    assert driver.config.data.gen_batch_size == 1  # veRL: exact refills fetch one prompt at a time
    evicted = refills = 0
    for step in range(1, STEPS + 1):
        driver.global_steps = step
        before = len(rollout.submitted)
        driver.prepare_step()  # the step's first batch, as veRL's fit loop submits it
        batch, metrics = buffer.sample(global_steps=step, partition_id="train", batch_size=BATCH)
        uids = sorted({key.split("_")[0] for key in batch.keys})
        assert len(uids) == BATCH and len(batch.keys) == BATCH * SAMPLES, "the batch is not full"
        # What the loss gets, read back from TransferQueue: every group has a non-zero spread of acc.
        got = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["extra_fields"])
        by_uid: dict[str, list[float]] = {}
        for key, extra in zip(batch.keys, got["extra_fields"], strict=True):
            by_uid.setdefault(key.split("_")[0], []).append(float(extra["reward_extra_info"]["acc"]))
        assert all(len(v) == SAMPLES and 0 < sum(v) < SAMPLES for v in by_uid.values()), by_uid
        assert {rollout.pid_of[u].split("-")[0] for u in uids} <= {"q1", "q3"}
        # The step's first submission is a whole batch; each later one is a refill (`refill_fn`).
        step_subs = rollout.submitted[before:]
        assert len(step_subs[0]) == BATCH
        refills += len(step_subs) - 1
        zero_var = [u for u, acc in rollout.acc_of.items() if len(set(acc)) == 1]
        assert metrics.get("training/filter_groups/evicted_samples", 0) == len(zero_var) - evicted
        left = {key.split("_")[0] for key in (tq.kv_list().get("train") or {})}
        assert not left & set(zero_var), "an evicted group is still in TransferQueue"
        evicted = len(zero_var)
        tq.kv_clear(keys=batch.keys, partition_id="train")  # as the trainer does after the update
    assert refills > 0 and evicted > 0, "no zero-variance group was filtered and refilled"
    dispatched = [pid for sub in rollout.submitted for pid in sub]
    assert dispatched == dataset.drawn, "a prompt reached veRL other than through the curriculum's draws"
    assert set(rollout.pid_of.values()) & {f"q0-{i}" for i in range(3)} <= dataset.curriculum.retired()
