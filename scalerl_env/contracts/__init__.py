"""The contracts every package shares: records, the `Strict` base, configuration loading, shipped paths,
the domain registry and the sigmoid fit record. Imports no other module of the project, so any package
may import it."""
