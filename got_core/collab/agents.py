"""Mergeable memory across agents: workers, a central repository, merges with review.

§6.3 of arXiv 2606.14470 (ARCHITECTURE §1): N agents learn lessons in parallel; git
merges their memories. Lessons live one file per topic key on a memory branch
(:mod:`got_core.memory.git`), so disjoint topics merge cleanly while two agents'
different lessons on one topic surface as a conflict with both sides — never kept
silently. :func:`concatenate_lessons` is the control arm: it appends everything
into one log and keeps contradictions with no signal at all.

Roles::

    central.git                       refs/heads/memory            the merged memory
                                      refs/heads/agents/<id>/memory each worker's lessons
                                      refs/notes/got-<id>          each worker's scores
                                      refs/tags/success_*          validated lessons
                                      refs/got/merge-pending/<into>/<name>  left for review
    Worker(path, central, id)   clone → learn on agents/<id>/memory → push (only that)
    Orchestrator(central[, path]) merge_workers(strategy) → merge_status() → resolve()

Resolution strategies: ``review`` (default: nothing is committed; the worker's
commit is parked under ``refs/got/merge-pending/`` and its conflicts are recomputed
on demand), ``ours``, ``theirs``, or a resolver callable — e.g. :func:`adjudicator`
over a chat model — whose decision is itself a merge commit naming both parents.

Selective sharing: a worker pushes its memory branch, the success tags that point
into it, and its own notes ref; raw traces (the session branch, failed tags, nodes)
never leave its repository. Remotes never prompt for credentials: one that asks
fails at once with :class:`~got_core.errors.RemoteError`.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from got_core.collab.layouts import Layout, LessonMemory
from got_core.errors import (
    ConcurrentUpdateError,
    CorruptRepositoryError,
    InvalidInputError,
    MergeConflictError,
    StorageError,
    UnknownRefError,
)
from got_core.memory.base import Lesson, validate_text
from got_core.memory.git import parse_topic_file, render_topic_file
from got_core.names import decode_component, encode_component
from got_core.repo import ReasoningRepo
from got_core.repo.sharing import is_url
from got_core.storage.inbound import InboundLimits
from got_core.types import Conflict, Identity, MergeResult

__all__ = [
    "PENDING_PREFIX",
    "ConcatenationResult",
    "LessonConflict",
    "MergeReport",
    "Orchestrator",
    "PendingMerge",
    "Worker",
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
_SCRATCH_PREFIX = "refs/got/merge-scratch/"
_scratch_ids = itertools.count()


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
    """What merging ``theirs`` into ``into`` would do, without moving ``into``.

    The merge runs on a scratch ref that is deleted afterwards (a clean merge leaves
    only an unreferenced commit behind). ``commit`` is None in the result.
    """
    tip = repo.tip(into)
    if tip is None:
        return MergeResult("fast-forward", None, (), None, repo.resolve(theirs), None)
    scratch = f"{_SCRATCH_PREFIX}{os.getpid()}-{threading.get_ident()}-{next(_scratch_ids)}"
    repo.set_ref(scratch, tip, expected=None)
    try:
        result = repo.merge(theirs, into=scratch, strategy="review")
    finally:
        repo.delete_ref(scratch)
    return MergeResult(result.status, None, result.conflicts, result.ours, result.theirs, result.base)


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


def merge_status(repo: ReasoningRepo, into: str | None = None) -> list[PendingMerge]:
    """Open merges left for review, with their conflicts recomputed against the current tip.

    An entry whose commit is already merged is dropped (its ref deleted). One that now
    merges cleanly is still listed (with no conflicts) until someone merges it.
    """
    prefix = PENDING_PREFIX + (encode_component(into, "branch") + "/" if into else "")
    out = []
    for ref, commit in sorted(repo.refs(prefix).items()):
        target_enc, _, name_enc = ref[len(PENDING_PREFIX) :].partition("/")
        target, name = decode_component(target_enc), decode_component(name_enc)
        preview = preview_merge(repo, commit, target)
        if preview.status == "up-to-date":
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


# ---------------------------------------------------------------------------- roles
class Orchestrator:
    """The central repository and the merges into its memory branch.

    Args:
        central: the central repository: a local bare repository (created with a root
            commit on ``into``), or a URL of one served by a git server (``git://``,
            ``http(s)://``, ``ssh://``; it must exist there). With a URL the orchestrator
            works in its own repository ``path``: it fetches the workers' branches from the
            URL, merges locally and pushes the merged ``into`` back (a push refused because
            central moved meanwhile is merged and tried again, never forced). Merges left
            for review are parked in ``path``.
        path: the orchestrator's own repository, required with a URL (created if missing).
        into: the shared memory branch.
        identity: author of merge commits.
        limits: what one fetch from a central URL may bring in.
    """

    def __init__(
        self,
        central: str | os.PathLike[str],
        *,
        path: str | os.PathLike[str] | None = None,
        into: str = "memory",
        identity: Identity | None = None,
        limits: InboundLimits | None = None,
        **repo_options: Any,
    ) -> None:
        identity = identity or Identity("got-orchestrator", "orchestrator@got.local")
        self.url = os.fspath(central) if is_url(central) else None
        self.into = into
        self.limits = limits
        if self.url is not None:
            if path is None:
                raise InvalidInputError("an orchestrator of a central URL needs path=, its own repository")
            self.repo = ReasoningRepo.open(path, identity=identity, **repo_options)
            self._workers_prefix = "refs/remotes/central/agents/"
            self._fetch()
            remote = self.repo.tip("refs/remotes/central/" + into)
            if remote is not None:
                self.repo.merge(remote, into=into, strategy="review")
        else:
            if path is not None:
                raise InvalidInputError("path= is for a central URL; a local central repository is its own path")
            self.repo = ReasoningRepo.init(central, identity=identity, **repo_options)
            self._workers_prefix = "refs/heads/agents/"
        if self.repo.tip(into) is None:
            # One shared root, so every worker's branch has a merge base with memory.
            try:
                self.repo.commit_files(
                    into,
                    {"README.md": ("Shared memory of GitOfThoughts agents: one file per topic key under lessons/.\n")},
                    "memory: shared root\n",
                    parents=[],
                    expected=None,
                )
            except ConcurrentUpdateError:  # another orchestrator created it first
                if self.repo.tip(into) is None:
                    raise
        self._publish()

    @property
    def path(self) -> Path:
        """The central repository's git directory (give it to workers); with a URL, our own repository's."""
        return Path(self.repo.gitdir)

    @property
    def central(self) -> str:
        """Where workers reach central: the URL, or the local git directory."""
        return self.url if self.url is not None else str(self.path)

    def _fetch(self) -> None:
        if self.url is not None:
            self.repo.fetch(self.url, name="central", tags=False, limits=self.limits)

    def _publish(self) -> None:
        if self.url is not None:
            self.repo.push(self.url, branches=(self.into,), tag_prefixes=(), merge="review", limits=self.limits)

    def workers(self) -> dict[str, str]:
        """Worker id -> tip of its ``agents/<id>/memory`` branch in the central repository."""
        self._fetch()
        out = {}
        for ref, oid in self.repo.refs(self._workers_prefix).items():
            rest = ref[len(self._workers_prefix) :]
            if rest.endswith("/memory") and rest.count("/") == 1:
                out[decode_component(rest[: -len("/memory")])] = oid
        return dict(sorted(out.items()))

    def merge_workers(
        self, agents: Sequence[str] | None = None, *, strategy: str | Callable[[Conflict], Any] = "review"
    ) -> MergeReport:
        """Merge each worker's branch into the memory branch, in order of worker id.

        Conflicted merges (``review``, or a resolver that abstains) are parked for
        review and the other workers are still merged. With a central URL, the merged
        memory branch is pushed back at the end.
        """
        known = self.workers()
        report = MergeReport()
        for agent in agents if agents is not None else known:
            if agent not in known:
                raise UnknownRefError(f"no worker {agent!r} has pushed to {self.central}")
            report.results[agent] = merge_recorded(
                self.repo,
                self._workers_prefix[: -len("agents/")] + agent_branch(agent),
                name=agent,
                into=self.into,
                strategy=strategy,
                message=f"Merge lessons of agent {agent} into {self.into}\n",
            )
        self._publish()
        return report

    def merge_status(self) -> list[PendingMerge]:
        """Open conflicts left for review (see :func:`merge_status`)."""
        return merge_status(self.repo, self.into)

    def resolve(
        self,
        agent: str,
        strategy: str | Callable[[Conflict], Any] | None = None,
        *,
        decisions: Mapping[str, str | bytes | None] | None = None,
    ) -> MergeResult:
        """Decide a pending merge: ``ours``, ``theirs``, a resolver, or explicit ``decisions``."""
        if decisions is not None:
            strategy = decisions_resolver(decisions)
        if strategy is None:
            raise InvalidInputError("give a strategy ('ours', 'theirs', a resolver) or decisions")
        result = resolve_pending(self.repo, agent, strategy, into=self.into)
        self._publish()
        return result

    def lessons(self) -> list[Lesson]:
        """Every lesson on the merged memory branch."""
        return lessons_at(self.repo, self.into)

    def concatenate_lessons(
        self, path: str | Path, agents: Sequence[str] | None = None, *, since: str | None = None
    ) -> ConcatenationResult:
        """The control arm: append every worker's new lessons (not yet on ``since``,
        default the memory branch) to one log; see :func:`concatenate_lessons`."""
        known = self.workers()
        names = list(agents) if agents is not None else list(known)
        return concatenate_lessons(
            self.repo, path, {a: f"refs/heads/{agent_branch(a)}" for a in names}, since=since or self.into
        )


class Worker:
    """One agent: its own repository, lessons on ``agents/<id>/memory``, pushes to central.

    Args:
        path: the worker's private repository (created if missing).
        central: path or URL of the central repository.
        agent_id: the worker's id (any string; encoded for refs).
        identity: author of its commits (default: named after the agent).
        limits: what one :meth:`sync` may fetch from central (default
            :data:`got_core.inbound.DEFAULT_LIMITS`); central is a peer like any other.
        layout: how lesson files are laid out (:mod:`got_core.collab.layouts`): ``keyed``
            (one file per topic: contradictions conflict) or ``content`` (one file per lesson
            text: nothing ever conflicts, contradictions land silently).
        **repo_options: passed to :class:`ReasoningRepo` (clock, signer, ...).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        central: str | os.PathLike[str],
        agent_id: str,
        *,
        identity: Identity | None = None,
        limits: InboundLimits | None = None,
        layout: Layout = "keyed",
        **repo_options: Any,
    ) -> None:
        self.agent_id = agent_id
        self.limits = limits
        self.branch = agent_branch(agent_id)
        self.notes_ref = agent_notes_ref(agent_id)
        self.central = str(central)
        enc = encode_component(agent_id, "agent id")
        self.repo = ReasoningRepo.open(
            path,
            identity=identity or Identity(f"agent {agent_id}", f"{enc}@got.local"),
            notes_ref=self.notes_ref,
            **repo_options,
        )
        self.memory = LessonMemory(repo=self.repo, branch=self.branch, layout=layout)

    def sync(self) -> MergeResult:
        """Fetch the central memory (and tags, and every agent's notes) and merge it into our branch.

        Returns:
            The merge into ``agents/<id>/memory`` (``conflicted`` leaves our branch as it was).

        Raises:
            RemoteError: central cannot be reached or asks for credentials.
            UntrustedContentError: what central sent broke a check or a limit; nothing changed.
        """
        self.repo.fetch(self.central, branches=["memory"], name="central", limits=self.limits)
        remote = "refs/remotes/central/memory"
        if self.repo.tip(self.branch) is None:
            self.repo.set_ref(self.branch, remote, expected=None)
            tip = self.repo.tip(self.branch)
            return MergeResult("fast-forward", tip, (), None, tip, None)
        return self.repo.merge(
            remote, into=self.branch, strategy="review", message=f"Sync central memory into agent {self.agent_id}\n"
        )

    def add_lesson(
        self, text: str, *, topic_key: str = "", outcome: str = "insight", score: float = 0.5, source_problem: str = ""
    ) -> tuple[Lesson, str]:
        """Learn one lesson: a commit on our branch, its score as a note on our notes ref,
        and a ``success_`` tag when ``outcome == "success"``.

        Returns:
            (the stored lesson, the commit that stored it).
        """
        add = {
            "insight": self.memory.add_insight,
            "success": self.memory.add_success,
            "failure": self.memory.add_failure,
        }.get(outcome)
        if add is None:
            raise InvalidInputError(f"outcome must be insight, success or failure, not {outcome!r}")
        lesson = add(text, topic_key=topic_key, score=score, source_problem=source_problem)
        commit = self.repo.tip(self.branch)  # one writer per worker branch: the tip is our commit
        if lesson is None or commit is None:
            raise CorruptRepositoryError(f"the lesson was not stored on {self.branch}")
        self.repo.set_note(commit, {"s_comb": float(score), "agent": self.agent_id})
        if outcome == "success":
            self.repo.tag_outcome(commit, "success", f"{self.agent_id}-{commit[:12]}")
        return lesson, commit

    def shareable_tags(self) -> list[str]:
        """Success tags that point into our memory branch (tags on raw traces stay private)."""
        if self.repo.tip(self.branch) is None:
            return []
        reachable = {c.oid for c in self.repo.log(self.branch)}
        tags = self.repo.tags("success_")
        ok = [t for t, oid in tags.items() if oid in reachable]
        # push() selects tags by prefix: drop a name that is a prefix of a private tag.
        return sorted(t for t in ok if not any(o.startswith(t) and o not in ok for o in tags))

    def push(self) -> list[str]:
        """Selective sharing: push our memory branch, its success tags and our notes ref.

        Returns:
            The refspecs pushed.

        A push central refuses because our branch or notes moved there meanwhile (the same
        agent pushing from elsewhere) is merged (``review``) and tried again, never forced.

        Raises:
            RemoteError: central cannot be reached, refused, or asked for credentials.
            MergeConflictError: what central holds on our branch conflicts with ours.
        """
        return self.repo.push(
            self.central,
            branches=(self.branch,),
            tag_prefixes=tuple(self.shareable_tags()),
            notes=(self.notes_ref,),
            merge="review",
            limits=self.limits,
        )

    def close(self) -> None:
        """Release the repository's handles."""
        self.repo.close()
