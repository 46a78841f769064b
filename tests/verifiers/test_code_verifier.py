"""Code verifier semantics: extraction, comparators, the three test kinds, statuses, details, API."""

from __future__ import annotations

import os
import threading

import pytest
from scalerl.env.contracts.records import Status, VerifyItem
from scalerl.verifiers.code.compare import compare_output, functional_equal
from scalerl.verifiers.code.extract import extract_code
from scalerl.verifiers.code.judge import CodeVerifier
from scalerl.verifiers.code.sandbox._canon import canon
from scalerl.verifiers.verifier_config import CodeConfig


def item(completion: str, tests: dict, id: str = "x", **kw) -> VerifyItem:
    return VerifyItem(id=id, domain="code", completion=completion, tests=tests, **kw)


def stdio(*pairs: tuple[str, str], compare: str = "tokens") -> dict:
    return {"kind": "stdio", "cases": [{"input": i, "output": o} for i, o in pairs], "compare": compare}


@pytest.fixture(scope="module")
def verifier():
    with CodeVerifier() as v:
        yield v


# ---------------------------------------------------------------------------------------------- pure parts
def test_extraction_takes_the_last_python_block_else_everything() -> None:
    text = "try:\n```python\nprint(1)\n```\nbetter:\n```py\nprint(2)\n```\n```text\nno\n```"
    assert extract_code(text) == "print(2)"
    assert extract_code("print(3)\n") == "print(3)"
    assert extract_code("```python\nprint(4)\n") == "print(4)"  # truncated final block
    assert extract_code("```\nprint(5)\n```") == "print(5)"
    assert extract_code("   \n") == "" and extract_code("```python\n\n```") == ""


def test_extraction_with_an_entry_point_takes_the_last_block_defining_it() -> None:
    solution_then_usage = ('```python\ndef g(s):\n    return s.replace("q", "g")\n```\n\n'
                           'Example usage:\n```python\nprint(g("123"))\n')
    assert extract_code(solution_then_usage) == 'print(g("123"))'  # the last block, as before
    assert extract_code(solution_then_usage, entry_point="g") == 'def g(s):\n    return s.replace("q", "g")'
    two_tries = "```python\ndef g(s):\n    return 1\n```\n```python\nasync def g(s):\n    return 2\n```"
    assert extract_code(two_tries, entry_point="g").endswith("return 2")
    no_definition = "```python\ndef gg(s):\n    return 1\n```\n```python\nprint(3)\n```"
    assert extract_code(no_definition, entry_point="g") == "print(3)"


def test_a_solution_followed_by_a_usage_block_is_correct(verifier: CodeVerifier) -> None:
    """A SmolLM2 sample (the study in docs/results.md): the usage block alone raised NameError."""
    tests = {"kind": "functional", "entry_point": "g",
             "cases": [{"args": ["aqb"], "expected": "agb"}, {"args": ["qq"], "expected": "gg"}]}
    text = ('```python\ndef g(s):\n    return s.replace("q", "g")\n```\n\n'
            'Example usage:\n```python\nprint(g("123"))  # Output: "123G"\n')
    assert verifier.verify_one(item(text, tests)).status == Status.correct
    assert verifier.verify_one(item(text.replace('"g")', '"x")', 1), tests)).status == Status.wrong


@pytest.mark.parametrize("got,exp,mode,ok", [
    ("1 2\n3", "1 2 3\n", "tokens", True),
    ("Yes", "yes", "tokens", False),
    ("0.3333334", "0.333333", "tokens", True),
    ("10", "10.0000001", "tokens", True),
    ("11", "10", "tokens", False),  # integers are exact
    ("3.0", "3", "tokens", False),  # expected is an integer token: no tolerance
    ("3.1", "3", "float:0.2", True),
    ("a b\n", "a b", "exact", False),
    ("a  \nb\n\n", "a\nb", "lines", True),
    ("a b\n", "a\nb", "lines", False),
])
def test_stdio_comparators(got: str, exp: str, mode: str, ok: bool) -> None:
    assert compare_output(got, exp, mode) is ok


def test_functional_equality_on_canonical_forms() -> None:
    assert functional_equal(canon((1, 2)), canon([1, 2]))
    assert functional_equal(canon(0.1 + 0.2), canon(0.3))
    assert functional_equal(canon(5), canon([5]))  # APPS single-element unwrap
    assert not functional_equal(canon([5, 6]), canon([5]))
    assert functional_equal(canon({1, 2}), canon([2, 1]))
    assert not functional_equal(canon("1"), canon(1))


# ---------------------------------------------------------------------------------------------- verifier
def test_statuses_for_each_outcome(verifier: CodeVerifier) -> None:
    add = stdio(("1 2\n", "3\n"), ("5 5\n", "10\n"))
    items = [
        item("```python\na, b = map(int, input().split())\nprint(a + b)\n```", add, "ok"),
        item("print(3)", add, "wrong"),
        item("   ", add, "empty"),
        item("def f(:\n", add, "syntax"),
        item("while True:\n    pass", add, "loop", limits={"time_s": 0.5}),
        item("raise ValueError('boom')", add, "crash"),
        item("import sys\nprint(3)\nsys.exit(0)", stdio(("", "3")), "exit0"),
    ]
    got = {v.id: v.status for v in verifier.verify_many(items)}
    assert got == {"ok": Status.correct, "wrong": Status.wrong, "empty": Status.no_answer,
                   "syntax": Status.unparsable, "loop": Status.timeout, "crash": Status.wrong,
                   "exit0": Status.correct}


def test_details_carry_tests_stderr_and_layers(verifier: CodeVerifier) -> None:
    v = verifier.verify_many([item("import sys\nsys.stderr.write('oops\\n')\nprint(4)", stdio(("", "3")))])[0]
    assert v.id == "x" and v.reward == 0.0
    assert v.details["tests"][0]["outcome"] == "wrong" and "oops" in v.details["stderr_tail"]
    assert v.details["sandbox"]["level"] == "strict" and "seccomp" in v.details["sandbox"]["layers"]
    (bad,) = verifier.verify_many([item("def f(:\n", stdio(("", "3")))])
    assert bad.details["tests"][0]["outcome"] == "compile_error"
    assert bad.details["tests"][0]["error"].startswith("SyntaxError")  # why it did not compile


def test_stop_at_first_failure_or_run_all() -> None:
    tests = stdio(("1\n", "1"), ("2\n", "0"), ("3\n", "3"))
    with CodeVerifier(CodeConfig(stop_at_first_failure=False, slots=1)) as v:
        d = v.verify_many([item("print(input())", tests)])[0].details
    assert [t["passed"] for t in d["tests"]] == [True, False, True]


def test_functional_kind(verifier: CodeVerifier) -> None:
    tests = {"kind": "functional", "entry_point": "f",
             "cases": [{"args": [2], "expected": [2, 2]}, {"args": [], "kwargs": {"x": 3}, "expected": [3, 3]}]}
    sol = "class Solution:\n    def f(self, x):\n        return (x, x)"
    items = [item("def f(x):\n    return [x, x]", tests, "a"), item("def f(x):\n    return [x]", tests, "b"),
             item(sol, tests, "cls"), item("def g(x): pass", tests, "missing")]
    assert [v.status for v in verifier.verify_many(items)] == [Status.correct, Status.wrong, Status.correct,
                                                              Status.wrong]


def test_assert_kind_needs_the_token(verifier: CodeVerifier) -> None:
    tests = {"kind": "assert", "code": "import math\nassert f(4) == 2\nassert math.isclose(f(2), 1.4142135623730951)"}
    items = [item("def f(x):\n    return math.sqrt(x)", tests, "ok"),
             item("def f(x):\n    return x", tests, "bad"),
             item("def f(x):\n    return 2\nimport os\nos._exit(0)", tests, "exit")]
    assert [v.status for v in verifier.verify_many(items)] == [Status.correct, Status.wrong, Status.wrong]


def test_verify_many_is_thread_safe_and_keeps_order(verifier: CodeVerifier) -> None:
    results: dict[int, list] = {}

    def work(k: int) -> None:
        items = [item(f"print({k * 10 + j})", stdio(("", str(k * 10 + (j % 2) * j))), f"{k}-{j}")
                 for j in range(6)]
        results[k] = [(v.id, v.status) for v in verifier.verify_many(items)]
    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(3):
        assert [r[0] for r in results[k]] == [f"{k}-{j}" for j in range(6)]
        assert all((r[1] == Status.correct) == (j % 2 == 1 or k * 10 + j == k * 10) for j, r in
                   enumerate(results[k]))


def test_info_counts_executions_and_kills() -> None:
    with CodeVerifier(CodeConfig(slots=1, max_output_bytes=4096)) as v:
        v.verify_many([item("print(1)", stdio(("", "1"))), item("print('x' * 100000)", stdio(("", "1")))])
        info = v.info()
    assert info["executions"] == 2 and info["kills"]["output"] == 1
    assert set(info["kills"]) == {"wall", "cpu", "memory", "output"}


def test_close_is_idempotent_and_kills_the_server() -> None:
    v = CodeVerifier(CodeConfig(slots=1))
    assert v.verify_many([item("print(1)", stdio(("", "1")))])[0].status == Status.correct
    pids = v._sandbox.server_pids
    v.close()
    v.close()
    assert pids and not [p for p in pids if os.path.exists(f"/proc/{p}")]
    with pytest.raises(RuntimeError):
        v.verify_many([item("print(1)", stdio(("", "1")))])
