"""`EpisodeLimits.brief`: the short form a character model with a 160-token context reads. The opening is
the problem's own messages, feedback is one line naming the failing visible case and what the program
gave, and hidden tests never reach it."""

from __future__ import annotations

from scalerl.env.contracts.records import ProblemRecord

from tests.env.test_environments import HIDDEN_IN, HIDDEN_OUT, every_text, reverse_record
from tests.support.episodes import play

TWICE = ProblemRecord(
    prompt_id="twice", domain="code", source="test", prompt=[{"role": "user", "content": "g(1)=2 g(3)=6 g(x)="}],
    tests={"kind": "functional", "entry_point": "g", "cases": [
        {"args": [1], "expected": 2}, {"args": [3], "expected": 6}, {"args": [40], "expected": 80},
        {"args": [7], "expected": 14}]})


def test_the_brief_opening_is_the_problem_alone():
    first = play("code-feedback", TWICE, [], brief=True)[0]
    assert [m.content for m in first.observation] == ["g(1)=2 g(3)=6 g(x)="]
    verbose = play("code-feedback", TWICE, [])[0].observation[-1].content
    assert "submissions" in verbose and "```python" in verbose  # the default form keeps the protocol


def test_brief_feedback_is_one_line_with_the_returned_value_and_a_fix_scores_1():
    steps = play("code-feedback", TWICE, ["def g(x): return x + 1", "def g(x): return 2 * x"], brief=True)
    assert [m.content for m in steps[1].observation] == ["g(3)=6, not 4"]  # the first visible case passed
    assert steps[2].done and steps[2].reward == 1.0 and steps[2].info["ended"] == "visible_passed"


def test_brief_feedback_names_the_error_and_never_a_hidden_test():
    steps = play("code-feedback", TWICE, ["def g(x): return x + 'a'"], brief=True)
    line = steps[1].observation[0].content
    assert line.startswith("g(1)=2, TypeError") and "\n" not in line
    assert "40" not in every_text(steps) and "80" not in every_text(steps)
    stdio = play("code-feedback", reverse_record(), ["print(input())"], brief=True)
    assert stdio[1].observation[0].content == "input 'abc\\n' gives 'cba\\n', not 'abc\\n'"
    assert HIDDEN_IN not in every_text(stdio) and HIDDEN_OUT not in every_text(stdio)
