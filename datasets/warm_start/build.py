"""Ship the built-in CPU default's warm start: train it (or take it from the user cache) and copy the
folder to `datasets/warm_start/<key>/`, removing folders of older keys. It learns every domain of
`warm_start.domains` (math, code, if), so any subset of them starts RL at once.

    python datasets/warm_start/build.py

Run it when `tests/trainer/test_warm_start_shipped.py` says the shipped folder no longer matches
(the warm-start recipe, the tiny model's size or the default problems changed).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.run.data_sources import build_data, warm_start_problems
from scalerl.trainer.tiny import warm_start as ws


def default_key_and_problems() -> tuple[str, list]:
    cfg = TrainConfig()
    problems = warm_start_problems(cfg, build_data(cfg))
    return ws.cache_key(cfg.tiny, cfg.warm_start, problems), problems


def main() -> Path:
    cfg = TrainConfig()
    key, problems = default_key_and_problems()
    source = ws.warm_start(cfg.tiny, cfg.warm_start, problems)
    target = ws.SHIPPED / key
    if source != target:
        shutil.copytree(source, target, dirs_exist_ok=True)
    for old in ws.SHIPPED.iterdir():
        if old.is_dir() and old.name != key and not old.name.startswith("_"):
            shutil.rmtree(old)
    return target


if __name__ == "__main__":
    print(main())
