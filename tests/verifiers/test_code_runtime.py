"""What a plain `python3` run provides works in the sandbox (`python -I -S`, so `site` never runs):
exit/quit, sys.exit, input, closed streams and pipes, deep recursion within the memory limit, threads."""

from __future__ import annotations

import pytest
from scalerl.env.contracts.records import Status, VerifyItem
from scalerl.verifiers.code.judge import CodeVerifier

DOUBLE = "print(int(input()) * 2)\n"


@pytest.fixture(scope="module")
def verifier():
    with CodeVerifier() as v:
        yield v


def judge(verifier: CodeVerifier, code: str, stdin: str = "21\n", expected: str = "42", **limits):
    tests = {"kind": "stdio", "cases": [{"input": stdin, "output": expected}]}
    item = VerifyItem(id="r", domain="code", completion=code, tests=tests, limits=limits or None)
    return verifier.verify_many([item])[0]


@pytest.mark.parametrize("ending", ["exit()", "quit()", "exit(0)", "quit(None)", "import sys\nsys.exit()",
                                    "import sys\nsys.exit(0)", "raise SystemExit"])
def test_a_contest_program_ending_in_exit_is_correct(verifier: CodeVerifier, ending: str) -> None:
    verdict = judge(verifier, DOUBLE + ending + "\nprint('never')")
    assert verdict.status is Status.correct, verdict.details


def test_exit_codes_and_messages_behave_as_in_python(verifier: CodeVerifier) -> None:
    three = judge(verifier, DOUBLE + "exit(3)")
    assert three.status is Status.wrong and three.details["tests"][0]["exit_code"] == 3
    message = judge(verifier, DOUBLE + "import sys\nsys.exit('bad input')")
    assert message.details["tests"][0]["exit_code"] == 1 and "bad input" in message.details["stderr_tail"]
    shown = judge(verifier, "print(repr(exit), repr(quit))", expected="x")
    assert "Use exit() or Ctrl-D (i.e. EOF) to exit Use quit()" in shown.details["stdout_head"]


def test_input_reads_stdin_and_raises_eoferror_at_its_end(verifier: CodeVerifier) -> None:
    two_lines = "a = int(input())\nb = int(input())\nprint(a + b)"
    assert judge(verifier, two_lines, stdin="40\n2\n").status is Status.correct
    past_end = judge(verifier, DOUBLE + "input()")
    assert past_end.status is Status.wrong and "EOFError" in past_end.details["stderr_tail"]
    caught = DOUBLE + "try:\n    input()\nexcept EOFError:\n    pass"
    assert judge(verifier, caught).status is Status.correct


def test_closed_streams_and_pipes_behave_as_in_python(verifier: CodeVerifier) -> None:
    # Output complete, then stdout closed: Python's own exit skips a closed stream; so does the sandbox.
    assert judge(verifier, "import sys\n" + DOUBLE + "sys.stdout.close()").status is Status.correct
    # SIGPIPE is ignored as in python3: writing to a pipe without a reader raises BrokenPipeError.
    own_pipe = ("import os\nr, w = os.pipe()\nos.close(r)\ntry:\n    os.write(w, b'x')\n"
                "except BrokenPipeError:\n    " + DOUBLE)
    assert judge(verifier, own_pipe).status is Status.correct
    # Printing after closing the fd is a failure, as in Python.
    assert judge(verifier, "import os\nos.close(1)\n" + DOUBLE).status is Status.wrong


def test_deep_recursion_with_a_raised_recursion_limit(verifier: CodeVerifier) -> None:
    # lru_cache recursion nests C frames: ~100k levels need far more than the usual 8 MiB stack.
    deep = ("import sys, functools\nsys.setrecursionlimit(10**6)\n@functools.lru_cache(None)\n"
            "def f(n):\n    return 0 if n == 0 else 1 + f(n - 1)\nassert f(100000) == 100000\n" + DOUBLE)
    assert judge(verifier, deep).status is Status.correct
    python_frames = ("import sys\nsys.setrecursionlimit(10**6)\ndef g(n):\n    return n if n == 0 else g(n - 1)\n"
                     "assert g(300000) == 0\n" + DOUBLE)
    assert judge(verifier, python_frames).status is Status.correct


def test_unbounded_recursion_still_gets_a_verdict_within_the_memory_limit(verifier: CodeVerifier) -> None:
    runaway = ("import sys, functools\nsys.setrecursionlimit(10**9)\n@functools.lru_cache(None)\n"
               "def f(n):\n    return 1 + f(n + 1)\nf(0)\n" + DOUBLE)
    verdict = judge(verifier, runaway, memory_mb=256)
    assert verdict.status is Status.wrong, verdict.details
    assert verdict.details["tests"][0]["outcome"] in ("runtime_error", "memory_limit")


def test_threads_with_their_own_stack_size(verifier: CodeVerifier) -> None:
    threaded = ("import sys, threading\nsys.setrecursionlimit(10**6)\nthreading.stack_size(1 << 26)\n"
                "def g(n):\n    return n if n == 0 else g(n - 1)\nout = []\n"
                "def main():\n    out.append(g(50000))\n    " + DOUBLE.strip() + "\n"
                "t = threading.Thread(target=main)\nt.start()\nt.join()\n"
                "workers = [threading.Thread(target=lambda: None) for _ in range(8)]\n"
                "[w.start() for w in workers]\n[w.join() for w in workers]")
    assert judge(verifier, threaded).status is Status.correct
