"""A Model Context Protocol server over a reasoning repository: ``got mcp -r REPO``.

Agents outside Python frameworks (desktop assistants, IDE agents) reach the repository
through tools, served by the official ``mcp`` SDK (:class:`mcp.server.MCPServer`):

- GCC: ``gcc_log`` (one Observation-Thought-Action step), ``gcc_commit``, ``gcc_branch``,
  ``gcc_merge``, ``gcc_context`` — the same functions the LangChain / LlamaIndex GCC tools wrap;
- memory: ``memory_add`` (a lesson on the ``memory`` branch), ``memory_search``;
- history: ``got_log``, ``got_show``, ``got_diff``, ``got_grep``;
- review: ``merge_status`` (merges parked for review, with their conflicts).

Every argument is typed (the SDK derives each tool's JSON schema from its signature) and
bounded here (text length, counts). A mistake of the caller — a hostile ref or branch name,
an unknown revision, an empty summary — comes back as a tool result with ``isError`` set
and a message saying what to do; nothing in the repository changes. ``read_only=True``
leaves the write tools out altogether, and the reading tools then change nothing either:
no ref moves (``merge_status`` does not drop entries merged since) and no object is
written; only the derived index under ``<gitdir>/got/`` is brought up to date.

Needs the ``mcp`` extra: ``pip install 'gitofthoughts[mcp]'``.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from got_core import ReasoningRepo
from got_core.errors import GotError, GotUserError, InvalidInputError, MissingExtraError

__all__ = ["MAX_TEXT_CHARS", "READ_TOOLS", "WRITE_TOOLS", "build_server"]

#: Longest text argument a tool accepts (a GCC summary, a lesson, a grep pattern...).
MAX_TEXT_CHARS = 64 * 1024
#: Tools that change the repository (left out with ``read_only=True``).
WRITE_TOOLS = ("gcc_log", "gcc_commit", "gcc_branch", "gcc_merge", "memory_add")
#: Tools that only read.
READ_TOOLS = ("gcc_context", "memory_search", "got_log", "got_show", "got_diff", "got_grep", "merge_status")

INSTRUCTIONS = (
    "A GitOfThoughts reasoning repository: every step you record is a git commit. Use gcc_log for each "
    "Observation-Thought-Action step, gcc_commit to summarise a milestone, gcc_branch to explore an "
    "alternative and gcc_merge to bring it back; gcc_context shows where you are. memory_add stores a "
    "general lesson (never an answer), memory_search finds lessons. got_log / got_show / got_diff / "
    "got_grep read the history; merge_status lists merges waiting for review."
)


def _check_args(name: str, values: dict[str, Any]) -> None:
    for key, value in values.items():
        if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
            raise InvalidInputError(
                f"{name}: argument {key!r} has {len(value)} characters; the limit is {MAX_TEXT_CHARS}"
            )


def _count(value: int, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInputError(f"{what} must be a whole number from {low} to {high}")
    return value


def _guard(fn: Callable[..., str], tool_error: type[Exception]) -> Callable[..., str]:
    """Bound the arguments and turn our typed errors into tool errors the model can read."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> str:
        bound = signature.bind(*args, **kwargs)
        try:
            _check_args(fn.__name__, dict(bound.arguments))
            return fn(*args, **kwargs)
        except GotUserError as exc:
            raise tool_error(f"error: {exc}") from None
        except GotError as exc:
            raise tool_error(f"failed: {exc}") from None

    return call


def _info(info: Any) -> dict[str, Any]:
    return {
        "oid": info.oid,
        "summary": info.summary,
        "time": info.time,
        "parents": list(info.parents),
        "tags": list(info.tags),
        "score": info.score,
    }


def build_server(
    repo: str | Path | ReasoningRepo,
    *,
    read_only: bool = False,
    namespace: str = "gcc",
    name: str = "gitofthoughts",
) -> Any:
    """The MCP server for one repository (an :class:`mcp.server.MCPServer`; call ``.run()``).

    Args:
        repo: the repository (created when missing, unless ``read_only``), or an open one.
        read_only: serve only the reading tools; never create or change anything.
        namespace: the GCC workspace's namespace (its branches live under ``refs/heads/<namespace>/``).
        name: the server's name as clients see it.

    Raises:
        MissingExtraError: the ``mcp`` package is not installed.
        RepositoryNotFoundError: ``read_only`` and no repository at ``repo``.
    """
    try:
        from mcp.server import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as exc:
        raise MissingExtraError("the MCP server", "mcp", exc) from None
    from got_core.collab import merge_status
    from got_core.gcc import GCCWorkspace, tool_specs
    from got_core.memory.git import GitMemory

    r = repo if isinstance(repo, ReasoningRepo) else ReasoningRepo(repo, create=not read_only)
    server = MCPServer(name, instructions=INSTRUCTIONS)

    def add(fn: Callable[..., str], description: str) -> None:
        if read_only and fn.__name__ in WRITE_TOOLS:
            return
        server.add_tool(_guard(fn, ToolError), name=fn.__name__, description=description, structured_output=False)

    def workspace() -> GCCWorkspace:
        # resumed per call: the current branch is remembered in the repository, shared with `got gcc`
        return GCCWorkspace.resume(r, namespace=namespace)

    def spec(tool: str) -> Callable[..., Any]:
        return next(s.fn for s in tool_specs(workspace()) if s.name == tool)

    # ------------------------------------------------------------------ GCC
    def gcc_log(observation: str, thought: str, action: str) -> str:
        return str(spec("gcc_log")(observation, thought, action))

    def gcc_commit(summary: str, update_roadmap: str = "") -> str:
        return str(spec("gcc_commit")(summary, update_roadmap))

    def gcc_branch(name: str, purpose: str) -> str:
        return str(spec("gcc_branch")(name, purpose))

    def gcc_merge(branch: str, summary: str = "") -> str:
        return str(spec("gcc_merge")(branch, summary))

    def gcc_context(k: int = 1) -> str:
        ws = workspace()
        if not ws.exists:
            return "no GCC workspace yet: gcc_log or gcc_commit starts one"
        return ws.context(_count(k, "k", 1, 50))

    add(gcc_log, "Log one Observation-Thought-Action step of your work (a commit on the current GCC branch).")
    add(
        gcc_commit,
        "Commit a milestone: summarise what the steps since the last commit achieved; they are compressed "
        "into this summary. update_roadmap replaces the roadmap when given.",
    )
    add(gcc_branch, "Create a GCC branch to explore an alternative (name, purpose) and switch to it.")
    add(gcc_merge, "Merge a finished GCC branch back into the current branch (summary optional).")
    add(gcc_context, "Where you are: the roadmap, the current branch, its last k commits and the steps since.")

    # ------------------------------------------------------------------ memory
    def memory_add(text: str, topic: str = "", outcome: str = "insight") -> str:
        memory = GitMemory(repo=r)
        if outcome == "insight":
            lesson = memory.add_insight(text, topic_key=topic)
        elif outcome == "success":
            lesson = memory.add_success(text, topic_key=topic)
        elif outcome == "failure":
            lesson = memory.add_failure(text, topic_key=topic)
        else:
            raise InvalidInputError("outcome must be insight, success or failure")
        tip = r.tip(r.ref("memory")) or ""
        return f"stored the lesson under topic {lesson.topic_key if lesson else topic!r} (memory at {tip[:12]})"

    def memory_search(query: str, k: int = 3) -> str:
        lessons = GitMemory(repo=r, read_only=read_only).get_relevant(query, _count(k, "k", 1, 50))
        return json.dumps(
            [
                {"text": lz.text, "topic": lz.topic_key, "outcome": lz.outcome, "relevance": lz.relevance}
                for lz in lessons
            ],
            ensure_ascii=False,
        )

    add(memory_add, "Store one general lesson (advice, never an answer) on the memory branch; topic groups lessons.")
    add(memory_search, "Find the k lessons most relevant to a query (git grep and pickaxe, ranked).")

    # ------------------------------------------------------------------ history
    def got_log(rev: str = "", limit: int = 20, all_refs: bool = False) -> str:
        infos = r.log(rev or None, limit=_count(limit, "limit", 1, 1000), all_refs=all_refs)
        return json.dumps([_info(i) for i in infos], ensure_ascii=False)

    def got_show(rev: str) -> str:
        info = r.commit_info(rev)
        files = r.list_files(info.oid)
        if "thought.md" not in files:
            return json.dumps(
                {"oid": info.oid, "message": info.message, "files": sorted(files), "tags": list(info.tags)},
                ensure_ascii=False,
            )
        node = r.read_node(info.oid)
        return json.dumps(
            {
                "oid": node.oid,
                "node_id": node.node_id,
                "problem_id": node.problem_id,
                "depth": node.depth,
                "outcome": node.outcome,
                "score": node.score,
                "tags": list(node.tags),
                "thought": node.thought,
                "scores": node.scores,
                "trace": node.trace,
            },
            ensure_ascii=False,
            default=str,
        )

    def got_diff(a: str, b: str, path: str = "") -> str:
        return r.diff(a, b, path or None) or "(no differences)"

    def got_grep(pattern: str, fixed: bool = False, ignore_case: bool = False, limit: int = 50) -> str:
        hits = r.grep(pattern, fixed=fixed, ignore_case=ignore_case)[: _count(limit, "limit", 1, 1000)]
        return json.dumps([_info(i) for i in hits], ensure_ascii=False)

    add(got_log, "History newest first, with scores and tags (rev: a branch, tag, SHA or node id; default: master).")
    add(
        got_show, "One commit in full: a reasoning node's thought, scores and trace, or any commit's message and files."
    )
    add(got_diff, "Unified diff between two revisions (path: only this file, e.g. thought.md).")
    add(got_grep, "Commits whose message matches a pattern (a regular expression; fixed=true for plain text).")

    # ------------------------------------------------------------------ review
    def merge_status_tool(into: str = "") -> str:
        # read-only lists what is pending and tidies nothing (an entry merged since stays parked)
        pending = merge_status(r, into or None, prune=not read_only)
        return json.dumps(
            [
                {
                    "name": p.name,
                    "into": p.into,
                    "commit": p.commit,
                    "conflicts": [
                        {"path": c.path, "ours": c.ours, "theirs": c.theirs, "base": c.base} for c in p.conflicts
                    ],
                }
                for p in pending
            ],
            ensure_ascii=False,
        )

    merge_status_tool.__name__ = "merge_status"
    add(
        merge_status_tool,
        "Merges parked for review (into: only those into this branch), with both sides of each conflict.",
    )
    return server
