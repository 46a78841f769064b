"""veRL drop-in: a dataset class (`data.custom_cls`) whose items are the prompts the curriculum plans.

    data.custom_cls.path=$(python -c "import scalerl_env.adapters.verl_curriculum as m; print(m.__file__)")
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
- The ledger hears the groups through `curriculum.report(...)` (`LocalCurriculum`). veRL's reward
  workers run in other processes, so with a local ledger the caller reports (a custom loop);
  in a stock veRL run the outcomes come from the reward server's ledger, which records every verdict
  that carries `extra_info.prompt_id` (a service-backed source, docs/curriculum.md).
Not guaranteed: dataloader workers (`data.dataloader_num_workers` > 0 is refused: each worker would
draw from its own copy); that a prompt retired between its draw and its rollout is taken back
(draws are made one batch at a time, as late as veRL's dataloader asks).

veRL loads this file by path (`load_extern_type`), outside the package's module names, so it does
not use postponed annotations: pydantic resolves the settings model's field types at definition.
"""


from collections import deque
from typing import Any

from omegaconf import DictConfig, OmegaConf
from verl.utils.dataset.rl_dataset import RLHFDataset

from curriculum.strategy_config import StrategyConfig
from scalerl_env.adapters import id_text
from scalerl_env.adapters.curriculum_source import CurriculumSource, LocalCurriculum, problem_record
from scalerl_env.contracts.domains import domain_for_ability
from scalerl_env.contracts.records import ProblemRecord, Strict


class VerlCurriculumSettings(Strict):
    """`data.curriculum.*`: where the plan lives and how it is drawn."""

    ledger: str
    seed: int = 0
    domain_weights: dict[str, float] | None = None
    settings: dict[str, Any] = {}
    draw_size: int | None = None  # default: data.train_batch_size


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
        problems = verl_problems(self.dataframe)
        self._row_of = {p.prompt_id: i for i, p in enumerate(problems)}
        if len(self._row_of) != len(problems):
            raise ValueError("extra_info.prompt_id: prompt ids must be unique in data.train_files")
        self.draw_size = settings.draw_size or int(config.get("train_batch_size"))
        self.curriculum: CurriculumSource = LocalCurriculum(
            problems, ledger=settings.ledger, strategies=StrategyConfig.model_validate(settings.settings),
            weights=settings.domain_weights, seed=settings.seed)
        self._queue: deque[str] = deque()
        self.drawn: list[str] = []  # every prompt id handed to veRL, in order (for logs and tests)

    def __getitem__(self, item: int) -> dict[str, Any]:
        if not self._queue:
            self._queue.extend(self.curriculum.draw(self.draw_size))
        pid = self._queue.popleft()
        self.drawn.append(pid)
        return super().__getitem__(self._row_of[pid])


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
