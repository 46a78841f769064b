"""Canonical, honest encoding of plain data (standard library only; used inside and outside the sandbox).

`canon(v)` turns a value built from int/float/complex/str/bytes/bool/None/list/tuple/dict/set/frozenset/
deque (and their subclasses: Counter, OrderedDict, namedtuple, ...) into immutable tagged tuples,
reading every value through the *base* type's methods (`int.__int__`, `list.__iter__`, ...). A subclass
that overrides `__eq__`, `__iter__` or `__class__` cannot change what is encoded, and any other type
raises `TypeError`. So "always equal" objects and patched builtins cannot fake equality: equal canonical
forms mean equal plain data. `to_json`/`from_json` carry canonical forms across the process boundary.

Guarantee: the encoding preserves Python `==` semantics for plain data (1 == 1.0 == True; list != tuple;
set == frozenset; dict order ignored). Departure: OrderedDict order and float NaN identity are ignored.
"""

from __future__ import annotations

import collections

_type, _iter, _len, _isinstance, _issub = type, iter, len, isinstance, issubclass
_int, _float, _complex, _str, _bytes, _bool = int, float, complex, str, bytes, bool
_list, _tuple, _dict, _set, _frozenset, _deque = list, tuple, dict, set, frozenset, collections.deque
MAX_DEPTH = 64
MAX_ITEMS = 1_000_000


def canon(v, _depth: int = 0, _budget: list | None = None):
    """Canonical immutable form of plain data; TypeError for anything else."""
    budget = _budget if _budget is not None else [MAX_ITEMS]
    budget[0] -= 1
    if _depth > MAX_DEPTH or budget[0] < 0:
        raise TypeError("value too deep or too large to compare")
    t = _type(v)
    if v is None or t is _bool:
        return v
    if _issub(t, _bool):
        return _bool(v)
    if _issub(t, _int):
        return _int.__int__(v)
    if _issub(t, _float):
        return _float.__float__(v)
    if _issub(t, _complex):
        return ("C", _complex.__complex__(v))
    if _issub(t, _str):
        return _str.__str__(v)
    if _issub(t, _bytes):
        return ("B", _bytes.__getitem__(v, slice(None)))
    d = _depth + 1
    if _issub(t, _list):
        return ("L", _tuple(canon(x, d, budget) for x in _list.__iter__(v)))
    if _issub(t, _tuple):
        return ("T", _tuple(canon(x, d, budget) for x in _tuple.__iter__(v)))
    if _issub(t, _deque):
        return ("Q", _tuple(canon(x, d, budget) for x in _deque.__iter__(v)))
    if _issub(t, (_set, _frozenset)):
        it = _set.__iter__(v) if _issub(t, _set) else _frozenset.__iter__(v)
        return ("S", _frozenset(canon(x, d, budget) for x in it))
    if _issub(t, _dict):
        return ("D", _frozenset((canon(k, d, budget), canon(x, d, budget)) for k, x in _dict.items(v)))
    raise TypeError(f"cannot compare a value of type {t.__name__!s}: only plain data")


def equal(a, b) -> bool:
    """Python `==` on plain data, immune to overridden `__eq__`; False when either side is not plain."""
    try:
        return canon(a) == canon(b)
    except (TypeError, RecursionError):
        return False


def to_json(c):
    """Canonical form → JSON-able value (tags become one-key objects)."""
    if _isinstance(c, _tuple):
        tag, body = c
        if tag == "C":
            return {"C": [body.real, body.imag]}
        if tag == "B":
            return {"B": body.hex()}
        if tag == "D":
            return {"D": [[to_json(k), to_json(x)] for k, x in body]}
        return {tag: [to_json(x) for x in body]}
    return c


def from_json(j):
    """Inverse of `to_json` (parent side); raises ValueError on malformed input."""
    if _isinstance(j, _dict):
        if _len(j) != 1:
            raise ValueError("malformed canonical value")
        (tag, body), = j.items()
        if tag == "C":
            return ("C", complex(body[0], body[1]))
        if tag == "B":
            return ("B", bytes.fromhex(body))
        if tag == "D":
            return ("D", frozenset((from_json(k), from_json(x)) for k, x in body))
        if tag == "S":
            return ("S", frozenset(from_json(x) for x in body))
        if tag in ("L", "T", "Q"):
            return (tag, tuple(from_json(x) for x in body))
        raise ValueError(f"unknown canonical tag {tag!r}")
    if _isinstance(j, _list):
        raise ValueError("malformed canonical value")
    return j
