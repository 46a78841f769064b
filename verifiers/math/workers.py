"""Persistent math worker processes with a hard per-item deadline enforced by the parent.

`MathWorkerPool(config)` starts `config.workers` processes (`sys.executable`, spawned fresh, never
forked from a threaded parent), each driven by one parent thread. A request is a (gold, pred) pair;
requests of one reference answer queue for one worker (`scalerl.verifiers.math.dispatch`: its parse memos
then parse that reference once; idle drivers take work from busy ones); the driver takes up to
`DISPATCH_BATCH` queued requests, writes them to its worker in one write (they fit the pipe buffer, so
the write never blocks), then reads the replies in order, waiting at most
`timeout_s` for each from the moment the previous reply came (when the worker started it). Past that
the worker is killed (SIGKILL) and replaced, the request is answered `timeout`, and the requests of
the batch it never started go back to the queue. A worker that dies on its own is replaced too and
its request is answered `error` (the verifier failed, not the model).

Guarantees: every submitted request resolves (answer, `timeout`, or `error`), including on `close()`;
no request runs longer than `timeout_s` inside a worker (queueing time is not counted: the deadline
is per item, from the moment a worker receives it); kills are counted by reason for metrics.
Non-guarantees: start-up (math-verify import and warm-up, ~1-3 s per worker) is not bounded by the
deadline; requests queue while workers warm.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from concurrent.futures import Future

from scalerl.verifiers.math.dispatch import Dispatcher, home
from scalerl.verifiers.math.worker import SETTINGS_FIELDS
from scalerl.verifiers.verifier_config import MathConfig

logger = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 120.0
DISPATCH_BATCH = 16  # requests a driver sends its worker in one write (replies still come one by one)
DISPATCH_BYTES = 60_000  # below the 64 KiB pipe buffer: the write never blocks
MAX_START_FAILURES = 3
_BOOT = "from scalerl.verifiers.math.worker import main; main()"


class WorkerDied(Exception):
    """The worker process exited or closed its pipe."""


class _Worker:
    """One worker process and the line-framed pipe to it."""

    def __init__(self, config: MathConfig):
        boot = {"settings": {name: getattr(config, name) for name in SETTINGS_FIELDS},
                "memory_mb": config.worker_memory_mb,
                "soft_timeout_s": config.timeout_s * (config.soft_timeout_fraction or 0.0)}
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOT, json.dumps(boot)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, bufsize=0,
            start_new_session=True,  # a Ctrl-C in the terminal goes to the parent, which cleans up
        )
        self._buf = b""

    def wait_ready(self, timeout_s: float) -> dict:
        return self._read_line(time.monotonic() + timeout_s)

    def send(self, lines: bytes) -> None:
        """Write request lines (one JSON object each) in one call."""
        try:
            self.proc.stdin.write(lines)
        except (BrokenPipeError, OSError, ValueError) as exc:
            raise WorkerDied(f"write failed: {exc}") from exc

    def read_reply(self, timeout_s: float) -> dict | None:
        """The next reply, or None when `timeout_s` passed first (the caller kills the worker)."""
        return self._read_line(time.monotonic() + timeout_s)

    def _read_line(self, deadline: float) -> dict | None:
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:  # close() from another thread may shut the pipe under us: that is a dead worker
                fd = self.proc.stdout.fileno()
                readable, _, _ = select.select([fd], [], [], remaining)
                if not readable:
                    return None
                chunk = os.read(fd, 1 << 16)
            except (OSError, ValueError) as exc:
                raise WorkerDied(f"worker pipe closed: {exc}") from exc
            if not chunk:
                raise WorkerDied(f"worker exited with code {self.proc.poll()}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


class _Request:
    __slots__ = ("future", "home", "line")

    def __init__(self, gold: str, pred: str, plain: bool, slot: int):
        body = {"gold": gold, "pred": pred, **({"plain": True} if plain else {})}
        self.line = (json.dumps(body) + "\n").encode()
        self.home = slot  # the worker whose queue it joins (`scalerl.verifiers.math.dispatch.home`)
        self.future = Future()


class MathWorkerPool:
    """`submit(gold, pred) -> Future[dict]` over persistent, deadline-guarded worker processes."""

    def __init__(self, config: MathConfig):
        self.config = config
        self._queue = Dispatcher(config.workers, DISPATCH_BATCH, DISPATCH_BYTES)
        self._lock = threading.Lock()
        self._closed = False
        self._alive = 0
        self._warm: set[int] = set()
        self._workers: dict[int, _Worker] = {}
        self._started: set[int] = set()  # driver slots that had a warm worker once (later starts are restarts)
        self.stats = {"restarts": 0, "kills": {"timeout": 0, "crash": 0}, "requests": 0,
                      "start_failures": 0, "startup_s": []}
        self._threads = [threading.Thread(target=self._drive, args=(i,), name=f"math-driver-{i}", daemon=True)
                         for i in range(config.workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, gold: str, pred: str, *, plain: bool = False) -> Future:
        """The worker's reply for the pair; `plain`: plain math-verify on `pred`, a whole completion
        (the second opinion, `scalerl.verifiers.math.worker.plain_math_verify`)."""
        request = _Request(gold, pred, plain, home(gold, self.config.workers))
        with self._lock:
            if self._closed:
                request.future.set_result({"status": "error", "reason": "verifier pool is closed",
                                           "elapsed_s": 0.0})
                return request.future
            self.stats["requests"] += 1
            self._queue.put(request)  # under the lock: queued before close() marks closed, or refused
        return request.future

    def ready(self) -> bool:
        with self._lock:
            return not self._closed and len(self._warm) == self.config.workers

    def info(self) -> dict:
        with self._lock:
            return {"workers": self.config.workers, "alive": self._alive, "warm": len(self._warm),
                    "restarts": self.stats["restarts"], "kills": dict(self.stats["kills"]),
                    "requests": self.stats["requests"], "start_failures": self.stats["start_failures"],
                    "queued": self._queue.queued(), "timeout_s": self.config.timeout_s,
                    "startup_s": list(self.stats["startup_s"][-8:]),
                    "pids": sorted(w.proc.pid for w in self._workers.values())}

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._workers.values())
        self._queue.close()
        for worker in workers:
            worker.kill()  # a driver blocked on a long request sees WorkerDied and answers `error`
        for thread in self._threads:
            thread.join(timeout=5)
        self._drain("verifier pool closed before this item ran")

    def _drain(self, reason: str) -> None:
        for request in self._queue.drain():
            if not request.future.done():
                request.future.set_result({"status": "error", "reason": reason, "elapsed_s": 0.0})

    # ------------------------------------------------------------------------------------ driver side
    def _drive(self, index: int) -> None:
        worker = self._start(index)
        while True:
            batch = self._queue.take(index)
            if batch is None:
                break
            if self._closed:
                for request in batch:
                    request.future.set_result({"status": "error", "reason": "verifier pool closed",
                                               "elapsed_s": 0.0})
                break
            if worker is None:
                worker = self._start(index)
            if worker is None:
                for request in batch:
                    request.future.set_result({"status": "error", "elapsed_s": 0.0,
                                               "reason": "math worker could not be started (see logs)"})
                continue
            worker, unstarted = self._run_batch(index, worker, batch)
            self._queue.put_back(unstarted)  # never reached the killed worker: queued again, not failed
        if worker is not None:
            self._retire(index, worker)

    def _run_batch(self, index: int, worker: _Worker, batch: list[_Request]) -> tuple[_Worker | None, list]:
        """Send the batch in one write, then read the replies in order. Each item's deadline runs from the
        previous reply (when the worker starts it). On a kill, the items after the culprit are returned."""
        timeout_s = self.config.timeout_s
        try:
            worker.send(b"".join(request.line for request in batch))
        except WorkerDied as exc:
            self._count_kill("crash", index, worker)
            batch[0].future.set_result({"status": "error", "reason": f"math worker crashed: {exc}",
                                        "elapsed_s": 0.0})
            return None, batch[1:]
        for i, request in enumerate(batch):
            reply, killed = self._read_reply(index, worker, timeout_s)
            request.future.set_result(reply)
            if killed:
                return None, batch[i + 1:]
        return worker, []

    def _read_reply(self, index: int, worker: _Worker, timeout_s: float) -> tuple[dict, bool]:
        """(reply, whether the worker was killed): a crash answers `error`, a missed deadline `timeout`."""
        start = time.perf_counter()
        try:
            reply = worker.read_reply(timeout_s)
        except (WorkerDied, ValueError) as exc:
            self._count_kill("crash", index, worker)
            return {"status": "error", "reason": f"math worker crashed: {exc}",
                    "elapsed_s": time.perf_counter() - start}, True
        if reply is None:
            self._count_kill("timeout", index, worker)
            return {"status": "timeout", "reason": f"hard deadline {timeout_s}s passed; worker killed",
                    "elapsed_s": time.perf_counter() - start}, True
        return reply, False

    def _count_kill(self, reason: str, index: int, worker: _Worker) -> None:
        with self._lock:
            closing = self._closed
            if not closing:
                self.stats["kills"][reason] += 1
        if not closing:
            logger.warning("math worker %d (pid %d) killed: %s", index, worker.proc.pid, reason)
        self._retire(index, worker)

    def _retire(self, index: int, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            if self._workers.get(index) is worker:
                del self._workers[index]
                self._alive -= 1
                self._warm.discard(index)

    def _start(self, index: int) -> _Worker | None:
        for attempt in range(MAX_START_FAILURES):
            with self._lock:
                if self._closed:
                    return None
                replacing = index in self._started
            try:
                worker = _Worker(self.config)
            except OSError as exc:
                logger.error("cannot spawn math worker: %s", exc)
                return None
            with self._lock:
                closed = self._closed  # close() ran while this worker was spawning: it cannot see it
                if not closed:
                    self._workers[index] = worker
                    self._alive += 1
            if closed:
                worker.kill()
                return None
            try:
                hello = worker.wait_ready(STARTUP_TIMEOUT_S)
            except (WorkerDied, ValueError) as exc:
                hello = None
                if not self._closed:  # a worker killed by close() while warming is no failure
                    logger.error("math worker %d failed to start (attempt %d): %s", index, attempt + 1, exc)
            if hello and "ready" in hello:
                with self._lock:
                    self._warm.add(index)
                    self._started.add(index)
                    self.stats["restarts"] += int(replacing)
                    self.stats["startup_s"].append(round(hello.get("startup_s", 0.0), 3))
                return worker
            with self._lock:
                self.stats["start_failures"] += 1
            self._retire(index, worker)
        return None
