"""The run as the audit reads it: config, result records and node trees, from git alone.

Everything here reads through a fresh :class:`~got_core.storage.git.GitRepo` handle on
``central.git`` (libgit2 caches objects it has read, so a fresh handle sees the disk as it
is now) and walks histories by hand, object by object, so a missing or damaged object is
a finding that names the object (``commit 1b30d8ca… is missing``), never a crashed walk.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from got_core.errors import CorruptRepositoryError
from got_core.repo import ReasoningRepo
from got_core.storage.git import GitRepo
from got_core.types import canonical_json

__all__ = ["NodeFiles", "RunView", "TaskView", "parse_commit", "walk_commits"]

_NODE_FILES = ("thought.md", "scores.json", "trace.jsonl", "metadata.json")


@dataclass
class NodeFiles:
    """One node commit's four files, parsed.

    Attributes:
        oid: the commit SHA.
        parents: its parent SHAs.
        meta: ``metadata.json``.
        trace: ``trace.jsonl``, one dict per step.
        thought: ``thought.md``.
        scores: ``scores.json``.
    """

    oid: str
    parents: tuple[str, ...]
    meta: dict[str, Any]
    trace: list[dict[str, Any]]
    thought: str
    scores: dict[str, Any]

    @property
    def label(self) -> str:
        """The node's label (``root``, ``A``, ``s2``, ``r2-B`` …)."""
        return str(self.meta.get("label", ""))


@dataclass
class TaskView:
    """One task of the config with its result as stored in ``central.git``.

    Attributes:
        key: ``<arm>/<problem id>``.
        ref: the result ref.
        entry: the task's entry in ``config.json``.
        sha: the result commit, or ``None`` when the ref is missing.
        record: ``result.json`` (plus ``result_sha``), or ``None``.
        error: why the record could not be read (a missing object, a file that does not parse).
    """

    key: str
    ref: str
    entry: dict[str, Any]
    sha: str | None = None
    record: dict[str, Any] | None = None
    error: str | None = None
    _nodes: list[NodeFiles] | None = field(default=None, repr=False)
    _damage: list[str] = field(default_factory=list, repr=False)


def parse_commit(raw: bytes) -> tuple[str, tuple[str, ...]]:
    """``(tree, parents)`` from a raw commit object's content.

    Raises:
        CorruptRepositoryError: the header names no tree.
    """
    header = raw.split(b"\n\n", 1)[0]
    tree, parents = "", []
    for line in header.split(b"\n"):
        if line.startswith(b"tree "):
            tree = line[5:].decode("ascii", "replace").strip()
        elif line.startswith(b"parent "):
            parents.append(line[7:].decode("ascii", "replace").strip())
    if not tree:
        raise CorruptRepositoryError("a commit object has no tree line; run `git fsck`")
    return tree, tuple(parents)


def walk_commits(git: GitRepo, tips: list[str]) -> tuple[list[tuple[str, str, tuple[str, ...]]], list[str]]:
    """Every commit reachable from ``tips``: ``(oid, tree, parents)``, and the damage met on the way.

    The walk goes on past a missing or damaged commit (its parents cannot be followed, the
    rest of the history can). Trees and blobs are checked by :func:`tree_damage`.

    Returns:
        ``(commits, problems)``; each problem names the object (``commit <sha> is missing``).
    """
    out: list[tuple[str, str, tuple[str, ...]]] = []
    problems: list[str] = []
    seen: set[str] = set()
    stack = list(reversed(tips))
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        problem, raw = git.object_problem(oid, "commit")
        if problem is not None or raw is None:
            problems.append(f"commit {oid} {problem or 'cannot be read'}")
            continue
        tree, parents = parse_commit(raw)
        out.append((oid, tree, parents))
        stack.extend(reversed(parents))
    return out, problems


def tree_damage(git: GitRepo, oid: str, tree: str, cache: dict[str, list[tuple[str, str, str]]]) -> list[str]:
    """Missing or altered trees and blobs under one commit, each named with its path.

    ``cache`` maps a tree to its damage: commits of different trees often share a tree (the
    same child under two arms), and each tree is hashed through once.
    """
    if tree not in cache:
        # A fresh ``seen`` per tree: damaged_under does not descend into a tree it has seen,
        # so a shared cache would hide a damaged blob under a sound tree met before.
        cache[tree] = git.damaged_under(tree, {})
    return [
        f"{'tree' if not path else 'object'} {bad} at {path or 'the root tree'} of commit {oid} {why}"
        for path, bad, why in cache[tree]
    ]


class RunView:
    """Read-only view of a run directory for the checks.

    Args:
        run_dir: the run directory.
        config: its ``config.json``.
        central: ``central.git`` opened read-only.
    """

    def __init__(self, run_dir: Path, config: dict[str, Any], central: ReasoningRepo) -> None:
        self.run_dir = run_dir
        self.config = config
        self.central = central
        self.git = GitRepo(central.gitdir, create=False)  # fresh: sees the objects on disk now
        self.problems: dict[str, dict[str, Any]] = {str(p["id"]): p for p in config.get("problems", [])}
        self._trees: dict[str, list[tuple[str, str, str]]] = {}  # tree -> its damage, shared by every walk
        self.tasks = [self._task(t) for t in config.get("tasks", [])]

    # ------------------------------------------------------------------ records
    def _task(self, entry: dict[str, Any]) -> TaskView:
        tv = TaskView(str(entry["key"]), str(entry["ref"]), entry)
        tv.sha = self.git.ref_target(tv.ref)
        if tv.sha is None:
            return tv
        problem, raw = self.git.object_problem(tv.sha, "commit")
        if problem is not None or raw is None:
            tv.error = f"result commit {tv.sha} {problem or 'cannot be read'}"
            return tv
        try:
            tree, _parents = parse_commit(raw)
            blob = self.git.tree_entry(tree, "result.json")
            if blob is None:
                tv.error = f"result commit {tv.sha} has no result.json"
                return tv
            record = json.loads(self.git.read_blob(blob))
        except (CorruptRepositoryError, ValueError) as exc:
            tv.error = f"result.json of {tv.sha}: {exc}"
            return tv
        if not isinstance(record, dict):
            tv.error = f"result.json of {tv.sha} is not a JSON object"
            return tv
        tv.record = {**record, "result_sha": tv.sha}
        return tv

    @property
    def records(self) -> dict[str, dict[str, Any] | None]:
        """Task key -> its result record (``None`` when missing or unreadable)."""
        return {t.key: t.record for t in self.tasks}

    def finished(self) -> list[TaskView]:
        """Tasks whose record could be read."""
        return [t for t in self.tasks if t.record is not None]

    # ------------------------------------------------------------------ trees
    def nodes(self, tv: TaskView) -> list[NodeFiles]:
        """The node commits of ``tv``'s problem reachable from its result commit.

        Raises:
            CorruptRepositoryError: an object under the result is missing or damaged (the
                message names the first; :meth:`damage` lists all).
        """
        if tv._nodes is None:
            tv._nodes, tv._damage = self._read_nodes(tv)
        if tv._damage:
            more = f" (and {len(tv._damage) - 1} more)" if len(tv._damage) > 1 else ""
            raise CorruptRepositoryError(f"{tv.key}: {tv._damage[0]}{more}")
        return tv._nodes

    def damage(self, tv: TaskView) -> list[str]:
        """Every missing or damaged object under ``tv``'s result commit."""
        if tv._nodes is None:
            tv._nodes, tv._damage = self._read_nodes(tv)
        return tv._damage

    def _read_nodes(self, tv: TaskView) -> tuple[list[NodeFiles], list[str]]:
        if tv.sha is None or tv.record is None:
            return [], []
        commits, damage = walk_commits(self.git, [tv.sha])
        nodes: list[NodeFiles] = []
        pid = tv.record.get("problem_id")
        for oid, tree, parents in commits:
            bad = tree_damage(self.git, oid, tree, self._trees)
            if bad:
                damage += bad
                continue
            files = self.git.tree_files(tree)
            if oid == tv.sha or len(parents) > 1 or "metadata.json" not in files:
                continue  # the result commit (it carries the winner's files), a merge, not a node
            missing = [f for f in _NODE_FILES if f not in files]
            if missing:
                damage.append(f"node commit {oid} lacks {', '.join(missing)}")
                continue
            raw = {f: self.git.read_blob(files[f]) for f in _NODE_FILES}
            try:
                meta = json.loads(raw["metadata.json"])
                node = NodeFiles(
                    oid,
                    parents,
                    meta if isinstance(meta, dict) else {},
                    [json.loads(line) for line in raw["trace.jsonl"].decode("utf-8").splitlines() if line.strip()],
                    raw["thought.md"].decode("utf-8"),
                    json.loads(raw["scores.json"]),
                )
            except ValueError as exc:
                damage.append(f"node commit {oid}: a file does not parse ({exc})")
                continue
            if not all(isinstance(s, dict) for s in node.trace):
                damage.append(f"node commit {oid}: trace.jsonl holds a line that is not a JSON object")
                continue
            if node.meta.get("problem_id") == pid:
                nodes.append(node)
        return nodes, damage

    def root(self, tv: TaskView) -> NodeFiles | None:
        """The tree's root node (``label == "root"``), or ``None``."""
        return next((n for n in self.nodes(tv) if n.label == "root"), None)

    def winner(self, tv: TaskView) -> NodeFiles | None:
        """The node the record names as its winner (``winner_sha``), or ``None``."""
        sha = (tv.record or {}).get("winner_sha")
        return next((n for n in self.nodes(tv) if n.oid == sha), None) if sha else None

    def question(self, tv: TaskView) -> tuple[str, list[str]]:
        """The question and options the tree was asked, checked against ``config.json``.

        The root's ``thought.md`` holds the question block; its normalised text must hash to
        the problem's ``question_sha`` and its options to ``choices_sha``.

        Raises:
            ValueError: no root, or a question / options that differ from the config's.
        """
        from got_core.bench.datasets import normalize_question

        root = self.root(tv)
        if root is None:
            raise ValueError(f"{tv.key}: the tree has no root node")
        entry = self.problems.get(str((tv.record or {}).get("problem_id")), {})
        choices = [str(c) for c in root.meta.get("choices") or []]
        body = root.thought.split("\n\n", 1)[-1]
        block = body.rsplit("\n\nPlan: ", 1)[0].removeprefix("Question:\n")
        question = block.rsplit("\n\nOptions:\n", 1)[0] if choices else block
        if _sha(normalize_question(question)) != entry.get("question_sha"):
            raise ValueError(f"{tv.key}: the root node {root.oid[:12]} holds another question than config.json's")
        if _sha(canonical_json(choices)) != entry.get("choices_sha"):
            raise ValueError(f"{tv.key}: the root node {root.oid[:12]} holds other options than config.json's")
        return question, choices


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


_SENTINEL = "\x00got-audit-final-text\x00"


def final_text(node: NodeFiles, method: str) -> str | None:
    """The model's last message of a node, cut back out of its ``thought.md``.

    ``thought.md`` is rendered by the solver (``NodeRun.thought``) from the role, the
    steps of ``trace.jsonl``, the final text and the extracted answer; rendering the same
    node with a sentinel for the text gives the frame around it.

    Args:
        node: a node (not the root).
        method: the solver arm that wrote it (the record's ``method``).

    Returns:
        The final text (stripped, as stored; ``""`` for an empty answer), or ``None`` when
        ``thought.md`` does not have the frame the solver writes (a stopped node, or a
        rewritten file).
    """
    from got_core.solver._engine import NodeRun

    answer = node.meta.get("answer")
    run = NodeRun(
        label=node.label,
        role=str(node.meta.get("role", "")),
        prompt="",
        text=_SENTINEL,
        answer=None if answer is None else str(answer),
        steps=[dict(s) for s in node.trace],
    )
    head, _, tail = run.thought(method).partition(_SENTINEL)
    body = node.thought
    if len(head) + len(tail) > len(body) or not body.startswith(head) or not body.endswith(tail):
        return None
    text = body[len(head) : len(body) - len(tail)]
    return "" if text == "(empty answer)" else text
