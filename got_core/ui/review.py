"""Memory lessons, merges awaiting review and experiment runs for the viewer (ARCHITECTURE §2, layer ui)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from got_core.collab import decisions_resolver, merge_status, resolve_pending
from got_core.errors import GotUserError, InvalidInputError, UnknownRefError
from got_core.memory.git import parse_topic_file
from got_core.names import decode_component, encode_component
from got_core.repo import ReasoningRepo
from got_core.ui.trees import render_markdown

__all__ = ["memory_view", "merges_view", "resolve_merge", "run_audit", "run_plot", "run_view"]

MAX_FILE = 256 * 1024


def _lessons(text: str) -> list[dict[str, Any]]:
    try:
        parsed = parse_topic_file(text)
    except Exception:  # a hand-written or damaged topic file: show its text as one lesson
        parsed = []
    if not parsed:
        return [{"text": text, "outcome": "", "score": None}]
    return [{"text": l.text, "outcome": l.outcome, "score": l.score} for l in parsed]


def memory_view(repo: ReasoningRepo, branch: str = "memory", limit: int = 2000) -> dict[str, Any]:
    """Lessons by topic key on ``branch``, each topic with the commits that changed it (its history)."""
    tip = repo.tip(branch)
    if tip is None:
        return {"branch": branch, "topics": []}
    history: dict[str, list[dict[str, Any]]] = {}
    for i, c in enumerate(repo.git.walk([tip], topo=True)):
        if i >= limit:
            break
        for path, old, new in repo.git.changed_paths(c):
            if path.startswith("lessons/"):
                status = "added" if not old else "deleted" if not new else "changed"
                history.setdefault(path, []).append(
                    {"commit": c.oid, "summary": c.message.split("\n", 1)[0], "time": c.time, "status": status}
                )
    topics = []
    for path, blob in sorted(repo.list_files(tip, "lessons/").items()):
        text = repo.read_blob(blob)[:MAX_FILE].decode("utf-8", errors="replace")
        stem = path.rsplit("/", 1)[-1].removesuffix(".md")
        topics.append(
            {"path": path, "topic": decode_component(stem), "lessons": _lessons(text), "history": history.get(path, [])}
        )
    return {"branch": branch, "tip": tip, "topics": topics}


def merges_view(repo: ReasoningRepo) -> dict[str, Any]:
    """Merges parked for review, each conflict with its base / ours / theirs text."""
    out = []
    for m in merge_status(repo, prune=False):
        out.append(
            {
                "name": m.name,
                "into": m.into,
                "commit": m.commit,
                "conflicts": [
                    {"path": c.path, "base": c.base, "ours": c.ours, "theirs": c.theirs} for c in m.conflicts
                ],
            }
        )
    return {"merges": out}


def resolve_merge(repo: ReasoningRepo, body: dict[str, Any]) -> dict[str, Any]:
    """Decide one pending merge: ``{"name", "into", "decisions": {path: {"take": ours|theirs|edit, "text"}}}``.

    Raises:
        InvalidInputError: a malformed request or a conflict left undecided.
        UnknownRefError: nothing from ``name`` is pending.
    """
    name, into, decisions = body.get("name"), body.get("into", "memory"), body.get("decisions")
    if not isinstance(name, str) or not isinstance(into, str) or not isinstance(decisions, dict):
        raise InvalidInputError("send {name, into, decisions: {path: {take, text}}}")
    pending = next((m for m in merge_status(repo, into, prune=False) if m.name == name), None)
    if pending is None:
        raise UnknownRefError(f"no merge from {name!r} into {into!r} is pending review")
    chosen: dict[str, str | bytes | None] = {}
    for c in pending.conflicts:
        d = decisions.get(c.path)
        if not isinstance(d, dict) or d.get("take") not in ("ours", "theirs", "edit"):
            raise InvalidInputError(f"decide {c.path}: take ours, theirs or edit")
        if d["take"] == "edit":
            if not isinstance(d.get("text"), str):
                raise InvalidInputError(f"an edit of {c.path} needs its text")
            chosen[c.path] = d["text"]
        else:
            chosen[c.path] = c.ours if d["take"] == "ours" else c.theirs
    result = resolve_pending(repo, name, decisions_resolver(chosen), into=into)
    return {"status": result.status, "commit": result.commit}


# ---------------------------------------------------------------------------- experiment runs
def _records(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "results.jsonl"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines()[:20000]:
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict):
            rows.append(
                {
                    k: r.get(k)
                    for k in ("arm", "phase", "problem_id", "correct", "outcome", "answer", "n_nodes", "winner_label")
                }
            )
    return rows


def _result_refs(run_dir: Path, rows: list[dict[str, Any]]) -> None:
    """Add to each row the result ref in ``central.git`` whose parents reach its tree (ARCHITECTURE §4)."""
    central = run_dir / "central.git"
    if not central.is_dir():
        return
    with ReasoningRepo.open(central) as repo:
        refs = repo.refs("refs/got/results/")
        for r in rows:
            try:
                ref = f"refs/got/results/{encode_component(str(r['arm']), 'arm')}/{encode_component(str(r['problem_id']), 'problem')}"
            except GotUserError:
                continue
            if ref in refs:
                r["ref"] = ref


def run_view(run_dir: Path) -> dict[str, Any]:
    """A run directory: its table (rendered), result rows (with their result refs), plots and config."""
    table = run_dir / "table.md"
    config = run_dir / "config.json"
    try:
        cfg = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
    except ValueError:
        cfg = {}
    rows = _records(run_dir)
    _result_refs(run_dir, rows)
    return {
        "dir": run_dir.name,
        "experiment": str(cfg.get("experiment", "")) if isinstance(cfg, dict) else "",
        "table_html": render_markdown(table.read_text(encoding="utf-8", errors="replace")[:MAX_FILE])
        if table.is_file()
        else "",
        "rows": rows,
        "plots": sorted(p.name for p in run_dir.glob("*.png") if p.is_file() and not p.is_symlink()),
        "has_central": (run_dir / "central.git").is_dir(),
    }


def run_plot(run_dir: Path, name: str) -> bytes:
    """The bytes of one plot listed by :func:`run_view` (nothing else in the directory is served)."""
    if name not in run_view_plots(run_dir):
        raise UnknownRefError(f"no plot {name!r} in the run directory")
    return (run_dir / name).read_bytes()


def run_view_plots(run_dir: Path) -> set[str]:
    """Names of the PNG plots directly in the run directory (no links)."""
    return {p.name for p in run_dir.glob("*.png") if p.is_file() and not p.is_symlink()}


def run_audit(run_dir: Path) -> dict[str, Any]:
    """The audit's checks (read-only: no re-run of the model)."""
    from got_core.bench.audit import audit_run

    report = audit_run(run_dir, rerun=False)
    return {
        "ok": report.ok,
        "checks": [{"name": c.name, "status": c.status, "detail": c.detail} for c in report.checks],
    }
