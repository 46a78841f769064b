"""Adapters that let other trainers use scalerl verdicts as rewards: OpenRLHF, veRL, TRL.

All three turn a (completion, reference) pair into a `VerifyItem` with `reference_item` and score
through `score_items`: over HTTP when a server URL is given (argument or `SCALERL_REWARD_URL`; one URL
or a comma-separated list of replicas, balanced and failed over by `scalerl.env.client`), with the
bearer token of the argument or `SCALERL_REWARD_TOKEN`; otherwise in this process with
`verifiers.verify_batch`.

Reference forms (`reference_item`), when no domain is given, in the registry's order
(`scalerl.env.contracts.domains.domain_of_reference`):
- code: a JSON object (or its text) that is either a test spec `{"kind": "stdio" | "functional" |
  "assert", ...}`, `{"tests": {...}, "limits": {...}}`, or the APPS/TACO stdio form
  `{"inputs": ["1 2\\n", ...], "outputs": ["3\\n", ...]}` (read by the code domain's
  `scalerl.verifiers.code.reference`);
- another domain's reference that its spec claims (`claims_reference`, e.g. instruction following's
  ground truth);
- math: the answer as text, e.g. `"\\frac{1}{2}"` (anything no domain claims).
With `domain=`, the reference is read as that domain's (`answer` text, or code tests).

References and ids usually come from dataset columns (HF `datasets`, parquet, pandas), which do not hand
back what was written: a struct column gives every row every field of the column, `None` where the row
had none, and pandas gives numpy arrays and scalars. `reference_item` therefore normalizes a reference
before the strict models see it (numpy to Python; `None`-valued spec fields are dropped by
`scalerl.verifiers.code.reference.code_spec`) and `id_text` turns
integer ids into text. Unknown fields with a value are still errors, and the HTTP API's `VerifyItem`
is not normalized at all.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError
from scalerl.env.client import TOKEN_ENV, URL_ENV
from scalerl.env.contracts.config_loader import validation_problems
from scalerl.env.contracts.domains import domain as domain_spec
from scalerl.env.contracts.domains import domain_of_reference
from scalerl.env.contracts.records import Verdict, VerifyItem
from scalerl.verifiers.code.reference import code_spec, tests_and_limits

_clients: dict[tuple[str, str | None], Any] = {}
_clients_lock = threading.Lock()


class AdapterInputError(ValueError):
    """A reference that cannot be turned into a verify item; `loc` is the path of the offending field."""

    def __init__(self, loc: tuple[str | int, ...], msg: str) -> None:
        super().__init__(f"{'.'.join(map(str, loc))}: {msg}")
        self.loc = tuple(loc)
        self.msg = msg

    def __reduce__(self) -> tuple[type, tuple[tuple[str | int, ...], str]]:
        # Pickle (and so Ray, which hands a worker's exception to the driver) rebuilds an exception from
        # `args`, which here is the formatted message alone: rebuild from (loc, msg) instead.
        return type(self), (self.loc, self.msg)


def id_text(value: Any, loc: tuple[str | int, ...] = ("prompt_id",)) -> str | None:
    """An id from a dataset column as text: integers (Python or numpy) become their decimal text."""
    value = plain(value)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise AdapterInputError(loc, f"an id must be text or an integer, got {type(value).__name__}")


def plain(value: Any) -> Any:
    """numpy arrays and scalars (pandas, veRL's object arrays) as Python lists and scalars, recursively."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def reference_item(completion: str, reference: Any, *, id: str = "", prompt_id: str | None = None,
                   loc: tuple[str | int, ...] = ("reference",), domain: str | None = None) -> VerifyItem:
    """The verify item scoring `completion` against `reference` (see the module docstring for forms)."""
    reference = plain(reference)
    try:
        target = domain_spec(domain) if domain else domain_of_reference(reference)
    except ValueError as exc:
        raise AdapterInputError(loc, str(exc)) from None
    if target.reference == "answer":
        if isinstance(reference, (dict, list)) and target.check_reference is not None:
            reference = json.dumps(reference)  # a structured ground truth travels as its JSON text
        return _answer_item(target.name, completion, reference, id=id, prompt_id=prompt_id, loc=loc)
    spec = code_spec(reference)
    if spec is None:
        raise AdapterInputError(loc, f"a {target.name} reference must be a test spec, got {type(reference).__name__}")
    try:
        tests, limits = tests_and_limits(spec)
    except ValidationError as exc:
        problems = "; ".join(validation_problems(exc, whole="spec"))
        raise AdapterInputError(loc, f"not a valid code test spec: {problems}") from None
    except (ValueError, TypeError) as exc:
        raise AdapterInputError(loc, f"not a valid code test spec: {exc}") from None
    return VerifyItem(id=id, domain=target.name, completion=completion, tests=tests, limits=limits,
                      prompt_id=prompt_id)


def _answer_item(name: str, completion: str, reference: Any, *, id: str, prompt_id: str | None,
                 loc: tuple[str | int, ...]) -> VerifyItem:
    if not isinstance(reference, (str, int, float)) or isinstance(reference, bool):
        raise AdapterInputError(loc, f"a {name} answer must be text, got {type(reference).__name__}")
    try:
        return VerifyItem(id=id, domain=name, completion=completion, answer=str(reference), prompt_id=prompt_id)
    except ValidationError as exc:
        raise AdapterInputError(loc, f"not a valid {name} reference: {validation_problems(exc)[0]}") from None


def score_items(items: Sequence[VerifyItem], *, url: str | None = None, token: str | None = None) -> list[Verdict]:
    """Score over HTTP when a URL is known (argument or `SCALERL_REWARD_URL`, one or a comma-separated
    list), sending `token` or `SCALERL_REWARD_TOKEN`; else in process."""
    url = url or os.environ.get(URL_ENV)
    if url:
        return _client(url, token or os.environ.get(TOKEN_ENV) or None).verify(items)
    from scalerl.verifiers import verify_batch

    return list(verify_batch(list(items)))


def _client(url: str, token: str | None) -> Any:
    """One client (one connection pool, one view of the replicas) per URL list and token per process."""
    from scalerl.env.client import RewardClient

    with _clients_lock:
        if (url, token) not in _clients:
            _clients[url, token] = RewardClient(url, token=token)
        return _clients[url, token]
