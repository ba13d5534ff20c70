"""The fairness audit of a benchmark run, from git alone (Table 2 of arXiv 2606.14470).

:func:`audit_run` reads ``RUN_DIR/config.json`` (what was asked), ``central.git`` and the
memory stores (what happened), re-derives what it can and trusts nothing it can re-derive.
One row per check, each ``PASS``, ``FAIL`` or ``SKIP`` (does not apply, with the reason):

* **results complete** — every task has a readable result commit;
* **objects intact** — every commit, tree and blob under every result, ingest record,
  study lesson and the git memory is present and hashes to its id; a missing or altered
  object is named (:mod:`.integrity`);
* **split disjoint** — study and test share no id and no normalised question;
* **problems match the data files** — gold answers, letters, option orders and questions,
  and the split, re-derived from the data files with the recorded seed; a data file that
  changed since the run fails (:mod:`.data`);
* **same gold letters across arms**;
* **every node a commit** — each result reaches exactly the nodes its record lists;
* **answers match the winning nodes** — each record is its task's, its answer, letter and
  winner are the winning node's, every tree holds the recorded question (:mod:`.verdicts`);
* **verdicts re-derived** — ``correct`` recomputed from the winning node's final text and
  the gold with the run's own checker;
* **result files match git** — ``results.jsonl`` / ``.csv`` / ``timings.jsonl`` rewritten
  from git byte for byte, ``arms.jsonl`` and ``table.md`` recomputed (:mod:`.files`);
* **no gold in model inputs** — prompts, lessons shown, tool output, trace fields and JSON
  keys state neither the expected answer nor the gold letter; **gold in model inputs by
  design** counts, per arm, where a protocol injects it on purpose (:mod:`.inputs`);
* **no expected answer in memory** — every memory re-read now, short answers matched as
  whole tokens in context (:mod:`.needles`, :mod:`.memory`);
* **memory stores match the ingest record** — each store re-read from its files holds
  exactly what was ingested, the same lessons for every backend, the study's own;
* **fresh memory per question** — as the protocol says (read-only shared, injected, fresh
  study, or online: memory at question i is the memory after question i−1);
* **pre-registration precedes the run** — issue 15's check, when there is one;
* **seeded re-run identical** — one task re-solved: the same record, bit-identical nodes;
* **git fsck central.git**.

A check that meets a damaged object or a tampered file FAILs with what it met; the audit
itself never stops on one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from got_core.bench.audit._core import STATUSES, AuditReport, Check, guarded
from got_core.bench.audit._view import RunView
from got_core.bench.audit.data import check_data, check_gold, check_split
from got_core.bench.audit.files import check_files
from got_core.bench.audit.inputs import BY_DESIGN, check_inputs
from got_core.bench.audit.inputs import NAME as INPUTS
from got_core.bench.audit.integrity import check_complete, check_fsck, check_nodes, check_objects
from got_core.bench.audit.memory import check_fresh, check_memory_answers, check_stores
from got_core.bench.audit.needles import MIN_ANSWER_CHARS, answer_needles, occurrences, states_answer
from got_core.bench.audit.rerun import PREREG, RERUN, check_prereg, check_rerun
from got_core.bench.audit.verdicts import check_answers, check_verdicts
from got_core.bench.runner import load_config
from got_core.errors import ConfigError
from got_core.repo import ReasoningRepo

__all__ = [
    "CHECKS",
    "MIN_ANSWER_CHARS",
    "STATUSES",
    "AuditReport",
    "Check",
    "answer_needles",
    "audit_run",
    "occurrences",
    "print_report",
    "states_answer",
]

#: Every row of the audit, in order.
CHECKS = (
    "results complete",
    "objects intact",
    "split disjoint",
    "problems match the data files",
    "same gold letters across arms",
    "every node a commit",
    "answers match the winning nodes",
    "verdicts re-derived",
    "result files match git",
    INPUTS,
    BY_DESIGN,
    "no expected answer in memory",
    "memory stores match the ingest record",
    "fresh memory per question",
    PREREG,
    RERUN,
    "git fsck central.git",
)


def _inputs(view: RunView, min_chars: int) -> list[Check]:
    pair = guarded(INPUTS, check_inputs, view, min_chars)
    if isinstance(pair, Check):  # the guard's FAIL row
        return [pair, Check(BY_DESIGN, "SKIP", "the inputs could not be read (see the row above)")]
    return list(pair)


def audit_run(
    run_dir: str | Path,
    *,
    rerun: bool = True,
    min_answer_chars: int = MIN_ANSWER_CHARS,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    fsck: bool = True,
) -> AuditReport:
    """Audit a run directory (the checks are listed in the module docstring).

    Args:
        run_dir: a directory written by a cookbook / :mod:`got_core.bench.protocols`.
        rerun: re-solve one task to check seeded reproducibility (needs the model server, or
            starts the stand-in again when the run used it).
        min_answer_chars: answers this long count anywhere; shorter ones as whole tokens
            stated as answers (:mod:`got_core.bench.audit.needles`).
        base_url, model, api_key: override the recorded endpoint for the re-run.
        fsck: run ``git fsck`` on ``central.git``.

    Returns:
        An :class:`AuditReport`; ``report.ok`` is false when a check failed.

    Raises:
        ConfigError: ``run_dir`` is not a run directory.
    """
    run_dir = Path(run_dir).resolve()
    config = load_config(run_dir)
    if not (run_dir / "central.git").exists():
        raise ConfigError(f"{run_dir} has no central.git; the run never started")
    report = AuditReport(run_dir, config.get("experiment", "?"))
    with ReasoningRepo(run_dir / "central.git", create=False) as central:
        try:
            view = RunView(run_dir, config, central)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(
                f"{run_dir}/config.json does not describe a run ({type(exc).__name__}: {exc}); "
                "was it edited by hand? Audit the directory a cookbook wrote"
            ) from None
        report.checks += [
            guarded("results complete", check_complete, view),
            guarded("objects intact", check_objects, view),
            guarded("split disjoint", check_split, view),
            guarded("problems match the data files", check_data, view),
            guarded("same gold letters across arms", check_gold, view),
            guarded("every node a commit", check_nodes, view),
            guarded("answers match the winning nodes", check_answers, view),
            guarded("verdicts re-derived", check_verdicts, view),
            guarded("result files match git", check_files, view),
            *_inputs(view, min_answer_chars),
            guarded("no expected answer in memory", check_memory_answers, view, min_answer_chars),
            guarded("memory stores match the ingest record", check_stores, view),
            guarded("fresh memory per question", check_fresh, view),
            guarded(PREREG, check_prereg, view),
        ]
        if rerun:
            overrides: dict[str, Any] = {"base_url": base_url, "model": model, "api_key": api_key}
            report.checks.append(guarded(RERUN, check_rerun, view, overrides))
        else:
            report.checks.append(Check(RERUN, "SKIP", "--no-rerun"))
        if fsck:
            report.checks.append(guarded("git fsck central.git", check_fsck, view))
    return report


def print_report(report: AuditReport, console: Any = None) -> None:
    """Print the checks as a rich table, then the verdict."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    table = Table(title=f"Audit of {report.run_dir} ({report.experiment}) — Table 2, from git alone")
    for col in ("check", "status", "detail"):
        table.add_column(col, overflow="fold")
    colour = {"PASS": "green", "FAIL": "bold red", "SKIP": "yellow"}
    for c in report.checks:
        table.add_row(c.name, f"[{colour.get(c.status, 'white')}]{c.status}[/]", escape(c.detail))
    console.print(table)
    console.print("[green]audit passed[/]" if report.ok else "[bold red]audit FAILED[/]")
