"""Multi-turn episodes through `EpisodeDriver`, with the scripted `retry-math` environment and a scripted
engine (the masks, versions and budgets are the driver's, so the engine only has to say what it sampled):
environment tokens are loss-masked and never trained on, every sampled token keeps its own policy version
across turns and weight pushes, the whole episode shares one length budget, a group is the episodes of one
problem, and the step's metrics name turns, tool calls and feedback per environment."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from scalerl.env.contracts.records import ChatMessage, ProblemRecord
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.length_control import training_loss_mask
from scalerl.trainer.core.losses import LossConfig
from scalerl.trainer.core.update import OptimConfig, PolicyTrainer, merge_metrics, pack_samples
from scalerl.trainer.distributed.sharding import cut_batch
from scalerl.trainer.engines.base import (
    EngineStats,
    GeneratedGroup,
    GeneratedSample,
    GenerationEngine,
    GenerationRequest,
    SamplingParams,
)
from scalerl.trainer.rollout.episodes import ENVIRONMENT, EPISODES, PROBLEM, EpisodeDriver, episode_metrics
from scalerl.trainer.rollout.messages import RolloutGroup
from scalerl.trainer.rollout.problems import PromptCodec
from scalerl.trainer.rollout.runtime import LocalRuntime
from scalerl.trainer.tiny.model import CharTokenizer, build_tiny_model

from tests.support import scripted_env
from tests.support.scripted_env import FEEDBACK, NAME

TOK = CharTokenizer()
CODEC = PromptCodec(TOK)
EOS = TOK.eos_token_id
PROBLEM_1 = ProblemRecord(prompt_id="p1", domain="math", source="test",
                          prompt=[ChatMessage(role="user", content="1+1=")], answer="2")


class ScriptedEngine(GenerationEngine):
    """Samples the text `actions[(sample, turn)]` (then eos) for each turn request, cut at the request's
    `max_new_tokens` ("length"); every token carries the engine's version when it finishes."""

    def __init__(self, actions: dict[tuple[int, int], str]) -> None:
        self._stats = EngineStats()
        self.actions = actions
        self.version = 0
        self.requests: list[GenerationRequest] = []
        self._queue: list[GenerationRequest] = []
        self._lock = threading.Lock()

    @property
    def policy_version(self) -> int:
        return self.version

    def submit(self, request: GenerationRequest) -> None:
        with self._lock:
            self.requests.append(request)
            self._queue.append(request)

    def poll(self, timeout_s: float = 0.0) -> list[GeneratedGroup]:
        time.sleep(min(timeout_s, 0.005))  # the runtime's feeder polls in a loop
        with self._lock:
            queue, self._queue = self._queue, []
        return [self._generate(r) for r in queue]

    def _generate(self, request: GenerationRequest) -> GeneratedGroup:
        sample, turn = int(request.request_id.split("/e")[1].split("/")[0]), request.metadata["turn"]
        ids = TOK.encode(self.actions.get((sample, turn), self.actions.get((-1, turn), "7"))) + [EOS]
        cap = request.sampling.max_new_tokens
        reason = "length" if len(ids) > cap else "stop"
        ids = ids[:cap]
        self._stats.sampled_tokens += len(ids)
        return GeneratedGroup(request=request, samples=[GeneratedSample(
            sample_index=0, token_ids=ids, logprobs=[-0.5] * len(ids), policy_versions=[self.version] * len(ids),
            loss_mask=[1] * len(ids), finish_reason=reason)])

    def update_weights(self, weights, policy_version: int) -> None:
        self.version = policy_version

    def num_pending(self) -> int:
        return len(self._queue)


@pytest.fixture(autouse=True)
def retry_math(monkeypatch):
    return scripted_env.install(monkeypatch)


def episode_request(samples: int = 2, budget: int = 64, request_id: str = "g0") -> GenerationRequest:
    return GenerationRequest(
        request_id=request_id, prompt_token_ids=CODEC.encode_problem(PROBLEM_1), samples_per_prompt=samples,
        sampling=SamplingParams(max_new_tokens=budget, stop_token_ids=[EOS]),
        metadata={"prompt_id": "p1", "domain": "math", ENVIRONMENT: NAME, PROBLEM: PROBLEM_1})


def play(driver: EpisodeDriver, between_turns=None, polls: int = 10) -> GeneratedGroup:
    for turn in range(polls):
        done = driver.poll()
        if done:
            return done[0]
        if between_turns is not None:
            between_turns(turn)
    raise AssertionError("the episodes did not end")


def test_environment_tokens_are_masked_and_versions_survive_a_push_between_turns():
    engine = ScriptedEngine({(0, 0): "3", (0, 1): "2", (1, 0): "2"})
    driver = EpisodeDriver(engine, CODEC, max_seq_len=160)
    driver.submit(episode_request())
    group = play(driver, between_turns=lambda turn: engine.update_weights({}, turn + 1))
    feedback = CODEC.encode_continuation([{"role": "user", "content": FEEDBACK}])
    first, second = group.samples
    assert first.token_ids == TOK.encode("3") + [EOS] + feedback + TOK.encode("2") + [EOS]
    assert first.loss_mask == [1, 1] + [0] * len(feedback) + [1, 1]
    # turn 1 sampled at version 0, the push to 1 came between the turns: turn 2's tokens say 1
    assert first.policy_versions == [0, 0] + [0] * len(feedback) + [1, 1]
    assert first.logprobs[2:2 + len(feedback)] == [0.0] * len(feedback)
    assert second.token_ids == TOK.encode("2") + [EOS] and second.loss_mask == [1, 1]
    # the group's prompt is the episodes' first observation; no turn re-tokenized what was sampled
    assert group.request.prompt_token_ids == CODEC.encode_prompt(PROBLEM_1.prompt)
    turn2 = next(r for r in engine.requests if r.request_id == "g0/e0/t1")
    assert turn2.prompt_token_ids == group.request.prompt_token_ids + first.token_ids[:-2]
    outcomes = group.request.metadata[EPISODES]
    assert [o.verdict.status.value for o in outcomes] == ["correct", "correct"]
    assert [o.turns for o in outcomes] == [2, 1] and outcomes[0].env_tokens == len(feedback)
    assert [o.last_action for o in outcomes] == ["2", "2"]  # what the verdicts scored
    assert {k: outcomes[0].verdict.details[k] for k in ("turns", "tool_calls", "environment")} == {
        "turns": 2, "tool_calls": 2, "environment": NAME}  # what the ledger's columns read
    assert all(e.closed >= 1 for e in scripted_env.OPENED) and len(scripted_env.OPENED) == 2


def test_environment_tokens_are_never_trained_on():
    """The loss counts exactly the sampled tokens of the episodes, through the loop's own packing."""
    engine = ScriptedEngine({(0, 0): "3", (0, 1): "2", (1, 0): "4", (1, 1): "5", (1, 2): "2"})
    driver = EpisodeDriver(engine, CODEC, max_seq_len=160)
    driver.submit(episode_request())
    group = play(driver)
    cfg = TrainConfig()
    masks = [training_loss_mask(s, cfg.length) for s in group.samples]
    prompt = group.request.prompt_token_ids
    batch = pack_samples([prompt] * 2, [s.token_ids for s in group.samples], [s.logprobs for s in group.samples],
                         masks, [1.0, -1.0], [0, 0])
    sampled = sum(o.sampled_tokens for o in group.request.metadata[EPISODES])
    assert sampled == 4 + 6 and int(batch.loss_mask.sum()) == sampled
    trained_ids = batch.input_ids[batch.loss_mask].tolist()
    assert TOK.decode(trained_ids, skip_special_tokens=True) == "32452"  # the actions, no feedback text
    trainer = PolicyTrainer(build_tiny_model(cfg.tiny, TOK), OptimConfig(warmup_steps=0), LossConfig())
    shard = cut_batch(batch, trainer.loss_cfg.aggregation, 1, trainer.optim_cfg.micro_batch_tokens)[0]
    metrics = merge_metrics(trainer.accumulate_shard(shard))
    assert metrics["tokens/loss"] == sampled


def test_the_whole_episode_shares_one_budget_and_a_cut_episode_is_truncated():
    """Budget 12: turn 1 samples 5 tokens, the feedback adds len(FEEDBACK) + 4 = 13 > 12 - 5: no room, cut."""
    engine = ScriptedEngine({(-1, 0): "1234", (-1, 1): "2"})
    driver = EpisodeDriver(engine, CODEC, max_seq_len=160)
    driver.submit(episode_request(samples=2, budget=12))
    group = play(driver)
    assert all(s.finish_reason == "length" and s.truncated for s in group.samples)
    outcomes = group.request.metadata[EPISODES]
    assert {o.ended_by for o in outcomes} == {"length_budget"} and {o.turns for o in outcomes} == {1}
    assert {o.verdict.status.value for o in outcomes} == {"no_answer"}
    assert all(training_loss_mask(s, TrainConfig().length) == [0] * len(s.token_ids) for s in group.samples)
    # a larger budget leaves room: turn 2's cap is the budget minus turn 1's and the feedback's tokens
    engine2 = ScriptedEngine({(-1, 0): "1234", (-1, 1): "2"})
    driver2 = EpisodeDriver(engine2, CODEC, max_seq_len=160)
    driver2.submit(episode_request(samples=1, budget=40))
    play(driver2)
    feedback = len(CODEC.encode_continuation([{"role": "user", "content": FEEDBACK}]))
    caps = [r.sampling.max_new_tokens for r in engine2.requests]
    assert caps == [40, 40 - 5 - feedback]
    prompt = len(CODEC.encode_prompt(PROBLEM_1.prompt))
    for request in engine2.requests:  # each turn's prompt + cap is the first prompt + the whole budget at most
        request.check_fits(prompt + 40)


def test_a_turn_cut_by_the_budget_is_still_scored_when_the_environment_ends_there():
    engine = ScriptedEngine({(-1, 0): "5", (-1, 1): "6", (-1, 2): "2222"})
    driver = EpisodeDriver(engine, CODEC, max_seq_len=160)
    feedback = len(CODEC.encode_continuation([{"role": "user", "content": FEEDBACK}]))
    driver.submit(episode_request(samples=1, budget=2 * (2 + feedback) + 3))  # turn 3 may sample 3 tokens
    (sample,), outcome = (g := play(driver)).samples, g.request.metadata[EPISODES][0]
    assert outcome.ended_by == "environment" and outcome.turns == 3 and outcome.verdict.status.value == "wrong"
    assert sample.finish_reason == "length" and scripted_env.OPENED[0].actions[-1] == "222"


def test_the_sequence_length_bounds_every_turn():
    engine = ScriptedEngine({(-1, 0): "3", (-1, 1): "2"})
    prompt = len(CODEC.encode_prompt(PROBLEM_1.prompt))
    driver = EpisodeDriver(engine, CODEC, max_seq_len=prompt + 10)
    driver.submit(episode_request(samples=1, budget=64))
    group = play(driver)
    assert engine.requests[0].sampling.max_new_tokens == 10
    assert group.request.metadata[EPISODES][0].ended_by == "length_budget"  # the feedback does not fit
    for request in engine.requests:  # every turn fits the engine (what the engines check on submit)
        request.check_fits(prompt + 10)


def test_requests_without_an_environment_pass_through():
    engine = ScriptedEngine({})
    driver = EpisodeDriver(engine, CODEC, max_seq_len=160)
    plain = episode_request().model_copy(update={"metadata": {"turn": 0}, "request_id": "v/e0/x"})
    driver.submit(plain)
    (out,) = driver.poll()
    assert out.request == plain and driver.num_pending() == 0 and EPISODES not in out.request.metadata


def test_the_lag_rule_holds_for_whole_episodes_in_the_runtime():
    """k=1, synchronous pushes between takes: every trained token's version is >= its group's submitted
    version (the oldest token is the first turn's), so the lag of every episode token is <= k."""

    class Worker:
        def __init__(self) -> None:
            self.n = 0

        def make_request(self, group_id: int) -> GenerationRequest:
            return episode_request(request_id=f"g{group_id}")

        def score(self, generated, submitted_version, submitted_at):
            outcomes = generated.request.metadata[EPISODES]
            return RolloutGroup(group_id=int(generated.request.request_id[1:]), problem=PROBLEM_1,
                                prompt_token_ids=generated.request.prompt_token_ids, samples=generated.samples,
                                completions=[""] * len(outcomes), verdicts=[o.verdict for o in outcomes],
                                submitted_version=submitted_version, submitted_at=submitted_at, finished_at=0.0,
                                episodes=outcomes)

    engine = ScriptedEngine({(0, 0): "3", (0, 1): "4", (0, 2): "2", (1, 0): "2"})
    runtime = LocalRuntime(EpisodeDriver(engine, CODEC, max_seq_len=160), Worker(), mode="pipeline", k=1,
                           prompts_per_step=2)
    runtime.start(0)
    lags = []
    try:
        for step in range(4):
            groups = runtime.take_groups(2, step, timeout_s=30)
            for g in groups:
                for s in g.samples:
                    assert min(s.policy_versions) >= g.submitted_version
                    lags += [step - v for v, m in zip(s.policy_versions, s.loss_mask) if m]
                # the compute clock counts what the model sampled; observations count with the prompt
                assert [n for _, n in g.sequence_lengths()] == [e.sampled_tokens for e in g.episodes]
                assert g.scored_texts() == [e.last_action for e in g.episodes]  # the ledger's texts
                assert [sum(pair) for pair in g.sequence_lengths()] == [
                    len(g.prompt_token_ids) + len(s.token_ids) for s in g.samples]
            runtime.push_weights({}, step + 1)
        metrics = episode_metrics(groups)
    finally:
        runtime.close()
    assert max(lags) <= 1
    assert metrics[f"episode/{NAME}/count"] == 4.0 and metrics[f"episode/{NAME}/turns_mean"] == 2.0
    assert metrics[f"episode/{NAME}/turns_max"] == 3.0 and metrics[f"episode/{NAME}/feedback_turns_mean"] == 1.0
    assert metrics[f"episode/{NAME}/tool_calls_mean"] == 2.0 and metrics[f"episode/{NAME}/cut_rate"] == 0.0
    assert {"tool_errors_mean", "env_tokens_mean", "sampled_tokens_mean"} <= {k.split("/")[-1] for k in metrics}


def test_domains_may_name_an_environment():
    cfg = TrainConfig(domains=[NAME, "code"])
    assert cfg.domains == ["math", "code"] and cfg.environments == [NAME]
    assert cfg.environment_by_domain() == {"math": NAME}
    assert TrainConfig(domains=["math"], environments=[NAME]).environment_by_domain() == {"math": NAME}
    with pytest.raises(ValueError, match=r"unknown domain\(s\) or environment\(s\) \['nope'\]; domains: .*math"
                       r".*; environments: .*retry-math"):
        TrainConfig(domains=["nope"])
    with pytest.raises(ValueError, match="names both 'math' and 'retry-math'"):
        TrainConfig(domains=["math", NAME])
    with pytest.raises(ValueError, match="not trained"):
        TrainConfig(domains=["code"], environments=[NAME])
    with pytest.raises(ValueError, match="unknown environment 'nope'"):
        TrainConfig(environments=["nope"])


def test_rollouts_ask_for_whole_episode_budgets_and_keep_the_environments_verdicts():
    from scalerl.trainer.core.length_control import output_budget
    from scalerl.trainer.rollout.worker import Rollouts

    cfg = TrainConfig(domains=[NAME])
    rollouts = Rollouts(cfg, CODEC, lambda: PROBLEM_1, verifier=None, seed=0)
    request = rollouts.make_request(0)
    phrase = len(CODEC.encode(cfg.length.interruption_phrase))
    assert request.interruption is None and request.metadata[ENVIRONMENT] == NAME
    assert request.sampling.max_new_tokens == output_budget(cfg.length, cfg.engine.max_new_tokens, phrase)
    driver = EpisodeDriver(ScriptedEngine({(-1, 0): "2"}), CODEC, max_seq_len=cfg.engine.max_seq_len)
    driver.submit(request)
    group = rollouts.score(play(driver), 0, 0.0)  # verifier=None: it would fail if called
    assert [v.status.value for v in group.verdicts] == ["correct"] * cfg.pipeline.samples_per_prompt
    assert group.episodes is not None and group.prompt_token_ids == CODEC.encode_prompt(PROBLEM_1.prompt)
    assert torch.tensor(group.rewards).eq(1.0).all()


def test_an_environment_that_raises_ends_its_episode_with_an_error_verdict(monkeypatch):
    def broken(self, action_text):
        raise RuntimeError("environment bug")

    monkeypatch.setattr(scripted_env.RetryEpisode, "step", broken)
    driver = EpisodeDriver(ScriptedEngine({}), CODEC, max_seq_len=160)
    driver.submit(episode_request(samples=2))
    group = play(driver)
    outcomes = group.request.metadata[EPISODES]
    assert {o.ended_by for o in outcomes} == {"error"} and {o.verdict.status.value for o in outcomes} == {"error"}
    assert "environment bug" in outcomes[0].verdict.details["error"]
    assert all(e.closed for e in scripted_env.OPENED)


def test_observations_follow_the_chat_template_after_the_sampled_stop_token():
    """A chat model's episode, as token ids, decodes to exactly the template's rendering of the conversation
    (SmolLM2's ChatML: the newline after the sampled `<|im_end|>` comes from the observation's ids); the
    tiny model's saved template gives the tiny codec's own ids."""
    from scalerl.trainer.engines.model_loading import load_tokenizer, stop_token_ids

    from tests.support.real_model import require_model

    model = require_model()
    tok = load_tokenizer(model)
    codec = PromptCodec(tok, stop_token_ids(tok, model))
    first, feedback = [{"role": "user", "content": "1+1="}], [{"role": "user", "content": FEEDBACK}]
    ids = (codec.encode_prompt(first) + codec.encode("3") + codec.stop_token_ids[:1]
           + codec.encode_continuation(feedback))
    conversation = [*first, {"role": "assistant", "content": "3"}, *feedback]
    assert tok.decode(ids) == tok.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    saved_tiny = PromptCodec(TOK.to_hf())
    assert saved_tiny.encode_continuation(feedback) == CODEC.encode_continuation(feedback)


def test_the_steps_of_a_poll_run_at_once(monkeypatch):
    """Two episodes' steps meet at a barrier: they pass only when both run together (with one step thread the
    barrier breaks, and both episodes end with an error verdict)."""
    barrier = threading.Barrier(2, timeout=10)
    original = scripted_env.RetryEpisode.step

    def meeting(self, action_text):
        barrier.wait()
        return original(self, action_text)

    monkeypatch.setattr(scripted_env.RetryEpisode, "step", meeting)
    driver = EpisodeDriver(ScriptedEngine({(-1, 0): "2"}), CODEC, max_seq_len=160, step_threads=2)
    driver.submit(episode_request(samples=2))
    outcomes = play(driver).request.metadata[EPISODES]
    assert [o.verdict.status.value for o in outcomes] == ["correct", "correct"]
    driver.close()


def test_first_observations_that_differ_share_their_common_prefix_as_the_prompt(monkeypatch):
    """Episode i's first observation ends with its own text: the group's prompt is what they share, the rest
    opens each sample, loss-masked."""
    original = scripted_env.RetryEpisode.reset

    def numbered(self):
        first = original(self)
        first.observation[-1].content += f" #{len(scripted_env.OPENED)}"
        return first

    monkeypatch.setattr(scripted_env.RetryEpisode, "reset", numbered)
    driver = EpisodeDriver(ScriptedEngine({(-1, 0): "2"}), CODEC, max_seq_len=160)
    driver.submit(episode_request(samples=2))
    group = play(driver)
    assert TOK.decode(group.request.prompt_token_ids) == "1+1= #"
    for i, sample in enumerate(group.samples, start=1):
        head = TOK.encode(f"{i}\nA: ")
        assert sample.token_ids == head + TOK.encode("2") + [EOS]
        assert sample.loss_mask == [0] * len(head) + [1, 1]


def test_a_first_observation_that_does_not_fit_fails_and_closes_the_opened_episodes():
    driver = EpisodeDriver(ScriptedEngine({}), CODEC, max_seq_len=len(CODEC.encode_prompt(PROBLEM_1.prompt)))
    with pytest.raises(ValueError, match="no room in engine.max_seq_len"):
        driver.submit(episode_request(samples=2))
    assert scripted_env.OPENED and all(e.closed for e in scripted_env.OPENED)
