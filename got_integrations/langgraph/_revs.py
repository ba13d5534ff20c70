"""Revisions of a thread, as git spells them: ``latest~3``, ``<checkpoint>^``, ``<commit>~2^``.

A thread namespace is a small git graph: ``head`` holds the latest checkpoint, ``forks/*``
the other lines, and every checkpoint's commit has its parent checkpoint's commit as
its git parent. ``~N`` and ``^N`` walk those parents exactly as git does, so after an
``update_state`` time travel ``latest~3`` follows the new checkpoint's real ancestry,
never the line it left. Only the commits reachable from the thread's refs are
considered, and only their commit messages are read until one is chosen.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from got_core.errors import InvalidInputError, UnknownRefError

if TYPE_CHECKING:  # pragma: no cover
    from got_integrations.langgraph.checkpoint import GitCheckpointSaver

__all__ = ["LATEST_NAMES", "ThreadGraph", "parse_revision"]

#: Names of the latest checkpoint (the tip of ``head``, the highest checkpoint id).
LATEST_NAMES = ("latest", "HEAD", "@")
#: Shortest id prefix accepted (git's minimum abbreviation).
MIN_PREFIX = 4

_STEP = re.compile(r"(~|\^)(\d*)")
_TRAILER = re.compile(r"^Checkpoint: (.+)$", re.MULTILINE)


def parse_revision(rev: str) -> tuple[str, list[tuple[str, int]]]:
    """Split ``rev`` into its base name and its ``~N`` / ``^N`` steps.

    Returns:
        ``(base, [("~", n) | ("^", n), ...])``; a bare ``~`` or ``^`` counts 1.

    Raises:
        InvalidInputError: an empty base, or a ``~`` / ``^`` not followed by a number.
    """
    cut = min((i for i in (rev.find("~"), rev.find("^")) if i >= 0), default=len(rev))
    base, rest = rev[:cut], rev[cut:]
    if not base:
        raise InvalidInputError(f"{rev!r} names no checkpoint; use latest, a checkpoint id or a commit, e.g. latest~2")
    steps: list[tuple[str, int]] = []
    pos = 0
    while pos < len(rest):
        m = _STEP.match(rest, pos)
        if m is None or (m.end() < len(rest) and rest[m.end()] not in "~^"):
            raise InvalidInputError(
                f"bad revision {rev!r}: ~ and ^ take a number (latest~3, latest^, latest^1), as in git"
            )
        steps.append((m.group(1), int(m.group(2)) if m.group(2) else 1))
        pos = m.end()
    return base, steps


@dataclass
class ThreadGraph:
    """The commits of one thread namespace and their parents, read from git.

    Attributes:
        thread: the thread id.
        ns: the checkpoint namespace.
        lines: ref name -> tip commit, for ``head`` and every fork.
        head: the commit of the latest checkpoint (``head``'s tip), or None.
        parents: commit -> its parent commits (a checkpoint has at most one).
        ids: commit -> checkpoint id, from the commit's ``Checkpoint:`` trailer.
        order: the commits, newest first (git's order).
    """

    saver: GitCheckpointSaver
    thread: str
    ns: str = ""
    lines: dict[str, str] = field(default_factory=dict)
    head: str | None = None
    parents: dict[str, tuple[str, ...]] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    subjects: dict[str, str] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, saver: GitCheckpointSaver, thread: str, ns: str = "") -> ThreadGraph:
        """Read the thread's refs and walk their history (messages only, no checkpoint payloads).

        Raises:
            UnknownRefError: the thread has no checkpoints in ``ns``.
        """
        graph = cls(saver, thread, ns)
        repo = saver.repo
        for name in saver.lines(thread, ns):
            tip = repo.tip(name)
            if tip is not None:
                graph.lines[name] = tip
                if name.endswith("/head"):
                    graph.head = tip
        if not graph.lines:
            where = f" in namespace {ns!r}" if ns else ""
            raise UnknownRefError(f"thread {thread!r} has no checkpoints{where}; `got threads list` shows the threads")
        for c in repo.git.walk(list(dict.fromkeys(graph.lines.values())), topo=True):
            graph.parents[c.oid] = c.parents
            found = _TRAILER.search(c.message)
            graph.ids[c.oid] = found.group(1).strip() if found else ""
            graph.subjects[c.oid] = c.message.split("\n", 1)[0]
            graph.order.append(c.oid)
        return graph

    def checkpoint_id(self, commit: str) -> str:
        """The checkpoint id stored in ``commit``'s ``checkpoint.json`` (the authoritative copy)."""
        raw = self.saver.repo.read_file(commit, "checkpoint.json")
        try:
            value = json.loads(raw.decode("utf-8")).get("checkpoint_id")
        except (ValueError, AttributeError, UnicodeDecodeError):
            value = None
        return value if isinstance(value, str) and value else self.ids.get(commit, "")

    def _base(self, base: str) -> str:
        if base in LATEST_NAMES:
            if self.head is None:
                raise UnknownRefError(f"thread {self.thread!r} has no latest checkpoint (no head line)")
            return self.head
        exact = [c for c, i in self.ids.items() if i == base] or [c for c in self.parents if c == base]
        if len(exact) == 1:
            return exact[0]
        low = base.lower()
        matches = sorted(
            {c for c, i in self.ids.items() if i.startswith(base)} | {c for c in self.parents if c.startswith(low)}
        )
        if len(matches) == 1 and len(base) >= MIN_PREFIX:
            return matches[0]
        if not matches:
            raise UnknownRefError(
                f"no checkpoint {base!r} in thread {self.thread!r}; use latest, a checkpoint id or a commit "
                "(`got threads log` lists them)"
            )
        raise UnknownRefError(
            f"{base!r} names {len(matches)} checkpoints of {self.thread!r}; give more of the id "
            "(at least 4 characters; `got threads log` lists them)"
        )

    def resolve(self, rev: str) -> str:
        """The commit ``rev`` names: ``latest`` / ``HEAD``, a checkpoint id, a unique prefix of a
        checkpoint id or commit SHA, then any number of ``~N`` (N first parents back) and
        ``^N`` (the N-th parent; ``^0`` is the checkpoint itself).

        Raises:
            InvalidInputError: a malformed revision.
            UnknownRefError: nothing by that name, or the walk goes past the thread's first checkpoint.
        """
        base, steps = parse_revision(rev)
        commit = self._base(base)
        for kind, n in steps:
            if kind == "^":
                if n == 0:
                    continue
                parents = self.parents.get(commit, ())
                if n > len(parents):
                    have = "no parent" if not parents else f"{len(parents)} parent"
                    raise UnknownRefError(
                        f"{rev!r}: checkpoint {self.ids.get(commit, commit)!r} has {have}; "
                        f"^{n} names none (a checkpoint has at most one parent)"
                    )
                commit = parents[n - 1]
                continue
            for walked in range(n):
                parents = self.parents.get(commit, ())
                if not parents:
                    raise UnknownRefError(
                        f"{rev!r} goes past the first checkpoint of thread {self.thread!r} "
                        f"({walked} step{'s' if walked != 1 else ''} back is as far as it goes)"
                    )
                commit = parents[0]
        return commit

    def first_parent_line(self, start: str, limit: int | None = None) -> list[str]:
        """``start`` and its ancestors along first parents, newest first (``git log --first-parent``)."""
        out: list[str] = []
        commit: str | None = start
        while commit is not None and (limit is None or len(out) < limit):
            out.append(commit)
            parents = self.parents.get(commit, ())
            commit = parents[0] if parents else None
        return out

    def labels(self, *, full: bool = False) -> dict[str, list[str]]:
        """commit -> the names of the lines ending there: ``latest`` for head, ``fork`` for the
        others (with ``full``, the fork ref's own name, ``fork <name>``)."""
        out: dict[str, list[str]] = {}
        for name, tip in sorted(self.lines.items()):
            if name.endswith("/head"):
                label = "latest"
            else:
                label = "fork " + name.rsplit("/forks/", 1)[-1] if full else "fork"
            out.setdefault(tip, []).append(label)
        return out
