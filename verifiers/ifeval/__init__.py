"""The instruction-following (`if`) domain's verifier: IFEval's constraints checked in strict and loose mode.

`verifier.IfBatchVerifier` is what the pool builds for `if` items; `reference` reads a constraint
reference; `constraints` holds the checks. Importing this package imports nothing else.
"""
