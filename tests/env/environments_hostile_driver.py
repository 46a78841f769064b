"""Runs the hostile corpus (tests/verifiers/hostile/) through both multi-turn environments; one JSON line
per program and path on stdout.

The tool path: a `math-tool` episode whose first action is the program in a ```python block and whose
second is a correct answer. The feedback path: a `code-feedback` episode submitting the program twice
(the second submission is the last turn, scored on every test), on tests of the program's kind with a
visible case and a hidden one whose data are markers. After each episode: processes left as a sandbox
uid, marker files on the host, secrets or hidden markers in anything the episode returned, and an
honest episode right after. Run inside the safety net of tests/env/test_environments_hostile.py (its
own PID, network, IPC and mount namespaces), as the corpus's own driver is.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CORPUS_DIR = os.path.join(REPO, "tests", "verifiers", "hostile")

_spec = importlib.util.spec_from_file_location("hostile_driver", os.path.join(CORPUS_DIR, "driver.py"))
corpus_driver = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus_driver)  # the corpus's helpers: header, survivors, the loopback listener

from scalerl.env.contracts.paths import reference_dir  # noqa: E402
from scalerl.env.contracts.records import Limits, ProblemRecord  # noqa: E402

sys.path.insert(0, REPO)
from tests.support.episodes import play as play_episode  # noqa: E402

HIDDEN = "hidden-" + secrets.token_hex(8)
SANDBOX = Limits(**corpus_driver.LIMITS)
MATH = ProblemRecord(prompt_id="hostile-math", domain="math", source="test", answer="7",
                     prompt=[{"role": "user", "content": "What is 3 + 4?"}])
HONEST = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"


def code_problem(kind: str) -> ProblemRecord:
    if kind == "assert":
        tests = {"kind": "assert", "code": f"assert add(1, 2) == 3\nassert add({HIDDEN!r}, '') == {HIDDEN!r}"}
    elif kind == "functional":
        tests = {"kind": "functional", "entry_point": "add", "cases": [
            {"args": [1, 2], "expected": 3}, {"args": [HIDDEN, ""], "expected": HIDDEN}]}
    elif kind == "honest":
        tests = {"kind": "stdio", "cases": [{"input": "2 3\n", "output": "5\n"}, {"input": "1 1\n", "output": "2\n"}]}
    else:
        tests = {"kind": "stdio", "cases": [{"input": "", "output": f"expected-{secrets.token_hex(8)}"},
                                            {"input": HIDDEN + "\n", "output": HIDDEN + "-out"}]}
    return ProblemRecord(prompt_id=f"hostile-{kind}", domain="code", source="test",
                         prompt=[{"role": "user", "content": "Write the program."}], tests=tests)


def play(name: str, problem: ProblemRecord, actions: list[str], max_turns: int = 2) -> tuple[list, float]:
    started = time.monotonic()
    steps = play_episode(name, problem, actions, sandbox=SANDBOX, max_turns=max_turns)
    return steps, time.monotonic() - started


def survivors(settle_s: float = 2.0) -> list[str]:
    """Live processes of a sandbox uid (name, state, parent), after up to `settle_s` for a killed one to
    finish exiting. This driver is PID 1 of the safety net, so a sandbox child orphaned when its
    episode's fork server is killed is reparented here and stays a zombie: dead, not a survivor."""
    deadline = time.monotonic() + settle_s
    while True:
        live = []
        for pid in corpus_driver.survivors():
            try:
                with open(f"/proc/{pid}/status") as f:
                    fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
            except OSError:
                continue
            if not fields.get("State", "").strip().startswith("Z"):
                live.append(f"{pid} {fields['Name'].strip()} {fields['State'].strip()} ppid {fields['PPid'].strip()}")
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.1)


def report(path: str, name: str, steps: list, elapsed: float, secret: str, markers: list[str],
           honest: str) -> dict:
    text = "\n".join(step.model_dump_json() for step in steps)
    end = steps[-1]
    return {"name": name, "path": path, "done": end.done, "status": end.verdict.status.value if end.verdict else None,
            "turns": end.turn, "info": end.info, "elapsed_s": round(elapsed, 3), "survivors": survivors(),
            "markers_present": [p for p in markers if os.path.exists(p)], "honest": honest,
            "leaked": "LEAK" in text or secret in text or HIDDEN in text}


def run_one(name: str, src: str, secret: str) -> list[dict]:
    meta = corpus_driver.header(src)
    markers = meta.get("markers", "").split()
    out = []
    steps, elapsed = play("math-tool", MATH, [f"```python\n{src}\n```", "The answer is \\boxed{7}."])
    honest, _ = play("math-tool", MATH, ["```python\nprint(3 + 4)\n```", "\\boxed{7}"])
    out.append(report("tool", name, steps, elapsed, secret, markers, honest[-1].verdict.status.value))
    steps, elapsed = play("code-feedback", code_problem(meta.get("kind", "stdio")), [src, src])
    honest, _ = play("code-feedback", code_problem("honest"), [HONEST])
    out.append(report("feedback", name, steps, elapsed, secret, markers, honest[-1].verdict.status.value))
    return out


def main(argv: list[str]) -> int:
    secret = "hostile-secret-" + secrets.token_hex(8)
    os.environ["SCALERL_HOSTILE_SECRET"] = secret
    corpus_driver.bring_loopback_up()
    port, accepted = corpus_driver.start_listener()
    subs = {"{repo}": REPO, "{reference}": str(reference_dir()), "{port}": str(port)}
    for name in corpus_driver.corpus(argv[1:]):
        with open(os.path.join(CORPUS_DIR, name + ".py")) as f:
            src = f.read()
        for k, v in subs.items():
            src = src.replace(k, v)
        for line in run_one(name, src, secret):
            print(json.dumps(line), flush=True)
    # An episode that never ends by itself: every action calls the tool with a program that never stops.
    with open(os.path.join(CORPUS_DIR, "sleep_forever.py")) as f:
        forever = f"```python\n{f.read()}\n```"
    steps, elapsed = play("math-tool", MATH, [forever] * 100, max_turns=4)
    print(json.dumps({"name": "_endless", "done": steps[-1].done, "turns": steps[-1].turn, "info": steps[-1].info,
                      "elapsed_s": round(elapsed, 3), "survivors": survivors()}), flush=True)
    print(json.dumps({"name": "_summary", "listener_received": [a.decode(errors="replace") for a in accepted]}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
