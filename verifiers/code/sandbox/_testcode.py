"""Assert-mode test code, compiled once on the trusted side (standard library only; used inside and outside
the sandbox).

`compile_test(src)` splits the test into its leading imports and the rest, rewrites `assert a == b` /
`assert a != b` in the rest to canonical equality (`__scalerl_eq__`, see `_canon.equal`), so an overridden
`__eq__` cannot pass an assert, and compiles both with asserts enabled. `pack` does that in the parent and
returns the two code objects marshalled (text-safe, cached per test source: many completions share a
test), so the child only unmarshals them; a test that does not compile is not packed and the child reports
its error from the source. The marshal format is the interpreter's own: parent and child run the same
Python.
"""

from __future__ import annotations

import ast
import binascii
import functools
import marshal


class _EqRewriter(ast.NodeTransformer):
    """`assert a == b` / `assert a != b` → canonical equality, so overridden __eq__ cannot pass asserts."""

    def visit_Assert(self, node: ast.Assert) -> ast.Assert:
        t = node.test
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], (ast.Eq, ast.NotEq)):
            call = ast.Call(ast.Name("__scalerl_eq__", ast.Load()), [t.left, t.comparators[0]], [])
            node.test = call if isinstance(t.ops[0], ast.Eq) else ast.UnaryOp(ast.Not(), call)
        return node


def compile_test(src: str):
    """(leading imports, rest with rewritten asserts); raises SyntaxError, ValueError, ... like `compile`."""
    tree = ast.parse(src)
    n = 0
    while n < len(tree.body) and isinstance(tree.body[n], (ast.Import, ast.ImportFrom)):
        n += 1
    prelude = ast.Module(tree.body[:n], [])
    rest = ast.fix_missing_locations(_EqRewriter().visit(ast.Module(tree.body[n:], [])))
    return (compile(prelude, "<test>", "exec", dont_inherit=True, optimize=0),
            compile(rest, "<test>", "exec", dont_inherit=True, optimize=0))


@functools.lru_cache(maxsize=4096)
def pack(src: str) -> str | None:
    """`compile_test(src)` marshalled as base64 text, or None when the test does not compile."""
    try:
        return binascii.b2a_base64(marshal.dumps(compile_test(src)), newline=False).decode()
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def unpack(packed: str):
    return marshal.loads(binascii.a2b_base64(packed))
