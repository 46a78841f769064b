"""`DIR/report.md` and `DIR/report.json` of a study, and its figures under `DIR/figures/`.

report.json: the study spec, the manifest's runs (status, wall time, error) and the `Analysis`
(per domain: R0, margin and its source, the fixed A; per variant x domain: A, B, C_mid seed means and
spreads, ΔA and ΔB against the baseline, whether ΔA exceeds the margin, B with A fixed, extrapolation
error, final pass rate; per run x domain: the fits themselves or why there is none).
report.md: the same as tables, with the command that reproduces the study. Numbers are printed at
3 decimals; read them with the intervals and spreads next to them.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from scalerl_env.contracts.config import atomic_write_text
from trainer.ablate.analysis import POINT_SE_TARGET, AnalysisResult, VariantDomain
from trainer.ablate.figures import plot_fixed_a, plot_heldout
from trainer.ablate.study import Manifest


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


def _pm(x: float | None, spread: float | None) -> str:
    return _num(x) if spread is None else f"{_num(x)} ± {_num(spread)}"


def _variant_row(v: VariantDomain) -> str:
    flag = "" if v.beyond_margin is None else ("**yes**" if v.beyond_margin else "no")
    c_mid = "–" if v.C_mid is None else f"{v.C_mid:.0f}"
    bound = f" ({v.A_at_bound} at 1)" if v.A_at_bound else ""
    return (f"| {v.variant} | {v.seeds_fitted}/{v.seeds} | {_pm(v.final_pass_rate, v.final_pass_rate_spread)} | "
            f"{_pm(v.late_pass_rate, v.late_pass_rate_spread)} | "
            f"{_pm(v.A, v.A_spread)}{bound} | {_num(v.dA)} | {flag} | {_pm(v.B, v.B_spread)} | {_num(v.dB)} | "
            f"{c_mid} | {_num(v.B_fixed)} | {_num(v.dB_fixed)} | {_num(v.extrapolation_error)} |")


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
        if d.fixed_A is not None:
            lines += [f"Fixed-A refit: A = {d.fixed_A:.3f} for {', '.join(d.fixed_A_variants)}.", ""]
        lines += ["| variant | fits/runs | final pass rate | last third | A | ΔA | ΔA > margin | B | ΔB | C_mid "
                  "| B (A fixed) | ΔB (A fixed) | extrap. error |", "|---" * 13 + "|"]
        lines += [_variant_row(v) for v in rep.variants if v.domain == d.domain]
        lines.append("")
    failures = [r for r in rep.runs if r.error]
    if failures:
        lines += ["## Fits that failed", ""] + [f"- {r.variant} seed {r.seed} {r.domain}: {r.error}" for r in failures]
        lines.append("")
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
