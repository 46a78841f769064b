"""What the trainer trains and validates on: `data.sources` read into a training pool and a held-out set
per domain, before any model is loaded.

Sources are problem files (verl parquet, as `scalerl-env data prepare` / `data generate` write them, or
foreign verl files) or the procedural generator; with no `data.sources` the generator runs for every
trained domain with `data.level`, `data.generated_per_domain` and `data.seed` (the built-in CPU default).

Guarantees:
- A malformed file (unreadable parquet, missing answer, code row without tests, unknown or wrong
  domain) raises `RecordFileError` naming file, row and field; nothing is skipped silently.
- Within a domain the first record of each prompt id is kept (sources in order, files in order).
- Held-out set per domain: the records of `data.heldout[domain]` files (their prompt ids are removed
  from the training pool), else `split_holdout` of the data layer over the pooled training records
  (`holdout_count(n, data.holdout_fraction, data.holdout_max_prompts)` of them, seed `data.seed`) —
  the same splitter as `data prepare --holdout`, so the split never depends on row order.
- Deterministic: the same files and config give the same pools in the same order (resume relies on it).
- Mixing: a domain's weight is the sum of its sources' weights (or `data.domain_weights[domain]`);
  within a domain each source's share of the draws is its weight's share of the domain's
  (`scalerl.curriculum.source_mix`), whatever the sources' sizes; a zero-weight source is never drawn for
  training. A prompt id found in two sources of a domain belongs to the first (the record kept).
  Each pool carries every problem's source label (`source_labels`: the file name, or `generator`)
  for the sampler, the `draws/<domain>/<source>` step metrics and `rollouts.jsonl`.
- The tiny model's warm start learns `warm_start_problems`: the training pools of `warm_start.domains`
  (generated for a domain the run does not train), so every subset of those domains shares one.
Not guaranteed: exact shares when a source runs out of active problems (retired) or a strategy passes
over prompts; to mix files in proportion to their sizes, list them in one source.
"""

from __future__ import annotations

from pathlib import Path

from scalerl.env.contracts.config_loader import ConfigError
from scalerl.env.contracts.records import ProblemRecord
from scalerl.env.sources.prepare import holdout_count, split_holdout
from scalerl.env.sources.verl import RecordFileError, load_record_file
from scalerl.trainer.config.data import SourceConfig
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.rollout.problems import DomainPool

__all__ = ["DataFileError", "build_data", "domain_weights", "effective_sources", "source_labels", "warm_start_problems"]


class DataFileError(ConfigError):
    """A data file the run must not start with; `path`, `row` (1-based, 0 = the whole file) and `field`."""

    def __init__(self, exc: RecordFileError) -> None:
        self.path, self.row, self.field = exc.path, exc.row, exc.field
        super().__init__(f"data file {exc}")


def _load_file(path: str, domain: str) -> list[ProblemRecord]:
    try:
        return load_record_file(Path(path), domain)
    except RecordFileError as exc:
        raise DataFileError(exc) from None


def effective_sources(cfg: TrainConfig) -> list[SourceConfig]:
    """`data.sources`, or one generator source per trained domain when none are given."""
    d = cfg.data
    if d.sources:
        return list(d.sources)
    return [SourceConfig(domain=dom, kind="generator", level=d.level, count=d.generated_per_domain, seed=d.seed)
            for dom in cfg.domains]


def check_sources(cfg: TrainConfig) -> None:
    """Every trained domain has a source and every source's domain is trained (ConfigError otherwise)."""
    sources = effective_sources(cfg)
    have = {s.domain for s in sources}
    if missing := [dom for dom in cfg.domains if dom not in have]:
        raise ConfigError(f"domains {missing} are trained but data.sources has none for them "
                          f"(add --data {missing[0]}=FILE, or set domains to {sorted(have)})")
    if extra := sorted(have - set(cfg.domains)):
        raise ConfigError(f"data.sources has {extra} problems but domains is {cfg.domains}; add them to domains")
    if extra := sorted(set(cfg.data.heldout) - set(cfg.domains)):
        raise ConfigError(f"data.heldout names domains not trained: {extra}")


def source_labels(sources: list[SourceConfig]) -> list[str]:
    """A name per source, unique within its domain: the first file's name (`+N` more files), or
    `generator`; a repeated name gets `#2`, `#3`, ..."""
    labels: list[str] = []
    seen: dict[tuple[str, str], int] = {}
    for s in sources:
        base = "generator" if s.kind == "generator" else Path(s.files[0]).name + (
            f"+{len(s.files) - 1}" if len(s.files) > 1 else "")
        n = seen[(s.domain, base)] = seen.get((s.domain, base), 0) + 1
        labels.append(base if n == 1 else f"{base}#{n}")
    return labels


def domain_weights(cfg: TrainConfig) -> dict[str, float]:
    out = {}
    for dom in cfg.domains:
        explicit = cfg.data.domain_weights.get(dom)
        summed = sum(s.weight for s in effective_sources(cfg) if s.domain == dom)
        if explicit and not summed:
            raise ConfigError(f"data.domain_weights.{dom} is {explicit} but every data.sources weight of {dom} is 0")
        out[dom] = explicit if explicit is not None else summed
    if not any(w > 0 for w in out.values()):
        raise ConfigError(f"every domain weight is 0: {out}")
    return out


def load_source(source: SourceConfig) -> list[ProblemRecord]:
    """The records of one source in order (duplicates included; `build_data` removes them)."""
    if source.kind == "generator":
        from scalerl.env.sources.generators import generate

        records = list(generate(source.domain, seed=source.seed, count=source.count, level=source.level,
                                families=source.families))
    else:
        records = [r for path in source.files for r in _load_file(path, source.domain)]
    if source.limit is not None:
        records = _distinct(records)[:source.limit]
    return records


def _distinct(records: list[ProblemRecord]) -> list[ProblemRecord]:
    unique: dict[str, ProblemRecord] = {}
    for r in records:
        unique.setdefault(r.prompt_id, r)
    return list(unique.values())


def build_data(cfg: TrainConfig) -> dict[str, DomainPool]:
    """Training pool and held-out set per trained domain (see the module docstring)."""
    check_sources(cfg)
    d = cfg.data
    pools = {}
    sources = effective_sources(cfg)
    labels = source_labels(sources)
    for dom in cfg.domains:
        mine = [(label, s) for label, s in zip(labels, sources) if s.domain == dom]
        source_of: dict[str, str] = {}
        records = []
        for label, s in mine:
            for r in load_source(s):
                source_of.setdefault(r.prompt_id, label)  # the first source, like the record `_distinct` keeps
                records.append(r)
        train = _distinct(records)
        if dom in d.heldout:
            held = _distinct([r for path in d.heldout[dom] for r in _load_file(path, dom)])
            held_ids = {r.prompt_id for r in held}
            train = [r for r in train if r.prompt_id not in held_ids]
        else:
            train, held = split_holdout(train, holdout_count(len(train), d.holdout_fraction, d.holdout_max_prompts),
                                        seed=d.seed)
        if not train:
            raise ConfigError(f"domain {dom}: no training problems left after holding out {len(held)}")
        if not held:
            raise ConfigError(f"domain {dom}: the held-out set is empty")
        pools[dom] = DomainPool(train=train, holdout=held, source_of=source_of,
                                source_weights={label: s.weight for label, s in mine})
    return pools


def warm_start_problems(cfg: TrainConfig, pools: dict[str, DomainPool]) -> list[ProblemRecord]:
    """What the tiny model's warm start learns: the training pool of each `warm_start.domains` entry in that
    order (the run's own, or for a domain the run does not train the generator's at the run's data level,
    count and seed), then the run's other domains. Every subset of those domains on generated data thus
    gets the same problems, so the same warm start (the shipped one); held-out problems never appear."""
    extra = [dom for dom in cfg.warm_start.domains if dom not in pools]
    if extra:
        generated = cfg.data.model_copy(update={"sources": [], "heldout": {}, "domain_weights": {}})
        pools = {**pools, **build_data(cfg.model_copy(update={"domains": extra, "data": generated}))}
    order = dict.fromkeys([*cfg.warm_start.domains, *pools])
    return [p for dom in order for p in pools[dom].train]
