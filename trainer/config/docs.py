"""Render `docs/configuration.md` from the configuration models (the one source of every default).

`python -m trainer.config.docs` rewrites the file; a test fails when the committed file differs from
what the models say, so the reference can never drift from the code.
"""

from __future__ import annotations

from pathlib import Path

from scalerl_env.contracts.config import atomic_write_text, reference_markdown
from scalerl_env.contracts.paths import REPO

DOC = REPO / "docs" / "configuration.md"
HEADER = """# Configuration reference

Generated from the pydantic models by `python -m trainer.config.docs` (do not edit by hand; a test
compares this file with the models). Precedence everywhere: model default → preset (`scalerl train
--preset`) → `--config FILE.yaml` → command-line flags → dotted overrides such as `loss.eps_max=4`.
`scalerl train --print-config [overrides]` prints the resolved result; each run folder keeps it as
`config.yaml`. Which defaults depart from the paper, and why, is said in `trainer/config/train.py`.
"""


def sections() -> list[tuple[str, str, type]]:
    """(title, what uses it, model) for each configuration the project reads."""
    from scalerl_env.server.config import ServerConfig
    from trainer.config.train import TrainConfig

    return [("`scalerl train`", "`TrainConfig` (`trainer/config/train.py`); `verifier.*` is the verifier pool's",
             TrainConfig),
            ("`scalerl-env serve`", "`ServerConfig` (`scalerl_env/server/config.py`), `--config FILE.yaml`",
             ServerConfig)]


def render() -> str:
    parts = [HEADER]
    for title, used_by, model in sections():
        parts.append(f"\n## {title}\n\n{used_by}.\n\n| key | default | meaning |\n|---|---|---|")
        parts.extend(reference_markdown(model))
    return "\n".join(parts) + "\n"


def write(path: Path = DOC) -> Path:
    return atomic_write_text(path, render())


if __name__ == "__main__":
    print(write())
