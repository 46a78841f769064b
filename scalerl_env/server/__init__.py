"""The reward server (`scalerl-env serve`): FastAPI app factory, limits, metrics and lifecycle.

Modules: `config` (ServerConfig), `models` (HTTP models), `app` (create_app), `routes`, `state`
(pool, ledger, scoring), `limits` (body guard, in-flight bound), `metrics`, `lifecycle` (run_server).
Names are imported lazily so that `scalerl.env.client` can use the models without loading FastAPI.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ServerConfig", "create_app", "run_server"]


def __getattr__(name: str) -> Any:
    if name == "ServerConfig":
        from scalerl.env.server.server_config import ServerConfig

        return ServerConfig
    if name == "create_app":
        from scalerl.env.server.app import create_app

        return create_app
    if name == "run_server":
        from scalerl.env.server.lifecycle import run_server

        return run_server
    raise AttributeError(name)
