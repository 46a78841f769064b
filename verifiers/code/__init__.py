"""The code domain's verifier: programs extracted from completions, run against typed tests in the sandbox.

`verifier.CodeBatchVerifier` is what the pool builds for `code` items; `reference` reads a bare test
spec; `converters` turn public datasets' rows into tests. Importing this package imports nothing else
(the sandbox starts on the first code item).
"""
