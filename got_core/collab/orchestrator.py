"""The orchestrator: the central repository and the merges into its memory branch.

Workers (:mod:`got_core.collab.worker`) push their lessons to ``agents/<id>/memory`` in
the central repository; the orchestrator merges them into ``memory`` with review
(:mod:`got_core.collab.review`), parks conflicted merges and resolves them. Central is a
local bare repository or a URL served by a git server (ARCHITECTURE §4, collaboration).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from got_core.collab.review import (
    ConcatenationResult,
    MergeReport,
    PendingMerge,
    agent_branch,
    concatenate_lessons,
    decisions_resolver,
    lessons_at,
    merge_recorded,
    merge_status,
    resolve_pending,
)
from got_core.errors import ConcurrentUpdateError, InvalidInputError, UnknownRefError
from got_core.memory.base import Lesson
from got_core.names import decode_component
from got_core.repo import ReasoningRepo
from got_core.repo.sharing import is_url
from got_core.storage.inbound import InboundLimits
from got_core.types import Conflict, Identity, MergeResult

__all__ = ["Orchestrator"]


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
