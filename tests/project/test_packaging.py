"""What the wheel installs: the package list, the namespace mapping, and the light install.

- `[tool.setuptools] packages` in pyproject.toml lists exactly the package folders of the tree (every
  folder with an `__init__.py` under the four roots), under their `scalerl.*` names, and package-dir maps
  the four folders.
- The `train` extra and `scalerl.trainer.cli.TRAIN_EXTRA_MODULES` name the same libraries.
- The light install (`pip install scalerl`, no extra): every module of `scalerl.env`, `scalerl.verifiers`
  and `scalerl.curriculum` imports with the trainer's libraries hidden, and `scalerl train` names the
  extra to install and exits 2. The wheel itself in a clean venv: tests/light_install_check.sh (CI).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from scalerl.env.contracts.paths import REPO
from scalerl.trainer.cli import MISSING_EXTRA_EXIT, TRAIN_EXTRA_MODULES

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own dependency
    import tomli as tomllib

FOLDERS = {"scalerl_env": "scalerl.env", "verifiers": "scalerl.verifiers", "curriculum": "scalerl.curriculum",
           "trainer": "scalerl.trainer"}
LIGHT_FOLDERS = ("scalerl_env", "verifiers", "curriculum")
# Plug-ins that run inside a trainer library's process and import that library (TRL with torch, veRL with
# omegaconf): not part of what the light install runs.
TRAINER_LIBRARY_PLUGINS = {"scalerl.env.adapters.trl_curriculum", "scalerl.env.adapters.verl_curriculum"}
# Libraries the light install does not have: the `train` extra's, and what the other extras add.
HIDDEN = (*TRAIN_EXTRA_MODULES, "vllm", "accelerate", "gguf")
HIDE = f"import sys; sys.modules.update(dict.fromkeys({HIDDEN!r}))"


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def installed_name(path: Path) -> str:
    """`verifiers/code/sandbox/client.py` -> `scalerl.verifiers.code.sandbox.client` (a folder: its package)."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return ".".join([FOLDERS[parts[0]], *parts[1:]])


def package_folders() -> set[str]:
    return {installed_name(init) for folder in FOLDERS for init in (REPO / folder).rglob("__init__.py")
            if "__pycache__" not in init.parts}


def is_sandbox_script(path: Path) -> bool:
    """The sandbox's `_*.py` files run by path inside the sandbox, importing each other by bare name
    (standard library only): never imported as package modules."""
    return path.parent.name == "sandbox" and path.name.startswith("_") and path.name != "__init__.py"


def light_modules() -> list[str]:
    paths = [p for folder in LIGHT_FOLDERS for p in sorted((REPO / folder).rglob("*.py"))
             if "__pycache__" not in p.parts and not is_sandbox_script(p)]
    return [name for name in map(installed_name, paths) if name not in TRAINER_LIBRARY_PLUGINS]


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_packages_list_is_the_tree():
    listed = pyproject()["tool"]["setuptools"]["packages"]
    assert len(listed) == len(set(listed)), "a package is listed twice"
    tree, listed = package_folders(), set(listed)
    assert not tree - listed, f"package folders missing from [tool.setuptools] packages: {sorted(tree - listed)}"
    assert not listed - tree, f"listed packages with no folder: {sorted(listed - tree)}"


def test_package_dir_maps_the_four_folders():
    assert pyproject()["tool"]["setuptools"]["package-dir"] == {name: folder for folder, name in FOLDERS.items()}


def test_train_extra_is_what_the_cli_checks():
    extra = pyproject()["project"]["optional-dependencies"]["train"]
    names = {re.match(r"[A-Za-z0-9_.-]+", requirement).group().lower().replace("-", "_") for requirement in extra}
    assert names == set(TRAIN_EXTRA_MODULES)
    light = pyproject()["project"]["dependencies"]
    assert not {re.match(r"[A-Za-z0-9_.-]+", r).group().lower() for r in light} & names


def test_light_paths_import_without_the_trainer_libraries():
    modules = light_modules()
    assert "scalerl.env.server.app" in modules and "scalerl.env.commands.serve" in modules
    code = HIDE + f"\nimport importlib\nfor name in {modules!r}:\n    importlib.import_module(name)\nprint('ok')"
    done = run_python(code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_trainer_command_without_its_extra_names_it_and_exits_2():
    done = run_python(HIDE + "\nsys.argv = ['scalerl', 'train', '--max-steps', '1']\n"
                             "from scalerl.trainer.cli import main\nmain()")
    assert done.returncode == MISSING_EXTRA_EXIT == 2, done.stderr
    assert "scalerl train: the trainer is not installed (no module torch" in done.stderr
    assert "pip install 'scalerl[train]'" in done.stderr


def test_trainer_help_works_without_its_extra():
    done = run_python(HIDE + "\nsys.argv = ['scalerl', '--help']\nfrom scalerl.trainer.cli import main\nmain()")
    assert done.returncode == 0, done.stderr
    assert "train" in done.stdout and "pip install" not in done.stdout + done.stderr
