"""Reasoning trees, nodes and diffs as JSON-ready dicts for the viewer (ARCHITECTURE §2, layer ui).

Everything here reads git through the repository API; nothing writes. Repository content is
returned as plain strings and rendered by the browser with ``textContent`` (never as HTML),
except ``thought.md``, which markdown-it renders here with raw HTML off and unsafe link
schemes refused.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from got_core.errors import InvalidInputError
from got_core.names import check_path, short_ref
from got_core.repo import ReasoningRepo
from got_core.repo.notes import note_paths
from got_core.types import OUTCOME_TAG_PREFIX, parse_trailers, trailer_score

__all__ = ["diff_view", "node_view", "render_markdown", "tree_view"]

#: Biggest file shown in a node page or a diff; larger ones are cut (the page stays fast).
MAX_SHOWN = 256 * 1024
#: Nodes on one page of a tree; older ones come on the next pages.
PAGE = 300


def render_markdown(text: str) -> str:
    """Markdown to HTML with raw HTML escaped and ``javascript:``-style links dropped."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    return md.render(text)


def _text(data: bytes) -> str:
    shown = data[:MAX_SHOWN].decode("utf-8", errors="replace")
    return shown + ("\n… (cut)" if len(data) > MAX_SHOWN else "")


def _outcome(tags: list[str], trailers: dict[str, str]) -> str:
    for t in tags:
        if t.startswith(OUTCOME_TAG_PREFIX["success"]):
            return "success"
        if t.startswith(OUTCOME_TAG_PREFIX["failed"]):
            return "failed"
    return trailers.get("Outcome", "")


def _tips(repo: ReasoningRepo, ref: str | None) -> dict[str, str]:
    """Ref name -> commit for the refs a tree page starts from."""
    if ref:
        return {ref: repo.resolve(ref)}
    out: dict[str, str] = {}
    for name, oid in repo.refs("refs/").items():
        if name.startswith(("refs/heads/", "refs/tags/", "refs/got/results/")) and (c := repo.git.peel_to_commit(oid)):
            out[name] = c
    return out


class _Order:
    """The walk order of each tree page's commits, kept per (repository, ref) and extended, not redone.

    A topological walk of a large DAG loads every commit first (hundreds of ms at 10k nodes, more
    when one result commit names thousands of parents); pages, re-renders and live updates then
    slice this list. When the tips move, only the commits new since the last tips are walked
    (``hide`` = the old tips) and put in front. Derived data (ARCHITECTURE §5, invariant 1):
    a rewritten ref (old tips no longer ancestors) rebuilds it.
    """

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self.entries: dict[tuple[str, str], tuple[tuple[str, ...], list[str]]] = {}

    def oids(self, repo: ReasoningRepo, ref: str | None, tips: dict[str, str]) -> list[str]:
        key = (str(repo.path), ref or "")
        now = tuple(sorted(set(tips.values())))
        cached = self.entries.get(key)
        if cached and cached[0] == now:
            return cached[1]
        old = cached[0] if cached else ()
        added = [t for t in now if t not in old]
        # Still valid when every old tip is kept or lies under a new one (refs only moved forward).
        kept_old = bool(old) and all(o in now or any(repo.git.is_ancestor(o, t) for t in added) for o in old)
        hide = old if kept_old else ()
        fresh = [
            c.oid
            for c in repo.git.walk(list(now), hide=hide, topo=True)
            if ref or "Node" in parse_trailers(c.message)  # lessons, checkpoints: they have pages of their own
        ]
        order = fresh + cached[1] if cached and kept_old else fresh
        self.entries.pop(key, None)
        self.entries[key] = (now, order)
        while len(self.entries) > self.size:
            self.entries.pop(next(iter(self.entries)))
        return order


_ORDER = _Order()


def tree_view(
    repo: ReasoningRepo, ref: str | None = None, offset: int = 0, limit: int = PAGE, win: str = ""
) -> dict[str, Any]:
    """One page of the reasoning DAG reachable from ``ref`` (default: every branch and tag).

    ``win`` names the winning node's label (a run's ``winner_label``) where no tag marks it.

    Returns:
        ``nodes`` (oid, parents, summary, node id, score, outcome, tags, refs, round, status)
        newest first, ``offset``/``limit``/``more`` for paging and the refs shown.
    """
    if offset < 0 or not 0 < limit <= 2000:
        raise InvalidInputError("offset must be >= 0 and limit between 1 and 2000")
    tips = _tips(repo, ref)
    labels: dict[str, list[str]] = {}
    for name, oid in tips.items():
        labels.setdefault(oid, []).append(short_ref(name))
    order = _ORDER.oids(repo, ref, tips)
    more = len(order) > offset + limit
    page_oids = order[offset : offset + limit]
    idx_tags: dict[str, list[str]] = {}
    for tag, target in repo.tags().items():
        idx_tags.setdefault(target, []).append(tag)
    nodes = []
    for oid in page_oids:
        fixed = _fixed(repo, oid)
        tags = sorted(idx_tags.get(oid, ()))
        note = repo.note_json(oid) or {}  # re-scores move notes, so scores are read each time
        s_comb = note.get("s_comb")
        score = s_comb if isinstance(s_comb, (int, float)) else fixed["trailer_score"]
        nodes.append(
            {
                **{k: v for k, v in fixed.items() if k not in ("trailers", "trailer_score")},
                "score": score,
                "outcome": _outcome(tags, fixed["trailers"]),
                "tags": tags,
                "refs": labels.get(oid, []),
            }
        )
    _mark_status(nodes, win)
    return {"nodes": nodes, "offset": offset, "limit": limit, "more": more, "refs": sorted(short_ref(r) for r in tips)}


#: What a commit says about itself never changes: kept per SHA (bounded) so pages cost reads of tags and notes only.
_FIXED: dict[str, dict[str, Any]] = {}
_FIXED_MAX = 100_000


def _fixed(repo: ReasoningRepo, oid: str) -> dict[str, Any]:
    if oid in _FIXED:
        return _FIXED[oid]
    c = repo.git.read_commit(oid)
    trailers = parse_trailers(c.message)
    meta = _json_file(repo, oid, "metadata.json")
    value = {
        "oid": oid,
        "parents": list(c.parents),
        "summary": c.message.split("\n", 1)[0],
        "node": trailers.get("Node", ""),
        "round": meta.get("round", 1) if isinstance(meta.get("round", 1), int) else 1,
        "label": str(meta.get("label", ""))[:40],
        "time": c.time,
        "trailers": trailers,
        "trailer_score": trailer_score(trailers),
    }
    if len(_FIXED) >= _FIXED_MAX:
        _FIXED.clear()
    _FIXED[oid] = value
    return value


def _mark_status(nodes: list[dict[str, Any]], win: str = "") -> None:
    """``winner`` on the path from a success/best node to its root; ``pruned`` for other leaves."""
    by_oid = {n["oid"]: n for n in nodes}
    children: dict[str, int] = {}
    for n in nodes:
        for p in n["parents"]:
            children[p] = children.get(p, 0) + 1
    winners: set[str] = set()
    stack = [n["oid"] for n in nodes if n["outcome"] == "success" or "best" in n["tags"] or (win and n["label"] == win)]
    while stack:
        oid = stack.pop()
        if oid in winners or oid not in by_oid:
            continue
        winners.add(oid)
        stack.extend(by_oid[oid]["parents"])
    for n in nodes:
        if n["oid"] in winners:
            n["status"] = "winner"
        elif n["outcome"] == "failed":
            n["status"] = "failed"
        elif not children.get(n["oid"]) and winners:
            n["status"] = "pruned"
        else:
            n["status"] = "open"


def _json_file(repo: ReasoningRepo, oid: str, path: str) -> dict[str, Any]:
    try:
        value = json.loads(repo.read_file(oid, path)[:MAX_SHOWN])
    except Exception:  # absent, not JSON, cut: a node page shows what it can
        return {}
    return value if isinstance(value, dict) else {"value": value}


def node_view(repo: ReasoningRepo, rev: str) -> dict[str, Any]:
    """A node page: rendered ``thought.md``, scores, the trace's steps, metadata, notes history."""
    oid = repo.resolve(rev)
    c = repo.git.read_commit(oid)
    files = repo.list_files(oid)
    thought = _text(repo.read_file(oid, "thought.md")) if "thought.md" in files else ""
    steps: list[Any] = []
    if "trace.jsonl" in files:
        for line in _text(repo.read_file(oid, "trace.jsonl")).splitlines():
            try:
                steps.append(json.loads(line))
            except ValueError:
                steps.append({"unparsed": line})
    return {
        "oid": oid,
        "parents": list(c.parents),
        "message": c.message,
        "author": c.author_name,
        "time": c.time,
        "trailers": parse_trailers(c.message),
        "tags": sorted(repo.tags_at(oid)),
        "thought": thought,
        "thought_html": render_markdown(thought),
        "scores": _json_file(repo, oid, "scores.json"),
        "metadata": _json_file(repo, oid, "metadata.json"),
        "trace": steps,
        "files": sorted(files),
        "notes": _notes_history(repo, oid),
    }


def _notes_history(repo: ReasoningRepo, oid: str, limit: int = 200) -> list[dict[str, Any]]:
    """Every version of this commit's score note, newest first (re-scores are notes commits)."""
    ref = repo.notes_ref
    tip = repo.tip(ref)
    if tip is None:
        return []
    out: list[dict[str, Any]] = []
    paths = note_paths(oid)  # every fan-out depth git reads
    last: str | None = None
    for i, nc in enumerate(repo.git.walk([tip], topo=True)):
        if i >= limit:
            break
        blob = next((b for b in repo.git.tree_entries(nc.tree, paths).values() if b), None)
        if blob is None or blob == last:
            continue
        last = blob
        out.append({"commit": nc.oid, "time": nc.time, "note": _text(repo.read_blob(blob))})
    return out


def diff_view(repo: ReasoningRepo, a: str, b: str) -> dict[str, Any]:
    """Per-file diff of two commits: unified hunks and side-by-side rows for each changed file."""
    oa, ob = repo.resolve(a), repo.resolve(b)
    ta, tb = repo.git.read_commit(oa).tree, repo.git.read_commit(ob).tree
    files = []
    for path, old, new in repo.git.changed_tree_paths(ta, tb):
        check_path(path)
        left = _text(repo.read_blob(old)).splitlines() if old else []
        right = _text(repo.read_blob(new)).splitlines() if new else []
        files.append(
            {
                "path": path,
                "status": "added" if not old else "deleted" if not new else "modified",
                "unified": list(difflib.unified_diff(left, right, f"a/{path}", f"b/{path}", lineterm="", n=3)),
                "side": _side_by_side(left, right),
            }
        )
    return {"a": oa, "b": ob, "files": files}


def _side_by_side(left: list[str], right: list[str]) -> list[list[Any]]:
    """Rows of ``[kind, left line no, left text, right line no, right text]``."""
    rows: list[list[Any]] = []
    sm = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            rows.extend(["same", i1 + k + 1, left[i1 + k], j1 + k + 1, right[j1 + k]] for k in range(i2 - i1))
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            li, ri = i1 + k, j1 + k
            rows.append(
                [
                    tag,
                    li + 1 if li < i2 else None,
                    left[li] if li < i2 else "",
                    ri + 1 if ri < j2 else None,
                    right[ri] if ri < j2 else "",
                ]
            )
    return rows
