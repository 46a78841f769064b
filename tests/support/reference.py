"""The reference data folder for tests (see `scalerl_env.paths.reference_dir`)."""

from scalerl_env.paths import REPO, reference_dir

REFERENCE = reference_dir()
__all__ = ["REFERENCE", "REPO"]
