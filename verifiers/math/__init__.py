"""The math domain's verifier: extraction, the exact fast path, the sympy judge in persistent workers.

`verifier.MathBatchVerifier` is what the pool builds for `math` items; importing this package imports
nothing else (no sympy, no math-verify: those load in the worker processes and on first use).
"""
