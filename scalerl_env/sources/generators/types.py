"""The value every generator family returns (kept apart to avoid an import cycle)."""

from __future__ import annotations

from dataclasses import dataclass

from scalerl.env.contracts.records import AssertTests, FunctionalTests, StdioTests


@dataclass(frozen=True)
class Generated:
    """One generated problem: prompt text, its reference (answer or tests) and a gold completion."""

    prompt: str
    solution: str
    answer: str | None = None
    tests: StdioTests | FunctionalTests | AssertTests | None = None
