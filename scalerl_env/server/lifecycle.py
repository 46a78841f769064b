"""Running the server under uvicorn, and stopping it cleanly.

On SIGTERM or SIGINT: /readyz turns 503 and new /v1/verify requests get 503 at once (so load
balancers and clients move on), uvicorn closes the listening socket and lets in-flight requests
finish for up to `drain_timeout_s`, then the app's lifespan closes the verifier pool (killing
sandboxes and workers) and flushes and closes the ledger. The process then exits 0.

Departure from uvicorn's default: uvicorn re-raises the captured signal after a graceful shutdown,
which would end the process with -SIGTERM; a drained, flushed server exits 0 instead.

Once started (app, verifier pool, modules: ~66k objects that live as long as the process), the process
collects its garbage once and freezes what is left out of the cyclic collector's scans (`gc.freeze`):
each full collection otherwise walks all of it again, and the collections that requests trigger cost
the event loop about 10 ms of CPU per round of benchmarks/bench_server.py, 3 ms after the freeze.
Objects created later (caches, ledger state) are collected as usual.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import signal
import threading
from collections.abc import Generator
from typing import Any

import uvicorn
from scalerl.env.server.app import create_app
from scalerl.env.server.auth import exposure_problem, is_loopback
from scalerl.env.server.server_config import ServerConfig

logger = logging.getLogger(__name__)
HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, state: Any) -> None:
        super().__init__(config)
        self.scalerl_state = state

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        gc.collect()
        gc.freeze()  # see the module docstring

    def handle_exit(self, sig: int, frame: Any) -> None:
        if not self.scalerl_state.draining:
            logger.info("signal %s: draining in-flight requests", signal.Signals(sig).name)
        self.scalerl_state.draining = True
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in HANDLED_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


def run_server(config: ServerConfig) -> None:
    """Serve until SIGTERM/SIGINT; returns after the drain and cleanup described above. A routable
    `host` without tokens (and without `security.insecure`) is refused (`auth.exposure_problem`)."""
    security = config.security
    problem = exposure_problem(config.host, security)
    if problem:
        raise ValueError(problem)
    if not is_loopback(config.host) and security.token_file and not security.ssl_certfile:
        logger.warning("serving %s over plain HTTP: tokens cross the network in clear text "
                       "(see docs/server.md, 'Authentication and TLS')", config.host)
    app = create_app(config)
    uv_config = uvicorn.Config(
        app, host=config.host, port=config.port, log_config=None, access_log=False,
        timeout_graceful_shutdown=config.drain_timeout_s, lifespan="on",
        limit_concurrency=config.limits.max_connections, timeout_keep_alive=30,
        ssl_certfile=security.ssl_certfile, ssl_keyfile=security.ssl_keyfile,
    )
    _Server(uv_config, app.state.scalerl).run()
