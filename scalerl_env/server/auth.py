"""Bearer-token authentication of the reward server, TLS settings, and the refusal to serve a routable
address anonymously.

Token file (`--token-file FILE`): one `SCOPE TOKEN` pair per line, `#` starts a comment, blank lines are
skipped. Scopes: `score` (every route, scoring included) and `read` (GET routes and
`POST /v1/ledger/query`). Tokens are at least 16 characters of printable ASCII without spaces.

    # scope  token
    score    3f9c1e0b7d2a4c58a61e9f0b2d7c4e81
    read     b7e2d0c94f1a4e6b8c3d5f7a9e1b2c4d

Guarantees:
- Routes are classified by method and path (`required_scope`), not one by one: `/healthz` and
  `/readyz` are open (probes of load balancers and orchestrators carry no token); other GET/HEAD
  routes and the POSTs in `READ_POSTS` need `read`; every other request needs `score`. A route added
  later is therefore protected by default.
- No token, or one that matches no entry: 401 with `WWW-Authenticate: Bearer`; a valid token lacking
  the scope: 403 naming the scope needed and the scope held. Bodies are JSON `{"detail": ...}`.
- The presented token is compared with every entry (`hmac.compare_digest` over SHA-256 digests, so
  neither the position of a mismatch nor the tokens' lengths change the time taken).
- The check runs before the request body is read: an anonymous caller cannot make the server read
  a large body.
- Each refusal is logged at INFO: method, path and the reason (no token, an unknown one, the scope
  missing), never the token.

Not guaranteed: tokens are read once at start-up (restart to rotate them); plain HTTP carries tokens
in clear text, so beyond one trusted network use TLS (`--ssl-certfile/--ssl-keyfile`) or a proxy.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import ipaddress
import logging
import os
import re
from collections.abc import Callable
from pathlib import Path

from pydantic import Field, model_validator
from scalerl.env.client import TOKEN_ENV
from scalerl.env.contracts.records import Strict
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# POSTs that only read: their body is a query, not something to score or record.
READ_POSTS = frozenset({"/v1/ledger/query"})
_TOKEN = re.compile(r"[!-~]{16,}")
logger = logging.getLogger(__name__)


class Access(str, enum.Enum):
    read = "read"
    score = "score"

    def allows(self, needed: Access) -> bool:
        return self is Access.score or needed is Access.read


class TokenFileError(ValueError):
    """A token file that cannot be used; the message names the file and line."""


class SecurityConfig(Strict):
    """`security:` of ServerConfig: who may call, over what transport."""

    token_file: str | None = Field(default=None, description="bearer tokens, one `SCOPE TOKEN` per line")
    insecure: bool = Field(default=False, description="allow a non-loopback bind without tokens")
    ssl_certfile: str | None = Field(default=None, description="PEM certificate (chain): serve HTTPS")
    ssl_keyfile: str | None = Field(default=None, description="PEM private key of ssl_certfile")
    owner_token_file: str | None = Field(
        default=None, description="file holding the token this process presents to the ledger owner "
                                  f"(default: ${TOKEN_ENV})")

    @model_validator(mode="after")
    def _tls_pair(self) -> SecurityConfig:
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise ValueError("ssl_certfile and ssl_keyfile go together (give both or neither)")
        return self


class Tokens:
    """The token table: SHA-256 digests and their scopes; the tokens themselves are not kept."""

    def __init__(self, entries: list[tuple[Access, str]]) -> None:
        if not entries:
            raise TokenFileError("no tokens given")
        self._entries = [(_digest(token), access) for access, token in entries]

    def access_of(self, presented: str) -> Access | None:
        """The scope of `presented`, or None; compares with every entry, never stopping early."""
        probe = _digest(presented)
        found: Access | None = None
        for digest, access in self._entries:
            if hmac.compare_digest(probe, digest) and found is None:
                found = access
        return found


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def load_tokens(path: str | os.PathLike[str]) -> Tokens:
    """Parse a token file (format in the module docstring); errors name the line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenFileError(f"{path}: cannot read the token file: {exc}") from None
    entries: list[tuple[Access, str]] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise TokenFileError(f"{path}:{number}: expected `SCOPE TOKEN`, got {len(parts)} fields")
        scope, token = parts
        if scope not in Access.__members__:
            raise TokenFileError(f"{path}:{number}: unknown scope {scope!r} (score or read)")
        if not _TOKEN.fullmatch(token):
            raise TokenFileError(f"{path}:{number}: a token must be at least 16 printable ASCII characters")
        if token in seen:
            raise TokenFileError(f"{path}:{number}: token repeated (first on line {seen[token]})")
        seen[token] = number
        entries.append((Access(scope), token))
    if not entries:
        raise TokenFileError(f"{path}: no tokens in the file")
    return Tokens(entries)


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The one token in a file of its own (comments and blank lines skipped): the client side's form."""
    lines = [ln.split("#", 1)[0].strip() for ln in Path(path).read_text(encoding="utf-8").splitlines()]
    tokens = [ln for ln in lines if ln]
    if len(tokens) != 1 or not _TOKEN.fullmatch(tokens[0]):
        raise TokenFileError(f"{path}: expected exactly one token (16+ printable ASCII characters, no spaces)")
    return tokens[0]


def owner_token(config: SecurityConfig) -> str | None:
    """The token for this process's outgoing calls to the ledger owner: `owner_token_file`, else
    `$SCALERL_REWARD_TOKEN`, else None. Send it as `bearer_headers(token)`."""
    if config.owner_token_file:
        return read_token_file(config.owner_token_file)
    return os.environ.get(TOKEN_ENV) or None


def bearer_headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def required_scope(method: str, path: str) -> Access | None:
    """The scope a request needs; None for the open probes."""
    if path in OPEN_PATHS:
        return None
    if method in READ_METHODS or (method == "POST" and path in READ_POSTS):
        return Access.read
    return Access.score


def is_loopback(host: str) -> bool:
    """Whether binding `host` stays on this machine: `localhost` or a loopback address. Any other name
    counts as routable (it may resolve differently later)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_problem(host: str, config: SecurityConfig) -> str | None:
    """Why serving `host` with `config` is refused, or None: a routable bind needs tokens or `insecure`."""
    if is_loopback(host) or config.token_file or config.insecure:
        return None
    return (f"refusing to bind {host!r} (not loopback) without authentication: give --token-file FILE "
            "(see docs/server.md, 'Authentication and TLS'), or --insecure to answer anyone who reaches the port")


class BearerAuth:
    """Pure ASGI middleware: the scope check of the module docstring, before anything reads the body."""

    def __init__(self, app: ASGIApp, tokens: Tokens, on_reject: Callable[[str], None] | None = None) -> None:
        self.app = app
        self.tokens = tokens
        self.on_reject = on_reject or (lambda reason: None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        needed = required_scope(scope["method"], scope["path"])
        if needed is None:
            await self.app(scope, receive, send)
            return
        presented = _bearer(scope)
        held = self.tokens.access_of(presented) if presented else None
        if held is not None and held.allows(needed):
            await self.app(scope, receive, send)
            return
        # Logged without the token: the method, the path, and what was wrong with the credentials.
        if held is None:
            logger.info("401 %s %s: %s", scope["method"], scope["path"],
                        "unknown bearer token" if presented else "no bearer token")
            self.on_reject("unauthorized")
            error = ', error="invalid_token"' if presented else ""
            detail = ("invalid bearer token" if presented else
                      "authentication required: send `Authorization: Bearer TOKEN`")
            response = JSONResponse({"detail": detail}, status_code=401,
                                    headers={"WWW-Authenticate": f'Bearer realm="scalerl"{error}'})
        else:
            logger.info("403 %s %s: scope %s, needs %s", scope["method"], scope["path"], held.value, needed.value)
            self.on_reject("forbidden")
            detail = (f"this token has scope {held.value!r}; {scope['method']} {scope['path']} "
                      f"needs scope {needed.value!r}")
            response = JSONResponse({"detail": detail}, status_code=403, headers={
                "WWW-Authenticate": f'Bearer realm="scalerl", error="insufficient_scope", scope="{needed.value}"'})
        await response(scope, receive, send)


def _bearer(scope: Scope) -> str | None:
    for key, value in scope["headers"]:
        if key == b"authorization":
            kind, _, token = value.decode("latin-1").strip().partition(" ")
            return (token.strip() or None) if kind.lower() == "bearer" else None
    return None


SCHEME = "bearerAuth"


def secure_openapi(schema: dict) -> dict:
    """The OpenAPI document with the bearer scheme: each operation lists the scope it needs (OpenAPI 3.1
    role names), open probes an empty `security`, protected ones their 401/403 answers. Documented
    whether or not this server was started with tokens: the document describes the API."""
    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {})[SCHEME] = {
        "type": "http", "scheme": "bearer",
        "description": "a token from the server's --token-file; scope `read` (GET routes, POST "
                       "/v1/ledger/query) or `score` (everything, scoring included). Open: "
                       + ", ".join(sorted(OPEN_PATHS)),
    }
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}}
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            needed = required_scope(method.upper(), path)
            if needed is None:
                operation["security"] = []
                continue
            operation["security"] = [{SCHEME: [needed.value]}]
            responses = operation.setdefault("responses", {})
            responses.setdefault("401", {"description": "no token, or an unknown one", **error})
            responses.setdefault("403", {"description": f"the token lacks scope `{needed.value}`", **error})
    return schema
