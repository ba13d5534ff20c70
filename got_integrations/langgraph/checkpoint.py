"""``GitCheckpointSaver``: LangGraph checkpoints as git commits (ARCHITECTURE §4).

A drop-in for ``SqliteSaver`` / ``InMemorySaver``::

    graph = builder.compile(checkpointer=GitCheckpointSaver.from_path("agent.git"))

Refs (ids go through :func:`got_core.names.encode_component`; the root namespace is ``root``)::

    refs/got/threads/<thread>/<ns>/head          the line holding the latest checkpoint
    refs/got/threads/<thread>/<ns>/forks/<id>    other lines (forks), named by the checkpoint
                                                 id their tip had when the ref was created
    refs/got/threads/<thread>/<ns>/writes        pending writes: one commit per put_writes

Each checkpoint is one commit whose parent is its parent checkpoint's commit. Its tree::

    checkpoint.json                       ids, versions, metadata, channel index (readable; exact when
                                          JSON round-trips, else checkpoint.bin holds the serializer's bytes)
    <channel>/value.json | value.bin      a channel value: readable rendering | serializer bytes
                                          (values of up to 96 serialised bytes, e.g. None, flags and
                                          counters, sit inline in checkpoint.json instead)
    <channel>/000/000003.json | .bin      a list channel (e.g. messages): one pair per element,
                                          100 elements per directory

``.bin`` files are ``<type tag>\\n<serializer bytes>``. An unchanged value or list element
is the same blob in every checkpoint, so a growing message list adds one message per
step, not a copy of the list; ``git diff <a> <b>`` shows the state change. The writes
tree holds ``<2 hex of sha1(id)>/<checkpoint id>~<task id>.json`` (readable values plus
the exact bytes in base64).

Encryption at rest: with a serializer that encrypts (``EncryptedSerializer``; see
:func:`~got_integrations.langgraph._serde.encrypts`) or ``readable=False``, nothing
readable is written of what the serializer protects: no ``.json`` renderings, no values
in ``checkpoint.json`` or the writes files, metadata only inside the encrypted
``checkpoint.bin``, and commit messages that hold ids only. What stays readable: ref
names (thread ids, namespaces, fork checkpoint ids), checkpoint and task ids, parent ids,
timestamps, channel names and versions, node names in task paths, type tags.

Cost per super-step (ARCHITECTURE §6: objects and ref moves are what a write costs): ``put`` writes
one commit, the root and the changed directories' trees, ``checkpoint.json`` and the new
element's two files (typically 7 objects) and moves one ref; ``put_writes`` writes one
commit, two small trees and one file (4 objects) and moves the ``writes`` ref. Unchanged
channels are not even serialised; a list is serialised once and split into elements.
Reads of recent checkpoints come from an in-process cache keyed by commit (git objects
are immutable, so a cache hit is never stale); ``head`` is re-read on every latest read.

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

import asyncio
import builtins
import json
import random
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from got_core.errors import ConcurrentUpdateError, ConfigError, CorruptRepositoryError, UnknownRefError
from got_core.repo import Keep, Publish, ReasoningRepo
from got_integrations.langgraph._history import HistoryOps, _Ns
from got_integrations.langgraph._layout import (
    FORMAT,
    LRU,
    THREADS_REF,
    ThreadRef,
    blob_sha,
    channel_dir,
    check_checkpoint_doc,
    check_writes_doc,
    decode_exact,
    decode_id,
    dump_json,
    elem_path,
    encode_exact,
    frame,
    id_component,
    join_msgpack_array,
    jsonable,
    message_summary,
    one_line,
    parse_json,
    render_json,
    split_msgpack_array,
    text_id,
    unframe,
    writes_bucket,
    writes_path,
)
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

__all__ = ["THREADS_REF", "DecryptionError", "GitCheckpointSaver", "UnsafePayloadError"]

Typed = tuple[str, bytes]
#: Channel values whose serializer bytes fit in this many bytes are kept inline in checkpoint.json.
INLINE_BYTES = 96
#: Header fields of a checkpoint that stay readable when the saver encrypts (ids, time, versions).
READABLE_HEADER = ("v", "id", "ts", "channel_versions", "versions_seen", "updated_channels")


class _Stored(NamedTuple):
    """What one ``put`` wrote: the commit, its files and encodings, where it went."""

    oid: str
    files: dict[str, str]
    doc: bytes
    lists: dict[str, list[Typed]]
    parent: str | None
    on_head: bool
    fork_of_parent: str | None = None


class GitCheckpointSaver(HistoryOps, BaseCheckpointSaver[str]):
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
        self._serde_lock = threading.Lock()
        self._blobs = LRU(cache_bytes // 2)  # blob sha -> bytes
        self._lists = LRU(cache_bytes // 2)  # (commit, channel) -> typed elements
        self._objs = LRU(200_000)  # (commit, channel) -> the list's element objects, weighed by length
        self._files = LRU(500_000)  # commit -> {path: blob sha}, weighed by entries
        self._docs = LRU(8 << 20)  # commit -> checkpoint.json bytes
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
        """Drop caches and release the repository's index handle."""
        for cache in (self._blobs, self._lists, self._objs, self._files, self._docs, self._writes_cache):
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

    def _blob(self, sha: str) -> bytes:
        data = self._blobs.get(sha)
        if data is None:
            data = self.repo.read_blob(sha)
            self._blobs.put(sha, data, len(data) + 80)
        return data

    def _tree(self, commit: str) -> dict[str, str]:
        files = self._files.get(commit)
        if files is None:
            files = self.repo.list_files(commit)
            self._files.put(commit, files, len(files) + 1)
        return files

    def _doc(self, commit: str, full: bool = True) -> dict[str, Any]:
        """The parsed ``checkpoint.json`` of a commit (a fresh dict on every call). With
        ``full``, the exact header and metadata from ``checkpoint.bin`` replace the readable
        ones where the saver stored them there (values JSON cannot carry, or encryption).

        Raises:
            CorruptRepositoryError: the commit holds no checkpoint the saver wrote.
        """
        data = self._docs.get(commit)
        if data is None:
            files = self._files.get(commit)
            try:
                data = self._blob(files["checkpoint.json"]) if files else self.repo.read_file(commit, "checkpoint.json")
            except (KeyError, UnknownRefError):
                raise CorruptRepositoryError(
                    f"commit {commit[:12]} has no checkpoint.json; it is not a LangGraph checkpoint"
                ) from None
            self._docs.put(commit, data, len(data) + 80)
        what = f"checkpoint.json of commit {commit[:12]}"
        doc = check_checkpoint_doc(parse_json(data, what), what)
        if full and doc.get("exact"):
            what = f"checkpoint.bin of commit {commit[:12]}"
            try:
                raw = self.repo.read_file(commit, "checkpoint.bin")
            except (KeyError, UnknownRefError):
                raise CorruptRepositoryError(f"commit {commit[:12]} lacks checkpoint.bin; run `got fsck`") from None
            exact = self._loads(unframe(raw, what), what)
            if not (
                isinstance(exact, dict)
                and isinstance(exact.get("checkpoint"), dict)
                and isinstance(exact.get("metadata"), dict)
            ):
                raise CorruptRepositoryError(f"{what} does not hold a checkpoint header and metadata")
            doc["checkpoint"], doc["metadata"] = exact["checkpoint"], exact["metadata"]
        return doc

    def _id_of(self, ns: _Ns, commit: str) -> str:
        known = ns.known.get(commit)
        return known[1] if known else self._doc(commit, full=False)["checkpoint_id"]

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

    def _loads_list(self, typed: list[Typed], name_of: Any = "list element {}".format) -> list[Any]:
        if typed and not self.encrypted and all(t == "msgpack" for t, _ in typed):
            # one msgpack array from the element encodings: a single decode, the same values
            try:
                value = self.serde.loads_typed(("msgpack", join_msgpack_array([d for _, d in typed])))
            except (ValueError, TypeError, KeyError, IndexError, OverflowError):
                value = None  # a damaged element: decoded one by one below, so the error names it
            if isinstance(value, list) and len(value) == len(typed):
                return value
        return [self._loads(t, name_of(i)) for i, t in enumerate(typed)]

    def _dump_list(
        self, value: list[Any], prev_objs: list[Any] | None = None, prev_typed: list[Typed] | None = None
    ) -> list[Typed]:
        """Element encodings of a list channel.

        Elements that are the very objects the parent checkpoint held (LangGraph's reducers
        keep old messages and append new ones) reuse the parent's encodings: like LangGraph's
        own channels, the saver treats state values as immutable — a message changed in place
        instead of replaced (``add_messages`` replaces by id) is not re-serialised.
        """
        keep = 0
        if prev_objs is not None and prev_typed is not None:
            limit = min(len(value), len(prev_objs), len(prev_typed))
            while keep < limit and value[keep] is prev_objs[keep]:
                keep += 1
        rest = value[keep:]
        head = list(prev_typed[:keep]) if keep and prev_typed is not None else []
        if not rest:
            return head
        whole = self._dumps(rest)
        if whole[0] == "msgpack":
            parts = split_msgpack_array(whole[1])
            if parts is not None and len(parts) == len(rest):
                return head + [("msgpack", p) for p in parts]  # one serializer call for the new part
        return head + [self._dumps(item) for item in rest]

    # ------------------------------------------------------------------ index of one namespace
    def _walk(self, ns: _Ns, tip: str) -> None:
        commit: str | None = tip
        while commit is not None and commit not in ns.known:
            cid = self._id_of(ns, commit)
            try:
                parent: str | None = self.repo.resolve(commit + "^")
            except UnknownRefError:
                parent = None
            ns.known[commit] = (parent, cid)
            commit = parent

    def _leaves(self, ns: _Ns) -> dict[str, str]:
        """Ref name -> commit for ``head`` and the fork refs of a namespace."""
        forks = ns.ref.prefix + "forks/"
        return {n: o for n, o in self.repo.refs(ns.ref.prefix).items() if n == ns.ref.head or n.startswith(forks)}

    def _refresh(self, ns: _Ns) -> list[tuple[str, str]]:
        """Re-read a namespace's refs; returns the reachable (checkpoint id, commit) pairs."""
        leaves = self._leaves(ns)
        ids: dict[str, str] = {}
        seen: set[str] = set()
        for name in sorted(leaves, key=lambda n: n != ns.ref.head):
            self._walk(ns, leaves[name])
            commit: str | None = leaves[name]
            while commit is not None and commit not in seen:
                if commit not in ns.known:
                    # put() records a new commit whose parent this process never walked
                    # (a fresh saver resuming a thread): walk on from there
                    self._walk(ns, commit)
                seen.add(commit)
                parent, cid = ns.known[commit]
                ids.setdefault(cid, commit)
                commit = parent
        ns.ids = ids
        ns.head = leaves.get(ns.ref.head)
        return list(ids.items())

    def _lookup(self, ns: _Ns, checkpoint_id: str) -> str | None:
        commit = ns.ids.get(checkpoint_id)
        if commit is None:
            self._refresh(ns)
            commit = ns.ids.get(checkpoint_id)
        return commit

    # ------------------------------------------------------------------ reading
    def _values(self, commit: str, doc: dict[str, Any]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        at = f"of commit {commit[:12]}"
        for name, info in doc["channels"].items():
            if info["kind"] == "inline":
                what = f"the inline value of channel {name!r} in checkpoint.json {at}"
                values[name] = self._loads(decode_exact(info["exact"], what), what)
                continue
            base = info["dir"]
            try:
                if info["kind"] == "value":
                    path = base + "/value.bin"
                    values[name] = self._loads(
                        unframe(self._blob(self._tree(commit)[path]), f"{path} {at}"), f"{path} {at}"
                    )
                    continue
                typed = self._lists.get((commit, name))
                if typed is None:
                    files = self._tree(commit)
                    typed = []
                    for i in range(info["length"]):
                        path = elem_path(base, i) + ".bin"
                        typed.append(unframe(self._blob(files[path]), f"{path} {at}"))
                    self._lists.put((commit, name), typed, sum(len(d) for _, d in typed) + 64 * len(typed))
                values[name] = self._loads_list(typed, lambda i, base=base: f"{elem_path(base, i)}.bin {at}")
            except KeyError as exc:
                raise CorruptRepositoryError(f"checkpoint {commit[:12]} lacks {exc}; run `got fsck`") from None
        return values

    def _tuple(self, ns: _Ns, commit: str, config: RunnableConfig | None) -> CheckpointTuple:
        doc = self._doc(commit)
        cid = doc["checkpoint_id"]
        t, n = ns.ref.thread_id, ns.ref.checkpoint_ns
        parent = doc.get("parent_checkpoint_id")
        header: Checkpoint = doc["checkpoint"]  # a JSON object (check_checkpoint_doc): the header put() stored
        return CheckpointTuple(
            config=config or {"configurable": {"thread_id": t, "checkpoint_ns": n, "checkpoint_id": cid}},
            checkpoint={**header, "channel_values": self._values(commit, doc)},
            metadata=doc["metadata"],
            parent_config=(
                {"configurable": {"thread_id": t, "checkpoint_ns": n, "checkpoint_id": parent}} if parent else None
            ),
            pending_writes=self._pending_writes(ns, cid),
        )

    def _writes_docs(self, ns: _Ns, checkpoint_id: str) -> list[dict[str, Any]]:
        tip = self.repo.tip(ns.ref.writes)
        if tip is None:
            return []
        docs = self._writes_cache.get((tip, checkpoint_id))
        if docs is None:
            stem = f"{writes_bucket(checkpoint_id)}/{id_component(checkpoint_id, 'checkpoint id')}~"
            files = self.repo.list_files(tip, writes_bucket(checkpoint_id))
            docs = []
            for path, sha in sorted(files.items()):
                if path.startswith(stem):
                    what = f"writes file {path} of commit {tip[:12]}"
                    doc = check_writes_doc(parse_json(self._blob(sha), what), what)
                    docs.append({**doc, "path": path})
            self._writes_cache.put((tip, checkpoint_id), docs)
        return docs

    def _pending_writes(self, ns: _Ns, checkpoint_id: str) -> list[PendingWrite]:
        rows = [
            (d.get("task_path", ""), d["task_id"], w["idx"], w["channel"], w["exact"], d["path"])
            for d in self._writes_docs(ns, checkpoint_id)
            for w in d["writes"]
        ]
        rows.sort(key=lambda r: writes_sort_key(r[0], r[1], r[2]))
        out = []
        for _, task_id, idx, channel, exact, path in rows:
            what = f"write {idx} ({channel!r}) in {path}"
            out.append((task_id, channel, self._loads(decode_exact(exact, what), what)))
        return out

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (its ``checkpoint_id``, else the latest), or None.

        Pending writes come back in ``writes_sort_key`` order (task path, task id, index).
        """
        conf = config["configurable"]
        ns = self._ns(conf["thread_id"], conf.get("checkpoint_ns", ""))
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            commit = self._lookup(ns, text_id(checkpoint_id, "checkpoint id"))
            return None if commit is None else self._tuple(ns, commit, config)
        commit = self.repo.tip(ns.ref.head)
        return None if commit is None else self._tuple(ns, commit, None)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (highest id first): of one thread (and namespace, when the
        config names one), whose metadata has every ``filter`` item, older than ``before``."""
        if config is not None:
            conf = config["configurable"]
            thread_ids, only_ns = [text_id(conf["thread_id"], "thread id")], conf.get("checkpoint_ns")
            only_id = get_checkpoint_id(config)
        else:
            thread_ids, only_ns, only_id = self.threads(), None, None
        before_id = get_checkpoint_id(before) if before else None
        rows: list[tuple[str, _Ns, str]] = []
        for thread_id in thread_ids:
            for checkpoint_ns in self.namespaces(thread_id):
                if only_ns is None or checkpoint_ns == only_ns:
                    ns = self._ns(thread_id, checkpoint_ns)
                    rows.extend((cid, ns, commit) for cid, commit in self._refresh(ns))
        rows.sort(key=lambda r: r[0], reverse=True)
        remaining = limit
        for cid, ns, commit in rows:
            if (only_id and cid != only_id) or (before_id and cid >= before_id):
                continue
            if filter:
                meta = self._doc(commit)["metadata"]
                if not all(meta.get(k) == v for k, v in filter.items()):
                    continue
            if remaining is not None:
                if remaining <= 0:
                    return
                remaining -= 1
            yield self._tuple(ns, commit, None)

    # below `def list`, a bare `list` in an annotation names that method: builtins.list is the type
    def threads(self) -> builtins.list[str]:
        """Every thread id with checkpoints in the repository."""
        out = set()
        for name, oid in self.repo.refs(THREADS_REF).items():
            thread = decode_id(name[len(THREADS_REF) :].split("/", 1)[0])
            if thread is None and name.endswith("/head"):  # a hashed long id: read it from the checkpoint
                thread = self._doc(oid, full=False)["thread_id"]
            if thread is not None:
                out.add(thread)
        return sorted(out)

    def namespaces(self, thread_id: str) -> builtins.list[str]:
        """The checkpoint namespaces of a thread (``""`` is the root graph)."""
        prefix = f"{THREADS_REF}{id_component(text_id(thread_id, 'thread id'), 'thread id')}/"
        out = set()
        for name, oid in self.repo.refs(prefix).items():
            ns = decode_id(name[len(prefix) :].split("/", 1)[0], namespace=True)
            if ns is None and name.endswith("/head"):
                ns = self._doc(oid, full=False)["checkpoint_ns"]
            if ns is not None:
                out.add(ns)
        return sorted(out)

    # ------------------------------------------------------------------ writing a checkpoint
    def _plan(
        self, checkpoint: Checkpoint, new_versions: ChannelVersions, parent: str | None
    ) -> tuple[dict[str, bytes | None], dict[str, Any], dict[str, str], dict[str, builtins.list[Typed]], str]:
        """What changes from the parent's tree: (changes, channel index, new tree listing,
        element encodings of list channels, a one-line summary)."""
        files = dict(self._tree(parent)) if parent else {}
        old_channels: dict[str, Any] = self._doc(parent, full=False)["channels"] if parent else {}
        readable = self.readable
        changes: dict[str, bytes | None] = {}
        lists: dict[str, list[Typed]] = {}
        summary = ""

        def put(path: str, data: bytes) -> None:
            sha = blob_sha(data)
            if files.get(path) != sha:
                files[path] = sha
                changes[path] = data

        def drop(info: dict[str, Any], keep: int = 0) -> None:
            if info["kind"] == "inline":
                return
            base = info["dir"]
            paths = (
                [base + "/value.bin", base + "/value.json"]
                if info["kind"] == "value"
                else [elem_path(base, i) + ext for i in range(keep, info["length"]) for ext in (".bin", ".json")]
            )
            for path in paths:
                if files.pop(path, None) is not None:
                    changes[path] = None

        versions, values = checkpoint["channel_versions"], checkpoint["channel_values"]
        channels: dict[str, Any] = {}
        for name, version in versions.items():
            old = old_channels.get(name)
            if name not in new_versions and old is not None and old.get("version") == version:
                channels[name] = old  # unchanged since the parent: its files stay, nothing is serialised
                continue
            if name not in values:
                if old is not None:
                    drop(old)
                continue
            value, base = values[name], channel_dir(name)
            typed_value = None if type(value) is list else self._dumps(value)
            kind = "list" if typed_value is None else ("inline" if len(typed_value[1]) <= INLINE_BYTES else "value")
            if old is not None and (old["kind"] != kind or old.get("dir", base) != base or kind == "inline"):
                drop(old)  # the channel changed shape (or name encoding): its old files go
            if kind == "inline" and typed_value is not None:  # typed_value is None only for a list
                # small values (None, flags, counters) live in checkpoint.json, which changes anyway
                channels[name] = {"kind": "inline", "version": version, "exact": encode_exact(typed_value)}
                if readable:
                    channels[name]["value"] = jsonable(value)
                continue
            if kind == "value" and typed_value is not None:
                data = frame(typed_value)
                if files.get(base + "/value.bin") != blob_sha(data):
                    put(base + "/value.bin", data)
                    if readable:
                        put(base + "/value.json", render_json(value))
                    elif files.pop(base + "/value.json", None) is not None:
                        changes[base + "/value.json"] = None
                channels[name] = {"dir": base, "kind": "value", "version": version}
                continue
            same_list = old is not None and old["kind"] == "list" and old["dir"] == base
            previous = self._lists.get((parent, name)) if same_list else None
            prev_objs = self._objs.get((parent, name)) if previous is not None else None
            typed = lists[name] = self._dump_list(value, prev_objs, previous)
            for i, item in enumerate(typed):
                if previous is not None and i < len(previous) and previous[i] == item:
                    continue  # byte-identical to the parent's element: same blobs
                stem = elem_path(base, i)
                data = frame(item)
                sha = blob_sha(data)
                if files.get(stem + ".bin") != sha:
                    files[stem + ".bin"] = sha
                    changes[stem + ".bin"] = data
                    if readable:
                        put(stem + ".json", render_json(value[i]))
                        summary = message_summary(value[i]) or summary
                    elif files.pop(stem + ".json", None) is not None:
                        changes[stem + ".json"] = None
            if same_list and old is not None:
                drop(old, keep=len(value))
            channels[name] = {"dir": base, "kind": "list", "length": len(value), "version": version}
        for name, old in old_channels.items():
            if name not in versions:
                drop(old)
        return changes, channels, files, lists, summary

    def _document(
        self,
        ns: _Ns,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        channels: dict[str, Any],
    ) -> tuple[bytes, bytes | None]:
        head = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        meta = get_checkpoint_metadata(config, metadata)
        doc: dict[str, Any] = {
            "format": FORMAT,
            "thread_id": ns.ref.thread_id,
            "checkpoint_ns": ns.ref.checkpoint_ns,
            "checkpoint_id": checkpoint["id"],
            "parent_checkpoint_id": config["configurable"].get("checkpoint_id"),
            "checkpoint": head,
            "metadata": meta,
            "channels": channels,
        }
        if not self.readable:
            # metadata and the exact header only inside the serializer's (encrypted) bytes
            doc["checkpoint"] = jsonable({k: head[k] for k in READABLE_HEADER if k in head})
            del doc["metadata"]
            doc["exact"] = True
            return dump_json(doc), frame(self._dumps({"checkpoint": head, "metadata": meta}))
        try:
            text = json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False)
            exact = json.loads(text) == doc
        except (TypeError, ValueError):
            exact = False
        if exact:
            return dump_json(doc, allow_nan=False), None
        # versions or metadata that JSON cannot carry exactly: the serializer's bytes beside a rendering
        data = frame(self._dumps({"checkpoint": head, "metadata": meta}))
        doc["exact"] = True
        return render_json(doc), data

    def _message(
        self, ns: _Ns, checkpoint_id: str, parent_id: str | None, metadata: Mapping[str, Any], summary: str
    ) -> str:
        """A checkpoint's commit message: step, source, a summary and trailers; ids only when
        the saver is not readable (the core's search index holds every commit message)."""
        if self.readable:
            head = f"step {metadata.get('step', '?')} ({metadata.get('source', '?')})" + (
                f" {summary}" if summary else ""
            )
        else:
            head = f"checkpoint {one_line(checkpoint_id, 60)}"
        lines = [head, "", f"Thread: {one_line(ns.ref.thread_id, 200)}"]
        if ns.ref.checkpoint_ns:
            lines.append(f"Namespace: {one_line(ns.ref.checkpoint_ns, 200)}")
        lines.append(f"Checkpoint: {one_line(checkpoint_id, 200)}")
        if parent_id:
            lines.append(f"Parent-Checkpoint: {one_line(parent_id, 200)}")
        if self.readable and metadata.get("run_id"):
            lines.append(f"Run: {one_line(metadata['run_id'], 200)}")
        return "\n".join(lines) + "\n"

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Commit ``checkpoint`` as a child of its parent checkpoint's commit (one commit, one ref move).

        Returns:
            The config of the stored checkpoint (thread id, namespace, checkpoint id).

        Raises:
            ConcurrentUpdateError: another process kept moving the same thread's refs.
            UnsafePayloadError: a value needs pickle.
        """
        conf = config["configurable"]
        ns = self._ns(conf["thread_id"], conf.get("checkpoint_ns", ""))
        parent_id, repo = conf.get("checkpoint_id"), self.repo
        parent_id = text_id(parent_id, "checkpoint id") if parent_id else None
        new_id = text_id(checkpoint["id"], "checkpoint id")
        with ns.head_lock:

            def build(tip: str | None) -> Publish | Keep:
                head = tip
                head_id = self._id_of(ns, head) if head else None
                parent = (
                    head if parent_id and parent_id == head_id else (self._lookup(ns, parent_id) if parent_id else None)
                )
                changes, channels, files, lists, summary = self._plan(checkpoint, new_versions, parent)
                doc_bytes, exact = self._document(ns, config, checkpoint, metadata, channels)
                changes["checkpoint.json"] = doc_bytes
                files["checkpoint.json"] = blob_sha(doc_bytes)
                if exact is not None:
                    changes["checkpoint.bin"] = exact
                    files["checkpoint.bin"] = blob_sha(exact)
                elif files.pop("checkpoint.bin", None) is not None:
                    changes["checkpoint.bin"] = None
                message = self._message(ns, new_id, parent_id, metadata, summary)
                if head is not None and new_id < (head_id or ""):
                    # An id below the latest (ids that do not grow along a line): it stays off head.
                    oid = self._publish_fork(ns, parent, new_id, changes, message)
                    return Keep(_Stored(oid, files, doc_bytes, lists, parent, on_head=False))
                # The latest checkpoint goes on `head`; the line it leaves keeps a fork ref.
                fork_of_parent = None
                if parent != head:
                    if parent is not None:
                        fork_of_parent = next(
                            (n for n, o in self._leaves(ns).items() if o == parent and n != ns.ref.head), None
                        )
                    if head is not None and new_id != head_id:
                        self._keep(ns, head, head_id or "")
                oid = repo.prepare_commit([parent] if parent else [], changes, message, fresh_tree=parent is None)
                return Publish(oid, _Stored(oid, files, doc_bytes, lists, parent, True, fork_of_parent))

            try:
                answer = (
                    repo.update_ref(ns.ref.head, build, tip_hint=ns.head)
                    if ns.head
                    else repo.update_ref(ns.ref.head, build)
                )
            except ConcurrentUpdateError:
                ns.head = None  # our view of the refs was stale: the next put re-reads them
                raise
            oid, files, doc_bytes, lists, parent = (answer.oid, answer.files, answer.doc, answer.lists, answer.parent)
            if answer.on_head:
                ns.head = oid
                if answer.fork_of_parent is not None:
                    repo.delete_ref(answer.fork_of_parent)  # now an ancestor of head
            self._files.put(oid, files, len(files) + 1)
            self._docs.put(oid, doc_bytes, len(doc_bytes) + 80)
            values = checkpoint["channel_values"]
            for name, typed in lists.items():
                self._lists.put((oid, name), typed, sum(len(d) for _, d in typed) + 64 * len(typed))
                if isinstance(values.get(name), list):
                    self._objs.put((oid, name), list(values[name]), len(values[name]) + 1)
            ns.ids[new_id] = oid
            ns.known[oid] = (parent, new_id)
        return {
            "configurable": {
                "thread_id": conf["thread_id"],
                "checkpoint_ns": ns.ref.checkpoint_ns,
                "checkpoint_id": new_id,
            }
        }

    def _publish_fork(
        self, ns: _Ns, parent: str | None, new_id: str, changes: dict[str, bytes | None], message: str
    ) -> str:
        """Commit a checkpoint that is not the latest on a fork ref (the parent's, or a new one)."""
        repo, parents, fresh = self.repo, [parent] if parent else [], parent is None
        fork = (
            next((n for n, o in self._leaves(ns).items() if o == parent and n != ns.ref.head), None)
            if parent is not None
            else None
        )
        if fork is not None:
            return repo.commit_files(fork, changes, message, parents=parents, expected=parent, fresh_tree=fresh)
        return repo.commit_files(
            self._free_fork_name(ns, new_id), changes, message, parents=parents, expected=None, fresh_tree=fresh
        )

    def _free_fork_name(self, ns: _Ns, checkpoint_id: str) -> str:
        name = candidate = ns.ref.fork(checkpoint_id)
        taken = self.repo.refs(ns.ref.prefix + "forks/")
        n = 2
        while candidate in taken:
            candidate, n = f"{name}-{n}", n + 1
        return candidate

    def _keep(self, ns: _Ns, commit: str, checkpoint_id: str) -> None:
        """Make sure ``commit`` stays reachable through a fork ref of ``ns``."""
        if not any(o == commit and n != ns.ref.head for n, o in self._leaves(ns).items()):
            self.repo.set_ref(self._free_fork_name(ns, checkpoint_id), commit, expected=None)

    # ------------------------------------------------------------------ pending writes
    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Store a task's writes for a checkpoint (one commit on the thread's ``writes`` ref).

        As in the reference savers, a regular write ``(task_id, idx)`` is stored once (a
        repeat is ignored); special writes (errors, interrupts, ...) replace the old one.
        """
        conf = config["configurable"]
        ns = self._ns(conf["thread_id"], conf.get("checkpoint_ns", ""))
        checkpoint_id = text_id(conf["checkpoint_id"], "checkpoint id")
        task_id, task_path = text_id(task_id, "task id"), text_id(task_path or "", "task path")
        path = writes_path(checkpoint_id, task_id)
        with ns.writes_lock:

            def build(tip: str | None) -> Publish | Keep:
                entries: dict[int, dict[str, Any]] = {}
                old_path = ""
                if tip is not None:
                    try:
                        raw = self.repo.read_file(tip, path)
                    except UnknownRefError:
                        pass
                    else:
                        what = f"writes file {path} of commit {tip[:12]}"
                        old = check_writes_doc(parse_json(raw, what), what)
                        entries = {w["idx"]: w for w in old["writes"]}
                        old_path = old.get("task_path", "")
                changed = False
                for idx, (channel, value) in enumerate(writes):
                    key = WRITES_IDX_MAP.get(channel, idx)
                    if key >= 0 and key in entries:
                        continue
                    entries[key] = {
                        "idx": key,
                        "channel": text_id(channel, "channel name"),
                        "exact": encode_exact(self._dumps(value)),
                    }
                    if self.readable:
                        entries[key]["value"] = jsonable(value)
                    changed = True
                if not changed:
                    return Keep()
                doc = {
                    "checkpoint_id": checkpoint_id,
                    "task_id": task_id,
                    "task_path": task_path or old_path,
                    "writes": [entries[i] for i in sorted(entries)],
                }
                data = dump_json(doc)
                node = task_path.rsplit(",", 1)[-1].strip() if task_path else task_id[:8]
                channels = ", ".join(sorted({str(e["channel"]) for e in entries.values()}))
                message = (
                    f"writes {one_line(node, 40)} -> {one_line(channels, 60)}\n\n"
                    f"Checkpoint: {one_line(checkpoint_id, 200)}\nTask: {one_line(task_id, 200)}\n"
                    + (f"Task-Path: {one_line(task_path, 200)}\n" if task_path else "")
                )
                return Publish(self.repo.prepare_commit([tip] if tip else [], {path: data}, message))

            self.repo.update_ref(ns.ref.writes, build)

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
        ns = self._ns(thread_id, checkpoint_ns)
        return {name: self._id_of(ns, oid) for name, oid in self._leaves(ns).items()}

    def commit_of(self, config: RunnableConfig) -> str | None:
        """The git commit SHA of the checkpoint named by ``config`` (the latest when it names none)."""
        conf = config["configurable"]
        ns = self._ns(conf["thread_id"], conf.get("checkpoint_ns", ""))
        checkpoint_id = get_checkpoint_id(config)
        return (
            self._lookup(ns, text_id(checkpoint_id, "checkpoint id")) if checkpoint_id else self.repo.tip(ns.ref.head)
        )

    # ------------------------------------------------------------------ async twins
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple` (in a worker thread: git I/O never blocks the event loop)."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`."""
        items = await asyncio.to_thread(lambda: list(self.list(config, filter=filter, before=before, limit=limit)))
        for item in items:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Async :meth:`put_writes`."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async :meth:`prune`."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)
