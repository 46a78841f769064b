"""`scalerl ablate`: the ScaleRL paper's leave-one-out (LOO) study as one command.

`variants` names each recipe change as dotted `TrainConfig` overrides (the paper's seven `loo-*`
variants plus user-defined ones from YAML); `study` plans one run folder per variant x seed with
the same compute budget and keeps a manifest so an interrupted study resumes; `runner` executes the
runs (one after another, or as Ray tasks); `analysis` fits the sigmoid per variant x domain x seed on
the first half of the budget, scores it on the second, derives the margin on A from the baseline's
seeds and refits with A fixed; `report` and `figures` write `report.md`, `report.json` and the PNGs.
"""
