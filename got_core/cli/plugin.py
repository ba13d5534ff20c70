"""Shared pieces of the CLI: the app, consoles, repository option, output helpers.

This is the public seam for command groups of other packages (ARCHITECTURE §7): they
build on :data:`app`'s options and helpers so every ``got`` command reads the same way
(abbreviated ids, one-sentence empty states, one-line errors, nothing created on failure).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from got_core.errors import GotError, InvalidInputError, RepositoryNotFoundError, UnknownRefError
from got_core.repo import ReasoningRepo

__all__ = [
    "Abbrev",
    "FullOption",
    "JsonOption",
    "RepoOption",
    "app",
    "check_target",
    "console",
    "created_on_failure_removed",
    "emit_json",
    "err_console",
    "one_line",
    "open_repo",
    "printable",
    "replace_demo",
    "repo_path",
    "require_positive",
    "safe",
    "say_empty",
    "short",
    "when",
]

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
FullOption = typer.Option(False, "--full", help="Full ids instead of abbreviated ones.")

#: Shortest abbreviation of an id, as git's ``core.abbrev`` default; it grows until unique.
MIN_ABBREV = 7
#: Longest abbreviation shown before giving the full id.
MAX_ABBREV = 12

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: object) -> str:
    """Text from a repository with its control characters shown as escapes (``\\x1b``).

    A fetched repository may hold terminal escape sequences or bidi overrides in
    messages, ids and files; they are shown, never interpreted by the terminal.
    """
    return _CONTROL.sub(lambda m: repr(m.group(0))[1:-1], str(text))


def safe(text: object) -> str:
    """Text from a repository, ready for rich markup: :func:`printable`, with markup escaped."""
    return escape(printable(text))


def one_line(text: object) -> str:
    """``text`` on one line: whitespace runs (newlines included) become one space."""
    return " ".join(str(text).split())


def repo_path(path: Path | None) -> Path:
    """The repository path the command line names: ``--repo``, else ``$GOT_REPO``, else ``./got.git``."""
    return path or Path(os.environ.get("GOT_REPO") or "got.git")


def open_repo(path: Path | None, *, create: bool = False) -> ReasoningRepo:
    """Open the repository named on the command line (never creates one unless asked).

    Raises:
        RepositoryNotFoundError: nothing (or something that is not a repository) at the path.
    """
    target = repo_path(path)
    try:
        is_file = target.exists() and not target.is_dir()
    except OSError as exc:
        raise RepositoryNotFoundError(f"cannot look at {target}: {exc.strerror or exc}") from None
    if is_file:
        raise RepositoryNotFoundError(f"{target} is a file, not a git repository; pass --repo PATH")
    if not create and not target.exists():
        raise RepositoryNotFoundError(
            f"no git repository at {target}; create one with `got init -r {target}`, or pass --repo PATH"
        )
    return ReasoningRepo(target, create=create)


def _leftovers(path: Path) -> list[Path]:
    """``path`` and its missing ancestors: what creating ``path`` would add to the disk."""
    missing = []
    for p in [path, *path.parents]:
        try:
            if p.exists() or p.is_symlink():
                break
        except OSError:
            break
        missing.append(p)
    return missing


@contextmanager
def created_on_failure_removed(*paths: Path) -> Iterator[None]:
    """Remove what the block created at ``paths`` (and their new parent directories) if it fails.

    A failed command leaves nothing behind: a repository initialised for a bundle that
    then proves damaged, the output directory of a run that could not start.
    """
    fresh = {p: _leftovers(Path(p)) for p in paths}
    try:
        yield
    except BaseException:
        for made in fresh.values():
            if made:
                top = made[-1]  # the outermost directory that did not exist before
                if top.is_dir() and not top.is_symlink():
                    shutil.rmtree(top, ignore_errors=True)
                else:
                    try:
                        top.unlink()
                    except OSError:
                        pass
        raise


class Abbrev:
    """Abbreviated object ids, as git prints them: the shortest prefix of at least 7 hex
    digits that names one object of the repository (up to 12; then the full id).

    With ``full`` every id is printed whole (``--full``).
    """

    def __init__(self, repo: ReasoningRepo | None, *, full: bool = False) -> None:
        self.repo = repo
        self.full = full
        self._cache: dict[str, str] = {}

    def __call__(self, oid: str | None) -> str:
        """The abbreviation of ``oid`` (an empty string for None)."""
        if not oid:
            return ""
        if self.full or self.repo is None:
            return oid
        got = self._cache.get(oid)
        if got is None:
            got = oid
            for n in range(MIN_ABBREV, MAX_ABBREV + 1):
                try:
                    if self.repo.git.resolve(oid[:n]) == oid:
                        got = oid[:n]
                        break
                except UnknownRefError:
                    continue  # ambiguous (or names another object first): longer
            self._cache[oid] = got
        return got

    def many(self, oids: Iterable[str]) -> str:
        """Comma-separated abbreviations."""
        return ", ".join(self(o) for o in oids)


def say_empty(sentence: str) -> None:
    """Print an empty result as one sentence, the same way in every command (exit status stays 0).

    ``sentence`` is plain text (no markup), e.g. ``"no tags in got.git"``; it is printed
    with a capital letter and a full stop.
    """
    text = sentence.strip().rstrip(".")
    console.print(safe(text[:1].upper() + text[1:] + "."))


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
    """Comma-separated short SHAs (a fixed 10 digits; :class:`Abbrev` gives git's unique ones)."""
    return ", ".join(o[:10] for o in oids)


def check_target(path: Path, what: str, *, directory: bool) -> Path:
    """Check a path a command will write to, before anything is written.

    ``path`` may exist already as the right kind (a directory with ``directory``, else
    a file). A directory's missing parents are created with it (its nearest existing
    ancestor must be a directory); a file's directory must exist already.

    Raises:
        InvalidInputError: the path is the wrong kind, or a file is in the way above it.
    """
    try:
        if path.exists():
            if directory and not path.is_dir():
                raise InvalidInputError(f"{what} {path} is a file, not a directory; choose a directory")
            if not directory and path.is_dir():
                raise InvalidInputError(f"{what} {path} is a directory, not a file; choose a file name")
            if not directory and not path.is_file():  # a device, FIFO or socket: never replaced
                raise InvalidInputError(f"{what} {path} is not a regular file; choose a file name")
            return path
        if not directory and not path.parent.exists():
            raise InvalidInputError(f"{what} {path}: the directory {path.parent} does not exist")
        for parent in path.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise InvalidInputError(f"{what} {path}: {parent} is a file, not a directory")
                break
    except OSError as exc:
        raise InvalidInputError(f"{what} {path}: {exc.strerror or exc}") from None
    return path


def replace_demo(target: Path, marker_ref: str) -> None:
    """Make room for a demo repository at ``target``: remove a previous run's, refuse anything else.

    A previous demo repository is recognised by ``marker_ref``; any other file or
    directory (a repository of your own included) is never deleted.

    Raises:
        InvalidInputError: something that is not an earlier demo repository is at ``target``.
    """
    try:
        if not target.exists() and not target.is_symlink():
            return
        if target.is_dir() and not target.is_symlink() and not any(target.iterdir()):
            return  # an empty directory: the demo goes in it
    except OSError as exc:
        raise InvalidInputError(f"cannot look at {target}: {exc.strerror or exc}") from None
    previous = None
    if target.is_dir() and not target.is_symlink():
        try:
            previous = ReasoningRepo(target, create=False)
        except GotError:
            previous = None
    if previous is None or previous.tip(marker_ref) is None:
        raise InvalidInputError(
            f"{target} exists and is not an earlier demo repository; nothing was deleted: choose another --repo path"
        )
    previous.close()
    shutil.rmtree(target)


def require_positive(value: int | float | None, option: str, *, zero: bool = False) -> None:
    """Refuse a count or budget below 1 (or below 0 with ``zero``), and NaN.

    Raises:
        InvalidInputError: naming the option.
    """
    if value is None:
        return
    if value != value or value < (0 if zero else 1) or value == float("inf"):  # NaN compares false
        bound = "0 or more" if zero else "1 or more"
        raise InvalidInputError(f"{option} must be {bound}, not {value}")
