"""scalerl environment: typed records, configuration, problem sources, reward server and CLI.

The contracts every other package relies on live in `scalerl.env.contracts.records`; importing this package
has no side effects.
"""

__version__ = "0.1.0"
