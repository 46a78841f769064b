"""The built-in domain specs (math, code), each declared in pyproject.toml's
`scalerl.domains` entry-point group and read through `scalerl.env.contracts.domains`."""
