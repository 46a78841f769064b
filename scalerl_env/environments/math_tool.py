"""`math-tool`: a math problem where the model may run Python in the sandbox before it answers.

An action holding a ```python (```py) block is a tool call: the environment runs the last such block in
the episode's sandbox (`scalerl.verifiers.code.judge.CodeVerifier.run`, with empty stdin and the
episode's per-call limits) and answers, as a `tool` message, with its stdout and stderr, cut to
`max_observation_chars`, and a line naming a time, memory or output limit that stopped it. An action
with no such block is the final answer, scored by the math verifier (the process-wide verifier pool's
`math` domain, `scalerl.verifiers.batch.default_pool`, with the problem's question, as the `math`
domain scores a sample). At `max_turns` or past `max_env_chars` the last action is scored as an answer,
whatever it holds.

Each call is stateless: one fresh sandboxed process per block, with nothing kept from earlier blocks.
A block is a whole program, so what a call shows depends on that block alone: no replayed cell can
time out, print again or draw other random numbers in a later call, and a call costs the same at the
tenth turn as at the first. The protocol line the model reads says so.

`EpisodeStep.info` counts `tool_calls` and `tool_errors` (a run that exited non-zero, was stopped at
a limit or that the sandbox failed to run); `info["call"]` describes the step's run.
"""

from __future__ import annotations

from typing import Any

from scalerl.env.contracts.episodes import EpisodeLimits
from scalerl.env.contracts.records import ProblemRecord, Verdict
from scalerl.env.environments.base import Ended, TurnEpisode, truncate
from scalerl.verifiers.code.extract import python_block
from scalerl.verifiers.verifier_config import VerifierConfig

_STOPPED = {"cpu": "the CPU time limit", "wall": "the wall-clock limit", "memory": "the memory limit",
            "output": "the output limit"}


class MathToolEpisode(TurnEpisode):
    """One `math-tool` episode (module docstring)."""

    ROLE = "tool"

    def __init__(self, problem: ProblemRecord, limits: EpisodeLimits, verifier_config: VerifierConfig | None):
        super().__init__(problem, limits, verifier_config)
        self.PROTOCOL = (
            f"You may run Python up to {limits.max_turns - 1} times: write a ```python block and you get its "
            "output. Each block runs on its own (print what you need; nothing is kept between blocks). "
            "A reply without a ```python block is your final answer." if limits.max_turns > 1 else "")

    def _respond(self, action: str) -> str | Ended:
        code = python_block(action)
        if code is None:
            return Ended("answer")
        self.info["tool_calls"] += 1
        text, call = self._run(code[: self.config.code.max_code_chars])
        self.info["call"] = call
        self.info["tool_errors"] += int(not call["ok"])
        return text

    def _run(self, code: str) -> tuple[str, dict[str, Any]]:
        """The observation text of one run and its record for `info["call"]`."""
        try:
            run, reason = self.sandbox.get().run(code, self.sandbox_limits)
        except Exception as exc:  # a host below the configured sandbox level, or a closed episode
            return "The Python tool is unavailable.", {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        if run.error:
            return "The Python tool failed to run this block.", {"ok": False, "error": run.error}
        part = self.limits.max_observation_chars // 2
        out, err = run.stdout.decode(errors="replace"), run.stderr.decode(errors="replace")
        lines = [f"stdout:\n{truncate(out, part)}" if out else "stdout: (empty)"]
        if err:
            lines.append(f"stderr:\n{truncate(err, part)}")
        if reason:
            lines.append(f"(stopped by {_STOPPED[reason]})")
        elif run.exit_code != 0:
            lines.append(f"(exit code {run.exit_code})")
        call = {"ok": run.exit_code == 0 and not reason, "exit_code": run.exit_code, "stopped": reason,
                "cpu_s": round(run.cpu_s, 4), "stdout_chars": len(out), "stderr_chars": len(err)}
        return "\n".join(lines), call

    def _score(self, action: str) -> Verdict:
        from scalerl.verifiers.batch import default_pool  # the math workers start on the first answer

        return default_pool(self.config).verify_batch([self.problem.verify_item(action)])[0]
