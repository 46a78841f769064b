"""The built-in domain specs (math, code, instruction following), each declared in pyproject.toml's
`scalerl.domains` entry-point group and read through `scalerl_env.contracts.domains`."""
