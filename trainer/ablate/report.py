"""`DIR/report.md` and `DIR/report.json` of a study, and its figures under `DIR/figures/`.

report.json: the study spec, the manifest's runs (status, wall time, error) and the `Analysis`
(per domain: R0, margin and its source, the fixed A; per variant x domain: A, B, C_mid seed means and
spreads, ΔA and ΔB against the baseline, whether ΔA exceeds the margin, B with A fixed, extrapolation
error, final pass rate; the differences in last-third pass rate, A and compute to the target pass rate
with their standard errors; per run x domain: the fits themselves or why there is none).
report.md: the same as tables, with the command that reproduces the study; per domain first the
resolution (the smallest differences the seeds resolve, `scalerl.trainer.ablate.resolution`) and beside every
Δ whether it is above it; the extrapolation check over all runs; per fit whether A and B are
determined or pinned at a bound. Numbers are printed at
3 decimals; read them with the intervals and spreads next to them.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from scalerl.env.contracts.config_loader import atomic_write_text
from scalerl.trainer.ablate.analysis import POINT_SE_TARGET, Analysis, AnalysisResult, DomainSummary, VariantDomain
from scalerl.trainer.ablate.figures import plot_fixed_a, plot_heldout
from scalerl.trainer.ablate.resolution import Resolution, fit_status
from scalerl.trainer.ablate.study import Manifest


def command_line(manifest: Manifest) -> str:
    s = manifest.study
    parts = ["scalerl", "ablate", "--variants", ",".join(s.variants), "--seeds", str(s.seeds),
             "--budget", f"{s.budget:g}", "--compute", s.compute, "--out", s.out]
    fraction = None if s.fit_fraction == 0.5 else s.fit_fraction  # the default is left out
    for flag, value in (("--variants-file", s.variants_file), ("--config", s.config), ("--domains", s.domains),
                        ("--model", s.model), ("--engine", s.engine), ("--ray-address", s.ray_address),
                        ("--eval-samples", s.eval_samples), ("--burn-in", s.burn_in), ("--fit-fraction", fraction)):
        if value is not None:
            parts += [flag, str(value)]
    return shlex.join(parts + list(s.overrides))


def _num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _sig(x: float | None) -> str:
    """Compute amounts: four significant figures, whatever the axis's unit (samples or FLOPs)."""
    return "–" if x is None else f"{x:.4g}"


def _pm(x: float | None, spread: float | None) -> str:
    return _num(x) if spread is None else f"{_num(x)} ± {_num(spread)}"


def extrapolation_line(rep: Analysis, domain: str) -> str:
    """The paper's extrapolation check over every run of the domain: fit on the first part, predict the rest."""
    errs = [r.extrapolation_mae for r in rep.runs if r.domain == domain and r.extrapolation_mae is not None]
    if not errs:
        return "Extrapolation check: no run has points beyond its fit window."
    return (f"Extrapolation check (fit on compute ≤ {rep.fit_until:g}, predict the later points): mean absolute "
            f"error {sum(errs) / len(errs):.3f} over {len(errs)} runs (largest {max(errs):.3f}).")


def fit_table(rep: Analysis) -> list[str]:
    """Per run and domain: whether the fit determined A and B, or what is pinned at a bound."""
    lines = ["## Fits", "", "| variant | seed | domain | A | B | determined? |", "|---|---|---|---|---|---|"]
    for r in rep.runs:
        a, b = (r.fit["A"], r.fit["B"]) if r.fit else (None, None)
        status = fit_status(r.fit) if r.fit else f"no fit ({r.error})"
        lines.append(f"| {r.variant} | {r.seed} | {r.domain} | {_num(a)} | {_num(b, 2)} | {status} |")
    return [*lines, ""]


def resolution_line(d: DomainSummary) -> str:
    """The smallest differences the study resolves in `d`'s domain, said before its comparisons."""
    r = d.resolution
    if r is None or r.from_baseline_runs < 2:
        return (f"Resolution: not measured ({0 if r is None else r.from_baseline_runs} baseline run(s); it needs "
                "at least 2 baseline seeds).")
    target = "" if r.target_pass_rate is None else (
        f", Δ compute to pass rate {r.target_pass_rate:.3f} ±{_sig(r.compute_to_target)}")
    return (f"Resolution at 2 standard errors with {r.seeds} seeds per recipe (spreads of {r.from_baseline_runs} "
            f"baseline runs): ΔA ±{_num(r.A)}, Δ last-third pass rate ±{_num(r.late_pass_rate)} (evaluation "
            f"noise alone ±{_num(r.eval_floor)}){target}. Smaller differences are below the resolution.")


def _resolved(delta: float | None, resolution: float | None, se: float | None = None) -> str:
    """Beyond the resolution stated first and, where the difference has its own standard error, beyond
    2 of those too (few seeds can make the baseline's spread, and so the resolution, too small)."""
    if delta is None or resolution is None:
        return "–"
    return "**yes**" if abs(delta) > resolution and (se is None or abs(delta) > 2 * se) else "no"


def _variant_row(v: VariantDomain, d: DomainSummary) -> str:
    flag = "" if v.beyond_margin is None else ("**yes**" if v.beyond_margin else "no")
    res = d.resolution or Resolution(seeds=0, from_baseline_runs=0)
    d_late = v.d_late_pass_rate
    c_mid = "–" if v.C_mid is None else f"{v.C_mid:.0f}"
    bound = f" ({v.A_at_bound} at 1)" if v.A_at_bound else ""
    return (f"| {v.variant} | {v.seeds_fitted}/{v.seeds} | {_pm(v.final_pass_rate, v.final_pass_rate_spread)} | "
            f"{_pm(v.late_pass_rate, v.late_pass_rate_spread)} | "
            f"{_num(d_late)} | {_resolved(d_late, res.late_pass_rate)} | "
            f"{_pm(v.A, v.A_spread)}{bound} | {_num(v.dA)} | {flag} | {_resolved(v.dA, res.A)} | "
            f"{_pm(v.B, v.B_spread)} | {_num(v.dB)} | "
            f"{c_mid} | {_num(v.B_fixed)} | {_num(v.dB_fixed)} | {_num(v.extrapolation_error)} |")


def _delta(x: float | None, se: float | None, show=_num) -> str:
    return show(x) if se is None else f"{show(x)} ± {show(se)}"


def difference_table(rep: Analysis, d: DomainSummary) -> list[str]:
    """Per variant: each difference from the baseline ± its standard error, and whether it clears both the
    resolution stated before the comparisons and 2 of its own standard errors."""
    res = d.resolution or Resolution(seeds=0, from_baseline_runs=0)
    target = "–" if res.target_pass_rate is None else f"{res.target_pass_rate:.3f}"
    lines = [f"Differences from the baseline (mean over seeds ± one standard error, from both recipes' seed "
             f"spreads); compute to the target pass rate {target} in {rep.compute}:", "",
             "| variant | Δ last third | resolved | ΔA | resolved | compute to target (seeds reached) "
             "| Δ compute to target | resolved |", "|---" * 8 + "|"]
    for v in (v for v in rep.variants if v.domain == d.domain):
        reach = f"{_sig(v.compute_to_target)} ({v.reached_target}/{v.seeds})"
        lines.append(f"| {v.variant} | {_delta(v.d_late_pass_rate, v.d_late_pass_rate_se)} | "
                     f"{_resolved(v.d_late_pass_rate, res.late_pass_rate, v.d_late_pass_rate_se)} | "
                     f"{_delta(v.dA, v.dA_se)} | {_resolved(v.dA, res.A, v.dA_se)} | {reach} | "
                     f"{_delta(v.d_compute_to_target, v.d_compute_to_target_se, _sig)} | "
                     f"{_resolved(v.d_compute_to_target, res.compute_to_target, v.d_compute_to_target_se)} |")
    return [*lines, ""]


def render_markdown(manifest: Manifest, result: AnalysisResult, figures: dict[str, str]) -> str:
    rep = result.report
    lines = ["# Leave-one-out study", "", "```bash", command_line(manifest), "```", "",
             f"Budget per run: {rep.budget:g} on the {rep.compute} axis (RL phase); "
             f"fits on compute ≤ {rep.fit_until:g}, scored at the budget. Seeds per variant: {manifest.study.seeds}.",
             ""]
    for d in rep.domains:
        lines += [f"## {d.domain}", "",
                  f"R0 (shared start) = {_num(d.R0)}"
                  + (f" (sd {d.R0_sd:.3f} over {d.R0_runs} evaluations of that same policy: the measured noise "
                     "of one evaluation)" if d.R0_sd is not None else "")
                  + f"; margin on A = ±{d.margin:.3f} ({d.margin_source}); "
                  f"{d.samples_per_point} held-out samples per evaluation, largest standard error of a point "
                  f"{d.max_point_se:.3f} ({'resolves' if d.max_point_se <= POINT_SE_TARGET else 'does not resolve'} "
                  f"±0.02 alone; {d.samples_for_margin} samples would).", ""]
        lines += [resolution_line(d), ""]
        if d.fixed_A is not None:
            lines += [f"Fixed-A refit: A = {d.fixed_A:.3f} for {', '.join(d.fixed_A_variants)}.", ""]
        lines += ["| variant | fits/runs | final pass rate | last third | Δ last third | resolved | A | ΔA "
                  "| ΔA > margin | ΔA resolved | B | ΔB | C_mid | B (A fixed) | ΔB (A fixed) | extrap. error |",
                  "|---" * 16 + "|"]
        lines += [_variant_row(v, d) for v in rep.variants if v.domain == d.domain]
        lines += ["", *difference_table(rep, d), extrapolation_line(rep, d.domain), ""]
    lines += fit_table(rep)
    lines += ["## Runs", "", "| variant | seed | status | steps | wall s (whole run) | load average | folder |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {r.variant} | {r.seed} | {r.status} | {r.steps or '–'} | {_num(r.wall_s, 0)} | "
              f"{_num(r.load_avg, 1)} | {r.folder} |"
              for r in manifest.runs]
    lines += ["", "## Figures", ""] + [f"![{name}]({rel})" for name, rel in figures.items()]
    return "\n".join(lines) + "\n"


def write_report(manifest: Manifest, result: AnalysisResult, out: Path) -> dict[str, Path]:
    """report.md, report.json and the figures; returns their paths."""
    (out / "figures").mkdir(exist_ok=True)
    figures = {"held-out pass rate vs compute": "figures/heldout.png"}
    paths = {"heldout": plot_heldout(result, out / figures["held-out pass rate vs compute"])}
    fixed = plot_fixed_a(result, out / "figures" / "fixed_a.png")
    if fixed is not None:
        figures["log F(R) vs log C, A fixed"] = "figures/fixed_a.png"
        paths["fixed_a"] = fixed
    payload = {"command": command_line(manifest), **manifest.model_dump(mode="json"),
               "analysis": result.report.model_dump(mode="json")}
    atomic_write_text(out / "report.json", json.dumps(payload, indent=2))
    atomic_write_text(out / "report.md", render_markdown(manifest, result, figures))
    return {**paths, "report_md": out / "report.md", "report_json": out / "report.json"}
