"""`scalerl-env doctor`: what this host allows the verifiers to do.

Prints every sandbox layer (available or not, and why not), the best isolation level this host meets,
the result of one real sandboxed smoke run, and (unless `--no-math`) whether a math-verify worker starts
and answers. Exit code 0 when the configured minimum level (`--sandbox`, default strict) is met and
the smoke checks pass, 1 otherwise.
"""

from __future__ import annotations

import json
import time

import typer

EXAMPLE = "scalerl-env doctor --sandbox standard --json"


def code_smoke(level: str) -> dict:
    """One honest and one wrong program through a real CodeVerifier at `level`."""
    from scalerl.env.contracts.records import VerifyItem
    from scalerl.verifiers.code.judge import CodeVerifier
    from scalerl.verifiers.code.sandbox import SandboxUnavailable
    from scalerl.verifiers.verifier_config import CodeConfig

    tests = {"kind": "stdio", "cases": [{"input": "2 3\n", "output": "5\n"}]}
    items = [VerifyItem(id=i, domain="code", completion=c, tests=tests)
             for i, c in (("honest", "a, b = map(int, input().split())\nprint(a + b)"), ("wrong", "print(6)"))]
    t0 = time.monotonic()
    try:
        with CodeVerifier(CodeConfig(sandbox=level, slots=1)) as verifier:
            got = [v.status.value for v in verifier.verify_many(items)]
    except SandboxUnavailable as exc:
        return {"ok": False, "error": str(exc)}
    return {"ok": got == ["correct", "wrong"], "statuses": got, "elapsed_s": round(time.monotonic() - t0, 3)}


def math_smoke(timeout_s: float = 120.0) -> dict:
    """Start one math-verify worker and score one pair."""
    from scalerl.verifiers.math.workers import MathWorkerPool
    from scalerl.verifiers.verifier_config import MathConfig

    t0 = time.monotonic()
    pool = MathWorkerPool(MathConfig(workers=1))
    try:
        result = pool.submit("\\frac{1}{2}", "0.5").result(timeout=timeout_s)
        return {"ok": result.get("status") == "correct", "result": result,
                "elapsed_s": round(time.monotonic() - t0, 3)}
    except Exception as exc:  # a diagnostic reports every failure
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    finally:
        pool.close()


def register(app: typer.Typer) -> None:
    """Add the `doctor` command to `app`."""

    @app.command(help=f"Show which sandbox layers this host allows and check the verifiers.\n\nExample: {EXAMPLE}")
    def doctor(
        sandbox: str = typer.Option("strict", help="minimum level to check for: strict | standard | minimal"),
        math: bool = typer.Option(True, "--math/--no-math", help="also start a math-verify worker"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object instead of text"),
    ) -> None:
        from scalerl.verifiers.code.sandbox import LEVELS, detect_layers

        if sandbox not in LEVELS:
            raise typer.BadParameter(f"--sandbox must be one of {sorted(LEVELS)}")
        report = {"sandbox": detect_layers(), "code_smoke": code_smoke(sandbox)}
        if math:
            report["math_smoke"] = math_smoke()
        ok = all(part["ok"] for key, part in report.items() if key.endswith("_smoke"))
        if as_json:
            typer.echo(json.dumps(report, indent=2, default=str))
        else:
            _print_text(report, sandbox)
        raise typer.Exit(0 if ok else 1)


def _print_text(report: dict, minimum: str) -> None:
    from scalerl.verifiers.code.sandbox import LEVELS

    sb = report["sandbox"]
    typer.echo(f"sandbox level available: {sb['level'] or 'none'} (required: {minimum})")
    for name, on in sb["layers"].items():
        levels = [lv for lv, req in LEVELS.items() if name in req]
        why = f"  ({sb['errors'][name]})" if name in sb["errors"] else ""
        typer.echo(f"  {'on ' if on else 'OFF'} {name:<14} needed by: {', '.join(levels) or 'optional'}{why}")
    for key in ("code_smoke", "math_smoke"):
        if key in report:
            part = report[key]
            detail = part.get("error") or part.get("statuses") or part.get("result")
            typer.echo(f"{key}: {'ok' if part['ok'] else 'FAILED'} {detail} ({part.get('elapsed_s', '-')} s)")
