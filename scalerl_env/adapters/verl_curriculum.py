"""veRL drop-in: a dataset class (`data.custom_cls`) whose items are the prompts the curriculum plans.

    data.custom_cls.path=$(python -c "import scalerl.env.adapters.verl_curriculum as m; print(m.__file__)")
    data.custom_cls.name=CurriculumRLHFDataset
    data.dataloader_num_workers=0
    +data.curriculum.ledger=runs/verl/curriculum.duckdb
    +data.curriculum.domain_weights={math:3,code:1}
    +data.curriculum.settings={priority:{mode:learnability}}

veRL 0.9.1 builds its train dataset through `create_rl_dataset` (which honours `data.custom_cls`) and
walks it with a plain random or sequential sampler in batches of `data.train_batch_size`. This class is
veRL's `RLHFDataset` (same rows, same item layout) except that `__getitem__` ignores the index it is
given: it returns the next prompt of the curriculum's plan, drawn `data.train_batch_size` at a time,
so each veRL batch is one draw. The rows are the problem table; every row needs
`extra_info.prompt_id` (text or integer, unique) — the id the reward adapter passes to the ledger.
`__len__` is the table's length, so veRL's epoch and step counts are unchanged.

Guarantees
- A prompt retired in the ledger before a draw is not in it; held-out prompts are never drawn; with
  `data.curriculum.settings` the `curriculum.*` strategies of `scalerl train` choose the order.
- Where the outcomes come from: with `data.curriculum.url` (a set of the reward server's curriculum,
  registered from these rows) the server's ledger records every verdict the reward adapter scores with
  `extra_info.prompt_id`, so a stock veRL run needs no extra wiring. With a local `ledger`, veRL's
  reward workers (other processes) cannot reach it: the caller reports (`dataset.curriculum.report`).
- Only `data.train_files` are drawn through the curriculum; veRL builds its validation dataset with
  the same class, and other files are read row by row as `RLHFDataset` does.
Not guaranteed: dataloader workers (`data.dataloader_num_workers` > 0 is refused: each worker would
draw from its own copy); that a prompt retired between its draw and its rollout is taken back
(draws are made one batch at a time, as late as veRL's dataloader asks).

veRL loads this file by path (`load_extern_type`), outside the package's module names, so it does
not use postponed annotations: pydantic resolves the settings model's field types at definition.
"""


from collections import deque
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from pydantic import model_validator
from scalerl.curriculum.strategy_config import StrategyConfig
from scalerl.env.adapters import id_text
from scalerl.env.adapters.curriculum_source import (
    CurriculumSource,
    LocalCurriculum,
    ServiceCurriculum,
    problem_record,
    set_records,
)
from scalerl.env.contracts.domains import domain_for_ability
from scalerl.env.contracts.records import ProblemRecord, Strict
from verl.utils.dataset.rl_dataset import RLHFDataset


class VerlCurriculumSettings(Strict):
    """`data.curriculum.*`: where the plan lives (a local `ledger`, or the reward server at `url`, set
    `set`) and how it is drawn."""

    ledger: str | None = None
    url: str | None = None
    set: str = "verl"
    seed: int = 0
    domain_weights: dict[str, float] | None = None
    settings: dict[str, Any] = {}
    draw_size: int | None = None  # default: data.train_batch_size
    report: bool = False  # with url: also report groups (off: the server's ledger records the verdicts)

    @model_validator(mode="after")
    def _one_place(self) -> "VerlCurriculumSettings":
        if (self.ledger is None) == (self.url is None):
            raise ValueError("data.curriculum: give exactly one of ledger (a local file) or url (the reward server)")
        return self


class CurriculumRLHFDataset(RLHFDataset):
    def __init__(self, data_files: Any, tokenizer: Any, config: DictConfig, processor: Any = None,
                 max_samples: int = -1) -> None:
        super().__init__(data_files, tokenizer, config, processor=processor, max_samples=max_samples)
        raw = config.get("curriculum")
        if raw is None:
            raise ValueError("data.curriculum: the curriculum dataset needs +data.curriculum.ledger=PATH")
        settings = VerlCurriculumSettings.model_validate(OmegaConf.to_container(raw, resolve=True))
        if int(config.get("dataloader_num_workers", 0) or 0) > 0:
            raise ValueError("data.dataloader_num_workers: the curriculum dataset draws in the driver process; "
                             "set it to 0")
        self.drawn: list[str] = []  # every prompt id handed to veRL, in order (for logs and tests)
        self._queue: deque[str] = deque()
        # veRL builds its validation dataset with the same class and data config: only the training files
        # are drawn through the curriculum, any other files are read row by row as RLHFDataset does.
        self.curriculum: CurriculumSource | None = None
        if list(self.data_files) != list(_as_list(config.get("train_files"))):
            return
        problems = verl_problems(self.dataframe)
        self._row_of = {p.prompt_id: i for i, p in enumerate(problems)}
        if len(self._row_of) != len(problems):
            raise ValueError("extra_info.prompt_id: prompt ids must be unique in data.train_files")
        self.draw_size = settings.draw_size or int(config.get("train_batch_size"))
        self.curriculum = build_source(settings, problems)

    def __getitem__(self, item: int) -> dict[str, Any]:
        if self.curriculum is None:
            return super().__getitem__(item)
        if not self._queue:
            self._queue.extend(self.curriculum.draw(self.draw_size))
        pid = self._queue.popleft()
        self.drawn.append(pid)
        return super().__getitem__(self._row_of[pid])


def build_source(settings: VerlCurriculumSettings, problems: list[ProblemRecord]) -> CurriculumSource:
    """A `LocalCurriculum` on `ledger`, or the server's set `set` (registered with these problems: the
    same spec again is a no-op, so every driver restart may register)."""
    strategies = StrategyConfig.model_validate(settings.settings)
    if settings.ledger is not None:
        return LocalCurriculum(problems, ledger=settings.ledger, strategies=strategies,
                               weights=settings.domain_weights, seed=settings.seed)
    from scalerl.env.curriculum_client import CurriculumClient

    client = CurriculumClient(settings.url, settings.set)
    client.register(records=set_records(problems), seed=settings.seed, domain_weights=settings.domain_weights,
                    curriculum=settings.settings)
    return ServiceCurriculum(client, report=settings.report)


def _as_list(files: Any) -> list[Any]:
    return list(files) if isinstance(files, (list, tuple, ListConfig)) else [files]


def verl_problems(dataframe: Any) -> list[ProblemRecord]:
    """The problem records of veRL rows: `prompt`, `reward_model.ground_truth`, `ability` (the domain),
    `extra_info.prompt_id`."""
    out = []
    for i, row in enumerate(dataframe):
        extra = row.get("extra_info") or {}
        spec = domain_for_ability(str(row["ability"])) if row.get("ability") else None
        truth = (row.get("reward_model") or {}).get("ground_truth")
        out.append(problem_record(id_text(extra.get("prompt_id"), ("extra_info", "prompt_id", i)), row["prompt"],
                                  truth, domain=spec.name if spec else None,
                                  source=str(row.get("data_source") or "verl"), loc=(i,)))
    return out
