"""Answer-shape rules: comparisons math-verify gets wrong, decided before it is asked.

`decide(gold, pred, equal)` looks at the *shape* of the reference and of the extracted answer and,
when a rule applies, returns `(verdict, rule)`; otherwise None and math-verify decides alone.
`equal(a, b)` is the caller's comparison of two answer strings (math-verify plus the false-positive
guard, `scalerl.verifiers.math.judge`); rules compare the parts they split out with it. The rules, in order:

    choice     a multiple-choice letter: A-E, (B), \\text{(B)}, "(B) 2\\sqrt2"; letters decide, the
               option text counts when the reference carries it
    parts      a multi-part reference (top-level commas, semicolons, "and"; labels `w=` `(a)` `Minimum:` dropped):
               same number of parts, every part equal; a bare list is unordered, labelled parts are
               matched by label; brackets on one side only are ignored
    ordering   a chain `a < b < c` against the list `a, b, c`: same items, same order (before interval)
    interval   an inequality in one variable against an interval or a union (k < -5 vs (-\\infty,-5))
    degrees    x^\\circ against an answer in π (30^\\circ vs \\frac{\\pi}{6})
    units      a trailing unit word on one side only (`12 \\text{ cm}` vs 12)
    text       word answers: case, articles, punctuation and \\text{} ignored; the reference's words
               inside a short answer without a negation (`\\text{stopped}` vs "It stopped")
    equation   in `scalerl.verifiers.math.judge` (needs sympy objects): an equation against an expression
               (`xy = 6` vs 6/x), a function definition with a renamed argument (f(x)=x vs f(z)=z)
    rounded    in `scalerl.verifiers.math.judge`: an exact answer against a decimal reference, equal at the
               reference's stated decimals (1587/52 vs 30.52)

Guarantees: pure string work plus `equal` calls (at most MAX_PARTS per rule); never raises on model
text; a rule that is unsure returns None rather than a verdict. Not guaranteed: that the question
asked for the shape the reference has (the verifier never sees the question).
"""

from __future__ import annotations

import re
from collections.abc import Callable

Equal = Callable[[str, str], bool]
Decision = tuple[bool, str] | None
MAX_PARTS = 12
MAX_CHARS = 400

_LETTER = r"[A-E]"
_CHOICE = re.compile(rf"^(?:\\text(?:bf)?\{{\s*)?\(?({_LETTER})\)?(?:\s*\}})?(?:[\s:.)]+(.*))?$", re.DOTALL)
_LABEL = re.compile(r"^\s*(?:\\text\{\s*\(?([a-z])\)\s*\}|\(([a-z])\)|([a-zA-Z](?:_\{?\w+\}?)?)\s*=(?!=)"
                    r"|([A-Za-z][A-Za-z ]{1,30}?)\s*:)\s*")
_WORDS = re.compile(r"[a-z]+")
_TEXT_CMD = re.compile(r"\\(?:text|textbf|mathrm|mbox|textit)\s*\{([^{}]*)\}")
_UNIT = re.compile(r"\s*(?:\\[,;!]\s*)*\\(?:text|mbox|mathrm)\s*\{\s*([a-zA-Z][a-zA-Z ]{0,20})\}\s*(\^\{?\d\}?)?\s*$")
_DEGREE = re.compile(r"^(.*?)\s*(?:\^\s*\{?\\circ\}?|°|\\degree|\s*\\text\{\s*degrees?\s*\})$")
_INEQ = re.compile(r"(<=|>=|\\leq?|\\geq?|\\le\b|\\ge\b|<|>)")
_NEGATIONS = frozenset({"not", "no", "never", "neither", "nor", "cannot", "isnt", "doesnt", "didnt", "wont"})
_ARTICLES = frozenset({"the", "a", "an", "it", "is", "was", "are", "answer", "final", "will", "be"})


def decide(gold: str, pred: str, equal: Equal) -> Decision:
    """(verdict, rule) when an answer-shape rule applies to the pair, else None."""
    if len(gold) > MAX_CHARS or len(pred) > MAX_CHARS:
        return None
    for rule in (_choice, _ordering, _interval, _parts, _degrees, _units, _text):
        found = rule(gold.strip(), pred.strip(), equal)
        if found is not None:
            return found
    return None


# ------------------------------------------------------------------------------------------ choice
def choice_of(text: str) -> tuple[str, str] | None:
    """(letter, option text or "") for a multiple-choice answer; None for anything else."""
    match = _CHOICE.match(text.strip())
    if match is None:
        return None
    rest = (match.group(2) or "").strip().strip("$").strip()
    if rest and not (text.lstrip().startswith(("(", "\\text")) or re.match(rf"^{_LETTER}[:.)]", text.strip())):
        return None  # "B 2" or "Bx" is not a choice
    return match.group(1), rest


def _choice(gold: str, pred: str, equal: Equal) -> Decision:
    g = choice_of(gold)
    if g is None:
        return None
    p = choice_of(pred)
    if p is not None:
        return p[0] == g[0], "choice"
    if g[1] and equal(g[1], pred):
        return True, "choice"
    return None


# ------------------------------------------------------------------------------------------ parts
def split_top(text: str) -> list[str]:
    """Top-level parts separated by `,` `;` `\\text{ and }` / `\\text{ or }` / "and" (not inside brackets)."""
    text = re.sub(r"\\(?:text|mbox)\{\s*(and|or)\s*\}", r";", text)
    text = re.sub(r"\s+(?:and|or)\s+", ";", text)
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch in ",;" and depth == 0 and not text[max(0, i - 1):i] == "\\":
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip().strip("$").strip() for p in parts if p.strip()]


def _thousands(text: str) -> bool:
    plain = re.sub(r"\\[!,]|\s", "", text).replace("{,}", ",")
    return bool(re.fullmatch(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?", plain))


def _unwrap(text: str) -> tuple[str, str]:
    """(brackets, inside) for `(...)`, `[...]`, `\\{...\\}` wrapping the whole text; ("", text) otherwise."""
    t = text.strip()
    t = re.sub(r"\\left|\\right", "", t)
    for open_, close, name in (("\\{", "\\}", "set"), ("(", ")", "()"), ("[", "]", "[]")):
        if t.startswith(open_) and t.endswith(close):
            inner = t[len(open_):-len(close)]
            if _balanced(inner):
                return name, inner
    return "", t


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += (ch in "([{") - (ch in ")]}")
        if depth < 0:
            return False
    return depth == 0


def labelled(part: str) -> tuple[str, str]:
    """(label, value) for `w=16`, `(a) 3`, `\\text{(b)} 4`; ("", part) when unlabelled."""
    match = _LABEL.match(part)
    if match is None or not part[match.end():].strip():
        return "", part.strip()
    groups = match.groups()
    label = groups[3].lower() if groups[3] else next(g for g in groups if g)  # `Minimum:` = `minimum:`
    return label, part[match.end():].strip()


def _parts(gold: str, pred: str, equal: Equal) -> Decision:
    if _thousands(gold) or "\\cup" in gold or _INEQ.search(gold):
        return None
    g_shape, g_inner = _unwrap(gold)
    p_shape, p_inner = _unwrap(pred)
    if g_shape in ("()", "[]") and p_shape in ("()", "[]"):
        return None  # tuples and intervals on both sides: math-verify's own comparison
    gold_parts = split_top(g_inner)
    if len(gold_parts) < 2 or len(gold_parts) > MAX_PARTS:
        return None
    pred_parts = [] if _thousands(p_inner) else split_top(p_inner)
    if g_shape in ("()", "[]") and len(pred_parts) < 2:
        return None  # (2, 5) may be an interval: an inequality or a number against it is another rule's
    if len(pred_parts) != len(gold_parts):
        return False, "parts"
    ordered = g_shape in ("()", "[]")
    return _match_parts([labelled(p) for p in gold_parts], [labelled(p) for p in pred_parts], ordered, equal)


def _match_parts(gold: list, pred: list, ordered: bool, equal: Equal) -> Decision:
    g_labels, p_labels = [lab for lab, _ in gold], [lab for lab, _ in pred]
    if all(g_labels) and all(p_labels) and sorted(g_labels) == sorted(p_labels) and len(set(g_labels)) == len(gold):
        by_label = dict(pred)
        return all(_part_equal(v, by_label[lab], equal) for lab, v in gold), "parts"
    if all(p_labels) and not any(g_labels) and len(set(p_labels)) == len(p_labels):
        ordered = True  # `w=16, d=3` against `16,3`: the reference lists the parts in the asked order
    if ordered:
        return all(_part_equal(g, p, equal) for (_, g), (_, p) in zip(gold, pred)), "parts"
    left = [v for _, v in pred]
    for _, g in gold:  # unordered multiset match; greedy is exact because equality is transitive here
        hit = next((k for k, p in enumerate(left) if _part_equal(g, p, equal)), None)
        if hit is None:
            return False, "parts"
        left.pop(hit)
    return True, "parts"


def _part_equal(gold: str, pred: str, equal: Equal) -> bool:
    if equal(gold, pred):
        return True
    g, p = strip_unit(gold), strip_unit(pred)
    return (g, p) != (gold, pred) and bool(g) and bool(p) and equal(g, p)


# ------------------------------------------------------------------------------------------ interval
def interval_of(text: str) -> str | None:
    """An interval (or union) string for an inequality in one variable: `k < -5` -> `(-\\infty,-5)`."""
    pieces = [p for p in re.split(r"\\text\{\s*or\s*\}|\s+or\s+|\\lor|\\vee", text) if p.strip()]
    if not pieces or len(pieces) > 4:
        return None
    out = []
    for piece in pieces:
        one = _one_interval(piece.strip().strip("$"))
        if one is None:
            return None
        out.append(one)
    return " \\cup ".join(out)


def _op(op: str) -> str:
    op = op.strip()
    return {"\\le": "<=", "\\leq": "<=", "\\ge": ">=", "\\geq": ">="}.get(op, op)


def _one_interval(piece: str) -> str | None:
    tokens = [t.strip() for t in _INEQ.split(piece)]
    values, ops = tokens[0::2], [_op(o) for o in tokens[1::2]]
    var = re.compile(r"^[a-zA-Z](?:_\{?\w+\}?)?$")
    if len(ops) == 1 and var.match(values[0]) and values[1]:
        bound, op = values[1], ops[0]
        if op in ("<", "<="):
            return f"(-\\infty, {bound}{')' if op == '<' else ']'}"
        return f"{'(' if op == '>' else '['}{bound}, \\infty)"
    if len(ops) == 2 and var.match(values[1]) and set(ops) <= {"<", "<="} and values[0] and values[2]:
        left = "(" if ops[0] == "<" else "["
        right = ")" if ops[1] == "<" else "]"
        return f"{left}{values[0]}, {values[2]}{right}"
    return None


def _interval(gold: str, pred: str, equal: Equal) -> Decision:
    g_ineq, p_ineq = bool(_INEQ.search(gold)), bool(_INEQ.search(pred))
    if g_ineq == p_ineq:
        return None
    converted = interval_of(pred if p_ineq else gold)
    if converted is None:
        return None
    return (equal(gold, converted) if p_ineq else equal(converted, pred)), "interval"


# ------------------------------------------------------------------------------------------ ordering
def _ordering(gold: str, pred: str, equal: Equal) -> Decision:
    """`a < b < c` against the list `a, b, c` (either side): the same items in the same order."""
    g_chain, p_chain = _chain(gold), _chain(pred)
    if (g_chain is None) == (p_chain is None):
        return None
    chain, listed = (g_chain, pred) if g_chain is not None else (p_chain, gold)
    items = split_top(_unwrap(listed)[1])
    if len(items) != len(chain) or _INEQ.search(listed):  # type: ignore[arg-type]
        return None
    pairs = zip(chain, items) if g_chain is not None else zip(items, chain)  # type: ignore[arg-type]
    return all(_part_equal(g, p, equal) for g, p in pairs), "ordering"


def _chain(text: str) -> list[str] | None:
    """The items of a chain of at least three terms joined by `<` only (`a < b < c`); None otherwise."""
    tokens = [t.strip() for t in _INEQ.split(text)]
    values, ops = tokens[0::2], tokens[1::2]
    if len(values) < 3 or any(op != "<" for op in ops) or not all(values):
        return None
    return values


# ------------------------------------------------------------------------------------------ degrees
def _degrees(gold: str, pred: str, equal: Equal) -> Decision:
    g_deg, p_deg = _DEGREE.match(gold), _DEGREE.match(pred)
    if bool(g_deg) == bool(p_deg):
        return None
    degrees, other = (g_deg.group(1), pred) if g_deg else (p_deg.group(1), gold)  # type: ignore[union-attr]
    if "\\pi" not in other or not degrees.strip():
        return None
    as_radians = f"\\frac{{({degrees.strip()})\\pi}}{{180}}"
    return (equal(as_radians, pred) if g_deg else equal(gold, as_radians)), "degrees"


# ------------------------------------------------------------------------------------------ units
def strip_unit(text: str) -> str:
    """`12 \\text{ cm}^2` -> `12`; text without a trailing unit word is returned unchanged."""
    match = _UNIT.search(text)
    if match is None or not text[:match.start()].strip():
        return text.strip()
    return text[:match.start()].strip()


def _units(gold: str, pred: str, equal: Equal) -> Decision:
    g, p = strip_unit(gold), strip_unit(pred)
    if (g == gold.strip()) == (p == pred.strip()):
        return None  # a unit on both sides (or neither): math-verify compares them as written
    return (True, "units") if equal(g, p) else None


# ------------------------------------------------------------------------------------------ text
def words_of(text: str) -> list[str] | None:
    """Lower-case words of a word answer; None when the text holds mathematics (digits, commands)."""
    plain = _TEXT_CMD.sub(r" \1 ", text)
    plain = plain.replace("\\ ", " ").replace("~", " ")
    if re.search(r"[\d\\^_=<>+*/{}]", plain):
        return None
    words = [w for w in _WORDS.findall(plain.lower().replace("'", "")) if w]
    return words or None


def _text(gold: str, pred: str, equal: Equal) -> Decision:
    g, p = words_of(gold), words_of(pred)
    if g is None or p is None or max(len(w) for w in g) < 2:
        return None  # one-letter answers are variables or choices, not words
    g_core = [w for w in g if w not in _ARTICLES] or g
    p_core = [w for w in p if w not in _ARTICLES] or p
    if g_core == p_core:
        return True, "text"
    negated = (_NEGATIONS & set(p)) - set(g)
    inside = all(w in p_core for w in g_core)
    return bool(inside and not negated and len(p_core) <= len(g_core) + 4), "text"
