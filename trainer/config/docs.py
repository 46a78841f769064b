"""Render `docs/configuration.md` from the configuration models (the one source of every default).

`python -m scalerl.trainer.config.docs` rewrites the file; a test fails when the committed file differs from
what the models say, so the reference can never drift from the code.
"""

from __future__ import annotations

from pathlib import Path

from scalerl.env.contracts.config_loader import atomic_write_text, reference_markdown
from scalerl.env.contracts.paths import REPO

DOC = REPO / "docs" / "configuration.md"
HEADER = """# Configuration reference

Generated from the pydantic models by `python -m scalerl.trainer.config.docs` (do not edit by hand; a test
compares this file with the models). Precedence everywhere: model default → preset (`scalerl train
--preset`, table at the end) → `--config FILE.yaml` → command-line flags → dotted overrides such as
`loss.eps_max=4`. `scalerl train --print-config [overrides]` prints the resolved result with the layer
that set each value; each run folder keeps it as `config.yaml`. The class defaults are the built-in
CPU default; which depart from the paper, and why, is said in `trainer/config/train.py`.
"""


def sections() -> list[tuple[str, str, type]]:
    """(title, what uses it, model) for each configuration the project reads."""
    from scalerl.env.server.server_config import ServerConfig
    from scalerl.trainer.config.train import TrainConfig

    return [("`scalerl train`", "`TrainConfig` (`trainer/config/train.py`); `verifier.*` is the verifier pool's",
             TrainConfig),
            ("`scalerl-env serve`", "`ServerConfig` (`scalerl_env/server/server_config.py`), `--config FILE.yaml`",
             ServerConfig)]


def presets_table() -> list[str]:
    """`scalerl train`'s presets as layers over the class defaults: one row per key any preset sets."""
    import json

    from scalerl.env.contracts.config_loader import leaf_paths
    from scalerl.trainer.config.presets import PRESETS
    from scalerl.trainer.config.train import TrainConfig

    defaults = dict(leaf_paths(TrainConfig().model_dump(mode="json")))
    named = {name: dict(leaf_paths(values)) for name, values in PRESETS.items() if values}
    keys = sorted({k for values in named.values() for k in values})

    def cell(value: object) -> str:
        return f"`{json.dumps(value)}`".replace("|", "\\|")

    rows = ["\n## Presets\n", "Each preset is data (`trainer/config/presets.py`) naming only what it changes from the "
            "class defaults (the built-in CPU default, `tiny-cpu`); `scalerl train --print-config` shows the layer "
            "that set each value of a run.\n", f"| key | default | {' | '.join(named)} |",
            "|---|---|" + "---|" * len(named)]
    for key in keys:
        values = [cell(named[n][key]) if key in named[n] else "" for n in named]
        rows.append(f"| `{'.'.join(key)}` | {cell(defaults.get(key))} | {' | '.join(values)} |")
    return rows


def render() -> str:
    parts = [HEADER]
    for title, used_by, model in sections():
        parts.append(f"\n## {title}\n\n{used_by}.\n\n| key | default | meaning |\n|---|---|---|")
        parts.extend(reference_markdown(model))
    parts.extend(presets_table())
    return "\n".join(parts) + "\n"


def write(path: Path = DOC) -> Path:
    return atomic_write_text(path, render())


if __name__ == "__main__":
    print(write())
