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

The roles live in :mod:`got_core.collab.worker` and :mod:`got_core.collab.orchestrator`,
the merging with review and the control arm in :mod:`got_core.collab.review`; this module
gathers their public names (ARCHITECTURE §2).
"""

from __future__ import annotations

from got_core.collab.orchestrator import Orchestrator
from got_core.collab.review import (
    PENDING_PREFIX,
    ConcatenationResult,
    LessonConflict,
    MergeReport,
    PendingMerge,
    adjudicator,
    agent_branch,
    agent_notes_ref,
    concatenate_lessons,
    decisions_resolver,
    lessons_at,
    merge_recorded,
    merge_status,
    pending_ref,
    preview_merge,
    resolve_pending,
)
from got_core.collab.worker import Worker

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
