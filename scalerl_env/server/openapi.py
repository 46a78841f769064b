"""Write the server's OpenAPI document: `python -m scalerl.env.server.openapi [openapi.json]`.

The committed `openapi.json` is checked against the app by `tests/env/test_server_api.py`; rerun this
after changing a route or model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from scalerl.env.contracts.config_loader import atomic_write_text


def openapi_document() -> dict[str, Any]:
    from scalerl.env.server.app import create_app

    return create_app().openapi()


def render() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0] if args else "openapi.json")
    atomic_write_text(path, render())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
