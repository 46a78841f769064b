"""The records that cross folders (docs/design.md, "Contracts").

Guarantees: every model forbids unknown fields, so a typo in a request or a file is an error naming
the field, never silently ignored. `Verdict` is what every verifier returns; `VerifyItem` is what the
server, the CLI and `verifiers.verify_batch` take; `ProblemRecord` is what sources produce and the
curriculum and trainer consume.

Not guaranteed here: that an answer or a test is *meaningful*; verifiers decide that and report it
through `Verdict.status`.
"""

from __future__ import annotations

import hashlib
import json
from enum import Enum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError
from scalerl.env.contracts.domains import check_domain_name, domain

# The name of an installed domain (scalerl.env.contracts.domains): math, code, if, or a plug-in's.
# A domain is any installed spec's name (the built-ins and plug-ins), so the schema says string, not an enum.
Domain = Annotated[str, AfterValidator(check_domain_name), Field(
    description="an installed domain (scalerl.env.contracts.domains): math, code, if or a plug-in's",
    examples=["math"])]


def _only(schema_type: str, error: str, accepts: Any) -> Any:
    def check(value: Any) -> Any:
        if not accepts(value):
            raise PydanticCustomError(error, "Input should be a valid {kind}, not {got}",
                                      {"kind": schema_type, "got": type(value).__name__})
        return value

    return BeforeValidator(check)


# The JSON Schema types the OpenAPI document states, and nothing more: lax pydantic would read `false` as 0
# and "5" as 5, which the document calls invalid. An integral float (4096.0) is a JSON Schema integer.
# Bounds go before the validator (`Annotated[int, Field(ge=0), JSON_INTEGER] | None`), so that an
# optional field's JSON Schema says minimum/maximum.
JSON_INTEGER = _only("integer", "int_type", lambda v: not isinstance(v, (bool, str, bytes)))
JSON_NUMBER = _only("number", "float_type", lambda v: not isinstance(v, (bool, str, bytes)))
JSON_BOOLEAN = _only("boolean", "bool_type",
                     lambda v: isinstance(v, bool) or not isinstance(v, (int, float, str, bytes)))
WireInt = Annotated[int, JSON_INTEGER]
WireFloat = Annotated[float, JSON_NUMBER]
WireBool = Annotated[bool, JSON_BOOLEAN]
# The largest integer every JSON reader takes exactly (I-JSON, RFC 7493): a bound above it would let a
# reader that parses numbers as doubles call 2**63 valid.
JSON_SAFE_INT = 2**53 - 1
# A count or step in the ledger's BIGINT columns, and an index in its INTEGER columns.
LedgerBigint = Annotated[int, Field(ge=0, le=JSON_SAFE_INT), JSON_INTEGER]
LedgerInteger = Annotated[int, Field(ge=0, le=2**31 - 1), JSON_INTEGER]


class Strict(BaseModel):
    """Base of every boundary model: unknown fields are rejected; a field that is gone (`GONE`: its name
    and what to use instead) is rejected with the replacement named."""

    model_config = ConfigDict(extra="forbid")
    GONE: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _gone_fields(cls, data: Any) -> Any:
        for name, instead in cls.GONE.items():
            if isinstance(data, dict) and name in data:
                raise ValueError(f"{name} is gone: {instead}")
        return data


class Status(str, Enum):
    """Outcome of scoring one completion. `error` is the verifier's failure, never the model's."""

    correct = "correct"
    wrong = "wrong"
    no_answer = "no_answer"
    unparsable = "unparsable"
    timeout = "timeout"
    error = "error"


class RewardTable(Strict):
    """Status → reward. Reward shaping is this table, not scattered `if`s."""

    correct: float = 1.0
    wrong: float = 0.0
    no_answer: float = 0.0
    unparsable: float = 0.0
    timeout: float = 0.0
    error: float = 0.0

    def reward(self, status: Status | str) -> float:
        return float(getattr(self, Status(status).value))


DEFAULT_REWARDS = RewardTable()


class Verdict(Strict):
    """The result of scoring one completion."""

    status: Status
    reward: WireFloat
    details: dict[str, Any] = Field(default_factory=dict)
    elapsed_s: WireFloat = 0.0
    id: str | None = None

    @property
    def correct(self) -> bool:
        return self.status is Status.correct

    @classmethod
    def of(
        cls,
        status: Status | str,
        *,
        details: dict[str, Any] | None = None,
        elapsed_s: float = 0.0,
        rewards: RewardTable = DEFAULT_REWARDS,
        id: str | None = None,
    ) -> Verdict:
        status = Status(status)
        return cls(
            status=status, reward=rewards.reward(status), details=details or {}, elapsed_s=elapsed_s, id=id
        )


# ---------------------------------------------------------------------------------------------- code tests
class StdioCase(Strict):
    input: str = ""
    output: str


class FunctionalCase(Strict):
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    expected: Any = None


class StdioTests(Strict):
    """Program reads stdin, writes stdout; compared with `compare`."""

    kind: Literal["stdio"] = "stdio"
    cases: list[StdioCase] = Field(min_length=1)
    compare: str = Field(
        default="tokens", pattern=r"^(tokens|exact|lines|float:[0-9.eE+-]+)$",
        description="tokens (default) | exact | lines | float:<tol>",
    )


class FunctionalTests(Strict):
    """Call `entry_point(*args, **kwargs)` and compare the (serialized) result with `expected`."""

    kind: Literal["functional"] = "functional"
    entry_point: str = Field(min_length=1)
    cases: list[FunctionalCase] = Field(min_length=1)


class AssertTests(Strict):
    """A test program appended to the solution (HumanEval/MBPP style); passing means it ran to the end."""

    kind: Literal["assert"] = "assert"
    code: str = Field(min_length=1)
    entry_point: str | None = None


CodeTests = Annotated[StdioTests | FunctionalTests | AssertTests, Field(discriminator="kind")]


class Limits(Strict):
    time_s: WireFloat = Field(default=2.0, gt=0, le=60, description="CPU-time limit per test, seconds")
    memory_mb: WireInt = Field(default=512, ge=16, le=8192, description="address-space limit, MiB")


def _check_reference(record, noun: str):
    """The reference the record's domain needs (its spec's `check`): the one rule for items and problems."""
    domain(record.domain).check(record, noun)
    return record


# ---------------------------------------------------------------------------------------------- verify item
QUESTION_MAX_CHARS = 100_000  # a problem statement, not a document; bounds what a request can carry


class VerifyItem(Strict):
    """One completion to score, against the reference its domain needs (`answer` or `tests`)."""

    id: str = ""
    domain: Domain
    completion: str
    answer: str | None = None
    tests: CodeTests | None = None
    limits: Limits | None = None
    question: str | None = Field(default=None, max_length=QUESTION_MAX_CHARS, description=(
        "the problem text, optional: the math verifier then also checks the answer forms it states "
        "(\"as a common fraction\", \"in the form y = mx + b\"; docs/math.md)"))
    prompt_id: str | None = None
    # Optional training context carried into the ledger when a prompt_id is present. Bounds fit the
    # ledger's columns (BIGINT, INTEGER): out-of-range values are rejected here, naming the field.
    step: LedgerBigint | None = None
    policy_version: LedgerBigint | None = None
    sample_index: LedgerInteger | None = None
    truncated: WireBool | None = None
    completion_tokens: LedgerBigint | None = None

    @model_validator(mode="after")
    def _needs_reference(self) -> VerifyItem:
        return _check_reference(self, "items")


# ---------------------------------------------------------------------------------------------- problems
class ChatMessage(Strict):
    role: Literal["system", "user", "assistant"]
    content: str


def normalize_prompt(text: str) -> str:
    """Whitespace-insensitive form used for the stable prompt id."""
    return " ".join(text.split())


def make_prompt_id(source: str, prompt: str | list[ChatMessage] | list[dict]) -> str:
    """Stable hash of source + normalized prompt text: same problem, same id, on any machine."""
    if isinstance(prompt, str):
        text = normalize_prompt(prompt)
    else:
        msgs = [m.model_dump() if isinstance(m, ChatMessage) else m for m in prompt]
        text = json.dumps([[m["role"], normalize_prompt(m["content"])] for m in msgs], ensure_ascii=False)
    digest = hashlib.sha256(f"{source}\x00{text}".encode()).hexdigest()
    return digest[:16]


class ProblemRecord(Strict):
    """A training/evaluation problem: what sources produce and the curriculum and trainer consume."""

    prompt_id: str
    domain: Domain
    source: str
    prompt: list[ChatMessage] = Field(min_length=1)
    answer: str | None = None
    tests: CodeTests | None = None
    limits: Limits | None = Field(default=None, description="per-problem code limits (e.g. TACO time limits)")
    difficulty_prior: float | None = Field(default=None, ge=0.0, le=1.0)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _needs_reference(self) -> ProblemRecord:
        return _check_reference(self, "problems")

    def verify_item(self, completion: str, **context: Any) -> VerifyItem:
        """The verify item scoring `completion` against this problem; it carries the problem's last user
        message as `question`, so the answer forms the problem states are checked (docs/math.md)."""
        return VerifyItem(
            id=context.pop("id", self.prompt_id), domain=self.domain, completion=completion,
            answer=self.answer, tests=self.tests, limits=self.limits, prompt_id=self.prompt_id,
            question=context.pop("question", self.question()), **context,
        )

    def question(self) -> str | None:
        """The last user message, as the policy read it; its tail when longer than a verify item carries
        (answer forms are stated at the end)."""
        users = [m.content for m in self.prompt if m.role == "user"]
        return users[-1][-QUESTION_MAX_CHARS:] if users else None
