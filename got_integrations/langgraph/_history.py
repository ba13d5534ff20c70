"""Whole-thread operations of :class:`~got_integrations.langgraph.GitCheckpointSaver`:
delete, copy, fork, prune and delete-for-runs.

In git these are ref operations: copying or forking a thread shares every object;
deleting leaves commits that no ref reaches (``git gc`` removes them). Pruning and deleting
single runs rewrite a line: survivors are re-parented onto their nearest surviving
ancestor (their trees, and so their state, are unchanged), and the writes history of
the namespace is squashed to what remains, so dropped data leaves the history too.
These are administrative operations: run them while no graph writes the same thread.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from got_core.errors import InvalidInputError, UnknownRefError
from got_core.repo import Keep, Publish
from got_integrations.langgraph._layout import (
    CARRIED,
    THREADS_REF,
    ThreadRef,
    check_writes_doc,
    fast_json,
    id_component,
    parse_json,
    text_id,
    writes_stem,
)

if TYPE_CHECKING:  # pragma: no cover
    from langchain_core.runnables import RunnableConfig

    from got_core.repo import ReasoningRepo
    from got_integrations.langgraph._layout import LRU

__all__ = ["HistoryOps"]


@dataclass
class _Ns:
    """In-process knowledge about one (thread, namespace); git stays the truth."""

    ref: ThreadRef
    head_lock: threading.RLock = field(default_factory=threading.RLock)
    writes_lock: threading.RLock = field(default_factory=threading.RLock)
    head: str | None = None  # head commit as last seen or written
    # checkpoint id -> its pending ref as this process last wrote it (a hint: the CAS checks it)
    pending_tips: dict[str, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)  # checkpoint id -> commit
    known: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # commit -> (git parent, id)
    children: dict[str, list[str]] = field(default_factory=dict)  # commit -> the known commits on it

    def note(self, commit: str, parent: str | None, checkpoint_id: str) -> None:
        """Record a checkpoint commit (its parent and id) in :attr:`known` and :attr:`children`."""
        if commit in self.known:
            return
        self.known[commit] = (parent, checkpoint_id)
        if parent is not None:
            self.children.setdefault(parent, []).append(commit)

    def forget_lines(self) -> None:
        """Drop what is known of the namespace's commits (after a rewrite)."""
        self.head, self.ids, self.known, self.children = None, {}, {}, {}

    # put_writes calls waiting for the next writes commit (group commit: one commit takes them all)
    pending_lock: threading.Lock = field(default_factory=threading.Lock)
    pending: list[Any] = field(default_factory=list)
    # checkpoints that got a special write (an interrupt, an error): their writes are never handed over
    urgent: dict[str, None] = field(default_factory=dict)
    # the latest checkpoints this saver put itself: no earlier saver's ``writes`` ref holds writes of
    # them (only savers older than the ``pending/`` refs wrote that ref), so their writes skip reading it
    mine: dict[str, None] = field(default_factory=dict)


class HistoryOps:
    """Mixin of thread-level operations; relies on the saver's refs, caches and index."""

    repo: ReasoningRepo
    _writes_cache: LRU

    if TYPE_CHECKING:  # what the mixin needs from its host, GitCheckpointSaver

        def _flush_deferred(self) -> None: ...
        def threads(self) -> list[str]: ...
        def namespaces(self, thread_id: str) -> list[str]: ...
        def _ns(self, thread_id: Any, checkpoint_ns: Any) -> _Ns: ...
        def _forget(self, thread_id: str) -> None: ...
        def _blob(self, sha: str) -> bytes: ...
        def _doc(self, commit: str, full: bool = True) -> dict[str, Any]: ...
        def _id_of(self, ns: _Ns, commit: str) -> str: ...
        def _leaves(self, ns: _Ns) -> dict[str, str]: ...
        def _refresh(self, ns: _Ns) -> list[tuple[str, str]]: ...
        def _sync_lines(self, ns: _Ns) -> str | None: ...
        def _carriers(self, ns: _Ns, commit: str | None) -> list[str]: ...
        def _lookup(self, ns: _Ns, checkpoint_id: str) -> str | None: ...
        def _keep(self, ns: _Ns, commit: str, checkpoint_id: str) -> None: ...
        def _free_fork_name(self, ns: _Ns, checkpoint_id: str) -> str: ...
        def _message(
            self, ns: _Ns, checkpoint_id: str, parent_id: str | None, metadata: Mapping[str, Any], summary: str
        ) -> str: ...

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of a thread (its refs; objects go at the next gc)."""
        self._flush_deferred()  # a running graph's queued writes are read too
        thread_id = text_id(thread_id, "thread id")
        prefix = f"{THREADS_REF}{id_component(thread_id, 'thread id')}/"
        for name in self.repo.refs(prefix):
            self.repo.delete_ref(name)
        self._forget(thread_id)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of a thread to another thread id.

        Git shares the objects, so a copy costs a few refs. Checkpoints already on the
        target stay; the copied lines join as forks and the highest id becomes ``head``.
        """
        self._flush_deferred()  # a running graph's queued writes are read too
        for checkpoint_ns in self.namespaces(source_thread_id):
            src = self._ns(source_thread_id, checkpoint_ns)
            dst = self._ns(target_thread_id, checkpoint_ns)
            with dst.head_lock, dst.writes_lock:
                for name, oid in self._leaves(src).items():
                    if name == src.ref.head and self.repo.tip(dst.ref.head) is None:
                        self.repo.set_ref(dst.ref.head, oid, expected=None)
                    else:
                        self._keep(dst, oid, self._id_of(src, oid))
                self._fix_head(dst)
                self._merge_writes(src, dst)
                dst.head, dst.ids = None, {}
                dst.pending_tips.clear()
        self._writes_cache.clear()

    def _fix_head(self, ns: _Ns) -> None:
        """Point ``head`` at the leaf with the highest checkpoint id; the others stay forks."""
        leaves = self._leaves(ns)
        if not leaves:
            return
        best = max(leaves, key=lambda n: self._id_of(ns, leaves[n]))
        if best == ns.ref.head:
            return
        head = leaves.get(ns.ref.head)
        if head is not None:
            self.repo.set_ref(self._free_fork_name(ns, self._id_of(ns, head)), head, expected=None)
        self.repo.set_ref(ns.ref.head, leaves[best], expected=head)
        self.repo.delete_ref(best)
        ns.head = None

    def _merge_writes(self, src: _Ns, dst: _Ns) -> None:
        """Give ``dst`` the pending writes of ``src``: each checkpoint's ``pending/`` ref (and
        the single ``writes`` ref of an earlier saver), copied, or merged into the target's own."""
        pairs = [(src.ref.writes, dst.ref.writes)]
        pairs += [
            (name, dst.ref.pending_prefix + name[len(src.ref.pending_prefix) :]) for name in self._pending_refs(src)
        ]
        for source, target in pairs:
            src_tip = self.repo.tip(source)
            if src_tip is None:
                continue
            dst_tip = self.repo.tip(target)
            if dst_tip is None:
                self.repo.set_ref(target, src_tip, expected=None)
                continue
            if dst_tip == src_tip:
                continue
            ours = self.repo.list_files(dst_tip)
            changes = {p: self._blob(s) for p, s in self.repo.list_files(src_tip).items() if ours.get(p) != s}
            self.repo.commit_files(
                target, changes, "writes copied from another thread\n", parents=[dst_tip, src_tip], expected=dst_tip
            )

    def _carried_to_pending(self, src: _Ns, commit: str, checkpoint_id: str, dst: _Ns) -> None:
        """Store in ``dst``'s ``pending/<checkpoint_id>`` the writes that children of ``commit``
        carry for it (``CARRIED``), merged into what that ref holds (its entries come first)."""
        carried: dict[str, dict[str, Any]] = {}
        for child in self._carriers(src, commit):
            for path, sha in sorted(self.repo.list_files(child, CARRIED).items()):
                what = f"writes file {path} of commit {child[:12]}"
                doc = check_writes_doc(parse_json(self._blob(sha), what), what)
                if doc.get("checkpoint_id") == checkpoint_id:
                    carried.setdefault(path[len(CARRIED) + 1 :], doc)
        if not carried:
            return

        def build(tip: str | None) -> Publish | Keep:
            held = self.repo.list_files(tip) if tip is not None else {}
            changes: dict[str, bytes | None] = {}
            for name, doc in carried.items():
                if name in held:
                    what = f"writes file {name} of commit {tip and tip[:12]}"
                    old = check_writes_doc(parse_json(self._blob(held[name]), what), what)
                    seen = {w["idx"] for w in old["writes"]}
                    more = [w for w in doc["writes"] if w["idx"] not in seen]
                    if not more:
                        continue
                    doc = {**old, "writes": [*old["writes"], *more]}
                changes[name] = fast_json(doc)
            if not changes:
                return Keep(None)
            message = "writes a later checkpoint carried, kept for this one\n"
            return Publish(self.repo.prepare_commit([tip] if tip else [], changes, message))

        self.repo.update_ref(dst.ref.pending(checkpoint_id), build)

    def _pending_refs(self, ns: _Ns) -> dict[str, str]:
        """The ``pending/<checkpoint>`` refs of a namespace -> their tips."""
        return self.repo.refs(ns.ref.pending_prefix)

    def fork_thread(
        self, source_thread_id: str, checkpoint_id: str, target_thread_id: str, checkpoint_ns: str = ""
    ) -> RunnableConfig:
        """Start a new thread from a past checkpoint of another one (a git branch).

        The target's history is the source's up to ``checkpoint_id`` (shared commits);
        invoking the graph on the target thread continues from there.

        Returns:
            The config of that checkpoint on the target thread.

        Raises:
            UnknownRefError: no such checkpoint.
            InvalidInputError: the target thread already has checkpoints in that namespace.
        """
        self._flush_deferred()  # a running graph's queued writes are read too
        src = self._ns(source_thread_id, checkpoint_ns)
        commit = self._lookup(src, checkpoint_id)
        if commit is None:
            raise UnknownRefError(
                f"thread {source_thread_id!r} has no checkpoint {checkpoint_id!r}; `got threads history` lists them"
            )
        dst = self._ns(target_thread_id, checkpoint_ns)
        with dst.head_lock, dst.writes_lock:
            if self.repo.tip(dst.ref.head) is not None:
                raise InvalidInputError(
                    f"thread {target_thread_id!r} already has checkpoints; fork into a new thread id"
                )
            self.repo.set_ref(dst.ref.head, commit, expected=None)
            self._merge_writes(src, dst)  # the target has no writes yet: each ref is copied as it is
            self._sync_lines(src)
            # the writes the source's next checkpoint carries for this one: the target's line ends here
            self._carried_to_pending(src, commit, checkpoint_id, dst)
            dst.head, dst.ids = None, {}
            dst.pending_tips.clear()
        return {
            "configurable": {
                "thread_id": target_thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: each namespace keeps only its latest checkpoint (now a root
        commit) and that checkpoint's writes; ``delete``: remove the threads.

        Raises:
            InvalidInputError: an unknown strategy.
        """
        self._flush_deferred()  # a running graph's queued writes are read too
        if strategy not in ("keep_latest", "delete"):
            raise InvalidInputError(f"unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'")
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            for checkpoint_ns in self.namespaces(thread_id):
                ns = self._ns(thread_id, checkpoint_ns)
                latest = self.repo.tip(ns.ref.head)
                if latest is not None:
                    self._rewrite(ns, keep={self._id_of(ns, latest)})

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose metadata ``run_id`` is listed;
        later checkpoints of the same line are re-parented onto the nearest survivor."""
        self._flush_deferred()  # a running graph's queued writes are read too
        runs = {str(r) for r in run_ids}
        if not runs:
            return
        for thread_id in self.threads():
            for checkpoint_ns in self.namespaces(thread_id):
                ns = self._ns(thread_id, checkpoint_ns)
                with ns.head_lock:
                    self._refresh(ns)
                    doomed = {
                        cid
                        for commit, (_, cid) in list(ns.known.items())
                        if str(self._doc(commit)["metadata"].get("run_id")) in runs
                    }
                    if doomed:
                        self._rewrite(ns, keep={cid for _, cid in list(ns.known.values())} - doomed)

    def _rewrite(self, ns: _Ns, keep: set[str]) -> None:
        """Rebuild a namespace with only the checkpoints whose id is in ``keep``."""
        repo, ref = self.repo, ns.ref
        with ns.head_lock, ns.writes_lock:
            self._refresh(ns)
            leaves = self._leaves(ns)
            for commit, (_, cid) in list(ns.known.items()):
                if cid in keep and any(ns.known[c][1] not in keep for c in self._carriers(ns, commit)):
                    self._carried_to_pending(ns, commit, cid, ns)  # the child carrying them goes
            scratch = ref.prefix + "rewrite"
            mapped: dict[str, str] = {}  # surviving commit -> its rewritten commit

            def survivor(commit: str | None) -> str | None:
                while commit is not None and ns.known[commit][1] not in keep:
                    commit = ns.known[commit][0]
                return commit

            def rebuild(tip: str) -> str | None:
                chain: list[str] = []  # survivors from the tip up to one already rebuilt (or the root)
                commit = survivor(tip)
                while commit is not None and commit not in mapped:
                    chain.append(commit)
                    commit = survivor(ns.known[commit][0])
                for old in reversed(chain):
                    parent = survivor(ns.known[old][0])
                    new_parent = mapped[parent] if parent is not None else None
                    old_files = repo.list_files(old)
                    if parent != ns.known[old][0]:  # another parent: the writes it carried were its old parent's
                        old_files = {p: b for p, b in old_files.items() if not p.startswith(CARRIED + "/")}
                    base = repo.list_files(new_parent) if new_parent else {}
                    changes: dict[str, bytes | None] = {
                        p: self._blob(s) for p, s in old_files.items() if base.get(p) != s
                    }
                    changes.update({p: None for p in base if p not in old_files})
                    doc = self._doc(old)
                    msg = self._message(ns, doc["checkpoint_id"], doc.get("parent_checkpoint_id"), doc["metadata"], "")
                    mapped[old] = repo.commit_files(
                        scratch,
                        changes,
                        msg,
                        parents=[new_parent] if new_parent else [],
                        expected=repo.tip(scratch),
                        force=True,
                        fresh_tree=new_parent is None,
                    )
                first = survivor(tip)
                return mapped[first] if first is not None else None

            new_tips = {t for t in (rebuild(o) for o in leaves.values()) if t is not None}
            inner = {mapped[p] for old in mapped if (p := survivor(ns.known[old][0])) is not None}
            ids = {mapped[old]: ns.known[old][1] for old in mapped}
            tips = sorted(new_tips - inner, key=lambda c: ids[c], reverse=True)
            for name in leaves:
                repo.delete_ref(name)
            repo.delete_ref(scratch)
            if tips:
                repo.set_ref(ref.head, tips[0], expected=None)
                for commit in tips[1:]:
                    repo.set_ref(self._free_fork_name(ns, ids[commit]), commit, expected=None)
            self._rewrite_writes(ns, keep)
            ns.forget_lines()
            ns.pending_tips.clear()
        self._writes_cache.clear()

    def _rewrite_writes(self, ns: _Ns, keep: set[str]) -> None:
        """Drop the pending writes of every checkpoint not in ``keep``."""
        kept = {ns.ref.pending(cid) for cid in keep}
        for name in self._pending_refs(ns):
            if name not in kept:
                self.repo.delete_ref(name)
        tip = self.repo.tip(ns.ref.writes)  # the single writes ref of an earlier saver
        if tip is None:
            return
        stems = {writes_stem(cid) for cid in keep}
        files = {p: self._blob(s) for p, s in self.repo.list_files(tip).items() if p.split("~", 1)[0] + "~" in stems}
        if not files:
            self.repo.delete_ref(ns.ref.writes)
            return
        # a fresh root commit: dropped writes leave the history too (it is squashed)
        self.repo.commit_files(
            ns.ref.writes,
            files,
            "writes kept after a prune or run deletion\n",
            parents=[],
            expected=tip,
            force=True,
            fresh_tree=True,
        )
