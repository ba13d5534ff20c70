"""Pending writes of :class:`~got_integrations.langgraph.GitCheckpointSaver`: ``put_writes``
(commits on each checkpoint's ``pending/<id>`` ref), and the writes a running graph's
``put_writes`` hands over to the checkpoint that follows.

A ``put_writes`` call writes a commit, a one-file tree and the file, and creates the
checkpoint's ``pending/<id>`` ref: a new name, which on ext4 costs a fraction of a rename
over an existing ref file, and a tree that stays one file however long the thread.
Concurrent ``put_writes`` calls of one namespace (parallel tasks, and the burst LangGraph
sends at exit under ``durability="exit"``) share one commit per checkpoint: the first
caller to get the lock takes every request queued by then (a group commit).

Hand-over (one ref transaction a super-step). Inside a running graph (LangGraph puts
``__pregel_runtime`` in the config it passes) a task's regular writes are queued, and
the call returns at once; they are published by whichever comes first:

- the next ``put`` of the namespace: when it moves ``head`` on from the writes'
  checkpoint, the task files go into the new checkpoint's own tree (``parent~writes/``, no
  ``pending/`` ref: one pack, one ref move), else they create ``pending/<id>`` in the same
  ref transaction as the checkpoint (LangGraph saves a step's writes before the checkpoint
  that applies them, so no reader ever sees a checkpoint without the writes of its parent);
- a special write (an error, an interrupt, a resume, a scheduled task) of the
  namespace, which is published at once, with the queue, before it returns; from then on
  every write of that checkpoint is too (an interrupted step ends the run, and the writes
  of its other tasks may come after the interrupt);
- any read or history operation of the saver, ``close``, and interpreter exit;
- :data:`HAND_OVER_S` after it was queued, from a background thread: a task whose
  step's other tasks run long is stored within that time, as LangGraph's own background
  executor stores it within the time the save takes.

So a process killed during a step loses at most the writes of the last
:data:`HAND_OVER_S` (LangGraph re-runs those tasks on resume, as it does for a task
whose background save had not finished), and never a write that a stored checkpoint
depends on. ``put_writes`` called outside a graph run (no ``__pregel_runtime``) is
published before it returns, as before.
"""

from __future__ import annotations

import atexit
import builtins
import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP

from got_core.errors import CorruptRepositoryError, UnknownRefError
from got_core.repo import Keep, Publish
from got_integrations.langgraph._history import _Ns
from got_integrations.langgraph._layout import (
    check_writes_doc,
    encode_exact,
    fast_json,
    jsonable,
    parse_json,
    task_file,
    text_id,
    writes_path,
)
from got_integrations.langgraph._render import writes_message

if TYPE_CHECKING:  # pragma: no cover
    from got_core.repo import ReasoningRepo
    from got_integrations.langgraph._reading import Typed

__all__ = ["HAND_OVER_S", "PendingOps"]

#: Seconds a graph task's queued writes wait for the next checkpoint before a background thread stores them.
HAND_OVER_S = 0.05
#: Seconds the background thread waits for more queued writes before it ends (a running graph
#: queues some every step: starting a thread again costs more than a step's own writes).
LINGER_S = 2.0
#: The config key LangGraph's Pregel loop sets on every call it makes: a graph is running.
RUNNING = "__pregel_runtime"
_log = logging.getLogger(__name__)


@dataclass(eq=False)
class _WriteRequest:
    """One ``put_writes`` call waiting for the commit that publishes it."""

    checkpoint_id: str
    task_id: str
    task_path: str
    path: str
    entries: list[dict[str, Any]]
    done: bool = False
    handed_over: bool = False  # the caller returned already: an error can only be logged
    queued: float = field(default_factory=time.monotonic)
    error: BaseException | None = field(default=None, repr=False)


class _Flusher:
    """Stores queued writes a namespace's next checkpoint did not take within :data:`HAND_OVER_S`."""

    def __init__(self, flush: Callable[[_Ns], None]) -> None:
        self._flush = flush
        self._lock = threading.Lock()  # taken directly on the hot path (arm): no Condition.__enter__ call
        self._cond = threading.Condition(self._lock)
        self._due: dict[int, tuple[float, _Ns]] = {}  # id(ns) -> (when, ns)
        self._thread: threading.Thread | None = None
        self._closed = False
        self._idle = False  # the thread waits for writes to be queued, nothing is due

    def arm(self, ns: _Ns) -> None:
        with self._lock:
            if id(ns) in self._due or self._closed:
                return
            wake = not self._due  # the thread sleeps until something is due
            self._due[id(ns)] = (time.monotonic() + HAND_OVER_S, ns)
            if self._thread is None:  # it ends LINGER_S after nothing was queued, and starts again here
                self._thread = threading.Thread(target=self._run, name="got-pending-writes", daemon=True)
                self._thread.start()
            elif wake:
                self._cond.notify()

    def waiting(self) -> builtins.list[_Ns]:
        """Every namespace that queued writes since its timer last found its queue empty."""
        with self._cond:
            return [ns for _, ns in self._due.values()]

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        idle_since: float | None = None
        while True:
            with self._cond:
                if not self._due and not self._closed:
                    # nothing queued: wait a while for the next step's writes, then end (no idle
                    # thread holds the saver for long)
                    now = time.monotonic()
                    idle_since = now if idle_since is None else idle_since
                    if now - idle_since < LINGER_S:
                        self._idle = True
                        self._cond.wait(LINGER_S - (now - idle_since))
                        self._idle = False
                        continue
                if not self._due or self._closed:
                    self._thread = None
                    return
                idle_since = None
                key, (when, ns) = min(self._due.items(), key=lambda kv: kv[1][0])
                now = time.monotonic()
                if when > now:
                    self._cond.wait(when - now)
                    continue
                # A namespace stays armed while it writes (one wake-up per HAND_OVER_S, not per
                # step): a put took most of its queue; what is left is stored once it is old enough.
                with ns.pending_lock:
                    oldest = ns.pending[0].queued if ns.pending else None
                if oldest is None:
                    del self._due[key]  # a request queued from now on arms it again
                    continue
                if oldest + HAND_OVER_S > now:
                    self._due[key] = (oldest + HAND_OVER_S, ns)
                    continue
                self._due[key] = (now + HAND_OVER_S, ns)  # looked at again then
            try:
                self._flush(ns)
            except Exception:  # the next read or put tries again; this thread must live on
                _log.exception("storing queued pending writes of %s failed", ns.ref.prefix)


_HANDING_OVER: weakref.WeakSet[PendingOps] = weakref.WeakSet()  # savers that queued writes: stored at exit


@atexit.register
def _flush_at_exit() -> None:
    for saver in list(_HANDING_OVER):
        try:
            saver._flush_deferred()
        except Exception:  # one saver's disk trouble does not keep the others' writes back
            _log.exception("storing queued pending writes at exit failed")


class PendingOps:
    """Mixin of the saver's pending writes; relies on the saver's repository and serializer."""

    repo: ReasoningRepo
    readable: bool
    hand_over_writes: bool = True
    _flusher: _Flusher | None = None

    if TYPE_CHECKING:  # what the mixin needs from its host, GitCheckpointSaver

        def _ns(self, thread_id: Any, checkpoint_ns: Any) -> _Ns: ...
        def _dumps(self, value: Any) -> Typed: ...

    # ------------------------------------------------------------------ put_writes
    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Store a task's writes for a checkpoint (a commit on the checkpoint's ``pending/<id>``
        ref, shared with the ``put_writes`` calls of the same namespace that run at the same time).

        Inside a running graph, regular writes are handed over to the namespace's next
        ``put`` (one ref transaction for both; see the module doc for when else they are stored).

        As in the reference savers, a regular write ``(task_id, idx)`` is stored once (a
        repeat is ignored); special writes (errors, interrupts, ...) replace the old one.

        Raises:
            CorruptRepositoryError: the task's writes file is damaged (nothing is changed).
            ConcurrentUpdateError: another process kept moving the same ``pending/`` ref.
            UnsafePayloadError: a value needs pickle.
        """
        self._put_writes(config, writes, task_id, task_path, publish=True)

    def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
        *,
        publish: bool,
    ) -> bool:
        """:meth:`put_writes`; with ``publish=False`` only if it can hand the writes over (no
        disk I/O: the async twin runs this inline). Returns whether it took the writes."""
        conf = config["configurable"]
        ns = self._ns(conf["thread_id"], conf.get("checkpoint_ns", ""))
        checkpoint_id = text_id(conf["checkpoint_id"], "checkpoint id")
        task_id, task_path = text_id(task_id, "task id"), text_id(task_path or "", "task path")
        special = any(channel in WRITES_IDX_MAP for channel, _ in writes)
        if not publish and (special or RUNNING not in conf or checkpoint_id in ns.urgent):
            return False
        entries: list[dict[str, Any]] = []
        for idx, (channel, value) in enumerate(writes):  # serialised before queueing: errors stay with the caller
            entry: dict[str, Any] = {
                "idx": WRITES_IDX_MAP.get(channel, idx),
                "channel": text_id(channel, "channel name"),
                "exact": encode_exact(self._dumps(value)),
            }
            if self.readable:
                entry["value"] = jsonable(value)
            entries.append(entry)
        if not entries:
            return True
        request = _WriteRequest(checkpoint_id, task_id, task_path, task_file(task_id), entries)
        with ns.pending_lock:
            if special:
                ns.urgent[checkpoint_id] = None
                if len(ns.urgent) > 64:  # the latest few interrupted checkpoints are enough
                    del ns.urgent[next(iter(ns.urgent))]
            hand_over = self.hand_over_writes and RUNNING in conf and not special and checkpoint_id not in ns.urgent
            if not hand_over and not publish:
                return False  # an interrupt of this checkpoint came meanwhile: the caller publishes
            request.handed_over = hand_over
            ns.pending.append(request)
        if hand_over:
            self._arm(ns)
            return True
        with ns.writes_lock:
            if not request.done:  # nobody took it into a commit yet: this call publishes the queue
                self._commit_writes(ns, self._take_queue(ns))
        if request.error is not None:
            raise request.error
        return True

    # ------------------------------------------------------------------ the queue
    def _arm(self, ns: _Ns) -> None:
        flusher = self._flusher
        if flusher is None:
            with ns.pending_lock:  # any lock will do: this runs once per saver
                flusher = self._flusher
                if flusher is None:
                    flusher = self._flusher = _Flusher(self._flush_ns)
                    _HANDING_OVER.add(self)
        flusher.arm(ns)

    def _take_queue(self, ns: _Ns) -> builtins.list[_WriteRequest]:
        with ns.pending_lock:
            batch, ns.pending = ns.pending, []
        return batch

    def _flush_ns(self, ns: _Ns) -> None:
        """Store the namespace's queued writes now (after a store of them in progress ends)."""
        with ns.writes_lock:
            batch = self._take_queue(ns)
            if batch:
                self._commit_writes(ns, batch)

    def _flush_deferred(self) -> None:
        """Store every queued write (before a read, a history operation, on close and at exit)."""
        flusher = self._flusher
        if flusher is not None:
            for ns in flusher.waiting():
                self._flush_ns(ns)

    def _close_flusher(self) -> None:
        self._flush_deferred()
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            flusher.close()

    def _finish(self, batch: builtins.list[_WriteRequest], errors: dict[int, BaseException] | None = None) -> None:
        """Mark the requests of a published group done, each with its own error; log what nobody waits for."""
        for n, request in enumerate(batch):
            request.error, request.done = (errors or {}).get(n), True
            if request.error is not None and request.handed_over:
                _log.error(
                    "the writes of task %s for checkpoint %s were not stored: %s",
                    request.task_id,
                    request.checkpoint_id,
                    request.error,
                )

    @staticmethod
    def _groups(batch: builtins.list[_WriteRequest]) -> dict[str, builtins.list[_WriteRequest]]:
        groups: dict[str, builtins.list[_WriteRequest]] = {}
        for request in batch:
            groups.setdefault(request.checkpoint_id, []).append(request)
        return groups

    def _commit_writes(self, ns: _Ns, batch: builtins.list[_WriteRequest]) -> None:
        """One commit per checkpoint on its ``pending/`` ref for the requests of ``batch``;
        marks each done, with its own error (a damaged file refuses its request only) or its
        commit's."""
        try:
            for checkpoint_id, group in self._groups(batch).items():
                ref = ns.ref.pending(checkpoint_id)

                def build(tip: str | None, group: builtins.list[_WriteRequest] = group) -> Publish | Keep:
                    return self._build_writes(ns, tip, group)

                try:
                    # the tip this process wrote last, else "absent": a checkpoint's first writes
                    # create its ref without reading it (the compare-and-swap checks either guess)
                    errors, tip = self.repo.update_ref(ref, build, tip_hint=ns.pending_tips.get(checkpoint_id))
                except Exception as exc:  # every caller of this checkpoint learns its commit failed
                    ns.pending_tips.pop(checkpoint_id, None)
                    self._finish(group, dict.fromkeys(range(len(group)), exc))
                    continue
                self._note_tip(ns, checkpoint_id, tip)
                self._finish(group, errors)
        except BaseException as exc:  # interrupted: nobody waits for a commit that will not come
            for request in batch:
                if not request.done:
                    request.error, request.done = exc, True
            raise

    @staticmethod
    def _note_tip(ns: _Ns, checkpoint_id: str, tip: str | None) -> None:
        if len(ns.pending_tips) >= 256:  # a hint per recent checkpoint is enough
            ns.pending_tips.clear()
        if tip is not None:
            ns.pending_tips[checkpoint_id] = tip

    def _build_writes(self, ns: _Ns, tip: str | None, batch: builtins.list[_WriteRequest]) -> Publish | Keep:
        """The commit on a ``pending/`` ref at ``tip`` that stores ``batch``: ``Publish(commit,
        (errors, commit))``, or ``Keep((errors, tip))`` when nothing in it is new."""
        files, errors, requests, channels = self._writes_files(ns, tip, batch)
        if not files:
            return Keep((errors, tip))
        message = writes_message(requests, channels)
        oid = self.repo.prepare_commit([tip] if tip else [], files, message)
        return Publish(oid, (errors, oid))

    def _writes_files(
        self, ns: _Ns, tip: str | None, batch: builtins.list[_WriteRequest]
    ) -> tuple[dict[str, bytes | None], dict[int, BaseException], builtins.list[_WriteRequest], builtins.list[str]]:
        """The task files ``batch`` changes (on the ``pending/`` tree at ``tip``, None: none):
        (path -> bytes, errors by request number, the requests with something new, channels)."""
        docs: dict[str, dict[str, Any]] = {}  # writes file -> its document as it will be
        errors: dict[int, BaseException] = {}
        changed: dict[str, builtins.list[_WriteRequest]] = {}
        legacy: builtins.list[str | None] = []  # the earlier saver's writes tip, read once
        for n, request in enumerate(batch):
            doc = docs.get(request.path)
            if doc is None:
                try:
                    doc = docs[request.path] = self._stored_writes(ns, tip, request, legacy)
                except CorruptRepositoryError as exc:
                    errors[n] = exc
                    continue
            stored = doc["entries"]
            fresh = False
            for entry in request.entries:
                key = entry["idx"]
                if key >= 0 and key in stored:
                    continue
                stored[key] = entry
                fresh = True
            doc["task_path"] = request.task_path or doc["task_path"]
            if fresh:
                changed.setdefault(request.path, []).append(request)
        files: dict[str, bytes | None] = {}
        for path in changed:
            doc = docs[path]
            files[path] = fast_json(
                {
                    "checkpoint_id": doc["checkpoint_id"],
                    "task_id": doc["task_id"],
                    "task_path": doc["task_path"],
                    "writes": [doc["entries"][i] for i in sorted(doc["entries"])],
                }
            )
        requests = [r for rs in changed.values() for r in rs]
        channels = sorted({str(e["channel"]) for path in changed for e in docs[path]["entries"].values()})
        return files, errors, requests, channels

    def _stored_writes(
        self, ns: _Ns, tip: str | None, request: _WriteRequest, legacy: builtins.list[str | None]
    ) -> dict[str, Any]:
        """The writes already stored for the request's (checkpoint, task): in the checkpoint's
        ``pending/`` ref at ``tip``, else in the single ``writes`` ref of an earlier saver
        (its tip read once per commit into ``legacy``); the next commit moves them to ``pending/``.

        Raises:
            CorruptRepositoryError: the file is damaged.
        """
        entries: dict[int, dict[str, Any]] = {}
        old_path = ""
        if not legacy:
            # a checkpoint this saver put has no writes in an earlier saver's ref: no ref read
            mine = request.checkpoint_id in ns.mine
            legacy.append(None if mine else self.repo.tip(ns.ref.writes))
        for commit, path in ((tip, request.path), (legacy[0], None)):
            if commit is None:
                continue
            if path is None:  # the earlier saver's file name: spelled only when its ref exists
                path = writes_path(request.checkpoint_id, request.task_id)
            try:
                raw = self.repo.read_file(commit, path)
            except UnknownRefError:
                continue
            what = f"writes file {path} of commit {commit[:12]}"
            old = check_writes_doc(parse_json(raw, what), what)
            entries = {w["idx"]: w for w in old["writes"]}
            old_path = old.get("task_path", "")
            break
        return {
            "checkpoint_id": request.checkpoint_id,
            "task_id": request.task_id,
            "task_path": old_path,
            "entries": entries,
        }
