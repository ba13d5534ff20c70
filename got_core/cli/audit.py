"""``got audit RUN_DIR``: the fairness audit of a benchmark run (Table 2 of arXiv 2606.14470).

Registered by ``got_core.cli`` as a core group (``register(app)`` adds the command).
Also runnable on its own: ``python -m got_core.cli.audit RUN_DIR``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

__all__ = ["audit_command", "register"]


def audit_command(
    run_dir: Path = typer.Argument(
        ..., exists=True, file_okay=False, help="A run directory written by a benchmark cookbook."
    ),
    rerun: bool = typer.Option(
        True,
        "--rerun/--no-rerun",
        help="Re-solve one task with the same seed and compare (needs the model "
        "server; a stand-in run starts the stand-in again).",
    ),
    min_answer_chars: int = typer.Option(
        4,
        "--min-answer-chars",
        min=0,
        help="Answers this long count wherever they occur; shorter ones ('2', '24') count as whole tokens "
        "stated as answers ('answer is 2', '= 2', '\\boxed{2}').",
    ),
    base_url: str = typer.Option(None, "--base-url", help="Override the recorded endpoint for the re-run."),
    model: str = typer.Option(None, "--model", help="Override the recorded model name for the re-run."),
    api_key: str = typer.Option(None, "--api-key", envvar="GOT_API_KEY", help="API key for the re-run."),
    json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Audit a benchmark run from git alone; exit 1 when a check FAILs.

    Rows: results complete; objects intact; split disjoint; problems match the
    data files; same gold letters across arms; every node a commit; answers
    match the winning nodes; verdicts re-derived; result files match git; no
    gold in model inputs (and by design); no expected answer in memory; memory
    stores match the ingest record; fresh memory per question;
    pre-registration; seeded re-run identical; git fsck. A damaged object or a
    tampered file is a FAIL row that names it.
    """
    from got_core.bench.audit import audit_run, print_report
    from got_core.cli.plugin import console, emit_json

    report = audit_run(
        run_dir, rerun=rerun, min_answer_chars=min_answer_chars, base_url=base_url, model=model, api_key=api_key
    )
    if json:
        emit_json(report.to_dict())
    else:
        print_report(report, console)
    if not report.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``audit`` to the ``got`` app."""
    app.command("audit")(audit_command)


def _standalone() -> int:  # pragma: no cover - exercised through `python -m`
    from got_core.errors import GotError, GotUserError

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(audit_command)
    try:
        rv = app(standalone_mode=False)
    except typer.Exit as exc:
        return exc.exit_code
    except GotUserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except GotError as exc:
        print(f"failed: {exc}", file=sys.stderr)
        return 1
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_standalone())
