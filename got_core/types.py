"""Plain data types of the substrate: nodes, commits, conflicts, hits, verdicts.

These are what the rest of the code (and users) speak; nothing here touches git.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from got_core.errors import InvalidInputError

__all__ = [
    "BEST_TAG",
    "NODE_FILES",
    "OUTCOME_TAG_PREFIX",
    "Clock",
    "CommitInfo",
    "Conflict",
    "DeterministicClock",
    "Hit",
    "Identity",
    "MergeResult",
    "Node",
    "VerifyResult",
    "WallClock",
    "canonical_json",
    "parse_trailers",
    "tag_value",
    "trailer_score",
]

#: The four files of a reasoning node (docs/ARCHITECTURE.md, "A reasoning node").
NODE_FILES = ("thought.md", "scores.json", "trace.jsonl", "metadata.json")

#: The tag rule, defined once. A validated node is tagged ``success_<id>`` or
#: ``failed_<id>``; ``best`` (and ``best_*``) marks the winner. Retrieval's tag term:
#: 1 for a success or best tag, 0 for a failed tag, 0.5 untagged.
OUTCOME_TAG_PREFIX = {"success": "success_", "failed": "failed_"}
BEST_TAG = "best"


def tag_value(tags: Iterable[str]) -> tuple[float, str | None]:
    """The retrieval tag term for a commit's tags: (value, the deciding tag or None)."""
    tags = list(tags)
    for t in tags:
        if t.startswith(OUTCOME_TAG_PREFIX["success"]) or t == BEST_TAG or t.startswith(BEST_TAG + "_"):
            return 1.0, t
    for t in tags:
        if t.startswith(OUTCOME_TAG_PREFIX["failed"]):
            return 0.0, t
    return 0.5, None


def parse_trailers(message: str) -> dict[str, str]:
    """The ``Got-*`` trailers of a commit message: ``{'Node': '…', 'Score': '…'}`` (last one wins)."""
    out: dict[str, str] = {}
    for line in message.splitlines():
        if line.startswith("Got-") and ": " in line:
            key, _, value = line.partition(": ")
            out[key[4:]] = value.strip()
    return out


def trailer_score(trailers: dict[str, str]) -> float | None:
    """The ``Got-Score`` trailer as a number, or None (absent or not a number)."""
    try:
        return float(trailers["Score"])
    except (KeyError, ValueError):
        return None


def canonical_json(data: Any) -> str:
    """Stable, diff-friendly JSON: sorted keys, two-space indent, trailing newline."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


@dataclass(frozen=True)
class Identity:
    """Author/committer identity, always explicit (never the user's git config)."""

    name: str = "GitOfThoughts"
    email: str = "got@localhost"


class Clock:
    """Source of commit timestamps: ``now() -> (seconds since epoch, utc offset minutes)``."""

    def now(self) -> tuple[int, int]:  # pragma: no cover - interface
        """Return the timestamp for the next commit."""
        raise NotImplementedError


class WallClock(Clock):
    """The real time, in UTC."""

    def now(self) -> tuple[int, int]:
        """Current time in whole seconds, offset 0."""
        return int(time.time()), 0


class DeterministicClock(Clock):
    """A clock that starts at ``start`` and advances ``step`` seconds per commit.

    Seeded runs use it so that a re-run writes bit-identical commits (§5 audit).
    """

    def __init__(self, start: int = 1_700_000_000, step: int = 1) -> None:
        self._next = int(start)
        self._step = int(step)

    def now(self) -> tuple[int, int]:
        """The next timestamp in the sequence."""
        value = self._next
        self._next += self._step
        return value, 0


@dataclass
class Node:
    """A scored reasoning node; committed as one commit of four files.

    Attributes:
        thought: the reasoning text (``thought.md``).
        scores: numeric scores (``scores.json``); ``s_comb`` is the combined score.
        trace: ReAct steps and tool calls, one JSON object per line (``trace.jsonl``).
        metadata: anything else (``metadata.json``); node id, problem, depth and
            outcome are stored there too.
        problem_id: the problem this node works on.
        depth: depth in the reasoning tree (root = 0).
        outcome: ``success``, ``failed``, ``timeout``, ``pending``… or empty.
        node_id: stable id; derived from the content when left empty.
        oid: commit SHA once committed / read back.
        parents: parent commit SHAs once committed / read back.
        note: the score note read back from the notes ref, if any.
        tags: tag names pointing at this commit, when read back.
    """

    thought: str
    scores: dict[str, float] = field(default_factory=dict)
    trace: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    problem_id: str = ""
    depth: int = 0
    outcome: str = ""
    node_id: str = ""
    oid: str | None = None
    parents: tuple[str, ...] = ()
    note: dict[str, Any] | None = None
    tags: list[str] = field(default_factory=list)

    @property
    def score(self) -> float | None:
        """The combined score: the note's ``s_comb`` if re-scored, else ``scores['s_comb']``."""
        for source in (self.note or {}, self.scores):
            value = source.get("s_comb")
            if isinstance(value, (int, float)):
                return float(value)
        return None

    def committed_oid(self) -> str:
        """The commit SHA of a node that was committed (or read back).

        Raises:
            InvalidInputError: the node was never committed (``oid`` is None).
        """
        if self.oid is None:
            raise InvalidInputError(
                f"node {self.node_id or self.thought[:40]!r} is not committed; "
                "commit it first (ReasoningRepo.commit_node)"
            )
        return self.oid

    def derive_id(self, parents: tuple[str, ...] | list[str] = ()) -> str:
        """Content hash id: the same thought under the same parents gets the same id."""
        h = hashlib.sha256()
        for part in (self.problem_id, str(self.depth), self.thought, *parents):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
        return h.hexdigest()[:16]


@dataclass(frozen=True)
class CommitInfo:
    """One commit as seen in logs and search results."""

    oid: str
    message: str
    parents: tuple[str, ...]
    time: int
    author: str = ""
    refs: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    score: float | None = None

    @property
    def summary(self) -> str:
        """First line of the message."""
        return self.message.split("\n", 1)[0]

    def trailers(self) -> dict[str, str]:
        """``Got-*`` trailers of the message as a dict (``{'Node': '…', 'Score': '…'}``)."""
        return parse_trailers(self.message)

    @classmethod
    def indexed(
        cls, oid: str, message: str, parents: tuple[str, ...], time: int, tags: tuple[str, ...], score: float | None
    ) -> CommitInfo:
        """The same object as ``CommitInfo(oid, message, parents, time, "", (), tags, score)``, built
        for a query's many hits: a frozen dataclass's ``__init__`` sets each field through
        ``object.__setattr__``, ten times the cost of filling the instance's dict at once (a
        grep of a common word at 100k commits builds thousands)."""
        obj = _new(cls)
        _setattr(
            obj,
            "__dict__",
            {
                "oid": oid,
                "message": message,
                "parents": parents,
                "time": time,
                "author": "",
                "refs": (),
                "tags": tags,
                "score": score,
            },
        )
        return obj


_new = object.__new__
_setattr = object.__setattr__


@dataclass(frozen=True)
class Conflict:
    """A path both sides changed differently; contents as text (None = absent on that side)."""

    path: str
    base: str | None
    ours: str | None
    theirs: str | None


@dataclass(frozen=True)
class MergeResult:
    """What a merge did.

    Attributes:
        status: ``up-to-date``, ``fast-forward``, ``merged``, ``resolved`` (conflicts
            decided by a strategy) or ``conflicted`` (nothing committed; see ``conflicts``).
        commit: the new tip of the target branch (None when conflicted).
        conflicts: conflicts found (also kept when a strategy resolved them).
        ours, theirs, base: the commits involved.
    """

    status: Literal["up-to-date", "fast-forward", "merged", "resolved", "conflicted"]
    commit: str | None
    conflicts: tuple[Conflict, ...] = ()
    ours: str | None = None
    theirs: str | None = None
    base: str | None = None


@dataclass(frozen=True)
class VerifyResult:
    """Signature verdict for one commit.

    ``status`` is ``good``, ``bad`` (signature does not match the content, or a tree or
    blob under the commit is missing or altered: tampered),
    ``unknown-key`` (signed, but by no trusted key) or ``unsigned``.
    """

    oid: str
    status: Literal["good", "bad", "unknown-key", "unsigned"]
    signer: str = ""
    detail: str = ""
    #: for ``bad`` because an object under the commit is damaged: that object's path
    #: in the commit's tree (``""``: the root tree or the commit itself).
    path: str = ""

    @property
    def ok(self) -> bool:
        """True only for a good signature by a trusted key."""
        return self.status == "good"


@dataclass(frozen=True)
class Hit:
    """A ranked retrieval result (ARCHITECTURE §3: ρ = 0.7·s_comb + 0.2·tag + 0.1·recency)."""

    oid: str
    summary: str
    rho: float
    score: float | None
    tag: str | None
    recency: float
    match: float
    node_id: str = ""
    problem_id: str = ""
    message: str = ""

    def trailers(self) -> dict[str, str]:
        """``Got-*`` trailers of the hit's commit message (``{'Node': '…', 'Score': '…'}``)."""
        return parse_trailers(self.message)
