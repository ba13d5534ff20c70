"""Merging memories with review: conflicts as data, pending merges, resolvers, the control arm.

§6.3 of arXiv 2606.14470 (ARCHITECTURE §1): lessons live one file per topic key on a
memory branch (:mod:`got_core.memory.git`), so disjoint topics merge cleanly while two
agents' different lessons on one topic surface as a conflict with both sides — never kept
silently. A conflicted merge is parked under ``refs/got/merge-pending/<into>/<name>``
(:func:`merge_recorded`) until a strategy decides it (:func:`resolve_pending`): ``ours``,
``theirs``, explicit decisions (:func:`decisions_resolver`) or a resolver such as
:func:`adjudicator` over a chat model, whose decision is itself a merge commit naming both
parents. :func:`concatenate_lessons` is the control arm: it appends everything into one
log and keeps contradictions with no signal at all.

The roles that use these functions are :mod:`got_core.collab.worker` and
:mod:`got_core.collab.orchestrator`; :mod:`got_core.collab.agents` gathers all three.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from got_core.errors import InvalidInputError, MergeConflictError, StorageError, UnknownRefError
from got_core.memory.base import Lesson, validate_text
from got_core.memory.git import parse_topic_file, render_topic_file
from got_core.names import decode_component, encode_component
from got_core.repo import ReasoningRepo, sharing
from got_core.types import Conflict, MergeResult

__all__ = [
    "PENDING_PREFIX",
    "ConcatenationResult",
    "LessonConflict",
    "MergeReport",
    "PendingMerge",
    "adjudicator",
    "agent_branch",
    "agent_notes_ref",
    "concatenate_lessons",
    "decisions_resolver",
    "lessons_at",
    "merge_recorded",
    "merge_status",
    "pending_ref",
    "preview_merge",
    "resolve_pending",
]

PENDING_PREFIX = "refs/got/merge-pending/"


def agent_branch(agent_id: str) -> str:
    """The branch a worker accumulates lessons on: ``agents/<id>/memory``."""
    return f"agents/{encode_component(agent_id, 'agent id')}/memory"


def agent_notes_ref(agent_id: str) -> str:
    """The worker's own notes ref (``refs/notes/got-<id>``): concurrent scorers never collide."""
    return f"refs/notes/got-{encode_component(agent_id, 'agent id')}"


def pending_ref(into: str, name: str) -> str:
    """Where a merge left for review is parked: ``refs/got/merge-pending/<into>/<name>``."""
    return f"{PENDING_PREFIX}{encode_component(into, 'branch')}/{encode_component(name, 'merge source name')}"


# ---------------------------------------------------------------------------- conflicts as data
@dataclass(frozen=True)
class LessonConflict:
    """A conflicted topic file read as lessons: what each side says about one topic key."""

    path: str
    topic_key: str
    base: tuple[Lesson, ...]
    ours: tuple[Lesson, ...]
    theirs: tuple[Lesson, ...]

    @classmethod
    def from_conflict(cls, conflict: Conflict) -> LessonConflict:
        """Parse a :class:`~got_core.types.Conflict` on a topic file."""
        sides = [
            tuple(parse_topic_file(text)) if text else () for text in (conflict.base, conflict.ours, conflict.theirs)
        ]
        key = next((l.topic_key for side in sides for l in side if l.topic_key), "")
        if not key:
            stem = conflict.path.rsplit("/", 1)[-1].removesuffix(".md")
            key = decode_component(stem)
        return cls(conflict.path, key, *sides)


@dataclass(frozen=True)
class PendingMerge:
    """A merge left for review: whose commit, into which branch, and its conflicts now."""

    name: str
    into: str
    commit: str
    conflicts: tuple[Conflict, ...]

    @property
    def lesson_conflicts(self) -> list[LessonConflict]:
        """The conflicts on topic files, as lessons."""
        return [LessonConflict.from_conflict(c) for c in self.conflicts if c.path.startswith("lessons/")]


@dataclass
class MergeReport:
    """What :meth:`Orchestrator.merge_workers` did, per worker."""

    results: dict[str, MergeResult] = field(default_factory=dict)

    @property
    def conflicts(self) -> list[Conflict]:
        """Every conflict surfaced (whether left for review or decided by a strategy)."""
        return [c for r in self.results.values() for c in r.conflicts]

    @property
    def pending(self) -> list[str]:
        """Workers whose merge was left for review."""
        return [name for name, r in self.results.items() if r.status == "conflicted"]


# ---------------------------------------------------------------------------- merging with review
def preview_merge(repo: ReasoningRepo, theirs: str, into: str = "memory") -> MergeResult:
    """What merging ``theirs`` into ``into`` would do, changing nothing.

    No ref moves and no object is written (:func:`got_core.repo.sharing.preview_merge`),
    so a repository served read-only stays as it was. ``commit`` is None in the result.
    """
    if repo.tip(into) is None:
        return MergeResult("fast-forward", None, (), None, repo.resolve(theirs), None)
    return sharing.preview_merge(repo, theirs, into=into)


def merge_recorded(
    repo: ReasoningRepo,
    theirs: str,
    *,
    name: str,
    into: str = "memory",
    strategy: str | Callable[[Conflict], Any] = "review",
    message: str | None = None,
) -> MergeResult:
    """Merge ``theirs`` into ``into``; park it under ``refs/got/merge-pending/`` when conflicted.

    A resolver that abstains (raises :class:`MergeConflictError`) also leaves the
    merge for review. A successful merge clears any pending entry of ``name``.

    Args:
        name: who this merge comes from (a worker id or peer name), for the pending entry.
        strategy: ``review``, ``ours``, ``theirs`` or a resolver (see :mod:`got_core.repo.sharing`).

    Returns:
        The merge result; ``status == "conflicted"`` means it is pending review.
    """
    commit = repo.resolve(theirs)
    ref = pending_ref(into, name)
    try:
        result = repo.merge(commit, into=into, strategy=strategy, message=message or f"Merge {name} into {into}\n")
    except MergeConflictError:
        preview = preview_merge(repo, commit, into)
        result = MergeResult("conflicted", None, preview.conflicts, preview.ours, commit, preview.base)
    if result.status == "conflicted":
        repo.set_ref(ref, commit)
    else:
        repo.delete_ref(ref)
    return result


def merge_status(repo: ReasoningRepo, into: str | None = None, *, prune: bool = True) -> list[PendingMerge]:
    """Open merges left for review, with their conflicts recomputed against the current tip.

    An entry whose commit is already merged is not listed; with ``prune`` its ref is
    deleted too (``prune=False`` changes nothing: for a repository served read-only).
    One that now merges cleanly is still listed (with no conflicts) until someone merges it.
    """
    prefix = PENDING_PREFIX + (encode_component(into, "branch") + "/" if into else "")
    out = []
    for ref, commit in sorted(repo.refs(prefix).items()):
        target_enc, _, name_enc = ref[len(PENDING_PREFIX) :].partition("/")
        target, name = decode_component(target_enc), decode_component(name_enc)
        preview = preview_merge(repo, commit, target)
        if preview.status == "up-to-date":
            if prune:
                repo.delete_ref(ref)
            continue
        out.append(PendingMerge(name, target, commit, preview.conflicts))
    return out


def decisions_resolver(decisions: Mapping[str, str | bytes | None]) -> Callable[[Conflict], str | bytes | None]:
    """A resolver from explicit decisions (path -> content; None deletes); abstains elsewhere."""

    def decide(conflict: Conflict) -> str | bytes | None:
        if conflict.path not in decisions:
            raise MergeConflictError(f"no decision given for {conflict.path}", [conflict])
        return decisions[conflict.path]

    decide.__name__ = "decisions"
    return decide


def resolve_pending(
    repo: ReasoningRepo, name: str, strategy: str | Callable[[Conflict], Any], *, into: str = "memory"
) -> MergeResult:
    """Decide a merge left for review with ``ours``, ``theirs`` or a resolver.

    Raises:
        UnknownRefError: nothing from ``name`` is pending for ``into``.
        InvalidInputError: ``strategy`` is ``review`` (that is what left it pending).
    """
    if strategy == "review":
        raise InvalidInputError("resolve with 'ours', 'theirs' or a resolver; 'review' leaves it pending")
    commit = repo.tip(pending_ref(into, name))
    if commit is None:
        raise UnknownRefError(f"no merge from {name!r} into {into!r} is pending review; see `got merge --status`")
    return merge_recorded(repo, commit, name=name, into=into, strategy=strategy)


def adjudicator(model: Any, *, instructions: str | None = None) -> Callable[[Conflict], str | None]:
    """A resolver that asks a chat model to reconcile two agents' lessons on one topic.

    The model answers with one lesson, or ``ABSTAIN`` to leave the conflict for review.
    Its answer is stored as text (never executed) in the topic file, and the decision
    becomes a merge commit naming both parents.

    Args:
        model: a :class:`got_core.solver.models.ChatModel` (``complete(messages) -> ChatResponse``).
        instructions: replaces the default system prompt.
    """
    system = instructions or (
        "You merge the memories of two agents. Both wrote advice on the same topic and they disagree. "
        "Reply with one short, answer-free lesson that is correct in general (say when each side "
        "applies if both can be), or reply ABSTAIN if a human must decide."
    )

    def adjudicate(conflict: Conflict) -> str | None:
        lc = LessonConflict.from_conflict(conflict)

        def show(side: tuple[Lesson, ...]) -> str:
            return "\n".join(f"- ({l.outcome}, confidence {l.score:.2f}) {l.text}" for l in side) or "- (nothing)"

        prompt = (
            f"Topic: {lc.topic_key}\n\nAgent A says:\n{show(lc.ours)}\n\nAgent B says:\n{show(lc.theirs)}\n\n"
            "Your lesson (or ABSTAIN):"
        )
        reply = model.complete([{"role": "system", "content": system}, {"role": "user", "content": prompt}])
        text = (getattr(reply, "text", reply) or "").strip()
        if not text or text.upper().startswith("ABSTAIN"):
            raise MergeConflictError(f"the adjudicator abstained on {lc.topic_key!r}", [conflict])
        sides = lc.ours + lc.theirs
        lesson = Lesson(
            validate_text(text, "adjudicated lesson").strip(),
            lc.topic_key,
            outcome="insight",
            score=max((l.score for l in sides), default=0.5),
            created=max((l.created for l in sides), default=0.0),
            meta={"adjudicated": True, "replaces": [l.text for l in sides]},
        )
        return render_topic_file([lesson])

    adjudicate.__name__ = "adjudicator"
    return adjudicate


# ---------------------------------------------------------------------------- the control arm
def lessons_at(repo: ReasoningRepo, rev: str | None) -> list[Lesson]:
    """Every lesson in the topic files of ``rev`` (none when ``rev`` is None or absent)."""
    if rev is None:
        return []
    try:
        tip = repo.resolve(rev)
    except UnknownRefError:
        return []
    return [
        l
        for path, data in sorted(repo.files(tip, "lessons").items())
        if path.endswith(".md")
        for l in parse_topic_file(data.decode("utf-8", "replace"))
    ]


@dataclass(frozen=True)
class ConcatenationResult:
    """The concatenation control: every lesson appended, contradictions and all.

    ``conflicts`` is always 0 — that is the point: nothing tells the reader that two
    entries on one topic disagree.
    """

    path: Path
    lessons: tuple[tuple[str, Lesson], ...]
    conflicts: int = 0


def concatenate_lessons(
    repo: ReasoningRepo, path: str | Path, sources: Mapping[str, str], *, since: str | None = "memory"
) -> ConcatenationResult:
    """Append every source's new lessons to one markdown log, with no conflict signal.

    Args:
        sources: name -> revision (e.g. worker id -> its memory branch).
        since: lessons already at this revision are not new (None: take all).
        path: the log file (created or appended to).

    Returns:
        The appended (source, lesson) pairs.
    """
    known = {(l.topic_key, l.text) for l in lessons_at(repo, since)} if since else set()
    added: list[tuple[str, Lesson]] = []
    for name, rev in sources.items():
        added.extend((name, l) for l in lessons_at(repo, rev) if (l.topic_key, l.text) not in known)
    out = Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("a", encoding="utf-8") as fh:
            for name, l in added:
                fh.write(f"## {l.topic_key} — from {name} ({l.outcome}, {l.score:.2f})\n\n{l.text}\n\n")
    except OSError as exc:
        raise StorageError(f"cannot append to {out}: {exc}") from None
    return ConcatenationResult(out, tuple(added))
