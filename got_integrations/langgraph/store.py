"""``GitStore``: LangGraph's long-term memory store on a git branch.

Every batch that writes (puts, deletes, TTL refreshes) is one commit on the store ref
(default ``refs/got/store``). An item is one readable JSON file::

    ns.<h>/<h>/<h>/<label 1>/<label 2>/.../<key>.json
        {"namespace", "key", "value", "created_at", "updated_at", "ttl", "expires_at", "index"}

The three ``<h>`` levels are hash buckets of the namespace (16 entries each,
:meth:`GitStore.namespace_path` names a namespace's directory), so a put rewrites a few
small trees however many namespaces the store holds. A store written before the buckets
(``<label 1>/.../<key>.json``) is read as it is and moved by its first write, in one
commit of trees only (``_store_migrate``).

Every label and key goes through :func:`got_core.names.encode_component` (``/``, ``..``,
NUL and control characters are percent-encoded; ids too long for a file name become a
hash, and the real id stays inside the file). Labels may not contain ``.`` (LangGraph's
rule), so a namespace directory never collides with an item file. Labels and keys are
text: bytes are refused (LangGraph's stores refuse bytes labels; a bytes key would
otherwise be stored as its ``repr()``).

Reads are answered by a derived index of the items
(:mod:`got_integrations.langgraph._store_index`, a SQLite file in the git directory):
``get`` is one indexed row, ``list_namespaces`` reads a table of namespaces, filtered and
cross-namespace searches run in SQLite, the TTL sweep reads an expiry index. The index
follows the ref: a batch compares the ref's tip with the index's, and catches up from the
tree diff (writes by other processes, or by stock git), or from its own write. Delete the
file any time (or call :meth:`GitStore.reindex`): git is the truth.

Encryption at rest: ``GitStore(..., serde=EncryptedSerializer.from_pycryptodome_aes(...))``
stores each value as the serializer's bytes (``"exact": {"type", "base64"}``) and no
readable copy; namespace, key, timestamps, TTL and the ``index`` field list stay readable,
and so the derived index holds only those (never a value, nor a vector). The trade-off:
a filter on values, or a semantic search, then reads and decrypts the candidate items of
the namespace prefix at query time. Without ``serde`` a value is readable JSON.

As in ``InMemoryStore`` and ``SqliteStore``, the reads of a batch see the store as it
was before the batch's writes, and the last put of a key in a batch wins.

TTL (``supports_ttl = True``): an item written with ``ttl`` (minutes) expires ``ttl``
minutes after its last write, or last read when ``refresh_ttl`` is on; expired items
are invisible at once and removed by :meth:`GitStore.sweep_ttl` (or the background
sweeper of :meth:`GitStore.start_ttl_sweeper`).

Semantic search (``index={"dims", "embed", "fields"}``) works like ``InMemoryStore``:
LangGraph's own ``ensure_embeddings`` / ``get_text_at_path`` pick the texts, scores are
cosine similarities max-pooled per item. Vectors are derived data: kept in memory and
in ``<gitdir>/got/store-vectors.sqlite3`` (delete it any time); git stays the truth.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from itertools import islice
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    tokenize_path,
)

from got_core.errors import ConfigError, InvalidInputError
from got_core.repo import ReasoningRepo
from got_integrations.langgraph._layout import LRU
from got_integrations.langgraph._serde import encrypts
from got_integrations.langgraph._store_bulk import BulkWriter
from got_integrations.langgraph._store_doc import (
    InvalidStoreNameError,
    ItemCodec,
    check_key,
    check_namespace,
    check_placement,
    item_path,
    key_blob,
    loads_value,
    matches,
    matches_filter,
    namespace_dir,
    ns_blob,
    ns_from_blob,
    to_us,
    utc_now,
)
from got_integrations.langgraph._store_filter import filter_sql
from got_integrations.langgraph._store_index import ItemIndex, Row, row_of_doc
from got_integrations.langgraph._store_migrate import LayoutMigrationMixin
from got_integrations.langgraph._store_ttl import TTLSweeperMixin
from got_integrations.langgraph._store_vectors import VectorCache, cosine, item_texts
from got_integrations.langgraph._store_write import EmbedDocs, StoreWritesMixin, redone

__all__ = ["DEFAULT_STORE_REF", "GitStore", "InvalidStoreNameError"]


#: Where the store's commits go (outside refs/heads: no `git branch` noise).
DEFAULT_STORE_REF = "refs/got/store"

#: The embedding call for a search query: a query -> its vector.
_EmbedQuery = Callable[[str], list[float]]
_WORKER_LOCK = threading.Lock()


class GitStore(StoreWritesMixin, LayoutMigrationMixin, TTLSweeperMixin, BaseStore):
    """A LangGraph ``BaseStore`` whose every batch of writes is one git commit.

    Args:
        repo: a :class:`~got_core.repo.ReasoningRepo` or a repository path (created if missing).
        ref: the branch or ref holding the store (default ``refs/got/store``).
        index: semantic search config ``{"dims", "embed", "fields"}`` (as ``InMemoryStore``).
        ttl: TTL config ``{"default_ttl", "refresh_on_read", "sweep_interval_minutes"}``.
        clock: returns "now" (a timezone-aware datetime); tests pass a fake clock.
        vector_cache: persist vectors in ``<gitdir>/got/store-vectors.sqlite3`` (derived data;
            never when values are not readable: vectors and text hashes tell of the values).
        embedding_model: names the embedding model in the vector cache (default: derived from ``embed``).
        serde: store each value as this serializer's bytes, e.g.
            ``EncryptedSerializer.from_pycryptodome_aes(key=...)`` (default: readable JSON).
        readable: also keep a readable JSON copy of each value beside the serializer's bytes
            (default: only when ``serde`` does not encrypt).

    Raises:
        InvalidStoreNameError: (from batch) a bad namespace label or key.
        PayloadTooLargeError: an item over the repository's file size limit.
        ConfigError: ``readable=True`` with a serializer that encrypts.
    """

    supports_ttl = True
    _async_worker: tuple[int, ThreadPoolExecutor] | None = None  # (the process that started it, the thread)

    def __init__(
        self,
        repo: ReasoningRepo | str | Any,
        *,
        ref: str = DEFAULT_STORE_REF,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        clock: Callable[[], datetime] | None = None,
        vector_cache: bool = True,
        embedding_model: str | None = None,
        serde: SerializerProtocol | None = None,
        readable: bool | None = None,
    ) -> None:
        self.serde = serde
        self.encrypted = serde is not None and encrypts(serde)
        if readable and self.encrypted:
            raise ConfigError("readable=True would store readable copies of what the serializer encrypts")
        #: Whether item values are written as readable JSON.
        self.readable = (not self.encrypted) if readable is None else bool(readable)
        if serde is None and not self.readable:
            raise ConfigError("readable=False needs a serde to store the values with (e.g. an EncryptedSerializer)")
        self._codec = ItemCodec(serde, encrypted=self.encrypted, readable=self.readable)
        vector_cache = vector_cache and self.readable
        self.repo = repo if isinstance(repo, ReasoningRepo) else ReasoningRepo.open(repo)
        self.ref = self.repo.ref(ref)
        self.ttl_config = ttl
        self.clock = clock or (lambda: datetime.now(UTC))
        self.index_config: dict[str, Any] | None = None
        self.embeddings = None
        self._vectors: VectorCache | None = None
        if index:
            self.index_config = dict(index)
            self.embeddings = ensure_embeddings(index.get("embed"))
            self.index_config["__tokenized_fields"] = [
                (p, tokenize_path(p)) if p != "$" else (p, p) for p in (index.get("fields") or ["$"])
            ]
            embed = index.get("embed")
            model = embedding_model or (
                embed
                if isinstance(embed, str)
                else getattr(embed, "model_name", None)
                or getattr(embed, "model", None)
                or f"{type(embed).__module__}.{getattr(embed, '__qualname__', type(embed).__qualname__)}"
            )
            self._vectors = VectorCache(
                self.repo.gitdir / "got" / "store-vectors.sqlite3" if vector_cache else None,
                f"{model}|{index.get('dims')}",
            )
        self._docs = LRU(16 << 20)  # blob sha -> decoded document (stores whose index holds no values)
        self._write_lock = threading.Lock()
        self._ttl_stop = threading.Event()
        self._ttl_thread: threading.Thread | None = None
        #: The derived index of the items (values only when they are readable).
        self.index = ItemIndex(self.repo, self.ref, "values" if self.readable else "sealed", self._row_of)
        self._bulk = BulkWriter(self.repo)  # many changes in one commit: one pack, not a file each

    @classmethod
    def from_path(cls, path: Any, **options: Any) -> GitStore:
        """A store on the repository at ``path`` (created when missing)."""
        return cls(ReasoningRepo.open(path), **options)

    # ------------------------------------------------------------------ rows and items
    @staticmethod
    def namespace_path(namespace: tuple[str, ...]) -> str:
        """The directory of ``namespace``'s item files in the store's tree
        (``ns.<h>/<h>/<h>/<labels...>``), e.g. for ``git log <ref> -- <path>``.

        Raises:
            InvalidStoreNameError: a namespace LangGraph does not allow.
        """
        return namespace_dir(check_namespace(namespace, allow_empty=False))

    @staticmethod
    def _path(namespace: tuple[str, ...], key: str) -> str:
        return item_path(namespace, key)

    def _row(self, doc: dict[str, Any], path: str, blob: str) -> Row:
        return row_of_doc(doc, path, blob, values=self.readable)

    def _row_of(self, path: str, blob: str) -> Row:
        """Read, validate and index one item file (the index calls this while it catches up)."""
        what = f"store item {path}"
        data = self.repo.read_blob(blob)
        doc = self._codec.decode(data, what) if self.readable else self._codec.parse(data, what)
        check_placement(doc, path, what)
        return self._row(doc, path, blob)

    def _doc(self, row: Row) -> dict[str, Any]:
        """The decoded document of a row whose value the index does not hold (decrypts it)."""
        doc = self._docs.get(row.blob)
        if doc is None:
            what = f"store item {row.path}"
            doc = self._codec.decode(self.repo.read_blob(row.blob), what)
            self._docs.put(row.blob, doc, 512)
        return doc

    def _value(self, row: Row) -> dict[str, Any]:
        """A fresh copy of the row's value (the caller may change it)."""
        if row.value is not None:
            return loads_value(row.value)
        return copy.deepcopy(self._doc(row)["value"])

    def _item(self, row: Row, value: dict[str, Any] | None = None, cls: type = Item, **extra: Any) -> Any:
        return cls(
            namespace=ns_from_blob(row.ns),
            key=row.key.decode("utf-8", "surrogatepass"),
            value=self._value(row) if value is None else value,
            created_at=datetime.fromisoformat(row.created),
            updated_at=datetime.fromisoformat(row.updated),
            **extra,
        )

    # ------------------------------------------------------------------ keys reach batch as text
    def get(self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None) -> Item | None:
        """``BaseStore.get``; a bytes key is refused (InvalidStoreNameError), not looked up as its repr.

        The batch of one read, without building it (the same checks, snapshot and TTL
        refresh as :meth:`batch`); a subclass that overrides :meth:`batch` still gets
        every read through it.
        """
        check_key(key)
        if (
            type(self).batch is not GitStore.batch
            or not isinstance(namespace, tuple)
            or not isinstance(key, str)
            or not key
        ):
            return super().get(namespace, key, refresh_ttl=refresh_ttl)
        if refresh_ttl is None:  # BaseStore's default (langgraph's _ensure_refresh)
            refresh_ttl = True if self.ttl_config is None else self.ttl_config.get("refresh_on_read", True)
        return self._get_alone(GetOp(check_namespace(namespace, allow_empty=False), key, refresh_ttl))

    def put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any], *args: Any, **options: Any) -> None:
        """``BaseStore.put``; a bytes key is refused (InvalidStoreNameError), not stored as its repr."""
        check_key(key)
        super().put(namespace, key, value, *args, **options)

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """``BaseStore.delete``; a bytes key is refused (InvalidStoreNameError)."""
        check_key(key)
        super().delete(namespace, key)

    async def aget(self, namespace: tuple[str, ...], key: str, **options: Any) -> Item | None:
        """Async :meth:`get`."""
        check_key(key)
        return await super().aget(namespace, key, **options)

    async def aput(
        self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any], *args: Any, **options: Any
    ) -> None:
        """Async :meth:`put`."""
        check_key(key)
        await super().aput(namespace, key, value, *args, **options)

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        """Async :meth:`delete`."""
        check_key(key)
        await super().adelete(namespace, key)

    # ------------------------------------------------------------------ the batch
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run get / search / list_namespaces / put (delete = put of None) operations.

        Reads see the store before this batch's writes; all writes become one commit.
        """
        embeddings = self.embeddings
        return self._batch(
            list(ops),
            (lambda texts: embeddings.embed_documents(texts)) if embeddings else None,
            (lambda text: embeddings.embed_query(text)) if embeddings else None,
        )

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch`: git work in the store's worker thread, embeddings through ``aembed_*``.

        The worker is the store's own single thread (started on first use), not the loop's
        default executor: every batch runs under one lock anyway, so one thread loses nothing,
        and it keeps one libgit2 handle (``repo.git`` is per thread) with its caches and the
        hints of its last ref move; the hop also skips the context copy ``asyncio.to_thread``
        makes (a batch reads no context variable).
        """
        loop = asyncio.get_running_loop()
        embeddings = self.embeddings
        if embeddings is None:
            return await loop.run_in_executor(self._worker(), self._batch, list(ops), None, None)

        def embed_docs(texts: list[str]) -> list[list[float]]:
            return asyncio.run_coroutine_threadsafe(embeddings.aembed_documents(texts), loop).result()

        def embed_query(text: str) -> list[float]:
            return asyncio.run_coroutine_threadsafe(embeddings.aembed_query(text), loop).result()

        return await loop.run_in_executor(self._worker(), self._batch, list(ops), embed_docs, embed_query)

    def _worker(self) -> ThreadPoolExecutor:
        """The store's worker thread (a forked child starts its own: it has none of its parent's threads)."""
        worker = self._async_worker
        if worker is None or worker[0] != os.getpid():
            with _WORKER_LOCK:
                worker = self._async_worker
                if worker is None or worker[0] != os.getpid():
                    worker = self._async_worker = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="got-store"))
        return worker[1]

    @staticmethod
    def _check(ops: list[Op]) -> dict[str, PutOp]:
        """Check every operation; returns the puts by item path (the last put of a path wins,
        in the order of the batch)."""
        puts: dict[str, PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                check_namespace(op.namespace, allow_empty=False)
                if not isinstance(op.key, str) or not op.key:
                    raise InvalidStoreNameError(f"a key is a non-empty string, not {op.key!r:.80}")
            elif isinstance(op, PutOp):
                check_namespace(op.namespace, allow_empty=False)
                path = item_path(op.namespace, op.key)
                puts.pop(path, None)  # last write wins, in order
                puts[path] = op
            elif isinstance(op, SearchOp):
                check_namespace(op.namespace_prefix, allow_empty=True)
            elif isinstance(op, ListNamespacesOp):
                for condition in op.match_conditions or ():
                    if not isinstance(condition.path, tuple) or not all(isinstance(p, str) for p in condition.path):
                        raise InvalidStoreNameError(f"match paths are tuples of strings, not {condition.path!r:.80}")
            else:
                raise InvalidInputError(f"unknown store operation {type(op).__name__}")
        return puts

    def _batch(self, ops: list[Op], embed_docs: EmbedDocs | None, embed_query: _EmbedQuery | None) -> list[Result]:
        puts = self._check(ops)
        held = all(isinstance(op, (GetOp, PutOp)) for op in ops)

        def attempt() -> list[Result]:
            now = utc_now(self.clock)
            refresh: dict[str, Row] = {}
            # one snapshot for every read of the batch; gets and puts also see the rows of our
            # latest writes that the index holds in memory, so those need not reach the file
            tip = self.index.fresh(held_rows=held)
            results = self._reads(ops, to_us(now), refresh, embed_docs, embed_query)
            # by namespace and key: an item of a legacy layout sits at another path
            existing = (
                self.index.rows_of({p: (ns_blob(op.namespace), key_blob(op.key)) for p, op in puts.items()})
                if puts
                else {}
            )
            if puts or refresh:  # planned on ``tip``: when another writer moved the ref, read and plan again
                self._write(tip, puts, existing, refresh, now, embed_docs)
            return results

        with self._write_lock:
            if puts and not self._layout_checked:
                self._migrate_layout()  # once per store object: legacy item files move first
            return redone(attempt, self.ref)

    def _get_alone(self, op: GetOp) -> Item | None:
        """:meth:`_batch` of ``[op]``, a checked get: the held rows answer it when they can."""

        def attempt() -> Item | None:
            now = utc_now(self.clock)
            refresh: dict[str, Row] = {}
            tip = self.index.fresh(held_rows=True)
            item = self._get(op, to_us(now), refresh)
            if refresh:  # a TTL refresh rewrites the file read at ``tip``: never on another tip
                self._write(tip, {}, {}, refresh, now, None)
            return item

        with self._write_lock:
            return redone(attempt, self.ref)

    def _reads(
        self,
        ops: list[Op],
        now_us: int,
        refresh: dict[str, Row],
        embed_docs: EmbedDocs | None,
        embed_query: _EmbedQuery | None,
    ) -> list[Result]:
        results: list[Result] = [None] * len(ops)
        searches = []
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[i] = self._get(op, now_us, refresh)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op, now_us)
            elif isinstance(op, SearchOp):
                searches.append((i, op))
        if searches:
            vectors: dict[str, list[float]] = {}
            if embed_query is not None:
                queries = {op.query for _, op in searches if op.query}
                vectors = {q: list(embed_query(q)) for q in sorted(queries)}
            for i, op in searches:
                results[i] = self._search(op, now_us, vectors, embed_docs, refresh)
        return results

    def _get(self, op: GetOp, now_us: int, refresh: dict[str, Row]) -> Item | None:
        row = self.index.get(ns_blob(op.namespace), key_blob(op.key))
        if row is None or (row.exp is not None and row.exp <= now_us):
            return None
        if op.refresh_ttl and row.ttl is not None:
            refresh[row.path] = row
        value = loads_value(row.value) if row.value is not None else copy.deepcopy(self._doc(row)["value"])
        return Item(
            namespace=op.namespace,
            key=op.key,
            value=value,
            created_at=datetime.fromisoformat(row.created),
            updated_at=datetime.fromisoformat(row.updated),
        )

    def _list_namespaces(self, op: ListNamespacesOp, now_us: int) -> list[tuple[str, ...]]:
        conditions = list(op.match_conditions or ())
        literal: list[str] = []  # the leading labels every listed namespace must have
        for condition in conditions:
            if condition.match_type == "prefix":
                labels = list(condition.path)
                fixed = labels[: labels.index("*")] if "*" in labels else labels
                if len(fixed) > len(literal):
                    literal = fixed
        rows = self.index.namespaces(now_us, ns_blob(tuple(literal)) if literal else None)
        if not conditions and op.max_depth is None:
            return [ns_from_blob(ns) for ns in islice(rows, op.offset, op.offset + op.limit)]
        out: list[tuple[str, ...]] = []
        for raw in rows:  # in tuple order, so truncated namespaces repeat next to each other
            ns = ns_from_blob(raw)
            if not all(matches(c, ns) for c in conditions):
                continue
            if op.max_depth is not None:
                ns = ns[: op.max_depth]
            if not out or out[-1] != ns:
                out.append(ns)
        return out[op.offset : op.offset + op.limit]

    def _candidates(self, op: SearchOp, now_us: int, want: int | None) -> Iterator[tuple[Row, dict[str, Any]]]:
        """Live items under the prefix passing the filter, newest first, with their values."""
        prefix = ns_blob(tuple(op.namespace_prefix)) if op.namespace_prefix else None
        wanted = op.filter or None
        where, params = filter_sql(wanted) if wanted and self.readable else ([], [])
        for row in self.index.search(prefix, now_us, where, params, want=want):
            value = self._value(row)
            if wanted is None or matches_filter(value, wanted):
                yield row, value

    def _search(
        self,
        op: SearchOp,
        now_us: int,
        queries: dict[str, list[float]],
        embed_docs: EmbedDocs | None,
        refresh: dict[str, Row],
    ) -> list[SearchItem]:
        kept: list[tuple[float | None, Row, dict[str, Any]]]
        if op.query and op.query in queries and self._vectors is not None:
            candidates = list(self._candidates(op, now_us, None))
            fields = self.index_config["__tokenized_fields"] if self.index_config else []
            texts = [item_texts(value, self._index_field(row), fields) for row, value in candidates]
            self._ensure_vectors((t for pairs in texts for _, t in pairs), embed_docs)
            query = queries[op.query]
            scored: list[tuple[float | None, Row, dict[str, Any]]] = []
            scoreless: list[tuple[float | None, Row, dict[str, Any]]] = []
            for (row, value), pairs in zip(candidates, texts):
                scores = [cosine(query, self._vectors.get(t) or []) for _, t in pairs]
                if scores:
                    scored.append((max(scores), row, value))
                else:
                    scoreless.append((None, row, value))
            scored.sort(key=lambda s: s[0] or 0.0, reverse=True)
            kept = scored[op.offset : op.offset + op.limit]
            if len(kept) < op.limit:
                kept += scoreless[: op.limit - len(kept)]  # as InMemoryStore: unscored items fill the page
        else:
            page = islice(self._candidates(op, now_us, op.offset + op.limit), op.offset, op.offset + op.limit)
            kept = [(None, row, value) for row, value in page]
        if op.refresh_ttl:
            for _, row, _ in kept:
                if row.ttl is not None:
                    refresh[row.path] = row
        return [self._item(row, value, SearchItem, score=score) for score, row, value in kept]

    @staticmethod
    def _index_field(row: Row) -> list[str] | bool | None:
        return json.loads(row.idx) if row.idx else None

    def _texts(self, doc: dict[str, Any]) -> list[tuple[str, str]]:
        """(field path, text) pairs an item is embedded under (none when semantic search is off)."""
        if not self.index_config:
            return []
        return item_texts(doc["value"], doc.get("index"), self.index_config["__tokenized_fields"])

    def _ensure_vectors(self, texts: Iterable[str], embed_docs: EmbedDocs | None) -> None:
        if self._vectors is None or embed_docs is None:
            return
        missing = sorted({t for t in texts if self._vectors.get(t) is None})
        if missing:
            vectors = embed_docs(missing)
            if len(vectors) != len(missing):
                raise InvalidInputError(
                    f"the embedding function returned {len(vectors)} vectors for {len(missing)} texts"
                )
            self._vectors.put_many(zip(missing, vectors))

    # ------------------------------------------------------------------ TTL and upkeep
    def reindex(self) -> None:
        """Rebuild the derived item index from the store ref.

        Raises:
            CorruptRepositoryError: an item file that is not what the store writes.
        """
        with self._write_lock:
            self.index.rebuild()

    def close(self) -> None:
        """Stop the sweeper and release the index and the repository."""
        self.stop_ttl_sweeper(timeout=1)
        with _WORKER_LOCK:
            worker, self._async_worker = self._async_worker, None
        if worker is not None and worker[0] == os.getpid():
            worker[1].shutdown(wait=False)  # close may run in the event loop: the thread just ends
        self.index.close()
        if self._vectors is not None:
            self._vectors.close()
        self.repo.close()

    def __enter__(self) -> GitStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
