"""A worker: one agent's own repository, its lessons on ``agents/<id>/memory``, pushed to central.

Selective sharing: a worker pushes its memory branch, the success tags that point into
it, and its own notes ref; raw traces (the session branch, failed tags, nodes) never
leave its repository. Remotes never prompt for credentials: one that asks fails at once
with :class:`~got_core.errors.RemoteError`.
"""

from __future__ import annotations

import os
from typing import Any

from got_core.collab.layouts import Layout, LessonMemory
from got_core.collab.review import agent_branch, agent_notes_ref
from got_core.errors import CorruptRepositoryError, InvalidInputError
from got_core.memory.base import Lesson
from got_core.names import encode_component
from got_core.repo import ReasoningRepo
from got_core.storage.inbound import InboundLimits
from got_core.types import Identity, MergeResult

__all__ = ["Worker"]


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
