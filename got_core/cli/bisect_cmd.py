"""``got bisect``: which lesson made the agent worse? (``git bisect run`` over the memory branch).

Registered by ``got_core.cli`` as a core group (``register(app)`` adds the command). The
work is :func:`got_core.repo.bisect.bisect_memory`; this module parses options and prints.
"""

from __future__ import annotations

from pathlib import Path

import typer

__all__ = ["bisect_command", "register"]


def bisect_command(
    good: list[str] = typer.Option(..., "--good", help="A revision known good (repeatable)."),
    run: str = typer.Option(
        ...,
        "--run",
        help="What to run against each candidate, in its scratch directory ($GOT_BISECT_DIR): "
        "exit 0 = good, 125 = skip, 1-127 = bad, 128+ aborts. Split like a shell line but run "
        "without a shell unless --shell.",
    ),
    bad: str | None = typer.Option(None, "--bad", help="A revision known bad (default: the branch tip)."),
    branch: str = typer.Option("memory", "--branch", "-b", help="The branch to bisect."),
    shell: bool = typer.Option(False, "--shell", help="Run --run through /bin/sh -c (pipes, &&, $VARS)."),
    first_parent: bool = typer.Option(False, "--first-parent", help="Follow only first parents, as git does."),
    metric: str | None = typer.Option(
        None,
        "--metric",
        help="Judge by a number the command prints: a regular expression whose first group (or whole "
        "match), last match in stdout, is the number. Needs --threshold.",
    ),
    threshold: float | None = typer.Option(
        None, "--threshold", help="The --metric value that separates good from bad."
    ),
    higher_is_better: bool = typer.Option(
        True, "--higher-is-better/--lower-is-better", help="With --metric: good is >= threshold (or <=)."
    ),
    timeout: float | None = typer.Option(
        None, "--timeout", min=0.001, help="Seconds per run; a run still going then is killed and the bisection stops."
    ),
    record: bool = typer.Option(
        True, "--record/--no-record", help="Record the first bad commit as a note on refs/notes/got-bisect."
    ),
    scratch: Path | None = typer.Option(None, "--scratch", help="Where scratch directories go (default: temp dir)."),
    keep_scratch: bool = typer.Option(False, "--keep-scratch", help="Leave each candidate's scratch directory."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show the command's output."),
    repo: Path | None = typer.Option(
        None, "--repo", "-r", envvar="GOT_REPO", help="Reasoning repository (default: ./got.git, or $GOT_REPO)."
    ),
    json: bool = typer.Option(False, "--json", help="Print JSON for scripts instead of text."),
) -> None:
    """Bisect the memory branch: the first lesson after which --run fails.

    Each candidate's memory is restored into a fresh scratch directory ($GOT_BISECT_DIR
    holds memory.git, a bare repository whose branch points at the candidate, and files/,
    its tree); your repository and working copy are never touched. Exit status 0 when
    the first bad commit is found, 1 when skipped commits hide it.
    """
    from got_core.cli.plugin import console, emit_json, err_console, open_repo
    from got_core.errors import ConfigError
    from got_core.repo.bisect import BisectStep, Metric, bisect_memory, command_check

    if (metric is None) != (threshold is None):
        raise ConfigError("--metric and --threshold go together")
    judge = Metric(metric, threshold, higher_is_better) if metric is not None and threshold is not None else None
    r = open_repo(repo)
    check = command_check(run, shell=shell, timeout=timeout, echo=verbose and not json)

    def progress(step: BisectStep, done: int, left: int) -> None:
        value = "" if step.metric is None else f" ({step.metric:g})"
        err_console.print(
            f"step {done}: {step.commit[:10]} {step.verdict}{value}  {step.subject}  (at most {left} more)",
            markup=False,
        )

    result = bisect_memory(
        r,
        good=good,
        bad=bad,
        check=check,
        branch=branch,
        first_parent=first_parent,
        metric=judge,
        record=record,
        scratch=scratch,
        keep_scratch=keep_scratch,
        progress=None if json else progress,
    )
    if json:
        emit_json(result.to_dict())
    elif result.first_bad is not None:
        console.print(f"{result.first_bad} is the first bad commit ({len(result.steps)} tests)", markup=False)
        console.print(result.message.splitlines()[0] if result.message else "", markup=False)
        if result.lesson:
            console.print("", result.lesson, sep="\n", markup=False)
        if result.note_ref:
            console.print(f"\nrecorded: git notes --ref={result.note_ref} show {result.first_bad[:10]}", markup=False)
    else:
        console.print("skipped commits hide the first bad commit; it is one of:", markup=False)
        for oid in result.suspects:
            console.print(f"  {oid}", markup=False)
    if result.first_bad is None:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``bisect`` to the ``got`` app."""
    app.command("bisect")(bisect_command)
