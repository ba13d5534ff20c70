"""Shared pieces of the CLI: the app, consoles, repository option, output helpers."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from got_core.repo import ReasoningRepo

__all__ = ["JsonOption", "RepoOption", "app", "console", "emit_json", "err_console", "open_repo", "when"]

app = typer.Typer(
    name="got",
    help="GitOfThoughts: agent reasoning as a git repository (log, diff, replay, search, merge, verify).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)  # one error, one line

RepoOption = typer.Option(
    None,
    "--repo",
    "-r",
    envvar="GOT_REPO",
    help="Reasoning repository (default: ./got.git, or $GOT_REPO).",
)
JsonOption = typer.Option(False, "--json", help="Print JSON for scripts instead of a table.")


def open_repo(path: Path | None, *, create: bool = False) -> ReasoningRepo:
    """Open the repository named on the command line (never creates one unless asked)."""
    return ReasoningRepo(path or Path(os.environ.get("GOT_REPO", "got.git")), create=create)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def emit_json(data: Any) -> None:
    """Print ``data`` (dataclasses welcome) as JSON on stdout."""
    typer.echo(json.dumps(_plain(data), indent=2, ensure_ascii=False, sort_keys=True))


def when(ts: int) -> str:
    """A commit time as ``YYYY-MM-DD HH:MM:SS`` UTC."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def short(oids: Iterable[str]) -> str:
    """Comma-separated short SHAs."""
    return ", ".join(o[:10] for o in oids)
