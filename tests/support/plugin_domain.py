"""Install a plug-in domain the way pip would, into a folder a test puts on PYTHONPATH: the package
`word_rlvr` with `source` as its `__init__.py`, and a dist-info whose entry point registers `word`."""

from __future__ import annotations

from pathlib import Path


def install_word_plugin(root: Path, source: str) -> Path:
    (root / "word_rlvr").mkdir()
    (root / "word_rlvr" / "__init__.py").write_text(source)
    info = root / "word_rlvr-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: word-rlvr\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[scalerl.domains]\nword = word_rlvr:SPEC\n")
    return root
