"""The reference data folder for tests (see `scalerl.env.contracts.paths.reference_dir`)."""

from scalerl.env.contracts.paths import REPO, reference_dir

REFERENCE = reference_dir()
__all__ = ["REFERENCE", "REPO"]
