"""Code verifier: run extracted programs against tests in the sandbox and return Verdicts.

Flow per item: extract the program (`extract`); `no_answer` if empty. Then by test kind:
- `stdio`: one sandboxed run per case (stdin → stdout), compared in this process (`compare`).
- `functional`: one run calling `entry_point` per case; each result is serialized by the child in a
  canonical plain-data form and compared here with `expected`, which never enters the sandbox.
- `assert`: one run of the program followed by the test code; it passes only if the run exits 0 *and*
  reports a per-run random token that the harness writes after the test code's last statement, so an
  early exit (sys.exit, os._exit, SystemExit, atexit or excepthook tricks, re-exec) cannot pass.

Status: `correct` when every test passes; `unparsable` when the program does not compile; `timeout`
when the first failing test ran out of CPU time (`limits.time_s`, the judge) or of wall time
(time_s × wall_factor + 1 s); `wrong` otherwise; `error` only when the sandbox itself failed. Limits are
per test case, as judges set them: each stdio case is its own run; a functional run times each case
itself, under the whole run's budget (time_s × cases) as the outer bound; `details["timeout_case"]` names
the case that ran out. Details carry per-test results, a stderr tail, and the active sandbox layers.
`verify_many` never raises on model output and is thread-safe; at most `slots` runs execute at once.
Within one `verify_many` call, items whose extracted programs, tests and limits are equal run once (the
samples of one prompt often repeat a program in different prose); the others get a copy of that verdict
with their own id and `details["deduplicated"] = True`, a timeout included (it is not run again).
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from scalerl.env.contracts.records import AssertTests, FunctionalTests, Limits, Status, StdioTests, Verdict, VerifyItem
from scalerl.verifiers.code.compare import compare_output, functional_equal
from scalerl.verifiers.code.extract import extract_code
from scalerl.verifiers.code.sandbox import RunRequest, RunResult, Sandbox, best_level, enabled_layers
from scalerl.verifiers.code.sandbox._canon import canon, from_json
from scalerl.verifiers.verifier_config import CodeConfig

logger = logging.getLogger(__name__)
SIGXCPU, SIGKILL = 24, 9


def _entry_point(item: VerifyItem) -> str | None:
    """The function the item's tests call, if they call one (extraction prefers the block defining it)."""
    return getattr(item.tests, "entry_point", None)


class CodeVerifier:
    """Scores code items; raises `SandboxUnavailable` at construction if the host is below `config.sandbox`."""

    def __init__(self, config: CodeConfig | None = None) -> None:
        self.config = config or CodeConfig()
        self._layers = enabled_layers(self.config.sandbox, self.config.disable_layers)
        self._sandbox = Sandbox(self._layers, slots=self.config.slots)
        self._pool = ThreadPoolExecutor(max_workers=self.config.slots, thread_name_prefix="code-verify")
        self._stats_lock = threading.Lock()
        self._executions = 0
        self._kills: Counter[str] = Counter()
        self._statuses: Counter[str] = Counter()
        self._closed = False

    # ------------------------------------------------------------------------------------------ public
    def layers(self) -> dict:
        """{"level": best level met, "minimum": configured level, "layers": {name: active}}."""
        return {"level": best_level(self._layers), "minimum": self.config.sandbox, "layers": dict(self._layers)}

    def info(self) -> dict:
        with self._stats_lock:
            return {"executions": self._executions, "kills": {r: self._kills[r] for r in
                                                              ("wall", "cpu", "memory", "output")},
                    "statuses": dict(self._statuses), "sandbox": self.layers()}

    def verify_many(self, items: list[VerifyItem]) -> list[Verdict]:
        """One Verdict per item, in input order; Verdict.id = item.id."""
        if self._closed:
            raise RuntimeError("CodeVerifier is closed")
        programs = [self._extract(item) for item in items]
        owners = _first_of_each_run(items, programs)
        runs = sorted(set(owners))
        try:
            scored = dict(zip(runs, self._pool.map(lambda i: self.verify_one(items[i], programs[i]), runs)))
        finally:
            self._sandbox.idle()  # between batches no pre-forked child waits (nor holds memory)
        copies = [scored[owner].model_copy(update={"id": items[i].id,
                                                   "details": {**scored[owner].details, "deduplicated": True}})
                  if owner != i else scored[i] for i, owner in enumerate(owners)]
        with self._stats_lock:
            self._statuses.update(v.status.value for i, v in enumerate(copies) if owners[i] != i)
        return copies

    def _program(self, item: VerifyItem) -> str:
        return extract_code(item.completion, self.config.max_code_chars, _entry_point(item))

    def _extract(self, item: VerifyItem) -> str | None:
        """The item's program; None if extraction failed (its run then fails the same way, as an `error`)."""
        try:
            return self._program(item)
        except Exception:
            return None

    def verify_one(self, item: VerifyItem, code: str | None = None) -> Verdict:
        """One item's verdict; `code` is its extracted program when the caller has it already."""
        t0 = time.monotonic()
        try:
            status, details = self._verify(item, code)
        except Exception as exc:
            logger.exception("code verifier failed on item %r", item.id)
            status, details = Status.error, {"error": f"{type(exc).__name__}: {exc}"}
        details["sandbox"] = {"level": best_level(self._layers),
                              "layers": sorted(k for k, v in self._layers.items() if v)}
        with self._stats_lock:
            self._statuses[status.value] += 1
        return Verdict.of(status, details=details, elapsed_s=time.monotonic() - t0, id=item.id)

    def run(self, code: str, limits: Limits | None = None, stdin: str = "") -> tuple[RunResult, str | None]:
        """One plain run of `code` in the sandbox, as one stdio test case runs but compared with nothing:
        the run (stdout, stderr, exit) and its kill reason (cpu, wall, memory, output or None). For
        environments that show a program's output (scalerl.env.environments)."""
        if self._closed:
            raise RuntimeError("CodeVerifier is closed")
        req = self._request(code, limits or Limits(), "stdio", stdin=stdin.encode())
        res = self._execute(req)
        return res, _kill_reason(res, req)

    def close(self) -> None:
        """Kill the fork server and every child; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._sandbox.close()

    def __enter__(self) -> CodeVerifier:  # Self needs Python 3.11
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------ internals
    def _verify(self, item: VerifyItem, code: str | None = None) -> tuple[Status, dict[str, Any]]:
        if code is None:
            code = self._program(item)
        if not code:
            return Status.no_answer, {"extracted": ""}
        tests, limits = item.tests, item.limits or Limits()
        if isinstance(tests, StdioTests):
            results = self._run_stdio(code, tests, limits)
        elif isinstance(tests, FunctionalTests):
            results = self._run_functional(code, tests, limits)
        elif isinstance(tests, AssertTests):
            results = self._run_assert(code, tests, limits)
        else:
            raise TypeError("code items need tests of kind stdio, functional or assert")
        status = _status(results)
        details = {"extracted_chars": len(code), "tests": [r["public"] for r in results],
                   "passed": sum(r["public"]["passed"] for r in results), "total": len(results),
                   **_failure_output(results, self.config.stderr_tail_chars)}
        if status is Status.timeout:
            details["timeout_case"] = next(r["public"]["test"] for r in results if r["public"]["outcome"] == "timeout")
        return status, details

    def _request(self, code: str, limits: Limits, mode: str, n_cases: int = 1, **kw: Any) -> RunRequest:
        c = self.config
        cpu_s = limits.time_s * n_cases
        return RunRequest(mode=mode, code=code, cpu_s=cpu_s, wall_s=cpu_s * c.wall_factor + 1.0,
                          case_cpu_s=limits.time_s, case_wall_s=limits.time_s * c.wall_factor + 1.0,
                          memory_mb=limits.memory_mb, disk_mb=c.disk_mb, fsize_mb=c.max_file_mb,
                          nproc=c.max_processes, nofile=c.max_open_files, max_output_bytes=c.max_output_bytes,
                          **kw)

    def _execute(self, req: RunRequest) -> RunResult:
        res = self._sandbox.run(req)
        reason = _kill_reason(res, req)
        with self._stats_lock:
            self._executions += 1
            if reason:
                self._kills[reason] += 1
        return res

    def _run_stdio(self, code: str, tests: StdioTests, limits: Limits) -> list[dict]:
        results = []
        for i, case in enumerate(tests.cases[: self.config.max_tests]):
            req = self._request(code, limits, "stdio", stdin=case.input.encode())
            res = self._execute(req)
            ok = res.exit_code == 0 and compare_output(res.stdout.decode(errors="replace"), case.output,
                                                       tests.compare)
            results.append(_test_result(i, res, req, ok, crashed=res.exit_code != 0))
            if not results[-1]["public"]["passed"] and self.config.stop_at_first_failure:
                break
        return results

    def _run_functional(self, code: str, tests: FunctionalTests, limits: Limits) -> list[dict]:
        cases = tests.cases[: self.config.max_tests]
        req = self._request(code, limits, "functional", n_cases=len(cases), entry_point=tests.entry_point,
                            cases=[json.dumps([c.args, c.kwargs]) for c in cases])
        res = self._execute(req)
        got = _parse_lines(res.result_lines)
        results, stopped = [], False
        for i, case in enumerate(cases):
            line = got.get(i)
            ok = False
            if line is not None and line.get("ok") == 1:
                try:
                    ok = functional_equal(from_json(line["v"]), canon(case.expected))
                except (TypeError, ValueError, KeyError):
                    ok = False
            # A case that reported is judged on its own; the run's end (a kill, a crash) is the first
            # silent case's; later silent cases never ran.
            reason = _kill_reason(res, req) if line is None else line.get("timeout")
            r = _test_result(i, res, req, ok, crashed=line is None or line.get("ok") != 1, reason=reason,
                             ran=not stopped, case_times=line)
            stopped = stopped or line is None or "timeout" in line
            if line is not None and line.get("ok") == 0:
                r["public"]["error"] = str(line.get("err"))[:500]
            results.append(r)
            if not ok and self.config.stop_at_first_failure:
                break
        self._count_case_timeouts(got)
        return results

    def _count_case_timeouts(self, got: dict) -> None:
        kinds = [line["timeout"] for line in got.values() if line.get("timeout") in ("cpu", "wall")]
        with self._stats_lock:
            self._kills.update(kinds[:1])

    def _run_assert(self, code: str, tests: AssertTests, limits: Limits) -> list[dict]:
        token = secrets.token_hex(16)
        req = self._request(code, limits, "assert", test=tests.code, token=token)
        res = self._execute(req)
        done = any(line.get("done") == token for line in _parse_lines(res.result_lines, key="done").values())
        return [_test_result(0, res, req, res.exit_code == 0 and done, crashed=res.exit_code != 0)]


# ---------------------------------------------------------------------------------------------- helpers
def _first_of_each_run(items: list[VerifyItem], programs: list[str | None]) -> list[int]:
    """Per item, the index of the first item with the same program, tests and limits (itself if none, or if
    its program is unknown): the one whose run decides them all."""
    dumped: dict[int, str] = {}  # tests serialized once per object (a group's items often share it)

    def tests_key(tests: Any) -> str:
        key = dumped.get(id(tests))
        if key is None:
            key = dumped[id(tests)] = tests.model_dump_json() if tests is not None else ""
        return key

    first: dict[tuple, int] = {}
    return [i if code is None else
            first.setdefault((code, tests_key(item.tests), item.limits.model_dump_json() if item.limits else ""), i)
            for i, (item, code) in enumerate(zip(items, programs))]


def _parse_lines(lines: list[bytes], key: str = "i") -> dict:
    """Result-channel lines by case index (or all `done`/error lines); malformed lines are ignored."""
    out: dict = {}
    for n, raw in enumerate(lines):
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        if "compile_error" in obj:
            out["compile_error"] = obj
        elif key == "i" and isinstance(obj.get("i"), int) and obj["i"] not in out:
            out[obj["i"]] = obj
        elif key != "i":
            out[n] = obj
    return out


def _kill_reason(res: RunResult, req: RunRequest) -> str | None:
    if res.error:
        return None
    if res.killed == "output":
        return "output"
    if res.oom:
        return "memory"
    if res.cpu_s > req.cpu_s or res.exit_code in (-SIGXCPU,) or (res.exit_code == -SIGKILL and
                                                                  res.cpu_s >= int(req.cpu_s) + 1):
        return "cpu"
    if res.killed == "wall":
        return "wall"
    if b"MemoryError" in res.stderr[-2000:]:
        return "memory"
    return None


_RUN_REASON = object()  # `_test_result`'s default: the kill reason of the whole run


def _test_result(i: int, res: RunResult, req: RunRequest, ok: bool, crashed: bool, reason: Any = _RUN_REASON,
                 ran: bool = True, case_times: dict | None = None) -> dict:
    """One test's public record; `reason` overrides the run's kill reason (functional cases are timed one by
    one), `ran=False` marks a case after the one that ended the run, `case_times` its own cpu_s/wall_s."""
    reason = _kill_reason(res, req) if reason is _RUN_REASON else reason
    compile_error = any(b'"compile_error"' in line for line in res.result_lines[:1])
    if res.error:
        outcome = "error"
    elif compile_error:
        outcome = "compile_error"
    elif not ran:
        outcome, ok = "not_run", False
    elif reason in ("cpu", "wall"):
        outcome, ok = "timeout", False
    elif ok:
        outcome = "passed"
    elif reason:
        outcome = f"{reason}_limit"
    elif crashed:
        outcome = "runtime_error"
    else:
        outcome = "wrong"
    times = case_times if case_times is not None and "cpu_s" in case_times else {"cpu_s": res.cpu_s,
                                                                                   "wall_s": res.wall_s}
    public = {"test": i, "passed": bool(ok and not res.error), "outcome": outcome, "exit_code": res.exit_code,
              "cpu_s": round(times["cpu_s"], 4), "wall_s": round(times.get("wall_s", res.wall_s), 4)}
    if res.error:
        public["error"] = res.error
    elif compile_error:
        public["error"] = str(_parse_lines(res.result_lines[:1]).get("compile_error", {}).get("compile_error"))[:500]
    return {"public": public, "stderr": res.stderr, "stdout": res.stdout}


def _status(results: list[dict]) -> Status:
    for r in results:
        outcome = r["public"]["outcome"]
        if outcome == "error":
            return Status.error
        if outcome == "compile_error":
            return Status.unparsable
        if outcome == "timeout":
            return Status.timeout
        if not r["public"]["passed"]:
            return Status.wrong
    return Status.correct


def _failure_output(results: list[dict], chars: int) -> dict[str, str]:
    """stderr tail and stdout head of the first failing test (empty when all passed)."""
    for r in results:
        if not r["public"]["passed"]:
            return {"stderr_tail": r["stderr"].decode(errors="replace")[-chars:] if chars else "",
                    "stdout_head": r["stdout"][:chars].decode(errors="replace")}
    return {"stderr_tail": "", "stdout_head": ""}
