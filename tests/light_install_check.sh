#!/usr/bin/env bash
# The light install end to end (run by .ci/run; a few minutes with a warm pip cache):
#   1. build the wheel from SOURCE (default: this repository) and install it without extras into a clean venv;
#   2. there, none of the `train` extra's libraries is installed, `scalerl train` names the extra and exits 2,
#      and every static file of the dashboard (package data) is installed;
#   3. `scalerl-env verify` scores a math, a code and an `if` item; `scalerl-env serve` answers one scoring
#      request and records it in its ledger; `scalerl-env ledger query` reads that ledger file;
#   4. PrimeIntellect's `verifiers` (PyPI) goes in beside it: one process imports both `verifiers` and
#      `scalerl.verifiers` and scores a completion through each.
# Everything runs from an empty working folder, so nothing is imported from the source tree.
# Usage: tests/light_install_check.sh [SOURCE]   (PYTHON picks the interpreter, default python3)
set -euo pipefail

SOURCE=$(cd "${1:-$(dirname "$0")/..}" && pwd)
PYTHON=${PYTHON:-python3}
PRIME_VERIFIERS="verifiers==0.4.0"
WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  # Removing a venv of ~150 packages took ~100 s on a loaded 2-core VM: done in the background, detached.
  (rm -rf "$WORK" </dev/null >/dev/null 2>&1 &)
}
trap cleanup EXIT
step() { echo "== light install: $* ($SECONDS s)"; }

step "wheel from $SOURCE"
"$PYTHON" -m pip wheel -q --no-deps -w "$WORK/dist" "$SOURCE"
WHEEL=$(ls "$WORK"/dist/scalerl-*.whl)

step "clean venv, $(basename "$WHEEL") without extras"
"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install -q --upgrade pip  # a fresh venv's bundled pip may not normalize extra names (PEP 685)
"$VPY" -m pip install -q "$WHEEL"
mkdir "$WORK/run" && cd "$WORK/run"

step "no trainer libraries; scalerl train names its extra"
"$VPY" - <<'EOF'
import importlib.util
import scalerl.env
from scalerl.trainer.cli import TRAIN_EXTRA_MODULES

assert "site-packages" in scalerl.env.__file__, scalerl.env.__file__
found = [name for name in TRAIN_EXTRA_MODULES if importlib.util.find_spec(name)]
assert not found, f"the light install pulled in {found}"
EOF
set +e
"$WORK/venv/bin/scalerl" train --max-steps 1 2> train.err
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "pip install 'scalerl\[train\]'" train.err || { cat train.err; echo "scalerl train: rc $rc"; exit 1; }

step "the wheel carries every static file of the dashboard"
"$VPY" - "$SOURCE/scalerl_env/dashboard/static" <<'EOF'
import sys
from pathlib import Path

import scalerl.env.dashboard


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


installed = Path(scalerl.env.dashboard.__file__).parent / "static"
missing = files(Path(sys.argv[1])) - files(installed)
assert not missing, f"not in the wheel (pyproject's package-data): {sorted(missing)}"
EOF

step "scalerl-env verify"
cat > items.jsonl <<'EOF'
{"id": "m", "domain": "math", "completion": "So the answer is $\\boxed{\\frac{1}{2}}$.", "answer": "0.5"}
{"id": "c", "domain": "code", "completion": "```python\na, b = map(int, input().split())\nprint(a + b)\n```", "tests": {"kind": "stdio", "cases": [{"input": "1 2\n", "output": "3\n"}]}}
{"id": "i", "domain": "if", "completion": "all lower case", "answer": "{\"instruction_id_list\": [\"change_case:english_lowercase\"], \"kwargs\": [{}]}"}
EOF
"$WORK/venv/bin/scalerl-env" verify --file items.jsonl --workers 1 --out verdicts.jsonl
"$VPY" - <<'EOF'
import json

statuses = {v["id"]: v["status"] for v in map(json.loads, open("verdicts.jsonl"))}
assert statuses == {"m": "correct", "c": "correct", "i": "correct"}, statuses
EOF

step "scalerl-env serve, one scoring request"
PORT=$("$VPY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$WORK/venv/bin/scalerl-env" serve --port "$PORT" --workers 1 --ledger ledger.duckdb > serve.log 2>&1 &
SERVER_PID=$!
"$VPY" - "$PORT" <<'EOF' || { cat serve.log; exit 1; }
import sys
import time

import httpx

url = f"http://127.0.0.1:{sys.argv[1]}"
deadline = time.monotonic() + 120
while True:
    try:
        if httpx.get(url + "/readyz", timeout=2).status_code == 200:
            break
    except httpx.TransportError:
        pass
    assert time.monotonic() < deadline, "the server was not ready within 120 s"
    time.sleep(0.5)
item = {"id": "a", "domain": "math", "completion": "\\boxed{4}", "answer": "4", "prompt_id": "p1"}
answer = httpx.post(url + "/v1/verify", json={"items": [item]}, timeout=60)
assert answer.status_code == 200, answer.text
assert answer.json()["results"][0]["status"] == "correct", answer.text
EOF
kill -TERM "$SERVER_PID" && wait "$SERVER_PID" || { cat serve.log; echo "serve did not stop cleanly"; exit 1; }
SERVER_PID=""

step "scalerl-env ledger query on the ledger file"
"$WORK/venv/bin/scalerl-env" ledger query "SELECT prompt_id, correct FROM attempts" --ledger ledger.duckdb \
  --format json > rows.json
"$VPY" - <<'EOF'
import json

text = open("rows.json").read()
assert "p1" in text and json.loads(text), text
EOF

step "PrimeIntellect's $PRIME_VERIFIERS beside it"
"$VPY" -m pip install -q "$PRIME_VERIFIERS"
"$VPY" - <<'EOF'
import verifiers
import verifiers.v1 as vf
from verifiers.v1.utils.score import verify_boxed_math_answer

import scalerl.verifiers
from scalerl.verifiers.batch import verify_batch

assert verifiers.__file__.endswith("site-packages/verifiers/__init__.py"), verifiers.__file__
assert scalerl.verifiers.__file__.endswith("site-packages/scalerl/verifiers/__init__.py"), scalerl.verifiers.__file__
assert vf.Env is not None
completion = "The sum is $\\boxed{\\frac{3}{4}}$."
assert verify_boxed_math_answer(completion, "0.75") == 1.0
[verdict] = verify_batch([{"id": "x", "domain": "math", "completion": completion, "answer": "0.75"}])
assert verdict.status.value == "correct", verdict
EOF
set +e
"$WORK/venv/bin/scalerl" train --max-steps 1 2> /dev/null
rc=$?
set -e
[ "$rc" = 2 ] || { echo "scalerl train beside verifiers: rc $rc, expected 2 (no torch)"; exit 1; }

step "passed"
