"""``GitCheckpointSaver``: LangGraph checkpoints as git commits (ARCHITECTURE §4).

A drop-in for ``SqliteSaver`` / ``InMemorySaver``::

    graph = builder.compile(checkpointer=GitCheckpointSaver.from_path("agent.git"))

Refs (ids go through :func:`got_core.names.encode_component`; the root namespace is ``root``)::

    refs/got/threads/<thread>/<ns>/head          the line holding the latest checkpoint
    refs/got/threads/<thread>/<ns>/forks/<id>    other lines (forks), named by the checkpoint
                                                 id their tip had when the ref was created
    refs/got/threads/<thread>/<ns>/pending/<id>  a checkpoint's pending writes: a commit per
                                                 put_writes (calls that run at the same time
                                                 share one), one <task id>.json per task
    refs/got/threads/<thread>/<ns>/writes        every checkpoint's writes, as earlier savers kept
                                                 them (read; a task's next write moves it on)

Each checkpoint is one commit whose parent is its parent checkpoint's commit. Its tree::

    checkpoint.json                       ids, versions, metadata, channel index (readable; exact when
                                          JSON round-trips, else checkpoint.bin holds the serializer's bytes)
    <channel>/value.json | value.bin      a channel value: readable rendering | serializer bytes
                                          (values of up to 96 serialised bytes, e.g. None, flags and
                                          counters, sit inline in checkpoint.json instead)
    <channel>/000/000003.json | .bin      a list channel (e.g. messages): a rendering per element,
                                          100 elements per directory; the .bin only until a
                                          segment holds the element
    <channel>/segments/000000+100.bin     the serializer bytes of elements 0-99 in one file (one per
    <channel>/segments/000100+10.bin      full bucket, then one per 10 elements of the open bucket):
                                          a cold read of a long list takes a few blobs
    parent~writes/<task id>.json          in a running graph, the parent checkpoint's writes of the
                                          step between them (as in a pending/ tree; no ref of their own)

``.bin`` files are ``<type tag>\\n<serializer bytes>``. An unchanged value or list element
is the same blob in every checkpoint, so a growing message list adds one message per
step, not a copy of the list; ``git diff <a> <b>`` shows the state change. A
``pending/<id>`` tree holds ``<task id>.json`` (readable values plus the exact bytes in
base64); the ``writes`` ref of an earlier saver holds ``<2 hex of sha1(id)>/<checkpoint
id>~<task id>.json``.

Encryption at rest: with a serializer that encrypts (``EncryptedSerializer``; see
:func:`~got_integrations.langgraph._serde.encrypts`) or ``readable=False``, nothing
readable is written of what the serializer protects: no ``.json`` renderings, no values
in ``checkpoint.json`` or the writes files, metadata only inside the encrypted
``checkpoint.bin``, and commit messages that hold ids only. What stays readable: ref
names (thread ids, namespaces, the checkpoint ids of forks and pending writes), checkpoint and task ids, parent ids,
timestamps, channel names and versions, node names in task paths, type tags.

Cost per super-step (ARCHITECTURE §6: objects and ref moves are what a write costs): ``put`` writes
one commit, the root and the changed directories' trees, ``checkpoint.json`` and the new
element's two files (typically 7 objects; a segment every 10 elements) and moves one ref;
``put_writes`` writes one commit, a one-file tree and the file (3 objects) and creates the
checkpoint's ``pending/`` ref (:mod:`~got_integrations.langgraph._writing`). Inside a running
graph, ``put_writes`` hands a task's regular writes to the namespace's next ``put``, which
puts them in its own tree (``parent~writes/``): one ref move and one pack a super-step
(:mod:`~got_integrations.langgraph._pending` says when else they are stored, in the
``pending/`` ref: interrupts and errors at once, reads, ``close``, exit, a 50 ms timer).
Readers merge a checkpoint's ``pending/`` ref with what its children carry for it; ``head``'s
tip never carries its own (a child that carries moves ``head`` on). Unchanged channels are not
even serialised; a list is serialised once and split into elements. Reads of recent
checkpoints come from an in-process cache keyed by commit (git objects are immutable, so
a cache hit is never stale); ``head`` is re-read on every latest read. A cold read reads
segments (:mod:`~got_integrations.langgraph._reading`).

The saver is split by job: this module (construction, caches, serializer, versions),
``_reading`` (documents, values, ``get_tuple``, ``list``), ``_writing`` (``put``),
``_pending`` (``put_writes``), ``_history`` (delete, copy, fork, prune) and ``_async`` (the
``a*`` twins).

"Latest" is the highest checkpoint id, as in ``InMemorySaver``: ``head`` always holds it;
a put whose parent is not ``head``'s tip (``update_state`` on an old config, a replay)
starts or extends a fork ref, so nothing is orphaned. Writes live apart from the
checkpoint chain because LangGraph may save a task's writes before (or after) the
checkpoint they belong to (``durability="async"`` runs saves in a thread pool).

Deserialisation is safe by default (:mod:`got_integrations.langgraph._serde`): LangGraph's
``JsonPlusSerializer`` in strict msgpack mode rebuilds only allow-listed types (LangGraph's
safe set, LangChain's message, agent and output types, ``allowed_msgpack_modules``, and the
schema types of every graph compiled with the saver, which LangGraph hands over through
``with_allowlist``); ``pickle`` payloads are refused both ways unless ``allow_pickle=True``;
damaged or foreign data raises :class:`~got_core.errors.CorruptRepositoryError` naming it.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, get_checkpoint_id
from langgraph.checkpoint.serde.base import SerializerProtocol

from got_core.errors import ConfigError
from got_core.repo import ReasoningRepo
from got_integrations.langgraph._async import AsyncOps
from got_integrations.langgraph._history import HistoryOps, _Ns
from got_integrations.langgraph._layout import LRU, THREADS_REF, ThreadRef, text_id
from got_integrations.langgraph._reading import ReadOps, Typed
from got_integrations.langgraph._serde import (
    DecryptionError,
    UnsafePayloadError,
    default_serde,
    encrypts,
    is_strict,
    request_graph_types,
    safe_loads,
    widen,
)
from got_integrations.langgraph._writing import INLINE_BYTES, READABLE_HEADER, WriteOps

__all__ = [
    "INLINE_BYTES",
    "READABLE_HEADER",
    "THREADS_REF",
    "DecryptionError",
    "GitCheckpointSaver",
    "UnsafePayloadError",
]


class GitCheckpointSaver(AsyncOps, HistoryOps, ReadOps, WriteOps, BaseCheckpointSaver[str]):
    """A LangGraph checkpointer that stores every checkpoint as a git commit.

    Args:
        repo: a :class:`~got_core.repo.ReasoningRepo` or a repository path (created if missing).
        serde: the serializer (default: ``JsonPlusSerializer`` in strict msgpack mode, no pickle).
            ``EncryptedSerializer.from_pycryptodome_aes(...)`` encrypts every payload, and
            then nothing readable is written of values, messages, writes or metadata.
        allowed_msgpack_modules: extra types (classes or ``(module, name)``) the serializer
            may rebuild. LangGraph's safe set (messages, ``Send``, ``Interrupt``, datetimes,
            ...), LangChain's agent and output types and the schema types of the graphs
            compiled with this saver are always allowed. A type that is not allowed comes
            back as plain data (LangGraph logs which one).
        allow_pickle: accept ``pickle`` payloads (only for repositories you trust).
        readable: write readable JSON renderings beside the serializer's bytes. Default:
            only when the serializer does not encrypt; ``False`` keeps values out of sight
            with any serializer.
        graph_types: let LangGraph hand every graph compiled from now on its schema types
            (``with_allowlist``; see :func:`~got_integrations.langgraph._serde.request_graph_types`).
        cache_bytes: memory for recently read or written checkpoint bytes (reads skip git).
        hand_over_writes: inside a running graph, let a task's regular ``put_writes`` return
            once queued and ride on the namespace's next ``put`` (one ref transaction a
            super-step; stored at the latest 50 ms later, and before any read, ``close`` or
            exit). ``False`` stores every ``put_writes`` before it returns, as outside a graph:
            a process killed mid-step then never re-runs a task whose call had returned.

    Raises:
        ConfigError: ``readable=True`` with a serializer that encrypts.

    Thread-safe: one saver may serve many graph threads; two processes may share one
    repository (every ref move is a compare-and-swap, retried on a lost race).
    """

    def __init__(
        self,
        repo: ReasoningRepo | str | Any,
        *,
        serde: SerializerProtocol | None = None,
        allowed_msgpack_modules: Iterable[tuple[str, ...] | type] | None = None,
        allow_pickle: bool = False,
        readable: bool | None = None,
        graph_types: bool = True,
        cache_bytes: int = 64 * 1024 * 1024,
        hand_over_writes: bool = True,
    ) -> None:
        if serde is None:  # strict: only allow-listed types are rebuilt, nothing is unpickled
            serde = default_serde(allowed_msgpack_modules)
        elif allowed_msgpack_modules:
            serde = widen(serde, allowed_msgpack_modules)
        super().__init__(serde=serde)
        self.encrypted = encrypts(self.serde)
        if readable and self.encrypted:
            raise ConfigError(
                "readable=True would store readable copies of what the serializer encrypts; "
                "leave readable unset, or use a serializer that does not encrypt"
            )
        #: Whether readable renderings (``.json`` files, values in JSON documents, summaries) are written.
        self.readable = not self.encrypted if readable is None else bool(readable)
        if graph_types and is_strict(self.serde):
            request_graph_types()
        self.repo = repo if isinstance(repo, ReasoningRepo) else ReasoningRepo.open(repo)
        self.allow_pickle = allow_pickle
        #: Whether a running graph's regular writes ride on the next ``put`` (see ``hand_over_writes``).
        self.hand_over_writes = bool(hand_over_writes)
        self._serde_lock = threading.Lock()
        self._blobs = LRU(cache_bytes // 2)  # blob sha -> bytes
        self._lists = LRU(cache_bytes // 2)  # (commit, channel) -> typed elements
        self._objs = LRU(200_000)  # (commit, channel) -> the list's element objects, weighed by length
        self._files = LRU(500_000)  # commit -> {path: blob sha}, weighed by entries
        self._roots = LRU(100_000)  # commit -> its root tree (a cold read reads the commit once)
        self._docs = LRU(8 << 20)  # commit -> checkpoint.json bytes
        self._channels = LRU(100_000)  # commit -> the channel index its put wrote (never mutated), by channels
        self._carried = LRU(100_000)  # commit -> the paths of the parent's writes its tree carries
        self._writes_cache = LRU(4096)  # (writes tip, checkpoint id) -> [writes documents]
        self._states: dict[tuple[str, str], _Ns] = {}
        self._states_lock = threading.Lock()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_path(cls, path: str | Any, **options: Any) -> GitCheckpointSaver:
        """A saver on the repository at ``path`` (a bare repository is created when missing)."""
        return cls(ReasoningRepo.open(path), **options)

    @classmethod
    @contextmanager
    def from_conn_string(cls, path: str, **options: Any) -> Iterator[GitCheckpointSaver]:
        """Context-manager form mirroring ``SqliteSaver.from_conn_string`` (takes a repository path)."""
        saver = cls.from_path(path, **options)
        try:
            yield saver
        finally:
            saver.close()

    def close(self) -> None:
        """Store a running graph's queued writes, let the async worker threads end, drop caches and
        release the repository's index handle."""
        self._close_flusher()
        self._close_workers()
        for cache in (
            self._blobs,
            self._lists,
            self._objs,
            self._files,
            self._roots,
            self._docs,
            self._channels,
            self._carried,
            self._writes_cache,
        ):
            cache.clear()
        self.repo.close()

    def __enter__(self) -> GitCheckpointSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> GitCheckpointSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers
    def with_allowlist(self, extra_allowlist: Iterable[tuple[str, ...]]) -> GitCheckpointSaver:
        """Let the serializer rebuild ``extra_allowlist`` too (LangGraph passes a compiled
        graph's schema types). Widens this saver in place and returns it, so the saver you
        hold and the one the graph uses read the same values.
        """
        with self._serde_lock:
            serde = widen(self.serde, extra_allowlist)
            if serde is not self.serde:
                self.serde = serde
        return self

    def _ns(self, thread_id: Any, checkpoint_ns: Any) -> _Ns:
        key = (text_id(thread_id, "thread id"), text_id(checkpoint_ns or "", "checkpoint namespace"))
        state = self._states.get(key)  # a dict read is atomic: the lock is only for adding one
        if state is not None:
            return state
        with self._states_lock:
            state = self._states.get(key)
            if state is None:
                state = self._states[key] = _Ns(ThreadRef(*key))
            return state

    def _forget(self, thread_id: str) -> None:
        with self._states_lock:
            for key in [k for k in self._states if k[0] == thread_id]:
                del self._states[key]
        self._writes_cache.clear()

    def _dumps(self, value: Any) -> Typed:
        typed = self.serde.dumps_typed(value)
        if typed[0] == "pickle" and not self.allow_pickle:
            raise UnsafePayloadError(
                f"a {type(value).__name__} value can only be stored with pickle; make it msgpack-serialisable, "
                "or pass allow_pickle=True to GitCheckpointSaver (and then load only repositories you trust)"
            )
        return typed

    def _loads(self, typed: Typed, what: str = "a checkpoint payload") -> Any:
        return safe_loads(self.serde, typed, encrypted=self.encrypted, allow_pickle=self.allow_pickle, what=what)

    # ------------------------------------------------------------------ versions
    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        """Next channel version: a zero-padded counter and a random fraction (the scheme of
        ``InMemorySaver`` / ``SqliteSaver``: versions sort, and forks never reuse one)."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    def lines(self, thread_id: str, checkpoint_ns: str = "") -> dict[str, str]:
        """The lines (git branches) of a thread: ref name -> checkpoint id at its tip.

        ``.../head`` holds the latest checkpoint; ``.../forks/...`` the other lines.
        """
        self._flush_deferred()
        ns = self._ns(thread_id, checkpoint_ns)
        return {name: self._id_of(ns, oid) for name, oid in self._leaves(ns).items()}

    def commit_of(self, config: RunnableConfig) -> str | None:
        """The git commit SHA of the checkpoint named by ``config`` (the latest when it names none)."""
        self._flush_deferred()
        conf = config["configurable"]
        ns = self._ns(conf["thread_id"], conf.get("checkpoint_ns", ""))
        checkpoint_id = get_checkpoint_id(config)
        return (
            self._lookup(ns, text_id(checkpoint_id, "checkpoint id")) if checkpoint_id else self.repo.tip(ns.ref.head)
        )
