"""LangGraph threads and LlamaIndex sessions read from our own ref layouts (ARCHITECTURE §4).

The viewer never imports langgraph or llama_index: a checkpoint is ``checkpoint.json`` plus one
JSON file per message on ``refs/got/threads/<thread>/<ns>/{head,forks/<id>}``, pending writes
one JSON file per task on ``.../pending/<checkpoint id>`` or, for a running graph's steps, in the
next checkpoint's ``parent~writes/`` (on ``.../writes``, one per (checkpoint, task), where earlier
savers kept them); a session is ``session.json`` plus
``messages/**.json`` on ``refs/got/sessions/<session>``.
"""

from __future__ import annotations

import json
from typing import Any

from got_core.errors import InvalidNameError, UnknownRefError
from got_core.names import decode_component, encode_component
from got_core.repo import ReasoningRepo
from got_core.types import parse_trailers

__all__ = ["checkpoint_view", "session_view", "sessions_view", "thread_view", "threads_view"]

THREADS = "refs/got/threads/"
SESSIONS = "refs/got/sessions/"
MAX_MESSAGE = 64 * 1024
#: The directory of a checkpoint's tree holding its parent's writes that a running graph handed over.
CARRIED = "parent~writes"


def threads_view(repo: ReasoningRepo) -> dict[str, Any]:
    """Every thread: id, namespaces, number of lines (head + forks), tip summary."""
    threads: dict[str, dict[str, Any]] = {}
    for ref, oid in repo.refs(THREADS).items():
        parts = ref[len(THREADS) :].split("/")
        if len(parts) < 3:
            continue
        tid = decode_component(parts[0])
        t = threads.setdefault(tid, {"thread": tid, "namespaces": [], "lines": 0, "summary": ""})
        ns = decode_component(parts[1])
        if ns not in t["namespaces"]:
            t["namespaces"].append(ns)
        if parts[2] in ("head", "forks"):
            t["lines"] += 1
        if parts[2] == "head":
            t["summary"] = repo.git.read_commit(oid).message.split("\n", 1)[0]
    return {"threads": sorted(threads.values(), key=lambda t: t["thread"])}


def _lines(repo: ReasoningRepo, thread: str) -> dict[str, str]:
    base = THREADS + encode_component(thread, "thread id") + "/"
    out = {}
    for ref, oid in sorted(repo.refs(base).items()):
        rest = ref[len(base) :].split("/", 1)
        if len(rest) == 2 and (rest[1] == "head" or rest[1].startswith("forks/")):
            ns = decode_component(rest[0])
            label = rest[1] if rest[1] == "head" else "fork " + decode_component(rest[1][len("forks/") :])
            out[f"{ns or '(root)'} · {label}"] = oid
    if not out:
        raise UnknownRefError(f"no thread {thread!r} in this repository; see the Threads page for the list")
    return dict(sorted(out.items(), key=lambda kv: (" · fork " in kv[0], kv[0])))  # each head before its forks


def thread_view(repo: ReasoningRepo, thread: str, limit: int = 500) -> dict[str, Any]:
    """The checkpoint timeline: each line (head, forks) and every checkpoint once, with its parents."""
    lines = _lines(repo, thread)
    seen: dict[str, dict[str, Any]] = {}
    lanes = []
    for label, tip in lines.items():
        chain = []
        for i, c in enumerate(repo.git.walk([tip], topo=True)):
            if i >= limit:
                break
            chain.append(c.oid)
            if c.oid in seen:
                continue
            tr = parse_trailers_any(c.message)
            seen[c.oid] = {
                "oid": c.oid,
                "parents": list(c.parents),
                "summary": c.message.split("\n", 1)[0],
                "checkpoint": tr.get("Checkpoint", ""),
                "time": c.time,
            }
        lanes.append({"label": label, "tip": tip, "commits": chain})
    return {"thread": thread, "lanes": lanes, "checkpoints": seen}


def parse_trailers_any(message: str) -> dict[str, str]:
    """``Key: value`` lines of the message's last paragraph (the checkpointer's trailers)."""
    out = dict(parse_trailers(message))
    for line in message.strip().split("\n\n")[-1].splitlines():
        key, sep, value = line.partition(": ")
        if sep and key.replace("-", "").isalnum():
            out.setdefault(key, value.strip())
    return out


def _json(repo: ReasoningRepo, rev: str, path: str) -> Any:
    try:
        return json.loads(repo.read_file(rev, path)[:MAX_MESSAGE])
    except Exception:  # a damaged or cut file is shown as unreadable, not fatal
        return None


def _message(value: Any) -> dict[str, Any]:
    """A message as ``{role, content, tool_calls, name}`` strings, whatever its JSON shape."""
    if not isinstance(value, dict):
        return {"role": "?", "content": json.dumps(value)[:MAX_MESSAGE]}
    role = str(value.get("type") or value.get("role") or "?")
    content = value.get("content", "")
    if isinstance(content, list):  # content blocks
        content = "\n".join(str(b.get("text", b)) if isinstance(b, dict) else str(b) for b in content)
    elif not isinstance(content, str):
        content = json.dumps(content)
    blocks = value.get("blocks")
    if not content and isinstance(blocks, list):  # llama-index's ChatMessage JSON
        content = "\n".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict))
    calls = value.get("tool_calls") or []
    return {
        "role": role.removeprefix("MessageRole."),
        "content": content[:MAX_MESSAGE],
        "name": str(value.get("name") or ""),
        "tool_calls": [
            {"name": str(c.get("name", "")), "args": json.dumps(c.get("args", {}))[:4096]}
            for c in calls
            if isinstance(c, dict)
        ],
    }


def _messages(repo: ReasoningRepo, rev: str, prefix: str) -> list[tuple[str, dict[str, Any]]]:
    files = sorted(p for p in repo.list_files(rev, prefix) if p.endswith(".json"))
    return [(p, _message(_json(repo, rev, p))) for p in files]


def checkpoint_view(repo: ReasoningRepo, thread: str, rev: str) -> dict[str, Any]:
    """State at one checkpoint: messages as a conversation, channels, metadata, pending writes, interrupts."""
    oid = repo.resolve(rev)
    cp = _json(repo, oid, "checkpoint.json") or {}
    channels = cp.get("channels", {}) if isinstance(cp, dict) else {}
    messages: list[dict[str, Any]] = []
    values: dict[str, Any] = {}
    for name, spec in channels.items() if isinstance(channels, dict) else ():
        if isinstance(spec, dict) and spec.get("kind") == "list" and isinstance(spec.get("dir"), str):
            msgs = [m for _p, m in _messages(repo, oid, spec["dir"] + "/")]
            if name == "messages":
                messages = msgs
            else:
                values[name] = msgs
        else:
            values[name] = spec
    cid = str(cp.get("checkpoint_id", "")) if isinstance(cp, dict) else ""
    writes: list[dict[str, str]] = []
    interrupts: list[dict[str, str]] = []
    base = THREADS + encode_component(thread, "thread id") + "/"
    depth = base.count("/") + 1
    # a checkpoint's own .../pending/<id> ref (every file is its writes), and the single
    # .../writes ref of earlier savers (files named <bucket>/<id>~<task>.json)
    try:
        pending = f"/pending/{encode_component(cid, 'checkpoint id')}" if cid else ""
    except InvalidNameError:  # an id too long for a ref name: the saver names its ref by a hash
        pending = ""
    wrefs = [
        r
        for r in repo.refs(base)
        if (r.endswith("/writes") and r.count("/") == depth)
        or (pending and r.endswith(pending) and r.count("/") == depth + 1)
    ]
    sources = [(wref, path) for wref in (wrefs if cid else ()) for path in sorted(repo.list_files(wref))]
    # a running graph's writes ride in the next checkpoint's tree: parent~writes/<task>.json
    sources += [
        (child, path) for child in _children(repo, base, oid) for path in sorted(repo.list_files(child, CARRIED))
    ]
    for wref, path in sources:
        if wref.endswith("/writes") and f"/{cid}~" not in "/" + path:
            continue
        w = _json(repo, wref, path) or {}
        if path.startswith(CARRIED + "/") and (not isinstance(w, dict) or w.get("checkpoint_id") != cid):
            continue  # carried for another parent (a line rewritten since)
        for item in w.get("writes", []) if isinstance(w, dict) else ():
            if not isinstance(item, dict):
                continue
            entry = {
                "task": str(w.get("task_path") or w.get("task_id") or ""),
                "channel": str(item.get("channel", "")),
                "value": json.dumps(item.get("value"), indent=1, default=str)[:MAX_MESSAGE],
            }
            (interrupts if entry["channel"] == "__interrupt__" else writes).append(entry)
    meta = cp.get("metadata", {}) if isinstance(cp, dict) else {}
    return {
        "oid": oid,
        "thread": thread,
        "checkpoint": cid,
        "parent_checkpoint": str(cp.get("parent_checkpoint_id") or "") if isinstance(cp, dict) else "",
        "metadata": meta,
        "messages": messages,
        "values": values,
        "writes": writes,
        "interrupts": interrupts,
        "parents": list(repo.git.read_commit(oid).parents),
    }


def _children(repo: ReasoningRepo, base: str, oid: str, limit: int = 100_000) -> list[str]:
    """Commits of the thread's lines (``head`` and ``forks/`` refs under ``base``) whose parent is ``oid``."""
    found: set[str] = set()
    seen: set[str] = set()
    for ref, tip in repo.refs(base).items():
        if not (ref.endswith("/head") or "/forks/" in ref):
            continue
        commit: str | None = tip
        while commit is not None and commit not in seen and len(seen) < limit:
            seen.add(commit)
            parents = repo.git.read_commit(commit).parents
            parent = parents[0] if parents else None
            if parent == oid:
                found.add(commit)
            commit = parent
    return sorted(found)


def sessions_view(repo: ReasoningRepo) -> dict[str, Any]:
    """Every LlamaIndex session: id, tip and its summary."""
    out = []
    for ref, oid in sorted(repo.refs(SESSIONS).items()):
        out.append(
            {
                "session": decode_component(ref[len(SESSIONS) :]),
                "tip": oid,
                "summary": repo.git.read_commit(oid).message.split("\n", 1)[0],
            }
        )
    return {"sessions": out}


def session_view(repo: ReasoningRepo, session: str, limit: int = 2000) -> dict[str, Any]:
    """A session's conversation, each message with the commit that wrote it."""
    ref = SESSIONS + encode_component(session, "session id")
    tip = repo.tip(ref)
    if tip is None:
        raise UnknownRefError(f"no session {session!r} in this repository; see the Sessions page for the list")
    written: dict[str, dict[str, Any]] = {}
    for i, c in enumerate(repo.git.walk([tip], topo=True)):
        if i >= limit:
            break
        for path, _old, new in repo.git.changed_paths(c):
            if new and path.startswith("messages/"):
                written[path] = {"commit": c.oid, "summary": c.message.split("\n", 1)[0], "time": c.time}
    messages = []
    for path, msg in _messages(repo, tip, "messages/"):
        messages.append({**msg, "path": path, **written.get(path, {"commit": "", "summary": "", "time": 0})})
    return {"session": session, "tip": tip, "messages": messages}
