"""OpenRLHF, veRL and TRL adapters against a real server, with requests shaped as those projects send them."""

from __future__ import annotations

import json

import httpx
import pytest
from scalerl.env.adapters import URL_ENV, AdapterInputError, reference_item

from tests.support.server_harness import shared_server

TEMPLATE = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
SUM_STDIO_APPS = json.dumps({"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]})
SUM_PROGRAM = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    ledger = tmp_path_factory.mktemp("ledger") / "ledger.duckdb"
    return shared_server(request, "main", "--ledger", str(ledger))


def openrlhf_post(url: str, queries, prompts, labels) -> httpx.Response:
    """What OpenRLHF's `request_api_wrapper` does: requests.post(url, json=data, headers=..., timeout=180)."""
    data = {"query": queries, "prompts": prompts, "labels": labels}
    return httpx.post(url, json=data, headers={"Content-Type": "application/json"}, timeout=180)


def test_openrlhf_get_reward_strips_the_prompt(server):
    # The prompt shows an example answer \boxed{7}: scored with the prompt left in, the second sample
    # would look correct. Stripped, it has no answer.
    prompts = [TEMPLATE.format("What is 1+1?"), TEMPLATE.format("Answer like \\boxed{7}. What is 3+4?")]
    responses = ["1+1 = \\boxed{2}", "I am not sure."]
    response = openrlhf_post(server.url + "/get_reward", [p + r for p, r in zip(prompts, responses)],
                             prompts, ["2", "7"])
    assert response.status_code == 200
    body = response.json()
    assert body["rewards"] == [1.0, 0.0]
    assert body["scores"] == [1.0, 0.0]
    assert body["extra_logs"]["no_answer"] == [0.0, 1.0]
    assert body["extra_logs"]["prompt_not_stripped"] == [0.0, 0.0]


def test_openrlhf_code_label_and_unstripped_prompt_is_flagged(server):
    prompts = [TEMPLATE.format("Add two numbers."), "a prompt that is not a prefix"]
    queries = [prompts[0] + SUM_PROGRAM, "rendered differently: " + SUM_PROGRAM]
    body = openrlhf_post(server.url + "/get_reward", queries, prompts, [SUM_STDIO_APPS, SUM_STDIO_APPS]).json()
    assert body["rewards"] == [1.0, 1.0]
    assert body["extra_logs"]["prompt_not_stripped"] == [0.0, 1.0]


def test_openrlhf_length_mismatch_and_bad_label_are_422(server):
    response = openrlhf_post(server.url + "/get_reward", ["a", "b"], ["a", "b"], ["1"])
    assert response.status_code == 422
    bad_code = json.dumps({"kind": "stdio", "cases": []})
    response = openrlhf_post(server.url + "/get_reward", ["x"], [""], [bad_code])
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "labels.0"


def test_openrlhf_reward_func_file_mode(server, monkeypatch):
    import torch
    from scalerl.env.adapters.openrlhf import reward_func

    monkeypatch.setenv(URL_ENV, server.url)
    prompts = [TEMPLATE.format("2*3?"), TEMPLATE.format("2*4?")]
    out = reward_func([p + r for p, r in zip(prompts, ["\\boxed{6}", "\\boxed{9}"])], prompts, ["6", "8"])
    assert isinstance(out["rewards"], torch.Tensor)
    assert out["rewards"].tolist() == [1.0, 0.0] and out["scores"].tolist() == [1.0, 0.0]


def test_verl_compute_score_over_http(server, monkeypatch):
    from scalerl.env.adapters.verl import compute_score

    monkeypatch.setenv(URL_ENV, server.url)
    # NaiveRewardManager's call, keyword for keyword.
    good = compute_score(data_source="openai/gsm8k", solution_str="... #### 72\nSo \\boxed{72}",
                         ground_truth="72", extra_info={"split": "test", "index": 0})
    bad = compute_score(data_source="openai/gsm8k", solution_str="\\boxed{71}", ground_truth="72")
    assert good == {"score": 1.0, "acc": 1.0}
    assert bad == {"score": 0.0, "acc": 0.0}
    code = compute_score("codecontests", SUM_PROGRAM, SUM_STDIO_APPS, {"index": 1})
    assert code["score"] == 1.0


def test_verl_batch_records_prompt_ids(server, monkeypatch):
    from scalerl.env.adapters.verl import compute_score_batch
    from scalerl.env.client import RewardClient

    monkeypatch.setenv(URL_ENV, server.url)
    scores = compute_score_batch(
        data_sources=["math"] * 3, solution_strs=["\\boxed{1}", "\\boxed{2}", "\\boxed{1}"],
        ground_truths=["1", "1", "1"], extra_infos=[{"prompt_id": "verl-batch-p"}] * 3,
    )
    assert [s["score"] for s in scores] == [1.0, 0.0, 1.0]
    with RewardClient(server.url) as client:
        rows = client.ledger_query("SELECT count(*) FROM attempts WHERE prompt_id = 'verl-batch-p'").rows
    assert rows == [[3]]


def test_verl_compute_score_in_process(monkeypatch):
    from scalerl.env.adapters.verl import compute_score
    from scalerl.verifiers import close_default_pools

    monkeypatch.delenv(URL_ENV, raising=False)
    try:
        assert compute_score("math", "\\boxed{\\frac{1}{2}}", "0.5")["score"] == 1.0
    finally:
        close_default_pools()


def test_trl_reward_plain_and_conversational(server):
    from scalerl.env.adapters.trl import ScaleRLReward

    reward = ScaleRLReward(server.url)
    assert reward.__name__ == "scalerl_reward"
    # GRPOTrainer: reward_func(prompts=..., completions=..., completion_ids=..., **dataset columns, trainer_state)
    plain = reward(prompts=["1+1?", "1+1?"], completions=["\\boxed{2}", "\\boxed{3}"],
                   completion_ids=[[1, 2], [3]], answer=["2", "2"], trainer_state=None)
    assert plain == [1.0, 0.0]
    chat = reward(prompts=[[{"role": "user", "content": "1+2?"}]],
                  completions=[[{"role": "assistant", "content": "It is \\boxed{3}"}]],
                  completion_ids=[[1]], answer=["3"], trainer_state=None)
    assert chat == [1.0]


def test_trl_missing_reference_column_names_it(server):
    from scalerl.env.adapters.trl import ScaleRLReward

    with pytest.raises(KeyError, match="solution"):
        ScaleRLReward(server.url, reference_key="solution")(prompts=["p"], completions=["c"], answer=["1"])


@pytest.mark.parametrize("reference, domain", [
    ("\\frac{1}{2}", "math"), ("{1, 2}", "math"), ("42", "math"),
    (SUM_STDIO_APPS, "code"), ({"kind": "assert", "code": "assert f() == 1"}, "code"),
    ({"tests": {"kind": "stdio", "cases": [{"output": "1"}]}, "limits": {"time_s": 1}}, "code"),
])
def test_reference_forms(reference, domain):
    assert reference_item("x", reference).domain == domain


def test_reference_errors_name_the_field():
    with pytest.raises(AdapterInputError) as info:
        reference_item("x", {"inputs": ["1"], "outputs": []}, loc=("ground_truth", 4))
    assert info.value.loc == ("ground_truth", 4)
    with pytest.raises(AdapterInputError):
        reference_item("x", ["not", "an", "answer"])


def test_get_reward_without_prompts_scores_the_whole_query(server):
    from scalerl.env.client import RewardClient

    with RewardClient(server.url) as client:
        result = client.get_reward(query=["Q: 2+2? A: \\boxed{4}", "Q: 2+2? A: \\boxed{5}"], labels=["4", "4"])
    assert result.rewards == [1.0, 0.0] and result.scores == [1.0, 0.0]


# ------------------------------------------------------------------ references read back from dataset columns
# Arrow gives every row of a struct column every field of the column: fields a row lacks come back as None.
STDIO_OBJ = {"kind": "stdio", "compare": "tokens",
             "cases": [{"input": "1 2\n", "output": "3\n"}, {"input": "3 4\n", "output": "7\n"}]}
FUNC_OBJ = {"kind": "functional", "entry_point": "add", "cases": [{"args": [1, 2], "expected": 3}]}
ADD_PROGRAM = "```python\ndef add(a, b):\n    return a + b\n```"


def column_rows(values: list) -> list:
    """The values as HF `datasets` hands them back from one column (how TRL and veRL load their data)."""
    import datasets

    return datasets.Dataset.from_list([{"ref": v} for v in values])["ref"]


def test_object_specs_from_a_mixed_column_gain_none_fields():
    # The premise of the normalization: if datasets stops filling None, this test says so.
    stdio, func = column_rows([STDIO_OBJ, FUNC_OBJ])
    assert stdio["entry_point"] is None and stdio["cases"][0]["args"] is None
    assert func["compare"] is None and func["cases"][0]["input"] is None


def test_object_specs_from_a_dataset_column_score(server):
    from scalerl.env.adapters.trl import ScaleRLReward

    stdio, func = column_rows([STDIO_OBJ, FUNC_OBJ])
    rewards = ScaleRLReward(server.url)(prompts=["p", "p", "p"], completions=[SUM_PROGRAM, ADD_PROGRAM, "nope"],
                                        answer=[stdio, func, func])
    assert rewards == [1.0, 1.0, 0.0]


def test_unknown_fields_stay_errors_in_columns_and_over_http(server):
    with pytest.raises(AdapterInputError, match=r"answer\.2: .*bogus"):
        reference_item("x", {**STDIO_OBJ, "bogus": 1}, loc=("answer", 2))
    item = {"id": "a", "domain": "code", "completion": "x", "tests": {**STDIO_OBJ, "entry_point": None}}
    response = httpx.post(server.url + "/v1/verify", json={"items": [item]}, timeout=30)
    assert response.status_code == 422  # the HTTP API stays strict: no None-dropping there


def test_integer_and_numpy_ids_become_text(server):
    import numpy as np
    from scalerl.env.adapters.trl import ScaleRLReward
    from scalerl.env.adapters.verl import compute_score_batch

    rewards = ScaleRLReward(server.url)(prompts=["p", "p"], completions=["\\boxed{5}", "\\boxed{6}"],
                                        answer=[5, np.int64(5)], prompt_id=[17, np.int64(17)])
    assert rewards == [1.0, 0.0]
    scores = compute_score_batch(["m"], ["\\boxed{5}"], ["5"], [{"prompt_id": 18}], url=server.url)
    assert scores[0]["score"] == 1.0


def test_adapter_error_survives_pickle():
    import pickle

    error = AdapterInputError(("answer", 3), "not a valid code test spec")
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, AdapterInputError)
    assert (copy.loc, copy.msg, str(copy)) == (error.loc, error.msg, "answer.3: not a valid code test spec")


def _raise_in_ray_worker():
    reference_item("x", {"kind": "stdio", "cases": []}, loc=("reward_model", "ground_truth"))


@pytest.mark.ray
def test_adapter_error_survives_ray():
    import ray

    ray.init(num_cpus=1, include_dashboard=False, namespace="scalerl-adapter-error")
    try:
        with pytest.raises(AdapterInputError, match=r"reward_model\.ground_truth: not a valid code test spec"):
            ray.get(ray.remote(_raise_in_ray_worker).remote())
    finally:
        ray.shutdown()


def test_object_specs_read_with_pandas(tmp_path):
    # pandas hands back a parquet struct column with numpy arrays for lists and None-filled fields.
    import pandas as pd

    import datasets

    path = tmp_path / "refs.parquet"
    datasets.Dataset.from_list([{"ref": STDIO_OBJ}, {"ref": FUNC_OBJ}]).to_parquet(str(path))
    stdio, func = pd.read_parquet(path)["ref"]
    assert type(stdio["cases"]).__module__ == "numpy"  # the premise: not plain lists
    assert reference_item("x", stdio).tests.cases[1].output == "7\n"
    assert reference_item("x", func).tests.cases[0].args == [1, 2]


def test_get_reward_label_with_an_unknown_field_is_422(server):
    label = {**STDIO_OBJ, "entry_point": None, "bogus": "x"}  # None is dropped, a value is not
    response = openrlhf_post(server.url + "/get_reward", [SUM_PROGRAM], [""], [label])
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "labels.0"
    assert "bogus" in response.json()["detail"][0]["msg"]
