"""``got threads``: LangGraph threads checkpointed by :class:`GitCheckpointSaver`.

``got threads list`` / ``history`` / ``log`` / ``show`` / ``diff`` / ``fork`` read any
repository written by the checkpointer (``--repo``, or ``$GOT_REPO``). Checkpoints are
named as git names commits: ``latest`` (or ``HEAD``), a checkpoint id, a unique prefix
of a checkpoint id or commit, then ``~N`` / ``^N`` walking parents along the thread's
history (``latest~3``, ``<id>^``). ``got threads demo`` runs
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

from got_core.cli.plugin import (
    Abbrev,
    FullOption,
    JsonOption,
    RepoOption,
    check_target,
    console,
    created_on_failure_removed,
    emit_json,
    open_repo,
    printable,
    replace_demo,
    safe,
    say_empty,
)
from got_core.cli.render import listing
from got_core.errors import ConfigError, InvalidInputError, MissingExtraError, UnknownRefError
from got_core.storage.gitcli import run_git
from got_integrations.langgraph._layout import jsonable, message_summary, one_line
from got_integrations.langgraph._revs import ThreadGraph
from got_integrations.langgraph.checkpoint import GitCheckpointSaver

if TYPE_CHECKING:  # pragma: no cover
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import CheckpointTuple
    from langgraph.graph import MessagesState

__all__ = ["DEMO_MARKER", "app", "build_demo_graph", "calculator_tool", "resolve_checkpoint", "scripted_agent"]

#: The ref only the demo thread writes: how `got threads demo` recognises its own earlier repository.
DEMO_MARKER = "refs/got/threads/demo/root/head"

app = typer.Typer(
    help="LangGraph threads in git: list, history, log, show, diff, fork, demo. Checkpoints are "
    "named as in git: latest, an id or unique prefix, then ~N / ^N along the thread's history.",
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


def resolve_checkpoint(saver: GitCheckpointSaver, thread: str, ns: str, rev: str) -> str:
    """The checkpoint id ``rev`` names in a thread, with git's revision rules.

    ``latest`` (or ``HEAD``), a checkpoint id, a unique prefix (4+ characters) of a
    checkpoint id or commit SHA, followed by ``~N`` (N parents back along the thread's
    history) and ``^N`` (the N-th parent), as ``git rev-parse`` reads them.

    Raises:
        InvalidInputError: a malformed revision (``latest~x``).
        UnknownRefError: no such thread, checkpoint, or parent.
    """
    graph = ThreadGraph.load(saver, thread, ns)
    return graph.checkpoint_id(graph.resolve(rev))


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
def list_threads(repo: Path | None = RepoOption, json: bool = JsonOption, full: bool = FullOption) -> None:
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
    if not rows:
        say_empty(f"no threads in {saver.repo.gitdir}")
        return
    abbrev = Abbrev(saver.repo, full=full)
    columns = ["thread", "namespace", "checkpoints", "latest step", "commit"] + (["latest checkpoint"] if full else [])
    table = listing(*columns, title=f"threads in {safe(saver.repo.gitdir)}", flex="thread", full=full)
    for r in rows:
        table.add_row(
            safe(r["thread_id"]),
            safe(r["checkpoint_ns"] or "(root)"),
            str(r["checkpoints"]),
            str(r["latest_step"]),
            abbrev(r["commit"]),
            *([r["latest_checkpoint_id"]] if full else []),
        )
    console.print(table)


@app.command()
def history(
    thread: str = typer.Argument(..., help="Thread id."),
    ns: str = NsOption,
    limit: int | None = typer.Option(None, "--limit", "-n", min=1, help="At most this many checkpoints."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
    full: bool = FullOption,
) -> None:
    """Every checkpoint of a thread (all lines), newest id first: step, source, commit, parent,
    last message (--full: checkpoint ids and pending writes too). `got threads log` follows
    one line as git log does."""
    saver = _saver(repo)
    rows = history_rows(saver, thread, ns, limit)
    if not rows:
        raise UnknownRefError(f"thread {thread!r} has no checkpoints; `got threads list` shows the threads")
    if json:
        emit_json(rows)
        return
    abbrev = Abbrev(saver.repo, full=full)
    parents = {r["checkpoint_id"]: r["commit"] for r in history_rows(saver, thread, ns)} if limit else {}
    parents.update({r["checkpoint_id"]: r["commit"] for r in rows})
    columns = ["step", "source", "commit", "parent", "last message"]
    if full:
        columns[2:2] = ["checkpoint"]
        columns.append("pending writes")
    table = listing(
        *columns,
        title=f"thread {safe(thread)}" + (f" / {safe(ns)}" if ns else ""),
        flex="last message",
        wrap=("pending writes",),
        full=full,
    )
    for r in rows:
        parent = parents.get(r["parent_checkpoint_id"] or "", "")
        cells = [str(r["step"]), str(r["source"]), abbrev(r["commit"]), abbrev(parent), safe(r["last_message"])]
        if full:
            cells[2:2] = [r["checkpoint_id"]]
            cells.append(safe(r["writes"]))
        table.add_row(*cells)
    console.print(table)


def _git_graph(graph: ThreadGraph, start: str | None, limit: int | None, abbrev: Abbrev) -> list[str]:
    """``git log --graph`` of the thread's lines (or of one line from ``start``), ids abbreviated
    and each line's tip labelled (latest, fork ...)."""
    tips = [start] if start else list(dict.fromkeys(graph.lines.values()))
    args = ["log", "--graph", "--topo-order", "--format=%H"] + ([f"-n{limit}"] if limit else []) + tips
    out = run_git(args, git_dir=graph.saver.repo.gitdir).stdout.decode("utf-8", "replace")
    labels = graph.labels(full=abbrev.full)
    lines = []
    for line in out.splitlines():
        head, _, sha = line.rpartition(" ")
        if sha not in graph.subjects:
            lines.append(safe(line))  # a connector row of the graph (|/, |\\)
            continue
        mark = f" [yellow]({safe(', '.join(labels[sha]))})[/]" if sha in labels else ""
        lines.append(f"{safe(head)} [bold]{abbrev(sha)}[/]{mark} {safe(graph.subjects[sha])}")
    return lines


@app.command("log")
def log_cmd(
    thread: str = typer.Argument(..., help="Thread id."),
    rev: str | None = typer.Argument(None, help="Start here (default: latest), e.g. latest~2 or a checkpoint id."),
    ns: str = NsOption,
    limit: int | None = typer.Option(None, "--limit", "-n", min=1, help="At most this many checkpoints."),
    graph_view: bool = typer.Option(False, "--graph", help="Draw every line of the thread as git log --graph does."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
    full: bool = FullOption,
) -> None:
    """A thread's history as git log shows it: from a checkpoint (default: latest) back along
    its parents; with --graph, every line (the latest and each fork) and where they part."""
    saver = _saver(repo)
    graph = ThreadGraph.load(saver, thread, ns)
    start = graph.resolve(rev) if rev is not None else None
    abbrev = Abbrev(saver.repo, full=full)
    if graph_view and not json:
        for line in _git_graph(graph, start, limit, abbrev):
            console.print(line, overflow="ellipsis", no_wrap=True, crop=True)
        return
    if start is None and graph.head is None:
        raise UnknownRefError(f"thread {thread!r} has no latest checkpoint; name one (see `got threads history`)")
    commits = graph.first_parent_line(start or graph.head or "", limit)
    labels = graph.labels(full=full)
    if json:
        emit_json(
            [
                {
                    "commit": c,
                    "checkpoint_id": graph.ids.get(c, ""),
                    "parent_commit": (graph.parents.get(c) or [None])[0],
                    "subject": graph.subjects.get(c, ""),
                    "lines": labels.get(c, []),
                }
                for c in commits
            ]
        )
        return
    columns = ["rev", "commit", "lines", "subject"]
    if full:
        columns.insert(2, "checkpoint")
    table = listing(*columns, title=f"thread {safe(thread)}" + (f" / {safe(ns)}" if ns else ""), full=full)
    name = rev or "latest"
    for i, c in enumerate(commits):
        cells = [safe(name if i == 0 else f"{name}~{i}"), abbrev(c), safe(", ".join(labels.get(c, [])))]
        if full:
            cells.insert(2, graph.ids.get(c, ""))
        table.add_row(*cells, safe(graph.subjects.get(c, "")))
    console.print(table)


@app.command()
def show(
    thread: str = typer.Argument(..., help="Thread id."),
    checkpoint: str = typer.Argument("latest", help="latest, a checkpoint id or commit (or unique prefix), ~N, ^N."),
    ns: str = NsOption,
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
    full: bool = FullOption,
) -> None:
    """The state of one checkpoint (readable rendering of every channel)."""
    saver = _saver(repo)
    cid = resolve_checkpoint(saver, thread, ns, checkpoint)
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
    abbrev = Abbrev(saver.repo, full=full)
    parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    fields = [
        ("checkpoint", cid),
        ("commit", abbrev(data["commit"])),
        ("step", f"{tup.metadata.get('step')} ({tup.metadata.get('source')})"),
        ("parent", parent or "-"),
    ]
    if tup.pending_writes:
        fields.append(("pending writes", _writes_summary(tup)))
    width = max(len(k) for k, _ in fields) + 1
    for key, value in fields:
        console.print(f"[bold]{(key + ':'):<{width}}[/] {safe(value)}", soft_wrap=False)
    console.print(
        Syntax(
            printable(jsonlib.dumps(data["values"], indent=2, ensure_ascii=False)),
            "json",
            theme="ansi_dark",
            word_wrap=True,
        )
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
    old: str = typer.Argument(..., help="Older checkpoint: latest~N, <id>^, a checkpoint id or commit (or prefix)."),
    new: str = typer.Argument("latest", help="Newer checkpoint (default: the latest)."),
    ns: str = NsOption,
    all_files: bool = typer.Option(False, "--all", help="Also checkpoint.json and the serializer's .bin files."),
    repo: Path | None = RepoOption,
) -> None:
    """What changed in the state between two checkpoints (git's patch format)."""
    saver = _saver(repo)
    a, b = resolve_checkpoint(saver, thread, ns, old), resolve_checkpoint(saver, thread, ns, new)
    text = checkpoint_diff(saver, thread, a, b, ns, all_files)
    if not text:
        say_empty(f"no differences between {old} and {new}" + ("" if all_files else " in the readable state"))
        return
    console.print(Syntax(printable(text), "diff", theme="ansi_dark", word_wrap=True))


@app.command()
def fork(
    thread: str = typer.Argument(..., help="Thread to fork."),
    checkpoint: str = typer.Argument(..., help="Checkpoint to fork at: latest~N, a checkpoint id or commit..."),
    to: str | None = typer.Option(None, "--to", help="New thread id (default: <thread>-fork-<id suffix>)."),
    ns: str = NsOption,
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
) -> None:
    """Start a new thread at a past checkpoint (a git branch sharing the history)."""
    saver = _saver(repo)
    if to is not None and not to.strip():
        raise InvalidInputError("--to must name the new thread; leave it out for <thread>-fork-<id suffix>")
    cid = resolve_checkpoint(saver, thread, ns, checkpoint)
    target = to or f"{thread}-fork-{cid[-8:]}"
    commit = _commit(saver, saver.fork_thread(thread, cid, target, ns))
    if json:
        emit_json({"thread_id": target, "checkpoint_id": cid, "commit": commit})
        return
    console.print(
        f"Forked [bold]{safe(thread)}[/] at {Abbrev(saver.repo)(commit)} into thread [bold]{safe(target)}[/]; "
        f"invoke the graph with thread_id={safe(repr(target))} to continue from checkpoint {safe(cid)}.",
        soft_wrap=False,
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
    replace_demo(target, DEMO_MARKER)
    check_target(target, "the demo repository", directory=True)
    with created_on_failure_removed(target):
        saver = GitCheckpointSaver.from_path(target)
        _run_demo(saver, HumanMessage, target)
    saver.close()
    if not keep:
        shutil.rmtree(target, ignore_errors=True)


def _run_demo(saver: GitCheckpointSaver, human: Any, target: Path) -> None:
    graph = build_demo_graph(saver)
    config = {"configurable": {"thread_id": "demo"}}
    for question in ("What is 12*(3+4)?", "What is 2**10/4?"):
        answer = graph.invoke({"messages": [human(question)]}, config)["messages"][-1]
        console.print(f"[bold]user[/] {escape(question)}  [bold]agent[/] {escape(str(answer.content))}")

    console.rule("[bold]1. every checkpoint is a commit (got threads history demo)")
    history(thread="demo", ns="", limit=None, repo=target, json=False, full=False)

    console.rule("[bold]2. what the last turn changed (got threads diff demo latest~4)")
    before = resolve_checkpoint(saver, "demo", "", "latest~4")
    console.print(
        Syntax(
            printable(checkpoint_diff(saver, "demo", before, resolve_checkpoint(saver, "demo", "", "latest"))),
            "diff",
            theme="ansi_dark",
            word_wrap=True,
        )
    )

    console.rule("[bold]3. fork: answer a different question from the first turn's end")
    rows = history_rows(saver, "demo")
    first_turn_end = next(r for r in rows if r["last_message"] == "ai: The answer is 84.")
    # invoking on a past checkpoint's config continues from there: the new line is a fork (a new ref)
    forked = graph.invoke({"messages": [human("What is 6*7?")]}, _config("demo", "", first_turn_end["checkpoint_id"]))[
        "messages"
    ][-1]
    console.print(f"fork answer: [bold]{escape(str(forked.content))}[/]; the first line keeps its own answers:")
    lines = ThreadGraph.load(saver, "demo")
    abbrev = Abbrev(saver.repo)
    table = listing("line", "commit", "last message")
    for tip, names in sorted(lines.labels().items(), key=lambda kv: kv[1]):
        checkpoint = _checkpoint(saver, "demo", "", lines.checkpoint_id(tip))
        table.add_row(safe(", ".join(names)), abbrev(tip), safe(_last_message(checkpoint.checkpoint["channel_values"])))
    console.print(table)
    console.rule("[bold]4. the thread's lines (got threads log demo --graph)")
    log_cmd(thread="demo", rev=None, ns="", limit=None, graph_view=True, repo=target, json=False, full=False)
    new_thread = saver.fork_thread("demo", first_turn_end["checkpoint_id"], "demo-branch")
    console.print(f"and a new thread [bold]demo-branch[/] starts at {new_thread['configurable']['checkpoint_id']}")
    where = escape(str(target))
    console.print(f"\nrepository: [bold]{where}[/]; try:")
    console.print(f"  got threads log demo --graph -r {where}")
    console.print(f"  git --git-dir={where} log --oneline --graph --glob='refs/got/threads/demo/*'")


@app.callback()
def _threads() -> None:
    """LangGraph threads in git: list, history, log, show, diff, fork, demo."""
