"""``got session``: the LlamaIndex memory's sessions, seen through git.

Registered by the ``got.cli`` entry point (``session = got_integrations.llamaindex.cli:app``)::

    got session list                       sessions, message counts, last write
    got session log alice                  every write (commit) with the messages it added
    got session show alice                 the stored conversation with message ids
    got session diff alice 2 4             git diff between writes #2 and #4 (or two commits)

Works on the repository alone (it does not import llama-index).
"""

from __future__ import annotations

import json as _json
from pathlib import Path
from typing import Any

import typer
from rich.syntax import Syntax

from got_core.cli.plugin import (
    Abbrev,
    FullOption,
    JsonOption,
    RepoOption,
    console,
    emit_json,
    open_repo,
    printable,
    safe,
    say_empty,
    when,
)
from got_core.cli.render import listing
from got_core.errors import CorruptRepositoryError, InvalidInputError, UnknownRefError
from got_core.repo import ReasoningRepo
from got_integrations.llamaindex._session import SessionLog, Write, list_sessions, message_path

__all__ = ["app"]

app = typer.Typer(
    help="Chat sessions of the LlamaIndex memory (GitMemory): list, log, show, diff.",
    no_args_is_help=True,
    add_completion=False,
)


def _preview(data: dict[str, Any], width: int = 70) -> str:
    parts = []
    blocks = data.get("blocks") if isinstance(data, dict) else None
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, dict):
            continue  # a preview only: `got session show --json` prints the file as stored
        if block.get("block_type") == "text" and block.get("text"):
            parts.append(str(block["text"]))
        elif block.get("block_type") == "tool_call":
            args = _json.dumps(block.get("tool_kwargs", {}), ensure_ascii=False, sort_keys=True)
            parts.append(f"→ {block.get('tool_name')}({args})")
    text = " ".join(" ".join(parts).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _added(repo: ReasoningRepo, write: Write) -> list[dict[str, Any]]:
    out = []
    for seq in write.added:
        try:
            raw = repo.read_file(write.commit, message_path(seq))
        except UnknownRefError:
            continue  # deleted again by the same write (never happens)
        try:
            data = _json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except (ValueError, RecursionError) as exc:
            raise CorruptRepositoryError(
                f"{message_path(seq)} in {write.commit[:12]} is not a stored chat message "
                f"({str(exc)[:120]}); restore it from an earlier commit of the session"
            ) from None
        out.append(
            {
                "seq": seq,
                "id": f"{write.commit}:{message_path(seq)}",
                "role": str(data.get("role", "?")),
                "preview": _preview(data),
            }
        )
    return out


def _resolve(log: SessionLog, writes: list[Write], turn: str) -> str:
    if turn.isdigit() and len(turn) < 7:  # a write number from `got session log`
        number = int(turn)
        if not 1 <= number <= len(writes):
            raise InvalidInputError(
                f"session {log.session_id!r} has writes 1..{len(writes)}, not {number}; "
                f"see `got session log {log.session_id}`"
            )
        return writes[number - 1].commit
    return log.repo.resolve(turn)


@app.command("list")
def list_cmd(repo: Path | None = RepoOption, json: bool = JsonOption, full: bool = FullOption) -> None:
    """Every session in the repository with its message count and last write."""
    r = open_repo(repo)
    rows: list[dict[str, Any]] = []
    for session_id, tip in list_sessions(r).items():
        state = SessionLog(r, session_id).state(tip)
        active = sum(1 for s in state.seqs if not state.is_archived(s))
        rows.append(
            {
                "session": session_id,
                "messages": len(state.blobs),
                "window": active,
                "head": tip,
                "time": r.commit_info(tip).time,
            }
        )
    if json:
        emit_json(rows)
        return
    if not rows:
        say_empty(f"no sessions in {r.gitdir}")
        return
    abbrev = Abbrev(r, full=full)
    table = listing(
        "session",
        "messages",
        "in window",
        "head",
        "updated",
        title=f"sessions in {safe(r.gitdir)}",
        flex="session",
        full=full,
    )
    for row in rows:
        table.add_row(
            safe(row["session"]), str(row["messages"]), str(row["window"]), abbrev(row["head"]), when(row["time"])[:16]
        )
    console.print(table)


@app.command()
def log(
    session_id: str = typer.Argument(..., help="The session id."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
    full: bool = FullOption,
) -> None:
    """Every write of a session, oldest first, with commit ids and the messages each added."""
    r = open_repo(repo)
    session = SessionLog(r, session_id)
    writes = session.history()
    if json:
        emit_json(
            [
                {
                    "number": w.number,
                    "commit": w.commit,
                    "time": w.time,
                    "op": w.op,
                    "window_start": w.window_start,
                    "subject": w.subject,
                    "messages": _added(r, w),
                }
                for w in writes
            ]
        )
        return
    console.print(f"[bold]session {safe(session_id)}[/]  ({safe(session.ref)})")
    abbrev = Abbrev(r, full=full)
    width = max(console.width, 40)
    for w in writes:
        console.print(f"[bold]#{w.number}[/] [yellow]{abbrev(w.commit)}[/] {when(w.time)[:16]}  {safe(w.subject)}")
        for m in _added(r, w):
            line = f"    {m['seq']:>4} {m['role']:<9} {m['preview']}"
            console.print(safe(line if len(line) <= width else line[: width - 1] + "…"))


@app.command()
def show(
    session_id: str = typer.Argument(..., help="The session id."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
    full: bool = FullOption,
) -> None:
    """The stored conversation (archived messages marked) with each message's id.

    An id is ``<commit>:<path>`` (``git show`` reads it); the commit is abbreviated as git
    does unless ``--full`` (``--json`` always gives whole ids).
    """
    r = open_repo(repo)
    session = SessionLog(r, session_id)
    session.require()
    ids = session.message_ids()
    rows: list[dict[str, Any]] = [
        {"seq": m.seq, "id": ids.get(m.seq, ""), "role": m.role, "archived": m.archived, "message": m.data}
        for m in session.messages()
    ]
    if json:
        emit_json(rows)
        return
    if not rows:
        say_empty(f"no messages in session {session_id}")
        return
    abbrev = Abbrev(r, full=full)
    for row in rows:
        commit, sep, path = str(row["id"]).partition(":")
        shown = f"{abbrev(commit)}{sep}{path}" if sep else row["id"]
        mark = "[dim]archived[/] " if row["archived"] else ""
        console.print(
            f"{row['seq']:>4} {mark}[bold]{safe(row['role'])}[/] {safe(_preview(row['message'], 200))}", soft_wrap=False
        )
        console.print(f"     [dim]{safe(shown)}[/]")


@app.command()
def diff(
    session_id: str = typer.Argument(..., help="The session id."),
    turn_a: str = typer.Argument(..., help="Old side: a write number from `got session log`, or a commit."),
    turn_b: str = typer.Argument(..., help="New side: a write number, or a commit."),
    repo: Path | None = RepoOption,
) -> None:
    """``git diff`` between two writes of a session (new message files, window moves)."""
    r = open_repo(repo)
    session = SessionLog(r, session_id)
    writes = session.history()
    text = r.diff(_resolve(session, writes, turn_a), _resolve(session, writes, turn_b))
    if not text:
        say_empty(f"no differences between {turn_a} and {turn_b}")
        return
    console.print(Syntax(printable(text), "diff", theme="ansi_dark", word_wrap=True))
