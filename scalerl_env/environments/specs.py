"""The built-in environments' specs, declared in `pyproject.toml` under `scalerl.environments` as a
plug-in declares its own. The `open` hooks import the episode code when called, so loading the
registry imports no sandbox or verifier code. The limits are `EpisodeLimits`' defaults."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scalerl.env.contracts.episodes import EnvironmentSpec, EpisodeLimits
from scalerl.env.contracts.records import ProblemRecord

if TYPE_CHECKING:
    from scalerl.env.environments.code_feedback import CodeFeedbackEpisode
    from scalerl.env.environments.math_tool import MathToolEpisode


def _check_domain(problem: ProblemRecord, name: str, domain: str) -> None:
    if problem.domain != domain:
        raise ValueError(f"environment {name!r} takes {domain} problems, not {problem.domain!r} "
                         f"(problem {problem.prompt_id})")


def open_code_feedback(problem: ProblemRecord, limits: EpisodeLimits, verifier_config: Any) -> CodeFeedbackEpisode:
    from scalerl.env.environments.code_feedback import CodeFeedbackEpisode

    _check_domain(problem, "code-feedback", "code")
    return CodeFeedbackEpisode(problem, limits, verifier_config)


def open_math_tool(problem: ProblemRecord, limits: EpisodeLimits, verifier_config: Any) -> MathToolEpisode:
    from scalerl.env.environments.math_tool import MathToolEpisode

    _check_domain(problem, "math-tool", "math")
    return MathToolEpisode(problem, limits, verifier_config)


CODE_FEEDBACK = EnvironmentSpec(
    name="code-feedback",
    domain="code",
    description="submit code, see the first failing visible test, submit again; scored on all tests",
    open=open_code_feedback,
    rank=1,
)

MATH_TOOL = EnvironmentSpec(
    name="math-tool",
    domain="math",
    description="run Python in the sandbox while solving; the answer is scored by the math verifier",
    open=open_math_tool,
    rank=0,
)
