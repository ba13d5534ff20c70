"""The one commit-on-score hook (§3.2 of arXiv 2606.14470, ARCHITECTURE §3).

Every node of every test-time arm is recorded through :class:`NodeRecorder`:

* a commit of ``thought.md``, ``scores.json``, ``trace.jsonl``, ``metadata.json``
  (through :meth:`ReasoningRepo.commit_node`), with the combined score as a git
  note on the notes ref;
* the root goes on the session branch; each child on its own exploration branch
  (``explore/<arm>/<label>``), so ``git log --all --graph`` draws the tree;
* validation outcomes are tags on the exact reasoning state: ``success_<id>`` /
  ``failed_<id>`` and the movable ``best``; a spent budget is a node with outcome
  ``timeout`` / ``budget``, tagged ``failed_timeout_<id>`` / ``failed_budget_<id>``;
* :meth:`NodeRecorder.finish` merges (normally fast-forwards) the winning leaf's
  branch into the session branch, so ``master`` ends on the winning path.

Inside ``with recorder.batch():`` the score notes of every node recorded (and
every verdict marked) are written together, as one commit on the notes ref when
the block ends: one notes commit per question instead of one per node (ARCHITECTURE §6:
fewer objects and ref updates per step is the main performance lever).

Layouts: a problem's own repository (session branch ``master``, tag ``best``) or
a session branch in a shared repository (``session_ref`` given; exploration
branches under ``explore/<problem>/…``, tag ``best_<problem>``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from got_core.errors import InvalidInputError
from got_core.names import encode_component, short_ref
from got_core.repo import ReasoningRepo
from got_core.types import Node

__all__ = ["FAILURE_OUTCOMES", "VALIDATION_OUTCOMES", "NodeRecorder"]

#: Outcomes set by validation; ``commit_node`` tags them ``success_`` / ``failed_``.
VALIDATION_OUTCOMES = ("success", "failed")
#: Outcomes that end a question early; tagged ``failed_<outcome>_<id>``.
FAILURE_OUTCOMES = ("timeout", "budget", "error")


#: Trace fields that hold measured durations (left out with ``timings=False``).
TIMING_KEYS = frozenset({"latency_ms", "tool_ms", "elapsed_s"})


class NodeRecorder:
    """Records the nodes of one problem's reasoning tree.

    Args:
        repo: where the nodes go.
        problem_id: the problem (any string; encoded wherever it meets a ref).
        session_ref: the branch the winning path ends on. ``None`` means the
            repository is the problem's own: ``master`` (the repo's session branch).
            Give one (e.g. ``sessions/<problem>``) to share a repository.
        arm: the test-time arm, part of each exploration branch name.

    Attributes:
        nodes: every node recorded, in order (as stored: ``oid``, ``tags`` filled in).
        session_ref: the full session ref.
        best_tag: ``best`` or ``best_<problem>`` in a shared repository.
    """

    def __init__(
        self,
        repo: ReasoningRepo,
        problem_id: str,
        session_ref: str | None = None,
        *,
        arm: str = "tot",
        timings: bool = True,
    ) -> None:
        if not isinstance(problem_id, str) or not problem_id.strip():
            raise InvalidInputError("problem_id must be a non-empty string")
        self.repo = repo
        self.problem_id = problem_id
        self.shared = session_ref is not None
        self.session_ref = repo.ref(session_ref) if session_ref is not None else repo.session_ref
        self._pid = encode_component(problem_id, "problem id")
        self.arm = encode_component(arm, "arm")
        self.explore_prefix = f"explore/{self._pid}/{self.arm}/" if self.shared else f"explore/{self.arm}/"
        self.best_tag = f"best_{self._pid}" if self.shared else "best"
        self.nodes: list[Node] = []
        self.timings = timings
        self._pending: dict[str, dict[str, Any]] | None = None

    # ------------------------------------------------------------------ notes
    @contextmanager
    def batch(self) -> Iterator[NodeRecorder]:
        """Defer the score notes of this block, then write them in one notes commit.

        Nested blocks join the outer one. The notes are written when the block
        ends, also when it ends with an exception.
        """
        outer = self._pending is None
        if outer:
            self._pending = {}
        try:
            yield self
        finally:
            if outer:
                pending, self._pending = self._pending, None
                if pending:
                    self._write_notes(pending)

    def _write_notes(self, notes: Mapping[str, Mapping[str, Any]]) -> None:
        self.repo.set_notes({oid: dict(note) for oid, note in notes.items()})

    def _note(self, oid: str, note: Mapping[str, Any]) -> None:
        if self._pending is not None:
            self._pending[oid] = dict(note)
        else:
            self.repo.set_note(oid, dict(note))

    # ------------------------------------------------------------------ recording
    def branch_for(self, label: str) -> str:
        """The exploration branch of a child called ``label``."""
        return self.explore_prefix + encode_component(label, "node label")

    def _node_id(self, label: str, thought: str, parents: Sequence[str]) -> str:
        # Siblings may write identical text (a scripted or greedy model): the label and
        # position keep their ids, and so their outcome tags, distinct.
        h = hashlib.sha256()
        for part in (self.problem_id, self.arm, label, str(len(self.nodes)), thought, *parents):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
        return h.hexdigest()[:16]

    def record(
        self,
        thought: str,
        scores: Mapping[str, float],
        trace: Sequence[Mapping[str, Any]],
        metadata: Mapping[str, Any],
        parents: Sequence[Node | str],
        depth: int,
        outcome: str | None = None,
        *,
        label: str | None = None,
    ) -> Node:
        """Commit one node; note its score; tag a known outcome.

        Args:
            thought: the node's reasoning text (``thought.md``).
            scores: ``s_local``, ``s_cross``, ``s_comb``… (``scores.json`` and the note).
            trace: ReAct steps (``trace.jsonl``).
            metadata: extra JSON-able facts (``metadata.json``); arm and label are added.
            parents: parent nodes or SHAs; empty for the root, which goes on the session branch.
            depth: depth in the tree (root 0).
            outcome: ``success`` / ``failed`` (validated), ``timeout`` / ``budget`` / ``error``
                (the question ended early), or ``None`` (not judged).
            label: the child's name (its branch is ``explore/…/<label>``); defaults to the node index.

        Returns:
            The stored :class:`Node` (``oid``, ``parents``, ``tags``, ``note`` filled in).

        Raises:
            InvalidInputError: scores, trace or metadata that are not JSON-serialisable.
        """
        parent_oids: list[str] = []
        for p in parents:
            oid = p.oid if isinstance(p, Node) else p
            if not oid:
                raise InvalidInputError("every parent must be a committed node (with an oid) or a SHA")
            parent_oids.append(oid)
        label = label or ("root" if not parent_oids else f"n{len(self.nodes)}")
        meta = {**dict(metadata), "arm": self.arm, "label": label}
        steps = [dict(s) for s in trace]
        if not self.timings:  # measured durations differ run to run; seeded re-runs must not
            steps = [{k: v for k, v in step.items() if k not in TIMING_KEYS} for step in steps]
        node = Node(
            thought=thought,
            scores=dict(scores),
            trace=steps,
            metadata=meta,
            problem_id=self.problem_id,
            depth=depth,
            outcome=outcome or "",
            node_id=self._node_id(label, thought, parent_oids),
        )
        now = self._pending is None  # in a batch, the note waits for the batch's notes commit
        if parent_oids:
            stored = self.repo.commit_node(node, ref=self.branch_for(label), parents=parent_oids, note=now)
        else:  # the root continues the session branch (a second session follows the first)
            stored = self.repo.commit_node(node, ref=self.session_ref, note=now)
        if not now and stored.scores:
            self._note(stored.committed_oid(), stored.scores)
            stored.note = dict(stored.scores)
        if outcome in FAILURE_OUTCOMES:
            stored.tags = [self.repo.tag(f"failed_{outcome}_{stored.node_id}", stored.committed_oid())]
        self.nodes.append(stored)
        return stored

    def mark(
        self, node: Node, outcome: str, details: Mapping[str, Any] | None = None, *, best: bool = False
    ) -> list[str]:
        """Record a validation verdict on an already committed node.

        The node is not rewritten: its note gains ``outcome`` and ``validation``
        (re-scoring without rewriting, ARCHITECTURE §1) and it is tagged.

        Args:
            node: a node returned by :meth:`record`.
            outcome: ``success`` or ``failed``.
            details: the checks that were run (JSON-able).
            best: also point the ``best`` tag at it.

        Returns:
            The tags now on the node.

        Raises:
            InvalidInputError: an outcome other than ``success`` / ``failed``, or an uncommitted node.
        """
        if outcome not in VALIDATION_OUTCOMES or not node.oid:
            raise InvalidInputError(f"mark() needs a committed node and an outcome in {VALIDATION_OUTCOMES}")
        note = {**node.scores, "outcome": outcome}
        if details:
            note["validation"] = dict(details)
        self._note(node.oid, note)
        tags = [self.repo.tag_outcome(node.oid, outcome, node.node_id)]
        if best:
            tags.append(self.repo.mark_best(node.oid, self.best_tag))
        node.note, node.outcome = note, outcome
        node.tags = sorted(set(node.tags) | set(tags))
        return node.tags

    def finish(self, winner: Node | None) -> str | None:
        """Put the winning path on the session branch; returns the session tip.

        The winner's branch is merged into the session branch: a fast-forward when
        the session still ends at the root (the normal case: root → best child), a
        merge commit preferring the winner's files if another session moved it.
        """
        if winner is not None and winner.oid and winner.parents:
            label = winner.metadata.get("label")
            source = self.branch_for(label) if label else winner.oid
            if self.repo.tip(source) != winner.oid:
                source = winner.oid
            self.repo.merge(
                source,
                into=self.session_ref,
                message=f"solve {self._pid}: winning path {winner.node_id}\n",
                strategy="theirs",
            )
        return self.repo.tip(self.session_ref)

    # ------------------------------------------------------------------ reading back
    @property
    def session_branch(self) -> str:
        """The session branch's short name (``master`` or the shared session's)."""
        return short_ref(self.session_ref)

    def children_of(self, node: Node) -> list[Node]:
        """Recorded nodes whose first parent is ``node``."""
        return [n for n in self.nodes if n.parents and n.parents[0] == node.oid]
