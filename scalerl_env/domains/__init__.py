"""The built-in domain specs (math, code, if), each declared in pyproject.toml's `scalerl.domains`
entry-point group and read through `scalerl.env.contracts.domains`. A spec module holds the domain's
`SPEC` and its hooks, plain functions that import the domain's verifier (`scalerl.verifiers.<home>`),
generator and row code only when called."""
