"""Adapters that let other trainers use scalerl verdicts as rewards: OpenRLHF, veRL, TRL.

All three turn a (completion, reference) pair into a `VerifyItem` with `reference_item` and score
through `score_items`: over HTTP when a server URL is given (argument or `SCALERL_REWARD_URL`),
otherwise in this process with `verifiers.verify_batch`.

Reference forms (`reference_item`):
- math: the answer as text, e.g. `"\\frac{1}{2}"` (anything that is not a code reference below);
- code: a JSON object (or its text) that is either a test spec `{"kind": "stdio" | "functional" |
  "assert", ...}`, `{"tests": {...}, "limits": {...}}`, or the APPS/TACO stdio form
  `{"inputs": ["1 2\\n", ...], "outputs": ["3\\n", ...]}`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from scalerl_env.config import validation_problems
from scalerl_env.records import CodeTests, Limits, Verdict, VerifyItem

URL_ENV = "SCALERL_REWARD_URL"
_TESTS = TypeAdapter(CodeTests)
_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


class AdapterInputError(ValueError):
    """A reference that cannot be turned into a verify item; `loc` is the path of the offending field."""

    def __init__(self, loc: tuple[str | int, ...], msg: str) -> None:
        super().__init__(f"{'.'.join(map(str, loc))}: {msg}")
        self.loc = loc
        self.msg = msg


def reference_item(completion: str, reference: Any, *, id: str = "", prompt_id: str | None = None,
                   loc: tuple[str | int, ...] = ("reference",)) -> VerifyItem:
    """The verify item scoring `completion` against `reference` (see the module docstring for forms)."""
    spec = _code_spec(reference)
    if spec is None:
        if not isinstance(reference, (str, int, float)) or isinstance(reference, bool):
            raise AdapterInputError(loc, f"a math answer must be text, got {type(reference).__name__}")
        return VerifyItem(id=id, domain="math", completion=completion, answer=str(reference), prompt_id=prompt_id)
    try:
        tests, limits = _code_tests(spec)
    except ValidationError as exc:
        problems = "; ".join(validation_problems(exc, whole="spec"))
        raise AdapterInputError(loc, f"not a valid code test spec: {problems}") from None
    except (ValueError, TypeError) as exc:
        raise AdapterInputError(loc, f"not a valid code test spec: {exc}") from None
    return VerifyItem(id=id, domain="code", completion=completion, tests=tests, limits=limits, prompt_id=prompt_id)


def _code_spec(reference: Any) -> dict[str, Any] | None:
    if isinstance(reference, str):
        text = reference.strip()
        if not text.startswith("{"):
            return None
        try:
            reference = json.loads(text)
        except json.JSONDecodeError:
            return None  # e.g. a set-valued math answer "{1, 2}"
    if isinstance(reference, dict) and ({"kind", "tests", "inputs"} & reference.keys()):
        return reference
    return None


def _code_tests(spec: dict[str, Any]) -> tuple[Any, Limits | None]:
    limits = Limits.model_validate(spec["limits"]) if spec.get("limits") is not None else None
    if "tests" in spec:
        return _TESTS.validate_python(spec["tests"]), limits
    if "kind" in spec:
        return _TESTS.validate_python({k: v for k, v in spec.items() if k != "limits"}), limits
    inputs, outputs = spec.get("inputs"), spec.get("outputs")
    if spec.get("fn_name"):
        raise ValueError("APPS/TACO call-based tests (fn_name) need the functional form {'kind': 'functional', ...}")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise ValueError("'inputs' and 'outputs' must be lists of equal length")
    cases = [{"input": str(i), "output": str(o)} for i, o in zip(inputs, outputs)]
    return _TESTS.validate_python({"kind": "stdio", "cases": cases}), limits


def score_items(items: Sequence[VerifyItem], *, url: str | None = None) -> list[Verdict]:
    """Score over HTTP when a URL is known (argument or `SCALERL_REWARD_URL`), else in process."""
    url = url or os.environ.get(URL_ENV)
    if url:
        return _client(url).verify(items)
    from verifiers import verify_batch

    return list(verify_batch(list(items)))


def _client(url: str) -> Any:
    """One client (one connection pool) per server URL per process."""
    from scalerl_env.client import RewardClient

    with _clients_lock:
        if url not in _clients:
            _clients[url] = RewardClient(url)
        return _clients[url]
