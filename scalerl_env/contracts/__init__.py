"""The contracts every package shares: records, the `Strict` base, configuration loading, shipped paths
and the domain registry. Imports no other module of the project, so any package may import it."""
