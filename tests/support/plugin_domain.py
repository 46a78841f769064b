"""Install a plug-in the way pip would, into a folder a test puts on PYTHONPATH: optionally a package
with `source` as its `__init__.py`, and a dist-info whose entry point registers it in a project group
(`scalerl.domains`, `scalerl.environments`). `install_word_plugin` is the `word` domain of the tests."""

from __future__ import annotations

from pathlib import Path


def install_plugin(root: Path, *, dist: str, group: str, name: str, target: str, package: str | None = None,
                   source: str | None = None) -> Path:
    """`target` is the entry point's `module:attr`; `package`/`source` write that package first."""
    if package is not None:
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text(source or "")
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {target}\n")
    return root


def install_word_plugin(root: Path, source: str) -> Path:
    return install_plugin(root, dist="word-rlvr", group="scalerl.domains", name="word", target="word_rlvr:SPEC",
                          package="word_rlvr", source=source)
