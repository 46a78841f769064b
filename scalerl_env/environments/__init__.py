"""The built-in multi-turn environments (the episode contract: `scalerl.env.contracts.episodes`).

`specs` declares them (`code-feedback`, `math-tool`) for the `scalerl.environments` entry-point group;
`code_feedback` and `math_tool` are the episodes, `base` what they share. Importing this package or
`specs` imports no sandbox or verifier code.
"""
