"""The built-in multi-turn environments in process, driven by scripted policies: the registry finds them,
code feedback names the failing visible test and a fixed submission scores 1, hidden tests never leak,
tool output returns, and the limits cut episodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from scalerl.env.contracts.episodes import EpisodeLimits, environment, environments
from scalerl.env.contracts.records import Limits, ProblemRecord
from scalerl.env.environments.base import EpisodeStateError, truncate
from scalerl.env.environments.code_feedback import split_tests
from scalerl.env.sources.generators import generate

from tests.support.episodes import play

HIDDEN_IN = "HIDDENINPUT7f3a"
HIDDEN_OUT = HIDDEN_IN[::-1]  # the reversing program's answer on the hidden case
REVERSE = "```python\nprint(input()[::-1])\n```"


def code_record(tests: dict, **metadata) -> ProblemRecord:
    return ProblemRecord(prompt_id=f"p{abs(hash(json.dumps(tests))) % 10**8}", domain="code", source="test",
                         prompt=[{"role": "user", "content": "Reverse the line."}], tests=tests,
                         limits={"time_s": 1.0, "memory_mb": 256}, metadata=metadata)


def reverse_record() -> ProblemRecord:
    return code_record({"kind": "stdio", "cases": [{"input": "abc\n", "output": "cba\n"},
                                                   {"input": HIDDEN_IN + "\n", "output": HIDDEN_OUT + "\n"}]})


def math_record(answer: str = "1024") -> ProblemRecord:
    return ProblemRecord(prompt_id="m1", domain="math", source="test",
                         prompt=[{"role": "user", "content": "What is 2 to the power 10?"}], answer=answer)




def every_text(steps: list) -> str:
    """Everything an episode gave the model or the client."""
    return "\n".join(step.model_dump_json() for step in steps)


# ---------------------------------------------------------------------------------------------- registry
def test_the_registry_finds_both_environments_by_entry_point():
    found = environments()
    assert found["code-feedback"].domain == "code" and found["math-tool"].domain == "math"
    assert list(found)[:2] == ["math-tool", "code-feedback"]


def test_loading_the_registry_imports_no_sandbox_or_episode_code():
    code = ("import sys\nfrom scalerl.env.contracts.episodes import environments\nenvironments()\n"
            "print([m for m in sys.modules if 'sandbox' in m or 'code_feedback' in m or 'math_tool' in m "
            "or m.startswith('scalerl.verifiers.math')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_environment_refuses_a_problem_of_another_domain():
    with pytest.raises(ValueError, match="takes math problems"):
        environment("math-tool").open(reverse_record(), EpisodeLimits(), None)


# ---------------------------------------------------------------------------------------------- code-feedback
def test_feedback_returns_the_failing_visible_test_and_a_fixed_submission_scores_1():
    steps = play("code-feedback", reverse_record(), ["```python\nprint(input())\n```", REVERSE])
    feedback = steps[1].observation[0].content
    assert not steps[1].done and "Visible test 1 of 1 failed (wrong)" in feedback
    assert "Input:\nabc" in feedback and "Expected output:\ncba" in feedback and "Your output:\nabc" in feedback
    assert steps[2].done and steps[2].reward == 1.0 and steps[2].verdict.status == "correct"
    assert steps[2].verdict.details["total"] == 2  # visible and hidden both decide
    assert steps[2].info["feedback_turns"] == 1 and steps[2].info["ended"] == "visible_passed"


def test_functional_feedback_shows_the_call_the_expected_value_and_what_the_function_returned():
    problem = generate("code", seed=3, count=1, level=1)[0]
    wrong = "```python\ndef f(x):\n    return 12345\n```"
    steps = play("code-feedback", problem, [wrong, problem.metadata["solution"]])
    feedback = steps[1].observation[0].content
    case = problem.tests.cases[0]
    assert f"Call:\nf({case.args[0]!r})" in feedback and f"Expected:\n{case.expected!r}" in feedback
    assert "Your function returned:\n12345" in feedback
    assert steps[2].reward == 1.0


def test_a_runtime_error_is_shown_with_the_end_of_its_traceback():
    steps = play("code-feedback", reverse_record(), ["```python\nraise ValueError('boom')\n```", REVERSE])
    assert "runtime error" in steps[1].observation[0].content and "ValueError: boom" in steps[1].observation[0].content


def test_the_last_turn_is_scored_whatever_it_holds():
    steps = play("code-feedback", reverse_record(), ["```python\nprint(1)\n```"] * 5, max_turns=2)
    assert len(steps) == 3 and steps[2].done and steps[2].reward == 0.0 and steps[2].info["ended"] == "max_turns"
    assert steps[2].verdict.status == "wrong"


def test_the_split_takes_half_the_cases_the_records_visible_tests_or_half_the_top_level_asserts():
    split = split_tests(reverse_record())
    assert [c.input for c in split.visible.cases] == ["abc\n"] and len(split.reward.cases) == 2
    given = code_record({"kind": "stdio", "cases": [{"input": "x\n", "output": "x\n"}]},
                        visible_tests={"kind": "stdio", "cases": [{"input": "y\n", "output": "y\n"}]})
    assert split_tests(given).visible.cases[0].input == "y\n"
    asserts = code_record({"kind": "assert", "code": "import math\nassert f(1) == 1\nassert f(2) == 2\n"
                                                     "assert f(3) == 3\nassert f(4) == 4\n"})
    assert split_tests(asserts).visible.code == "import math\nassert f(1) == 1\nassert f(2) == 2"
    one = code_record({"kind": "stdio", "cases": [{"input": "x\n", "output": "x\n"}]})
    assert split_tests(one).visible is None


def test_a_record_without_visible_tests_is_a_one_turn_episode():
    one = code_record({"kind": "stdio", "cases": [{"input": "ab\n", "output": "ba\n"}]})
    steps = play("code-feedback", one, [REVERSE, REVERSE])
    assert len(steps) == 2 and steps[1].reward == 1.0 and steps[1].info["ended"] == "no_visible_tests"


LEAKY_PROGRAMS = [
    "print(input())",  # echoes its input as output
    "import sys\ns = sys.stdin.read()\nprint(s, file=sys.stderr)\nraise SystemExit(s)",
    "s = input()\nraise ValueError(s + ' ' + s[::-1])",
    "s = input()\nwhile s: pass",  # a timeout on the hidden case
    "s = input()\nprint(s * 100000)",  # past the output limit
]


@pytest.mark.parametrize("program", LEAKY_PROGRAMS)
def test_hidden_stdio_tests_never_reach_an_observation_or_the_verdict(program):
    fenced = f"```python\n{program}\n```"
    steps = play("code-feedback", reverse_record(), [fenced, fenced, fenced], max_turns=3)
    text = every_text(steps)
    assert steps[-1].done and steps[-1].verdict.status != "correct"
    assert HIDDEN_IN not in text and HIDDEN_OUT not in text


def test_hidden_functional_and_assert_tests_never_leak():
    functional = code_record({"kind": "functional", "entry_point": "f", "cases": [
        {"args": ["a"], "expected": "a!"}, {"args": [HIDDEN_IN], "expected": HIDDEN_OUT}]})
    assert_tests = code_record({"kind": "assert", "code": f"assert f('a') == 'a!'\nassert f({HIDDEN_IN!r}) == "
                                                          f"{HIDDEN_OUT!r}\n"})
    leaky = "```python\ndef f(s):\n    print(s)\n    raise KeyError(s)\n```"
    for problem in (functional, assert_tests):
        steps = play("code-feedback", problem, [leaky, leaky, leaky], max_turns=3)
        text = every_text(steps)
        assert "KeyError" in steps[1].observation[0].content and steps[-1].done
        assert HIDDEN_IN not in text and HIDDEN_OUT not in text


def test_a_submission_passing_the_visible_tests_only_scores_0_without_seeing_the_hidden_one():
    only_visible = "```python\nprint('cba')\n```"
    steps = play("code-feedback", reverse_record(), [only_visible])
    assert steps[1].done and steps[1].reward == 0.0 and steps[1].info["ended"] == "visible_passed"
    assert HIDDEN_IN not in every_text(steps)


# ---------------------------------------------------------------------------------------------- math-tool
def test_tool_output_returns_and_the_final_answer_is_scored_by_the_math_verifier():
    steps = play("math-tool", math_record(), [
        "Let me compute.\n```python\nimport sys\nprint(2 ** 10)\nprint('note', file=sys.stderr)\n```",
        "```python\nraise RuntimeError('bad cell')\n```",
        "So the answer is $\\boxed{1024}$.",
    ])
    first, second, end = steps[1], steps[2], steps[3]
    assert first.observation[0].role == "tool" and "stdout:\n1024" in first.observation[0].content
    assert "stderr:\nnote" in first.observation[0].content and first.info["call"]["ok"]
    assert "RuntimeError: bad cell" in second.observation[0].content
    assert "(exit code 1)" in second.observation[0].content
    assert end.done and end.reward == 1.0 and end.verdict.status == "correct"
    assert end.info["tool_calls"] == 2 and end.info["tool_errors"] == 1 and end.info["ended"] == "answer"


def test_each_tool_call_is_stateless():
    steps = play("math-tool", math_record(), ["```python\nx = 41\nprint(x)\n```", "```python\nprint(x + 1)\n```",
                                              "\\boxed{1024}"])
    assert "NameError" in steps[2].observation[0].content


def test_a_wrong_final_answer_scores_0():
    assert play("math-tool", math_record(), ["The answer is \\boxed{1000}."])[-1].reward == 0.0


# ---------------------------------------------------------------------------------------------- limits
def test_a_policy_that_keeps_calling_tools_is_cut_at_max_turns():
    steps = play("math-tool", math_record(), ["```python\nprint(1)\n```"] * 20, max_turns=3)
    assert len(steps) == 4 and steps[-1].done and steps[-1].info["ended"] == "max_turns"
    assert steps[-1].info["tool_calls"] == 2 and steps[-1].verdict.status == "no_answer"


def test_observations_are_cut_and_the_environments_characters_end_the_episode():
    spam = "```python\nprint('x' * 50000)\n```"
    steps = play("math-tool", math_record(), [spam] * 10, max_observation_chars=500, max_env_chars=1200, max_turns=10)
    shown = [len(s.observation[0].content) for s in steps[1:-1]]
    assert max(shown) <= 500 and sum(shown) <= 1200 and "characters cut]" in steps[1].observation[0].content
    assert steps[-1].done and steps[-1].info["ended"] == "max_env_chars" and len(steps) < 10


def test_a_call_past_its_sandbox_limits_is_stopped_and_counted():
    steps = play("math-tool", math_record(), ["```python\nwhile True: pass\n```", "\\boxed{1024}"],
                 sandbox=Limits(time_s=0.5))
    assert "(stopped by the" in steps[1].observation[0].content and steps[1].info["tool_errors"] == 1
    assert steps[2].reward == 1.0


def test_truncate_keeps_head_and_tail_and_states_what_it_cut():
    text = "x" * 300 + "y" * 300
    cut = truncate(text, 100)
    assert len(cut) == 100 and cut.startswith("x") and cut.endswith("y")
    assert f"[{600 - cut.count('x') - cut.count('y')} characters cut]" in cut and truncate("short", 100) == "short"


# ---------------------------------------------------------------------------------------------- lifecycle
def test_calls_out_of_order_are_refused_and_close_is_idempotent():
    spec = environment("math-tool")
    episode = spec.open(math_record(), spec.limits, None)
    with pytest.raises(EpisodeStateError):
        episode.step("\\boxed{1}")
    episode.reset()
    with pytest.raises(EpisodeStateError):
        episode.reset()
    assert episode.step("\\boxed{1024}").done
    with pytest.raises(EpisodeStateError):
        episode.step("\\boxed{1024}")
    episode.close()
    episode.close()
    with pytest.raises(EpisodeStateError):
        episode.step("\\boxed{1024}")


def test_close_from_another_thread_kills_the_run_in_flight():
    spec = environment("math-tool")
    episode = spec.open(math_record(), spec.limits.model_copy(update={"sandbox": Limits(time_s=30)}), None)
    episode.reset()
    result: list = []
    worker = threading.Thread(target=lambda: result.append(episode.step("```python\nwhile True: pass\n```")))
    started = time.monotonic()
    worker.start()
    while episode.info["tool_calls"] == 0 and time.monotonic() - started < 10:  # the step has begun its call
        time.sleep(0.05)
    time.sleep(0.5)
    episode.close()
    worker.join(timeout=20)
    assert not worker.is_alive() and time.monotonic() - started < 20
    assert result and result[0].info["tool_errors"] == 1


STATE_FILES = ("/tmp/scalerl_episode_state", "/work/scalerl_episode_state", "scalerl_episode_state")
SLEEPER = "scalerl_sleeper"
STATE_WRITER = f"""```python
import ctypes, os, time
os.environ["SCALERL_EPISODE_STATE"] = "set"
for path in {STATE_FILES!r}:
    with open(path, "w") as f:
        f.write("x")
if os.fork() == 0:
    os.setsid()
    ctypes.CDLL(None).prctl(15, b"{SLEEPER}", 0, 0, 0)  # PR_SET_NAME: the host finds it by name
    time.sleep(60)
    os._exit(0)
time.sleep(0.2)
print("wrote")
```"""
STATE_READER = f"""```python
import os
print("env", os.environ.get("SCALERL_EPISODE_STATE"), "files", [p for p in {STATE_FILES!r} if os.path.exists(p)])
```"""


def host_processes_named(name: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == name:
                    found.append(pid)
        except OSError:
            continue
    return found


@pytest.mark.parametrize("name", ["math-tool", "code-feedback"])
def test_no_file_process_or_environment_variable_survives_into_the_next_episode(name):
    problem = math_record() if name == "math-tool" else reverse_record()
    wrote = play(name, problem, [STATE_WRITER, STATE_WRITER], max_turns=2)
    assert wrote[-1].done and (name == "code-feedback" or "wrote" in wrote[1].observation[0].content), wrote
    time.sleep(0.2)
    assert host_processes_named(SLEEPER) == [] and not any(os.path.exists(p) for p in STATE_FILES[:2])
    steps = play("math-tool", math_record(), [STATE_READER, "\\boxed{1024}"])
    assert "env None files []" in steps[1].observation[0].content, steps[1].observation[0].content


def test_only_a_python_tagged_block_is_a_tool_call():
    from scalerl.verifiers.code.extract import python_block

    assert python_block("no code here") is None and python_block("```\nprint(1)\n```") is None
    assert python_block("```py\na\n```\ntext\n```python\nb\n```") == "b\n"


def test_a_record_whose_visible_tests_are_not_a_test_spec_is_refused_at_open():
    bad = code_record({"kind": "stdio", "cases": [{"input": "x\n", "output": "x\n"}]}, visible_tests={"kind": "?"})
    with pytest.raises(ValueError, match="metadata.visible_tests is not a test spec"):
        environment("code-feedback").open(bad, EpisodeLimits(), None)
