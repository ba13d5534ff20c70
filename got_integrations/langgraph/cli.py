"""``got threads``: LangGraph threads checkpointed by :class:`GitCheckpointSaver`.

``got threads list`` / ``history`` / ``show`` / ``diff`` / ``fork`` read any repository
written by the checkpointer (``--repo``, or ``$GOT_REPO``); ``got threads demo`` runs
an agent graph with a tool loop, driven by a scripted model, into a local repository
and shows its log, a diff of two checkpoints and a fork. Registered on the ``got``
command through the ``got.cli`` entry point.
"""

from __future__ import annotations

import json as jsonlib
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from got_core.cli.plugin import JsonOption, RepoOption, console, emit_json, open_repo
from got_core.errors import ConfigError, MissingExtraError, UnknownRefError
from got_integrations.langgraph._layout import jsonable, message_summary, one_line
from got_integrations.langgraph.checkpoint import GitCheckpointSaver

if TYPE_CHECKING:  # pragma: no cover
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import CheckpointTuple
    from langgraph.graph import MessagesState

__all__ = ["app", "build_demo_graph", "calculator_tool", "scripted_agent"]

app = typer.Typer(
    help="LangGraph threads in git: list, history, show, diff, fork, demo.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

NsOption = typer.Option("", "--ns", help="Checkpoint namespace (default: the root graph).")


def _saver(repo: Path | None) -> GitCheckpointSaver:
    """The saver on ``repo``; with ``LANGGRAPH_AES_KEY`` set (LangGraph's own variable), one that
    decrypts what ``EncryptedSerializer.from_pycryptodome_aes()`` wrote with that key."""
    serde = None
    if os.environ.get("LANGGRAPH_AES_KEY"):
        from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

        from got_integrations.langgraph._serde import default_serde

        try:
            serde = EncryptedSerializer.from_pycryptodome_aes(serde=default_serde())
        except ImportError as exc:
            raise MissingExtraError("encrypted LangGraph repositories (pycryptodome)", "langgraph", exc) from exc
        except ValueError as exc:
            raise ConfigError(f"LANGGRAPH_AES_KEY: {exc}") from None
    return GitCheckpointSaver(open_repo(repo), serde=serde)


def _config(thread: str, ns: str, checkpoint_id: str | None = None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _resolve(saver: GitCheckpointSaver, thread: str, ns: str, ref: str) -> str:
    """A checkpoint id from an id, a unique id prefix, ``latest`` or ``latest~N``."""
    ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list(_config(thread, ns))]
    if not ids:
        raise UnknownRefError(f"thread {thread!r} has no checkpoints; `got threads list` shows the threads")
    if ref == "latest" or ref.startswith("latest~"):
        back = int(ref.split("~", 1)[1] or 0) if "~" in ref else 0
        if back >= len(ids):
            raise UnknownRefError(f"thread {thread!r} has only {len(ids)} checkpoints")
        return ids[back]
    matches = [i for i in ids if i == ref] or [i for i in ids if i.startswith(ref)]
    if len(matches) != 1:
        raise UnknownRefError(
            f"{ref!r} names {len(matches)} checkpoints of {thread!r}; give more of the id (see `got threads history`)"
        )
    return matches[0]


def _checkpoint(saver: GitCheckpointSaver, thread: str, ns: str, checkpoint_id: str) -> CheckpointTuple:
    """The checkpoint ``checkpoint_id`` of a thread.

    Raises:
        UnknownRefError: the thread has no such checkpoint (any more: another process may delete it).
    """
    tup = saver.get_tuple(_config(thread, ns, checkpoint_id))
    if tup is None:
        raise UnknownRefError(
            f"thread {thread!r} has no checkpoint {checkpoint_id!r}; `got threads history` lists them"
        )
    return tup


def _commit(saver: GitCheckpointSaver, config: RunnableConfig) -> str:
    """The commit of the checkpoint ``config`` names.

    Raises:
        UnknownRefError: there is no such checkpoint (any more: another process may delete it).
    """
    commit = saver.commit_of(config)
    if commit is None:
        raise UnknownRefError(
            f"no checkpoint {config['configurable'].get('checkpoint_id', 'latest')!r} in "
            f"thread {config['configurable']['thread_id']!r}; `got threads history` lists them"
        )
    return commit


def _writes_summary(tup: Any) -> str:
    names: dict[str, list[str]] = {}
    for task_id, channel, _ in tup.pending_writes or []:
        names.setdefault(task_id[:8], []).append(channel)
    return "; ".join(f"{t}: {', '.join(sorted(set(c)))}" for t, c in names.items())


def _last_message(values: dict[str, Any]) -> str:
    messages = values.get("messages")
    if isinstance(messages, list) and messages:
        return message_summary(messages[-1]) or one_line(repr(messages[-1]), 60)
    return ""


def history_rows(
    saver: GitCheckpointSaver, thread: str, ns: str = "", limit: int | None = None
) -> list[dict[str, Any]]:
    """One row per checkpoint of a thread, newest first (what ``got threads history`` prints)."""
    rows = []
    for tup in saver.list(_config(thread, ns), limit=limit):
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        rows.append(
            {
                "checkpoint_id": tup.config["configurable"]["checkpoint_id"],
                "parent_checkpoint_id": parent,
                "step": tup.metadata.get("step"),
                "source": tup.metadata.get("source"),
                "commit": saver.commit_of(tup.config),
                "last_message": _last_message(tup.checkpoint["channel_values"]),
                "writes": _writes_summary(tup),
            }
        )
    return rows


@app.command("list")
def list_threads(repo: Path | None = RepoOption, json: bool = JsonOption) -> None:
    """Every thread with its namespaces, latest step and checkpoint count."""
    saver = _saver(repo)
    rows = []
    for thread in saver.threads():
        for ns in saver.namespaces(thread):
            tuples = list(saver.list(_config(thread, ns)))
            if not tuples:
                continue
            latest = tuples[0]
            rows.append(
                {
                    "thread_id": thread,
                    "checkpoint_ns": ns,
                    "checkpoints": len(tuples),
                    "latest_step": latest.metadata.get("step"),
                    "latest_checkpoint_id": latest.config["configurable"]["checkpoint_id"],
                    "commit": saver.commit_of(latest.config),
                }
            )
    if json:
        emit_json(rows)
        return
    table = Table(title=f"threads in {saver.repo.gitdir}")
    for col in ("thread", "namespace", "checkpoints", "latest step", "latest checkpoint", "commit"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            escape(r["thread_id"]),
            escape(r["checkpoint_ns"] or "(root)"),
            str(r["checkpoints"]),
            str(r["latest_step"]),
            r["latest_checkpoint_id"],
            r["commit"][:10],
        )
    console.print(table)


@app.command()
def history(
    thread: str = typer.Argument(..., help="Thread id."),
    ns: str = NsOption,
    limit: int | None = typer.Option(None, "--limit", "-n", help="At most this many checkpoints."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
) -> None:
    """Checkpoints of a thread, newest first: id, step, source, commit, last message, writes."""
    saver = _saver(repo)
    rows = history_rows(saver, thread, ns, limit)
    if not rows:
        raise UnknownRefError(f"thread {thread!r} has no checkpoints; `got threads list` shows the threads")
    if json:
        emit_json(rows)
        return
    table = Table(title=f"thread {escape(thread)}" + (f" / {escape(ns)}" if ns else ""))
    for col in ("step", "source", "checkpoint", "commit", "parent", "last message", "pending writes"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            str(r["step"]),
            str(r["source"]),
            r["checkpoint_id"],
            r["commit"][:10],
            (r["parent_checkpoint_id"] or "")[-12:],
            escape(r["last_message"]),
            escape(r["writes"]),
        )
    console.print(table)


@app.command()
def show(
    thread: str = typer.Argument(..., help="Thread id."),
    checkpoint: str = typer.Argument("latest", help="Checkpoint id, unique prefix, latest or latest~N."),
    ns: str = NsOption,
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
) -> None:
    """The state of one checkpoint (readable rendering of every channel)."""
    saver = _saver(repo)
    cid = _resolve(saver, thread, ns, checkpoint)
    tup = _checkpoint(saver, thread, ns, cid)
    data = {
        "checkpoint_id": cid,
        "commit": _commit(saver, tup.config),
        "metadata": jsonable(tup.metadata),
        "values": jsonable(tup.checkpoint["channel_values"]),
        "pending_writes": [{"task_id": t, "channel": c, "value": jsonable(v)} for t, c, v in tup.pending_writes or []],
    }
    if json:
        emit_json(data)
        return
    console.print(
        f"[bold]checkpoint {cid}[/]  commit {data['commit'][:10]}  "
        f"step {tup.metadata.get('step')} ({tup.metadata.get('source')})"
    )
    console.print(
        Syntax(jsonlib.dumps(data["values"], indent=2, ensure_ascii=False), "json", theme="ansi_dark", word_wrap=True)
    )


def checkpoint_diff(
    saver: GitCheckpointSaver, thread: str, old: str, new: str, ns: str = "", all_files: bool = False
) -> str:
    """Unified diff between two checkpoints of a thread: the readable state files, or every
    file (``checkpoint.json`` and the serializer's ``.bin`` files too) with ``all_files``."""
    a = saver.commit_of(_config(thread, ns, old))
    b = saver.commit_of(_config(thread, ns, new))
    if a is None or b is None:
        raise UnknownRefError(f"no checkpoint {old if a is None else new!r} in thread {thread!r}")
    patch = saver.repo.diff(a, b)
    if all_files:
        return patch
    kept, keep = [], True
    for line in patch.splitlines(keepends=True):
        if line.startswith("diff --git "):
            name = line.rstrip().rsplit(" b/", 1)[-1]
            keep = not name.endswith(".bin") and name not in ("checkpoint.json", "checkpoint.bin")
        if keep:
            kept.append(line)
    return "".join(kept)


@app.command()
def diff(
    thread: str = typer.Argument(..., help="Thread id."),
    old: str = typer.Argument(..., help="Older checkpoint (id, unique prefix, latest~N)."),
    new: str = typer.Argument("latest", help="Newer checkpoint (default: the latest)."),
    ns: str = NsOption,
    all_files: bool = typer.Option(False, "--all", help="Also checkpoint.json and the serializer's .bin files."),
    repo: Path | None = RepoOption,
) -> None:
    """What changed in the state between two checkpoints (git's patch format)."""
    saver = _saver(repo)
    text = checkpoint_diff(
        saver, thread, _resolve(saver, thread, ns, old), _resolve(saver, thread, ns, new), ns, all_files
    )
    if not text:
        console.print("(no differences)")
        return
    console.print(Syntax(text, "diff", theme="ansi_dark", word_wrap=True))


@app.command()
def fork(
    thread: str = typer.Argument(..., help="Thread to fork."),
    checkpoint: str = typer.Argument(..., help="Checkpoint to fork at (id, unique prefix, latest~N)."),
    to: str | None = typer.Option(None, "--to", help="New thread id (default: <thread>-fork-<id suffix>)."),
    ns: str = NsOption,
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
) -> None:
    """Start a new thread at a past checkpoint (a git branch sharing the history)."""
    saver = _saver(repo)
    cid = _resolve(saver, thread, ns, checkpoint)
    target = to or f"{thread}-fork-{cid[-8:]}"
    commit = _commit(saver, saver.fork_thread(thread, cid, target, ns))
    if json:
        emit_json({"thread_id": target, "checkpoint_id": cid, "commit": commit})
        return
    console.print(
        f"forked [bold]{escape(thread)}[/] at {cid} into thread [bold]{escape(target)}[/] "
        f"(commit {commit[:10]}); invoke the graph with "
        f"thread_id={escape(target)!r} to continue from there"
    )


# ---------------------------------------------------------------------------- the demo
def calculator_tool() -> Any:
    """The demo's calculator as a LangChain tool (a whitelist parser; nothing is eval-ed)."""
    from langchain_core.tools import tool

    from got_core.solver.tools import calculate

    @tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression exactly, e.g. '12*(3+4)'."""
        return calculate(expression)

    return calculator


def scripted_agent(state: MessagesState) -> dict[str, Any]:
    """A scripted stand-in for a chat model (not an LLM): plans one calculator call per
    question, then reports the tool's answer."""
    from langchain_core.messages import AIMessage, HumanMessage

    last = state["messages"][-1]
    if isinstance(last, HumanMessage):
        text = str(last.content).strip().rstrip("?")
        expression = re.split(r"(?i)\bwhat is\b|:", text)[-1].strip()
        call = {"name": "calculator", "args": {"expression": expression}, "id": f"call-{len(state['messages'])}"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}
    return {"messages": [AIMessage(content=f"The answer is {last.content}.")]}


def build_demo_graph(checkpointer: Any) -> Any:
    """The demo agent: an ``agent`` node and a ``ToolNode`` in a loop, compiled with ``checkpointer``."""
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    builder = StateGraph(MessagesState)
    builder.add_node("agent", scripted_agent)
    builder.add_node("tools", ToolNode([calculator_tool()]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


@app.command()
def demo(
    path: Path | None = typer.Option(
        None,
        "--repo",
        "-r",
        help="Where to write the demo repository (default ./got-langgraph-demo.git; replaced if present).",
    ),
    keep: bool = typer.Option(True, help="Keep the repository afterwards."),
) -> None:
    """An agent with a tool loop (scripted model) checkpointed into git: log, diff, fork."""
    from langchain_core.messages import HumanMessage

    target = path or Path("got-langgraph-demo.git")
    if target.exists():
        shutil.rmtree(target)
    saver = GitCheckpointSaver.from_path(target)
    graph = build_demo_graph(saver)
    config = {"configurable": {"thread_id": "demo"}}
    for question in ("What is 12*(3+4)?", "What is 2**10/4?"):
        answer = graph.invoke({"messages": [HumanMessage(question)]}, config)["messages"][-1]
        console.print(f"[bold]user[/] {escape(question)}  [bold]agent[/] {escape(str(answer.content))}")

    console.rule("[bold]1. every checkpoint is a commit (got threads history demo)")
    history(thread="demo", ns="", limit=None, repo=target, json=False)

    console.rule("[bold]2. what the last turn changed in the state (got threads diff demo latest~4)")
    rows = history_rows(saver, "demo")
    console.print(
        Syntax(
            checkpoint_diff(saver, "demo", rows[4]["checkpoint_id"], rows[0]["checkpoint_id"]),
            "diff",
            theme="ansi_dark",
            word_wrap=True,
        )
    )

    console.rule("[bold]3. fork: answer a different question from the first turn's end")
    first_turn_end = next(r for r in rows if r["last_message"] == "ai: The answer is 84.")
    # invoking on a past checkpoint's config continues from there: the new line is a fork (a new ref)
    forked = graph.invoke(
        {"messages": [HumanMessage("What is 6*7?")]}, _config("demo", "", first_turn_end["checkpoint_id"])
    )["messages"][-1]
    console.print(f"fork answer: [bold]{escape(str(forked.content))}[/]; the first line keeps its own answers:")
    table = Table()
    table.add_column("ref")
    table.add_column("commit")
    table.add_column("last message", overflow="fold")
    for ref, checkpoint_id in sorted(saver.lines("demo").items()):
        tip = _checkpoint(saver, "demo", "", checkpoint_id)
        table.add_row(
            escape(ref), _commit(saver, tip.config)[:10], escape(_last_message(tip.checkpoint["channel_values"]))
        )
    console.print(table)
    new_thread = saver.fork_thread("demo", first_turn_end["checkpoint_id"], "demo-branch")
    console.print(f"and a new thread [bold]demo-branch[/] starts at {new_thread['configurable']['checkpoint_id']}")
    where = escape(str(target))
    console.print(
        f"\nrepository: [bold]{where}[/] — try: git --git-dir={where} log --oneline "
        f"refs/got/threads/demo/root/head; got threads history demo -r {where}"
    )
    saver.close()
    if not keep:
        shutil.rmtree(target, ignore_errors=True)


@app.callback()
def _threads() -> None:
    """LangGraph threads in git: list, history, show, diff, fork, demo."""
