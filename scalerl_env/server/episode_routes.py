"""Multi-turn episodes over HTTP (`/v1/episodes`): create, step, read, close; the store that holds them.

    POST   /v1/episodes                   {environment, problem, limits?}  → episode id + first step
    POST   /v1/episodes/{id}/step         {action, turn}                   → the next step
    GET    /v1/episodes/{id}                                               → the transcript so far
    DELETE /v1/episodes/{id}                                               → closed

Guarantees:
- Episode ids are `secrets.token_urlsafe(24)`: unguessable, so an id is the episode's capability.
- A step names the turn it answers; a turn already applied (the client's retry after a lost answer) gets
  the result it got first and is not applied again; a retried create with the same `Idempotency-Key`
  gets the same episode. One episode's calls run one at a time (a lock per episode); environment work
  runs on the store's own threads (`episodes.concurrent_steps`), never on the event loop.
- At most `episodes.max_open` episodes are open (503 + Retry-After past it). An episode untouched for
  `episodes.idle_timeout_s`, closed by DELETE, or open at shutdown is closed (`Episode.close`: its
  sandboxes freed); later calls on it get 410 naming why (the last `GONE_KEPT` ids are remembered,
  older ones get 404).
- A finished episode is recorded once, before its last step is answered, through the server's
  recording path (`scalerl.env.server.owner_link.record`): one attempt of its problem, the verdict's
  `details` carrying `turns`, `tool_calls` and `environment`. The environment's resources are freed at
  once; the transcript stays readable until DELETE or the idle timeout.

Not guaranteed: episodes survive a restart (they live in this process: a client holding several server
URLs must send an episode's calls to the one that created it); a step answered 503 because the ledger
owner did not commit may already be applied (its retry records it and gets the same result).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from scalerl.env.contracts.episodes import (
    EnvironmentSpec,
    Episode,
    EpisodeLimits,
    EpisodeMessage,
    EpisodeStep,
    UnknownEnvironmentError,
    environment,
)
from scalerl.env.contracts.records import ProblemRecord, Verdict
from scalerl.env.server.episode_models import (
    EPISODES_PATH,
    EpisodeClosed,
    EpisodeCreated,
    EpisodeCreateRequest,
    EpisodeState,
    EpisodeStepRequest,
)
from scalerl.env.server.models import IDEMPOTENCY_HEADER, error_responses
from scalerl.env.server.owner_link import OwnerRefused, OwnerUnavailable, record
from scalerl.env.server.routes import _idempotency_key

logger = logging.getLogger(__name__)
GONE_KEPT = 4096  # closed episode ids remembered, so a late call hears why (410) instead of 404


@dataclass
class _Open:
    """One episode the server holds. `steps[t]` answered the state after t actions (`steps[0]`: reset)."""

    id: str
    environment: str
    problem: ProblemRecord
    limits: EpisodeLimits
    create_key: str | None
    lock: threading.Lock = field(default_factory=threading.Lock)
    opened: threading.Event = field(default_factory=threading.Event)  # set when the create's open has finished
    episode: Episode | None = None
    steps: list[EpisodeStep] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    failed: HTTPException | None = None
    closed: str | None = None  # why, once closed; steps then get 410
    recorded: bool = False
    touched: float = field(default_factory=time.monotonic)

    @property
    def done(self) -> bool:
        return bool(self.steps) and self.steps[-1].done


@dataclass(frozen=True)
class _Gone:
    reason: str
    turn: int
    done: bool
    create_key: str | None


class EpisodeStore:
    """The open episodes of one server; its methods are called on the event loop."""

    def __init__(self, state: Any) -> None:
        self.state = state  # scalerl.env.server.state.ServerState: ledger, owner link, verifier config, metrics
        self.config = state.config.episodes
        self.open: dict[str, _Open] = {}
        self.gone: OrderedDict[str, _Gone] = OrderedDict()
        self.keys: dict[str, str] = {}  # create Idempotency-Key → episode id
        self.executor = ThreadPoolExecutor(self.config.concurrent_steps, thread_name_prefix="scalerl-episode")
        self._sweeper: asyncio.Task | None = None

    # ------------------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

    async def stop(self) -> None:
        """Close every open episode (freeing sandboxes) and wait for the environment threads."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        for rec in list(self.open.values()):
            self._retire(rec, "the server shut down")
        await asyncio.to_thread(self.executor.shutdown, wait=True)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(min(self.config.idle_timeout_s / 4, 5.0))
            self.sweep()

    def sweep(self) -> None:
        """Close the episodes idle past `idle_timeout_s`; one in a call (its lock held) is not idle."""
        cutoff = time.monotonic() - self.config.idle_timeout_s
        for rec in [r for r in self.open.values() if r.touched < cutoff and not r.lock.locked()]:
            self._retire(rec, f"closed after {self.config.idle_timeout_s:g} s without a call "
                              "(episodes.idle_timeout_s)")

    def _retire(self, rec: _Open, reason: str) -> None:
        """Forget `rec` (remembering why) and free its environment on a thread, after any call in progress."""
        self.open.pop(rec.id, None)
        self.gone[rec.id] = _Gone(reason, len(rec.actions), rec.done, rec.create_key)
        while len(self.gone) > GONE_KEPT:
            self.keys.pop(self.gone.popitem(last=False)[1].create_key, None)
        self.executor.submit(_release, rec, reason)

    # ------------------------------------------------------------------------------------- calls
    async def create(self, body: EpisodeCreateRequest, key: str | None) -> EpisodeCreated:
        self.sweep()
        if key is not None and key in self.keys:
            rec = self._find(self.keys[key])
            if (rec.environment, rec.problem.prompt_id) != (body.environment, body.problem.prompt_id):
                raise HTTPException(409, f"{IDEMPOTENCY_HEADER} {key!r} created an episode of {rec.environment!r} "
                                         f"on prompt {rec.problem.prompt_id!r}, not this one")
            await self._run(_reopened, rec)
            return _created(rec)
        spec = _spec(body)
        if self.state.draining:
            raise self._busy("the server is shutting down")
        if len(self.open) >= self.config.max_open:
            raise self._busy(f"{len(self.open)} episodes open; limit episodes.max_open={self.config.max_open}")
        limits = _limits(spec.limits, body.limits)
        rec = _Open(secrets.token_urlsafe(24), spec.name, body.problem, limits, key)
        self.open[rec.id] = rec
        if key is not None:
            self.keys[key] = rec.id
        try:
            await self._run(self._open_episode, rec, spec)
        except BaseException:  # failed, or this request was cancelled while its open runs on: free it after
            self.open.pop(rec.id, None)
            self.keys.pop(key, None)
            self.executor.submit(_release, rec, "its create did not finish")
            raise
        return _created(rec)

    async def step(self, episode_id: str, body: EpisodeStepRequest) -> EpisodeStep:
        rec = self._find(episode_id)
        rec.touched = time.monotonic()
        try:
            result = await self._run(self._step, rec, body.turn, body.action)
        except _EnvironmentFailed as exc:
            self._retire(rec, str(exc))
            raise HTTPException(500, f"{exc}; the episode is closed") from None
        rec.touched = time.monotonic()
        return result

    async def close(self, episode_id: str) -> EpisodeClosed:
        rec = self.open.get(episode_id)
        if rec is not None:
            self._retire(rec, "closed by DELETE")
        gone = self.gone.get(episode_id)
        if gone is None:
            raise HTTPException(404, f"no episode {episode_id!r} on this server")
        return EpisodeClosed(episode_id=episode_id, turn=gone.turn, done=gone.done)

    def read(self, episode_id: str) -> EpisodeState:
        rec = self._find(episode_id)
        steps, actions = list(rec.steps), list(rec.actions)
        messages = list(steps[0].observation) if steps else []
        for action, after in zip(actions, steps[1:]):
            messages += [EpisodeMessage(role="assistant", content=action), *after.observation]
        last = steps[-1] if steps else EpisodeStep()
        return EpisodeState(episode_id=rec.id, environment=rec.environment, prompt_id=rec.problem.prompt_id,
                            turn=len(actions), done=last.done, reward=last.reward, limits=rec.limits,
                            messages=messages, info=last.info)

    def _find(self, episode_id: str) -> _Open:
        rec = self.open.get(episode_id)
        if rec is not None:
            return rec
        gone = self.gone.get(episode_id)
        if gone is not None:
            raise HTTPException(410, f"episode {episode_id!r} is closed: {gone.reason}")
        raise HTTPException(404, f"no episode {episode_id!r} on this server (never created, or closed long ago)")

    def _busy(self, detail: str) -> HTTPException:
        self.state.metrics.rejected.labels(reason="overloaded").inc()
        return HTTPException(503, detail, headers={"Retry-After": str(self.state.config.limits.retry_after_s)})

    async def _run(self, work: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, work, *args)

    # ------------------------------------------------------------------------------------- environment threads
    def _open_episode(self, rec: _Open, spec: EnvironmentSpec) -> None:
        with rec.lock:
            try:
                rec.episode = spec.open(rec.problem, rec.limits, self.state.config.verifier)
                rec.steps.append(rec.episode.reset())
            except ValueError as exc:  # the environment cannot take this problem: the caller's to fix
                rec.failed = _field_error(("body", "problem"), f"{spec.name}: {exc}")
            except Exception as exc:
                logger.exception("environment %s failed to open an episode", spec.name)
                rec.failed = HTTPException(500, f"environment {spec.name!r} failed to open the episode: "
                                                f"{type(exc).__name__}: {exc}")
            finally:
                rec.opened.set()
            if rec.failed is not None:
                _release_locked(rec, "failed to open")
                raise rec.failed
            if rec.done:  # an episode that ended at reset: freed and recorded like one ended by a step
                _release_locked(rec, None)
                self._record(rec)

    def _step(self, rec: _Open, turn: int, action: str) -> EpisodeStep:
        with rec.lock:
            if rec.closed is not None:
                raise HTTPException(410, f"episode {rec.id!r} is closed: {rec.closed}")
            applied = len(rec.actions)
            if turn < applied:  # a retry: answered with what the first send got
                if rec.actions[turn] != action:
                    raise HTTPException(409, f"turn {turn} was applied with another action; the next is {applied}")
                if rec.done and not rec.recorded:
                    self._record(rec)
                return rec.steps[turn + 1]
            if rec.done:
                raise HTTPException(409, f"the episode ended at turn {applied}; read it (GET) or close it (DELETE)")
            if turn > applied:
                raise HTTPException(409, f"turn {turn} is ahead: {applied} actions are applied, the next turn is "
                                         f"{applied}")
            try:
                result = rec.episode.step(action)
            except Exception as exc:
                logger.exception("environment %s failed at turn %d", rec.environment, turn)
                raise _EnvironmentFailed(f"environment {rec.environment!r} failed at turn {turn}: "
                                         f"{type(exc).__name__}: {exc}") from None
            rec.actions.append(action)
            rec.steps.append(result)
            if result.done:
                _release_locked(rec, None)  # free sandboxes now; the transcript stays readable
                self._record(rec)
            return result

    def _record(self, rec: _Open) -> None:
        """The finished episode as one attempt of its problem (the recording path of every verdict)."""
        state = self.state
        final = rec.steps[-1]
        verdict = final.verdict or Verdict.of("error", details={"error": "the environment ended without a verdict"})
        details = {**verdict.details, "turns": final.turn, "tool_calls": int(final.info.get("tool_calls", 0)),
                   "environment": rec.environment}
        verdict = verdict.model_copy(update={"details": details, "id": rec.id})
        state.metrics.observe([rec.problem.domain], [verdict])
        if state.ledger is not None or state.owner is not None:
            item = rec.problem.verify_item(rec.actions[-1] if rec.actions else "", id=rec.id)
            try:
                added = record(state.ledger, state.owner, [item], [verdict], f"episode:{rec.id}")
            except OwnerUnavailable as exc:
                raise HTTPException(503, f"{exc}; retry this step (same turn): it is applied, not yet recorded",
                                    headers={"Retry-After": str(state.config.limits.retry_after_s)}) from None
            except OwnerRefused as exc:
                raise HTTPException(exc.status, f"ledger owner: {exc.detail}") from None
            if added and state.owner is None:
                state.metrics.ledger_records.inc(added)
        rec.recorded = True


class _EnvironmentFailed(RuntimeError):
    """The environment raised in `step`: the episode cannot go on (answered 500, the episode closed)."""


def _release(rec: _Open, reason: str) -> None:
    with rec.lock:
        _release_locked(rec, reason)


def _release_locked(rec: _Open, reason: str | None) -> None:
    """Free the episode's environment (idempotent); with a reason, later steps get 410."""
    if reason is not None:
        rec.closed = reason
    episode, rec.episode = rec.episode, None
    if episode is not None:
        try:
            episode.close()
        except Exception:  # freeing failed: logged, the episode is gone either way
            logger.exception("environment %s failed to close episode %s", rec.environment, rec.id)


def _reopened(rec: _Open) -> None:
    """A retried create: wait for the first create's open, and fail as it failed."""
    rec.opened.wait()
    if rec.failed is not None:
        raise rec.failed


def _spec(body: EpisodeCreateRequest) -> EnvironmentSpec:
    try:
        spec = environment(body.environment)
    except UnknownEnvironmentError as exc:
        raise HTTPException(404, f"environment: {exc}") from None
    if body.problem.domain != spec.domain:
        raise _field_error(("body", "problem", "domain"), f"environment {spec.name!r} takes problems of domain "
                                                            f"{spec.domain!r}, not {body.problem.domain!r}")
    return spec


def _limits(own: EpisodeLimits, given: EpisodeLimits | None) -> EpisodeLimits:
    """The environment's limits with the fields the request gave replaced."""
    if given is None:
        return own
    return EpisodeLimits.model_validate({**own.model_dump(), **given.model_dump(include=given.model_fields_set)})


def _created(rec: _Open) -> EpisodeCreated:
    return EpisodeCreated(episode_id=rec.id, environment=rec.environment, limits=rec.limits, step=rec.steps[0])


def _field_error(loc: tuple, msg: str) -> RequestValidationError:
    return RequestValidationError([{"loc": loc, "msg": msg, "type": "value_error"}])


# ----------------------------------------------------------------------------------------------- routes
router = APIRouter(prefix=EPISODES_PATH, tags=["episodes"])
DESCRIBED = {
    400: "malformed body (invalid UTF-8, bad Content-Length)",
    404: "no such episode, or (`detail` starting with `environment:`) an environment that is not installed; "
         "the detail lists the installed ones",
    409: "a turn that does not follow the last one, a retried turn with another action, a step after the end, "
         "or an Idempotency-Key that created another episode",
    410: "the episode is closed (by DELETE, after episodes.idle_timeout_s idle, at shutdown): `detail` says why",
    413: "body larger than limits.max_body_bytes",
    500: "the environment failed (logged); the episode is closed",
    503: "episodes.max_open episodes are open, the server is shutting down, or (replica) the ledger owner has not "
         "committed the finished episode; retry after Retry-After seconds (a step with the same turn)",
}
_CREATE_KEY = {"parameters": [{"name": IDEMPOTENCY_HEADER, "in": "header", "required": False, "schema": {
    "type": "string", "minLength": 1, "maxLength": 200}, "description":
    "names this create: a retry with the same key gets the same episode"}]}


def _store(request: Request) -> EpisodeStore:
    return request.app.state.episodes


@router.post("", response_model=EpisodeCreated, responses=error_responses(DESCRIBED, 400, 404, 409, 410, 413,
                                                                           500, 503), openapi_extra=_CREATE_KEY)
async def create_episode(body: EpisodeCreateRequest, request: Request) -> EpisodeCreated:
    """Open an episode of an installed environment on one problem; the answer holds the first observation."""
    return await _store(request).create(body, _idempotency_key(request))


@router.post("/{episode_id}/step", response_model=EpisodeStep,
             responses=error_responses(DESCRIBED, 400, 404, 409, 410, 413, 500, 503))
async def step_episode(episode_id: str, body: EpisodeStepRequest, request: Request) -> EpisodeStep:
    """Apply the model's action of turn `turn`; a turn already applied is answered as it was the first time."""
    try:
        body.action.encode("utf-8")
    except UnicodeEncodeError as exc:  # a JSON escape can smuggle a lone surrogate past the UTF-8 check
        raise _field_error(("body", "action"), f"lone surrogate at character {exc.start}") from None
    return await _store(request).step(episode_id, body)


@router.get("/{episode_id}", response_model=EpisodeState, responses=error_responses(DESCRIBED, 404, 410))
async def read_episode(episode_id: str, request: Request) -> EpisodeState:
    """The episode's transcript and counters so far (does not count as activity for the idle timeout)."""
    return _store(request).read(episode_id)


@router.delete("/{episode_id}", response_model=EpisodeClosed, responses=error_responses(DESCRIBED, 404))
async def close_episode(episode_id: str, request: Request) -> EpisodeClosed:
    """Close the episode and free its sandboxes; closing a closed episode answers the same."""
    return await _store(request).close(episode_id)
