"""`code-feedback`: the model submits code, sees its first failing visible test, and submits again.

Each action is scored on the visible tests by the code verifier, in the episode's sandbox
(`scalerl.verifiers.code.judge.CodeVerifier.verify_one`: the same extraction, runs and comparison as the
`code` domain). While one fails, the environment answers with that test: its input (or call), the
expected output, the program's output or error, cut to `max_observation_chars` (with `limits.brief`: one
line, `call=expected, not returned` or the error's last line). The episode ends when
every visible test passes, at `max_turns` or past `max_env_chars`; the reward is the verdict of the
record's whole test set (visible and hidden) on the last submission, which is the single-turn `code`
verdict of that submission.

Visible tests (`split_tests`): `metadata["visible_tests"]` when the record carries them (a test spec
of any kind); else the first half, rounded down, of a stdio or functional set's cases, or of an assert
program's top-level `assert` statements (the program's other statements run with both halves). A
record with no visible tests (one case; an assert program with fewer than two top-level asserts or
statements sharing a line) makes a one-turn episode.

Guarantee: no hidden test's input, output or expected value reaches the model or the client. Feedback
is built from visible runs only, and the final verdict's details hold counts and outcomes, never
output, error text or inputs (a program could echo its hidden input into them).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError
from scalerl.env.contracts.episodes import EpisodeLimits
from scalerl.env.contracts.records import (
    AssertTests,
    CodeTests,
    FunctionalTests,
    ProblemRecord,
    Status,
    StdioTests,
    Verdict,
    VerifyItem,
)
from scalerl.env.environments.base import Ended, TurnEpisode, truncate
from scalerl.verifiers.code.extract import extract_code
from scalerl.verifiers.verifier_config import VerifierConfig

_TESTS = TypeAdapter(CodeTests)
# What the final verdict keeps of the code verifier's per-test records: nothing that holds program
# output or a test's data.
_PUBLIC_TEST_KEYS = ("test", "passed", "outcome", "cpu_s", "wall_s")


@dataclass(frozen=True)
class TestSplit:
    """The tests the model sees fail (`visible`, None: none) and the tests that decide the reward."""

    visible: CodeTests | None
    reward: CodeTests


def split_tests(problem: ProblemRecord) -> TestSplit:
    """Visible and rewarded tests of a code record (rules in the module docstring)."""
    tests = problem.tests
    if tests is None:
        raise ValueError(f"problem {problem.prompt_id} has no tests")
    given = problem.metadata.get("visible_tests")
    if given is not None:
        try:
            return TestSplit(visible=_TESTS.validate_python(given), reward=tests)
        except ValidationError as exc:
            raise ValueError(f"problem {problem.prompt_id}: metadata.visible_tests is not a test spec: {exc}") from exc
    if isinstance(tests, (StdioTests, FunctionalTests)):
        shown = len(tests.cases) // 2
        return TestSplit(visible=tests.model_copy(update={"cases": tests.cases[:shown]}) if shown else None,
                         reward=tests)
    return TestSplit(visible=_visible_asserts(tests), reward=tests)


def _visible_asserts(tests: AssertTests) -> AssertTests | None:
    """The assert program without its second half of top-level asserts; None when it cannot be split."""
    try:
        body = ast.parse(tests.code).body
    except SyntaxError:
        return None
    asserts = [node for node in body if isinstance(node, ast.Assert)]
    lines = [node.lineno for node in body]
    if len(asserts) < 2 or len(set(lines)) != len(lines):
        return None
    hidden = {n for node in asserts[len(asserts) // 2:] for n in range(node.lineno, node.end_lineno + 1)}
    code = "\n".join(line for n, line in enumerate(tests.code.splitlines(), 1) if n not in hidden)
    return tests.model_copy(update={"code": code})


class CodeFeedbackEpisode(TurnEpisode):
    """One `code-feedback` episode (module docstring)."""

    ROLE = "user"

    def __init__(self, problem: ProblemRecord, limits: EpisodeLimits, verifier_config: VerifierConfig | None):
        super().__init__(problem, limits, verifier_config)
        self.split = split_tests(problem)
        self.PROTOCOL = (
            f"You have up to {limits.max_turns} submissions. After each one you see the first failing visible "
            "test; your last submission is scored on all tests, visible and hidden."
            if self.split.visible is not None and limits.max_turns > 1 else "")

    def _respond(self, action: str) -> str | Ended:
        if self.split.visible is None:
            return Ended("no_visible_tests")
        verdict = self._verify(action, self.split.visible)
        if verdict.status is Status.correct:
            return Ended("visible_passed")
        self.info["feedback_turns"] += 1
        return self._feedback(action, verdict)

    def _score(self, action: str) -> Verdict:
        verdict = self._verify(action, self.split.reward)
        return verdict.model_copy(update={"details": _public_details(verdict.details)})

    def _verify(self, action: str, tests: CodeTests) -> Verdict:
        try:
            verifier = self.sandbox.get()
        except Exception as exc:  # a host below the configured sandbox level, or a closed episode
            return Verdict.of(Status.error, rewards=self.config.rewards,
                              details={"reason": f"sandbox unavailable: {type(exc).__name__}: {exc}"})
        item = VerifyItem(id=self.problem.prompt_id, domain="code", completion=action, tests=tests,
                          limits=self.sandbox_limits)
        verdict = verifier.verify_one(item)
        return verdict.model_copy(update={"reward": self.config.rewards.reward(verdict.status)})

    # ------------------------------------------------------------------------------------------ feedback
    def _feedback(self, action: str, verdict: Verdict) -> str:
        if self.limits.brief:
            return self._brief_feedback(action, verdict)
        details, part = verdict.details, self.limits.max_observation_chars // 4
        if verdict.status is Status.no_answer:
            return "No program found: answer with the complete code in a single ```python block."
        if verdict.status is Status.error:
            return f"The sandbox could not run your program ({details.get('reason') or details.get('error')})."
        failed = next((t for t in details.get("tests", []) if not t.get("passed")), None)
        if verdict.status is Status.unparsable or failed is None:
            return "Your program does not compile:\n" + truncate(str((failed or {}).get("error", "")), part * 2)
        visible = self.split.visible
        index = failed["test"]
        lines = [f"Visible test {index + 1} of {_count(visible)} failed ({failed['outcome'].replace('_', ' ')})."]
        if isinstance(visible, StdioTests):
            case = visible.cases[index]
            lines += _section("Input", case.input, part) + _section("Expected output", case.output, part)
            lines += _section("Your output", details.get("stdout_head", ""), part)
        elif isinstance(visible, FunctionalTests):
            case = visible.cases[index]
            lines += _section("Call", _call(visible.entry_point, case.args, case.kwargs), part)
            lines += _section("Expected", repr(case.expected), part)
            if failed["outcome"] == "wrong" and "error" not in failed:
                lines += _section("Your function returned", self._returned(action, visible, index), part)
            lines += _section("Error", str(failed.get("error", "")), part)
        lines += _section("Error output (end)", details.get("stderr_tail", ""), part)
        return "\n".join(lines)

    def _brief_feedback(self, action: str, verdict: Verdict) -> str:
        """One line (`limits.brief`): the failing visible case in the problem's own notation and what the
        program gave, e.g. `g('ab')='ba', not 'ab'`; an error's last line instead of a result."""
        details = verdict.details
        failed = next((t for t in details.get("tests", []) if not t.get("passed")), None)
        if verdict.status is Status.no_answer:
            return "no program"
        if verdict.status is Status.error or failed is None:
            return "not run" if verdict.status is Status.error else "does not compile"
        error = (str(failed.get("error", "")) or details.get("stderr_tail", "")).strip().splitlines()
        visible, index = self.split.visible, failed["test"]
        if isinstance(visible, FunctionalTests):
            case = visible.cases[index]
            head = f"{_call(visible.entry_point, case.args, case.kwargs)}={case.expected!r}"
            got = self._returned(action, visible, index) if failed["outcome"] == "wrong" and not error else ""
        elif isinstance(visible, StdioTests):
            case = visible.cases[index]
            head, got = f"input {case.input!r} gives {case.output!r}", repr(details.get("stdout_head", ""))
        else:
            head, got = "assert failed", ""
        return f"{head}, not {got}" if got else f"{head}, {error[-1] if error else failed['outcome']}"

    def _returned(self, action: str, tests: FunctionalTests, index: int) -> str:
        """What the submitted function returns on visible case `index`: one plain sandbox run that prints
        its repr (the code verifier compares results without reporting them)."""
        case = tests.cases[index]
        program = extract_code(action, self.config.code.max_code_chars, tests.entry_point)
        call = (f"\n\nimport json as _json\nprint(repr({tests.entry_point}(*_json.loads({json.dumps(case.args)!r}), "
                f"**_json.loads({json.dumps(case.kwargs)!r}))))\n")
        try:
            run, reason = self.sandbox.get().run(program + call, self.sandbox_limits)
        except Exception as exc:
            return f"(not available: {type(exc).__name__})"
        if run.error or reason or run.exit_code != 0:
            return f"(not available: {run.error or reason or 'the call failed'})"
        return run.stdout.decode(errors="replace").rstrip("\n")


def _count(tests: CodeTests) -> int:
    return len(tests.cases) if isinstance(tests, (StdioTests, FunctionalTests)) else 1


def _call(entry_point: str, args: list[Any], kwargs: dict[str, Any]) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"{entry_point}({', '.join(parts)})"


def _section(title: str, text: str, limit: int) -> list[str]:
    return [f"{title}:", truncate(text, max(limit, 64))] if text else []


def _public_details(details: dict[str, Any]) -> dict[str, Any]:
    """The final verdict's details without program output, error text or test data (module docstring)."""
    out = {k: details[k] for k in ("passed", "total", "timeout_case", "sandbox", "reason") if k in details}
    if "tests" in details:
        out["tests"] = [{k: t[k] for k in _PUBLIC_TEST_KEYS if k in t} for t in details["tests"]]
    return out
