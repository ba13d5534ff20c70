"""``got memory``: list, search, add and measure lessons in any memory backend."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from got_core.cli.plugin import (
    JsonOption,
    check_target,
    console,
    created_on_failure_removed,
    emit_json,
    require_positive,
    say_empty,
)
from got_core.cli.render import Listing, listing
from got_core.errors import InvalidInputError
from got_core.memory import BACKENDS, get_backend
from got_core.memory.base import BaseMemory, Lesson

__all__ = ["app"]

app = typer.Typer(
    help="Cross-problem memory: list, search, add, stats — for any of the five backends. "
    "Reads never create a store: a path with none is an error (exit 2).",
    no_args_is_help=True,
)

BackendOption = typer.Option("git", "--backend", "-b", help=f"One of: {', '.join(BACKENDS)}.")
PathOption = typer.Option(
    Path("got-memory"),
    "--path",
    "-p",
    envvar="GOT_MEMORY_PATH",
    help="Where the backend keeps its data (the git backend: a repository).",
)


def _open_for_reading(backend: str, path: Path) -> BaseMemory:
    """Open an existing store read-only: a mistyped path is an error, never a new empty store."""
    if path.exists() and not path.is_dir():
        raise InvalidInputError(f"the memory path {path} is a file; give the directory the {backend} memory lives in")
    return get_backend(backend, path=path, read_only=True, create=False)


def _table(lessons: list[Lesson], with_relevance: bool = False) -> Listing:
    cols = (["relevance"] if with_relevance else []) + ["outcome", "score", "topic", "source", "lesson"]
    table = listing(*cols, wrap=("topic", "source", "lesson"), flex="lesson")
    for lesson in lessons:
        row = [f"{lesson.relevance:.3f}"] if with_relevance else []
        row += [
            lesson.outcome,
            f"{lesson.score:.2f}",
            escape(lesson.topic_key),
            escape(lesson.source_problem),
            escape(lesson.text),
        ]
        table.add_row(*row)
    return table


@app.command("list")
def list_(backend: str = BackendOption, path: Path = PathOption, json: bool = JsonOption) -> None:
    """Every stored lesson."""
    with _open_for_reading(backend, path) as mem:
        lessons = mem.all_lessons()
        if json:
            emit_json([lesson.to_dict() for lesson in lessons])
        elif not lessons:
            say_empty(f"no lessons in the {backend} memory at {path}")
        else:
            console.print(_table(lessons))
            console.print(f"{len(lessons)} lesson(s) in the {backend} memory at {escape(str(path))}")


@app.command()
def search(
    query: str = typer.Argument(..., help="What the lessons should be about."),
    k: int = typer.Option(3, "-k", min=1, help="How many lessons."),
    backend: str = BackendOption,
    path: Path = PathOption,
    json: bool = JsonOption,
) -> None:
    """The k most relevant lessons for a query, best first."""
    with _open_for_reading(backend, path) as mem:
        lessons = mem.get_relevant(query, k)
        if json:
            emit_json([lesson.to_dict() for lesson in lessons])
        elif not lessons:
            say_empty(f"no lessons in the {backend} memory at {path} match {query!r}")
        else:
            console.print(_table(lessons, with_relevance=True))


@app.command()
def add(
    text: str = typer.Argument(..., help="The lesson (answer-free advice)."),
    outcome: str = typer.Option("insight", help="insight, success or failure."),
    topic: str = typer.Option("", help="Topic key (default: derived from the text)."),
    source: str = typer.Option("", help="The problem it came from."),
    score: float = typer.Option(0.5, min=0.0, max=1.0, help="Confidence in [0, 1]."),
    backend: str = BackendOption,
    path: Path = PathOption,
) -> None:
    """Store one lesson."""
    verbs = {"insight": "add_insight", "success": "add_success", "failure": "add_failure"}
    if outcome not in verbs:
        raise InvalidInputError(f"--outcome must be one of {', '.join(verbs)}, not {outcome!r}")
    require_positive(score, "--score", zero=True)  # NaN
    check_target(path, "the memory path", directory=True)
    with created_on_failure_removed(path), get_backend(backend, path=path) as mem:
        lesson = getattr(mem, verbs[outcome])(text, topic_key=topic, source_problem=source, score=score)
        console.print(f"stored under topic [bold]{escape(lesson.topic_key)}[/]" if lesson else "read-only: not stored")


@app.command()
def stats(backend: str = BackendOption, path: Path = PathOption, json: bool = JsonOption) -> None:
    """Counts, cost meters and bytes on disk."""
    with _open_for_reading(backend, path) as mem:
        data = mem.stats()
        if json:
            emit_json(data)
            return
        for key, value in data.items():
            console.print(f"{key:>14}: {value}")
        console.print(escape(mem.get_summary()))
