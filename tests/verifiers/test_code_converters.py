"""Converters: each format to its test kind, malformed rows named, and CodeContests run end to end."""

from __future__ import annotations

import base64
import json
import os
import pickle
import zlib

import pytest
from scalerl.env.contracts.paths import reference_dir
from scalerl.env.contracts.records import AssertTests, FunctionalTests, Status, StdioTests, VerifyItem
from scalerl.verifiers.code import converters as cv
from scalerl.verifiers.code.judge import CodeVerifier

CONTESTS = os.path.join(reference_dir(), "sandboxfusion_code_contests", "code_eval_code_contests.jsonl")

# Positive controls written here for three CodeContests problems (the reference has no solutions).
SOLUTIONS = {
    "12_B. Correct Solution?": """
n, m = input().strip(), input().strip()
d = sorted(n)
if n != "0":
    i = next(k for k, c in enumerate(d) if c != "0")
    d[0], d[i] = d[i], d[0]
print("OK" if "".join(d) == m else "WRONG_ANSWER")
""",
    "1238_B. Kill 'Em All": """
import sys
data = sys.stdin.buffer.read().split()
q, i, out = int(data[0]), 1, []
for _ in range(q):
    n, r = int(data[i]), int(data[i + 1]); i += 2
    xs = sorted(set(map(int, data[i:i + n])), reverse=True); i += n
    c = 0
    for x in xs:
        if x - c * r <= 0:
            break
        c += 1
    out.append(str(c))
print("\\n".join(out))
""",
    "1342_C. Yet Another Counting Problem": """
import sys
d = sys.stdin.read().split()
t, i, out = int(d[0]), 1, []
for _ in range(t):
    a, b, q = int(d[i]), int(d[i + 1]), int(d[i + 2]); i += 3
    p = a * b
    pre = [0] * (p + 1)
    for x in range(p):
        pre[x + 1] = pre[x] + ((x % a) % b != (x % b) % a)
    f = lambda n: (n // p) * pre[p] + pre[n % p + 1]
    res = []
    for _ in range(q):
        lo, hi = int(d[i]), int(d[i + 1]); i += 2
        res.append(f(hi) - f(lo - 1))
    out.append(" ".join(map(str, res)))
print("\\n".join(out))
""",
}


def contest_rows() -> list[dict]:
    with open(CONTESTS) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_apps_stdio_and_functional() -> None:
    t = cv.from_apps({"input_output": json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})})
    assert isinstance(t, StdioTests) and t.cases[0].output == "3\n"
    f = cv.from_apps({"input_output": {"inputs": [[1, 2]], "outputs": [[3]], "fn_name": "add"}})
    assert isinstance(f, FunctionalTests) and f.entry_point == "add" and f.cases[0].args == [1, 2]
    lines = cv.from_apps({"input_output": {"inputs": [["1", "2"]], "outputs": [["3"]]}})
    assert lines.cases[0].input == "1\n2"


def test_livecodebench_plain_and_packed_private_cases() -> None:
    private = [{"input": "5\n", "output": "25\n", "testtype": "stdin"}]
    packed = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(private)))).decode()
    t = cv.from_livecodebench({"public_test_cases": json.dumps([{"input": "2\n", "output": "4\n",
                                                                 "testtype": "stdin"}]),
                               "private_test_cases": packed})
    assert isinstance(t, StdioTests) and [c.output for c in t.cases] == ["4\n", "25\n"]
    f = cv.from_livecodebench({"public_test_cases": [{"input": "[1, 2]\n3", "output": "[1, 2, 3]",
                                                      "testtype": "functional"}],
                               "metadata": json.dumps({"func_name": "append"})})
    assert isinstance(f, FunctionalTests) and f.cases[0].args == [[1, 2], 3] and f.cases[0].expected == [1, 2, 3]


def test_livecodebench_refuses_pickled_globals() -> None:
    evil = base64.b64encode(zlib.compress(pickle.dumps(os.getcwd))).decode()  # a global: posix.getcwd
    with pytest.raises(ValueError, match="private_test_cases"):
        cv.from_livecodebench({"public_test_cases": "[]", "private_test_cases": evil})


def test_deepcoder_list_and_apps_dict() -> None:
    t = cv.from_deepcoder({"tests": json.dumps([{"input": "1\n", "output": "1\n", "type": "stdin_stdout"}])})
    assert isinstance(t, StdioTests)
    f = cv.from_deepcoder({"tests": [{"input": [2], "output": 4, "type": "function_call", "fn_name": "sq"}]})
    assert isinstance(f, FunctionalTests) and f.entry_point == "sq"
    d = cv.from_deepcoder({"tests": {"inputs": ["x"], "outputs": ["y"]}})
    assert isinstance(d, StdioTests)


def test_codecontests_both_layouts() -> None:
    t = cv.from_codecontests({"public_tests": {"input": ["1\n"], "output": ["2\n"]},
                              "private_tests": {"input": ["3\n"], "output": ["4\n"]},
                              "generated_tests": {"input": [], "output": []}})
    assert [c.input for c in t.cases] == ["1\n", "3\n"]
    rows = contest_rows()
    assert sum(len(cv.from_codecontests(r).cases) for r in rows) == 2233


def test_humaneval_and_mbpp() -> None:
    h = cv.from_humaneval({"prompt": "from typing import List\n\ndef f(x: List[int]) -> int:\n",
                           "test": "def check(candidate):\n    assert candidate([1]) == 1\n", "entry_point": "f"})
    assert isinstance(h, AssertTests) and h.code.startswith("from typing import List") and h.code.endswith("check(f)\n")
    m = cv.from_mbpp({"test_list": ["assert f(1) == 1"], "test_imports": ["import math"]})
    assert m.code == "import math\nassert f(1) == 1\n"


@pytest.mark.parametrize("fn,row,field", [
    (cv.from_apps, {}, "input_output"),
    (cv.from_apps, {"input_output": "{not json"}, "input_output"),
    (cv.from_apps, {"input_output": {"inputs": [1], "outputs": []}}, "input_output"),
    (cv.from_livecodebench, {"private_test_cases": "[]"}, "public_test_cases"),
    (cv.from_livecodebench, {"public_test_cases": [{"input": "1", "output": "1", "testtype": "functional"}]},
     "public_test_cases"),
    (cv.from_deepcoder, {"tests": []}, "tests"),
    (cv.from_codecontests, {"title": "x"}, "public_tests"),
    (cv.from_humaneval, {"test": "def check(c): pass"}, "entry_point"),
    (cv.from_mbpp, {"test_list": "assert x"}, "test_list"),
    (cv.from_mbpp, {"test_list": ["assert f()"], "test_imports": "import os"}, "test_imports"),
])
def test_malformed_rows_raise_value_error_naming_the_field(fn, row, field) -> None:
    with pytest.raises(ValueError, match=field):
        fn(row)


@pytest.fixture(scope="module")
def verifier():
    with CodeVerifier() as v:
        yield v


def test_codecontests_positive_controls_pass_every_test(verifier: CodeVerifier) -> None:
    rows = {json.loads(r["labels"])["name"]: r for r in contest_rows()}
    items = [VerifyItem(id=name, domain="code", completion=src, tests=cv.from_codecontests(rows[name]))
             for name, src in SOLUTIONS.items()]
    verdicts = verifier.verify_many(items)
    assert [(v.id, v.status) for v in verdicts] == [(i.id, Status.correct) for i in items]
    assert all(v.details["passed"] == len(i.tests.cases) for v, i in zip(verdicts, items))


def test_codecontests_negative_control_is_wrong_on_every_problem(verifier: CodeVerifier) -> None:
    items = [VerifyItem(id=r["id"] if isinstance(r["id"], str) else str(r["id"]), domain="code",
                        completion="print(-7)", tests=cv.from_codecontests(r)) for r in contest_rows()]
    assert {v.status for v in verifier.verify_many(items)} == {Status.wrong}
