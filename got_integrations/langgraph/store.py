"""``GitStore``: LangGraph's long-term memory store on a git branch.

Every batch that writes (puts, deletes, TTL refreshes) is one commit on the store ref
(default ``refs/got/store``). An item is one readable JSON file::

    <label 1>/<label 2>/.../<key>.json     {"namespace", "key", "value", "created_at",
                                           "updated_at", "ttl", "expires_at", "index"}

Every label and key goes through :func:`got_core.names.encode_component` (``/``, ``..``,
NUL and control characters are percent-encoded; ids too long for a file name become a
hash, and the real id stays inside the file). Labels may not contain ``.`` (LangGraph's
rule), so a namespace directory never collides with an item file. Labels and keys are
text: bytes are refused (LangGraph's stores refuse bytes labels; a bytes key would
otherwise be stored as its ``repr()``).

Encryption at rest: ``GitStore(..., serde=EncryptedSerializer.from_pycryptodome_aes(...))``
stores each value as the serializer's bytes (``"exact": {"type", "base64"}``) and no
readable copy; namespace, key, timestamps, TTL and the ``index`` field list stay readable,
and semantic-search vectors are kept in memory only (never in the vector cache file).
Without ``serde`` a value is readable JSON.

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
import concurrent.futures
import copy
import dataclasses
import decimal
import hashlib
import json
import logging
import math
import pathlib
import sqlite3
import threading
import uuid
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)

from got_core.errors import ConfigError, CorruptRepositoryError, InvalidInputError, InvalidNameError
from got_core.repo import ReasoningRepo
from got_integrations.langgraph._layout import (
    LRU,
    blob_sha,
    decode_exact,
    dump_json,
    encode_exact,
    id_component,
    one_line,
    parse_json,
)
from got_integrations.langgraph._serde import UnsafePayloadError, encrypts, safe_loads

__all__ = ["DEFAULT_STORE_REF", "GitStore", "InvalidStoreNameError"]

logger = logging.getLogger(__name__)

#: Where the store's commits go (outside refs/heads: no `git branch` noise).
DEFAULT_STORE_REF = "refs/got/store"


class InvalidStoreNameError(InvalidNameError, InvalidNamespaceError):
    """A namespace label or key the store cannot use (empty, not text, a '.' or NUL in a label)."""


#: The embedding calls a batch makes: texts -> vectors, and a query -> its vector.
_EmbedDocs = Callable[[list[str]], list[list[float]]]
_EmbedQuery = Callable[[str], list[float]]


def _utc(clock: Callable[[], datetime]) -> datetime:
    now = clock()
    return now if now.tzinfo else now.replace(tzinfo=UTC)


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, (uuid.UUID, decimal.Decimal, pathlib.PurePath)):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def _check_key(key: Any) -> None:
    if isinstance(key, (bytes, bytearray, memoryview)):
        raise InvalidStoreNameError(f"store keys are text, not bytes ({bytes(key)[:40]!r}); decode the key first")


def _iso(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def _check_item(doc: Any, what: str) -> dict[str, Any]:
    """A parsed item file when it has the fields and types the store writes.

    Raises:
        CorruptRepositoryError: naming ``what`` and the first field that is wrong.
    """

    def need(cond: bool, problem: str) -> None:
        if not cond:
            raise CorruptRepositoryError(f"{what} {problem}; it is not what the store wrote (run `got fsck`)")

    need(isinstance(doc, dict), "is not a JSON object")
    need(
        isinstance(doc.get("namespace"), list)
        and bool(doc["namespace"])
        and all(isinstance(x, str) for x in doc["namespace"]),
        "has no valid 'namespace'",
    )
    need(isinstance(doc.get("key"), str), "has no valid 'key'")
    need(isinstance(doc.get("value"), dict) or isinstance(doc.get("exact"), dict), "has no valid 'value'")
    need(_iso(doc.get("created_at")) and _iso(doc.get("updated_at")), "has no valid timestamps")
    ttl = doc.get("ttl")
    need(
        ttl is None or (isinstance(ttl, (int, float)) and not isinstance(ttl, bool) and math.isfinite(ttl)),
        "has no valid 'ttl'",
    )
    need(doc.get("expires_at") is None or _iso(doc["expires_at"]), "has no valid 'expires_at'")
    index = doc.get("index")
    need(
        index is None or index is False or (isinstance(index, list) and all(isinstance(i, str) for i in index)),
        "has no valid 'index'",
    )
    return doc


def _check_namespace(namespace: Any, *, allow_empty: bool) -> tuple[str, ...]:
    if not isinstance(namespace, tuple) or (not namespace and not allow_empty):
        raise InvalidStoreNameError(f"a namespace is a non-empty tuple of strings, not {namespace!r:.80}")
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise InvalidStoreNameError(
                f"namespace labels are non-empty strings; got {label!r:.80} in {namespace!r:.80}"
            )
        if "." in label or "\x00" in label:
            raise InvalidStoreNameError(f"namespace label {label!r:.80} contains '.' or NUL (LangGraph forbids both)")
    return namespace


def _compare(item_value: Any, wanted: Any) -> bool:
    """Filter matching with the operators of LangGraph's stores ($eq, $ne, $gt, $gte, $lt, $lte)."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(item_value, op, arg) for op, arg in wanted.items())
        return isinstance(item_value, dict) and all(_compare(item_value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(item_value, (list, tuple))
            and len(item_value) == len(wanted)
            and all(_compare(a, b) for a, b in zip(item_value, wanted))
        )
    return item_value == wanted


def _operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return value == arg
    if op == "$ne":
        return value != arg
    try:
        left, right = float(value), float(arg)
    except (TypeError, ValueError):
        return False
    if op == "$gt":
        return left > right
    if op == "$gte":
        return left >= right
    if op == "$lt":
        return left < right
    if op == "$lte":
        return left <= right
    raise InvalidInputError(f"unsupported filter operator {op!r}; use $eq, $ne, $gt, $gte, $lt or $lte")


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path) if condition.match_type == "prefix" else zip(reversed(namespace), reversed(path))
    if condition.match_type not in ("prefix", "suffix"):
        raise InvalidInputError(f"match_type must be 'prefix' or 'suffix', not {condition.match_type!r}")
    return all(p == "*" or n == p for n, p in pairs)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


class _VectorCache:
    """Text -> vector, in memory and (optionally) in a rebuildable SQLite file."""

    def __init__(self, path: Any, model: str) -> None:
        self.model = model
        self._memory: dict[str, list[float]] = {}
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS vectors(model TEXT, text_sha TEXT, vec BLOB, "
                    "PRIMARY KEY(model, text_sha))"
                )
                self._db.commit()
            except (sqlite3.Error, OSError):
                self._db = None  # read-only repository: memory only

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def get(self, text: str) -> list[float] | None:
        key = self._key(text)
        with self._lock:
            vec = self._memory.get(key)
            if vec is None and self._db is not None:
                row = self._db.execute(
                    "SELECT vec FROM vectors WHERE model=? AND text_sha=?", (self.model, key)
                ).fetchone()
                if row is not None:
                    vec = self._memory[key] = array("f", row[0]).tolist()
        return vec

    def put_many(self, pairs: Iterable[tuple[str, Sequence[float]]]) -> None:
        rows = []
        with self._lock:
            for text, vec in pairs:
                key = self._key(text)
                self._memory[key] = [float(x) for x in vec]
                rows.append((self.model, key, array("f", self._memory[key]).tobytes()))
            if self._db is not None and rows:
                try:
                    self._db.executemany("INSERT OR REPLACE INTO vectors VALUES(?,?,?)", rows)
                    self._db.commit()
                except sqlite3.Error:
                    pass  # a cache: losing a write only costs a re-embedding


class GitStore(BaseStore):
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
        vector_cache = vector_cache and self.readable
        self.repo = repo if isinstance(repo, ReasoningRepo) else ReasoningRepo.open(repo)
        self.ref = self.repo.ref(ref)
        self.ttl_config = ttl
        self.clock = clock or (lambda: datetime.now(UTC))
        self.index_config: dict[str, Any] | None = None
        self.embeddings = None
        self._vectors: _VectorCache | None = None
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
            self._vectors = _VectorCache(
                self.repo.gitdir / "got" / "store-vectors.sqlite3" if vector_cache else None,
                f"{model}|{index.get('dims')}",
            )
        self._docs = LRU(16 << 20)  # blob sha -> parsed item document
        self._listings = LRU(8)  # store tip -> {path: blob sha}
        self._write_lock = threading.Lock()
        self._ttl_stop = threading.Event()
        self._ttl_thread: threading.Thread | None = None

    @classmethod
    def from_path(cls, path: Any, **options: Any) -> GitStore:
        """A store on the repository at ``path`` (created when missing)."""
        return cls(ReasoningRepo.open(path), **options)

    # ------------------------------------------------------------------ paths and items
    @staticmethod
    def _path(namespace: tuple[str, ...], key: str) -> str:
        if not isinstance(key, str) or not key:
            raise InvalidStoreNameError(f"a key is a non-empty string, not {key!r:.80}")
        try:
            labels = [id_component(label, "namespace label") for label in namespace]
            return "/".join([*labels, id_component(key, "key") + ".json"])
        except InvalidNameError as exc:
            raise InvalidStoreNameError(str(exc)) from None

    def _listing(self, tip: str | None, namespace_prefix: tuple[str, ...] = ()) -> dict[str, str]:
        if tip is None:
            return {}
        full = self._listings.get(tip)
        if full is not None:
            return full
        if namespace_prefix:
            prefix = "/".join(id_component(label, "namespace label") for label in namespace_prefix)
            return self.repo.list_files(tip, prefix)
        full = self.repo.list_files(tip)
        self._listings.put(tip, full)
        return full

    def _load(self, sha: str, path: str = "") -> dict[str, Any]:
        doc = self._docs.get(sha)
        if doc is None:
            doc = self._decode(self.repo.read_blob(sha), f"store item {path or sha[:12]}")
            self._docs.put(sha, doc, 512)
        return doc

    def _decode(self, data: bytes, what: str) -> dict[str, Any]:
        """An item file's document with its value decoded (validated: damage is a typed error)."""
        doc = _check_item(parse_json(data, what), what)
        if "exact" in doc:
            if self.serde is None:
                raise CorruptRepositoryError(
                    f"{what} holds serializer bytes; open the store with the serde "
                    "that wrote it (e.g. serde=EncryptedSerializer...)"
                )
            value = safe_loads(
                self.serde, decode_exact(doc["exact"], what), encrypted=self.encrypted, allow_pickle=False, what=what
            )
            if not isinstance(value, dict):
                raise CorruptRepositoryError(f"{what} does not hold a mapping value")
            doc = {k: v for k, v in doc.items() if k != "exact"}
            doc["value"] = value
        elif self.serde is not None and not self.readable:
            raise CorruptRepositoryError(
                f"{what} holds a readable value, but every value this store writes is "
                "encrypted; refusing it (the repository was altered)"
            )
        return doc

    def _value_fields(self, value: dict[str, Any]) -> dict[str, Any]:
        """How a value is written: readable JSON, the serializer's bytes, or both."""
        if self.serde is None:
            return {"value": value}
        typed = self.serde.dumps_typed(value)
        if typed[0].partition("+")[0] == "pickle":
            raise UnsafePayloadError("a store value would need pickle; store plain data")
        return {"exact": encode_exact(typed), **({"value": value} if self.readable else {})}

    def _alive(self, doc: dict[str, Any], now: datetime) -> bool:
        expires = doc.get("expires_at")
        return expires is None or datetime.fromisoformat(expires) > now

    @staticmethod
    def _item(doc: dict[str, Any], cls: type = Item, **extra: Any) -> Any:
        return cls(
            namespace=tuple(doc["namespace"]),
            key=doc["key"],
            value=copy.deepcopy(doc["value"]),
            created_at=datetime.fromisoformat(doc["created_at"]),
            updated_at=datetime.fromisoformat(doc["updated_at"]),
            **extra,
        )

    def _encode(self, doc: dict[str, Any]) -> bytes:
        """An item file: ``doc`` with its ``value`` written as :meth:`_value_fields` says."""
        fields = {k: v for k, v in doc.items() if k != "value"}
        if self.serde is not None:
            # JSON-normalise first (as a readable store would), so both kinds read back alike
            plain = json.loads(self._json({"value": doc["value"]}))["value"]
            fields.update(self._value_fields(plain))
        else:
            fields["value"] = doc["value"]
        return self._json(fields)

    @staticmethod
    def _json(data: dict[str, Any]) -> bytes:
        try:
            return dump_json(data, indent=2, allow_nan=False, default=_json_default)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"store values must be JSON-serialisable (no NaN): {exc}") from None

    def _refreshed(self, doc: dict[str, Any], now: datetime) -> dict[str, Any] | None:
        if doc.get("ttl") is None:
            return None
        new = dict(doc)
        new["expires_at"] = (now + timedelta(minutes=float(doc["ttl"]))).isoformat()
        return new

    # ------------------------------------------------------------------ keys reach batch as text
    def get(self, namespace: tuple[str, ...], key: str, **options: Any) -> Item | None:
        """``BaseStore.get``; a bytes key is refused (InvalidStoreNameError), not looked up as its repr."""
        _check_key(key)
        return super().get(namespace, key, **options)

    def put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any], *args: Any, **options: Any) -> None:
        """``BaseStore.put``; a bytes key is refused (InvalidStoreNameError), not stored as its repr."""
        _check_key(key)
        super().put(namespace, key, value, *args, **options)

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """``BaseStore.delete``; a bytes key is refused (InvalidStoreNameError)."""
        _check_key(key)
        super().delete(namespace, key)

    async def aget(self, namespace: tuple[str, ...], key: str, **options: Any) -> Item | None:
        """Async :meth:`get`."""
        _check_key(key)
        return await super().aget(namespace, key, **options)

    async def aput(
        self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any], *args: Any, **options: Any
    ) -> None:
        """Async :meth:`put`."""
        _check_key(key)
        await super().aput(namespace, key, value, *args, **options)

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        """Async :meth:`delete`."""
        _check_key(key)
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
        """Async :meth:`batch`: git work in a worker thread, embeddings through ``aembed_*``."""
        loop = asyncio.get_running_loop()
        embeddings = self.embeddings
        if embeddings is None:
            return await asyncio.to_thread(self._batch, list(ops), None, None)

        def embed_docs(texts: list[str]) -> list[list[float]]:
            return asyncio.run_coroutine_threadsafe(embeddings.aembed_documents(texts), loop).result()

        def embed_query(text: str) -> list[float]:
            return asyncio.run_coroutine_threadsafe(embeddings.aembed_query(text), loop).result()

        return await asyncio.to_thread(self._batch, list(ops), embed_docs, embed_query)

    def _batch(self, ops: list[Op], embed_docs: _EmbedDocs | None, embed_query: _EmbedQuery | None) -> list[Result]:
        for op in ops:
            if isinstance(op, (GetOp, PutOp)):
                _check_namespace(op.namespace, allow_empty=False)
                self._path(op.namespace, op.key)
            elif isinstance(op, SearchOp):
                _check_namespace(op.namespace_prefix, allow_empty=True)
            elif isinstance(op, ListNamespacesOp):
                for condition in op.match_conditions or ():
                    if not isinstance(condition.path, tuple) or not all(isinstance(p, str) for p in condition.path):
                        raise InvalidStoreNameError(f"match paths are tuples of strings, not {condition.path!r:.80}")
            else:
                raise InvalidInputError(f"unknown store operation {type(op).__name__}")
        with self._write_lock:
            tip = self.repo.tip(self.ref)
            now = _utc(self.clock)
            results: list[Result] = [None] * len(ops)
            refresh: dict[str, dict[str, Any]] = {}
            puts: dict[str, tuple[PutOp, str]] = {}
            for i, op in enumerate(ops):
                if isinstance(op, GetOp):
                    results[i] = self._get(tip, op, now, refresh)
                elif isinstance(op, ListNamespacesOp):
                    results[i] = self._list_namespaces(tip, op, now)
                elif isinstance(op, PutOp):
                    path = self._path(op.namespace, op.key)
                    puts.pop(path, None)  # last write wins, in order
                    puts[path] = (op, path)
            searches = [(i, op) for i, op in enumerate(ops) if isinstance(op, SearchOp)]
            if searches:
                vectors: dict[str, list[float]] = {}
                if embed_query is not None:
                    queries = {op.query for _, op in searches if op.query}
                    vectors = {q: list(embed_query(q)) for q in sorted(queries)}
                for i, op in searches:
                    results[i] = self._search(tip, op, now, vectors, embed_docs, refresh)
            self._write(tip, puts, refresh, now, embed_docs)
        return results

    def _existing(self, tip: str | None, path: str) -> dict[str, Any] | None:
        if tip is None:
            return None
        listing = self._listings.get(tip)
        if listing is not None:
            sha = listing.get(path)
            return self._load(sha, path) if sha else None
        try:
            data = self.repo.read_file(tip, path)
        except KeyError:
            return None
        return self._decode(data, f"store item {path}")

    def _get(self, tip: str | None, op: GetOp, now: datetime, refresh: dict[str, dict[str, Any]]) -> Item | None:
        path = self._path(op.namespace, op.key)
        doc = self._existing(tip, path)
        if doc is None or not self._alive(doc, now) or tuple(doc["namespace"]) != op.namespace or doc["key"] != op.key:
            return None
        if op.refresh_ttl and (new := self._refreshed(doc, now)) is not None:
            refresh[path] = new
        return self._item(doc)

    def _alive_items(self, tip: str | None, prefix: tuple[str, ...], now: datetime) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for path, sha in self._listing(tip, prefix).items():
            if path.endswith(".json"):
                doc = self._load(sha, path)
                if tuple(doc["namespace"][: len(prefix)]) == prefix and self._alive(doc, now):
                    out.append((path, doc))
        return out

    def _list_namespaces(self, tip: str | None, op: ListNamespacesOp, now: datetime) -> list[tuple[str, ...]]:
        namespaces = {tuple(doc["namespace"]) for _, doc in self._alive_items(tip, (), now)}
        if op.match_conditions:
            namespaces = {ns for ns in namespaces if all(_matches(c, ns) for c in op.match_conditions)}
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    def _texts(self, doc: dict[str, Any]) -> list[tuple[str, str]]:
        """(field path, text) pairs an item is indexed under (none when indexing is off)."""
        if not self.index_config or doc.get("index") is False:
            return []
        paths = (
            self.index_config["__tokenized_fields"]
            if doc.get("index") is None
            else [(p, tokenize_path(p)) for p in doc["index"]]
        )
        out: list[tuple[str, str]] = []
        for path, tokens in paths:
            texts = get_text_at_path(doc["value"], tokens)
            out.extend((f"{path}.{i}" if len(texts) > 1 else path, t) for i, t in enumerate(texts))
        return out

    def _ensure_vectors(self, texts: Iterable[str], embed_docs: _EmbedDocs | None) -> None:
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

    def _search(
        self,
        tip: str | None,
        op: SearchOp,
        now: datetime,
        queries: dict[str, list[float]],
        embed_docs: _EmbedDocs | None,
        refresh: dict[str, dict[str, Any]],
    ) -> list[SearchItem]:
        candidates = [
            (p, d)
            for p, d in self._alive_items(tip, tuple(op.namespace_prefix), now)
            if not op.filter or all(_compare(d["value"].get(k), v) for k, v in op.filter.items())
        ]
        # newest first without a query, as SqliteStore orders by updated_at
        candidates.sort(key=lambda pd: (pd[1]["updated_at"], pd[1]["namespace"], pd[1]["key"]), reverse=True)
        if op.query and op.query in queries and self._vectors is not None:
            texts = {path: self._texts(doc) for path, doc in candidates}
            self._ensure_vectors((t for pairs in texts.values() for _, t in pairs), embed_docs)
            query = queries[op.query]
            scored: list[tuple[float, str, dict[str, Any]]] = []
            scoreless: list[tuple[float | None, str, dict[str, Any]]] = []
            for path, doc in candidates:
                scores = [_cosine(query, self._vectors.get(t) or []) for _, t in texts[path]]
                if scores:
                    scored.append((max(scores), path, doc))
                else:
                    scoreless.append((None, path, doc))
            scored.sort(key=lambda s: s[0], reverse=True)
            kept: list[tuple[float | None, str, dict[str, Any]]] = list(scored[op.offset : op.offset + op.limit])
            if len(kept) < op.limit:
                kept += scoreless[: op.limit - len(kept)]  # as InMemoryStore: unscored items fill the page
        else:
            kept = [(None, p, d) for p, d in candidates[op.offset : op.offset + op.limit]]
        if op.refresh_ttl:
            for _, path, doc in kept:
                if (new := self._refreshed(doc, now)) is not None:
                    refresh[path] = new
        return [self._item(doc, SearchItem, score=score) for score, _, doc in kept]

    def _write(
        self,
        tip: str | None,
        puts: dict[str, tuple[PutOp, str]],
        refresh: dict[str, dict[str, Any]],
        now: datetime,
        embed_docs: _EmbedDocs | None,
    ) -> None:
        changes: dict[str, bytes | None] = {}
        summary: list[str] = []
        embed_texts: list[str] = []
        for path, (op, _) in puts.items():
            label = one_line("/".join(op.namespace) + ":" + op.key, 80)
            if op.value is None:
                if self._existing(tip, path) is not None:
                    changes[path] = None
                    summary.append(f"delete {label}")
                refresh.pop(path, None)
                continue
            if not isinstance(op.value, Mapping):
                raise InvalidInputError(f"store values are mappings (dicts), not {type(op.value).__name__}")
            old = self._existing(tip, path)
            created = old["created_at"] if old is not None and self._alive(old, now) else now.isoformat()
            ttl = op.ttl if op.ttl is not None else None
            doc = {
                "namespace": list(op.namespace),
                "key": op.key,
                "value": dict(op.value),
                "created_at": created,
                "updated_at": now.isoformat(),
                "ttl": ttl,
                "expires_at": (now + timedelta(minutes=float(ttl))).isoformat() if ttl is not None else None,
                "index": op.index if op.index is False or op.index is None else list(op.index),
            }
            data = changes[path] = self._encode(doc)
            self._docs.put(blob_sha(data), self._decode(data, f"store item {path}"), 512)
            embed_texts.extend(t for _, t in self._texts(doc))
            refresh.pop(path, None)
            summary.append(f"put {label}")
        for path, doc in refresh.items():
            changes[path] = self._encode(doc)
        if refresh:
            summary.append(f"refresh ttl of {len(refresh)} item(s)")
        if not changes:
            return
        self._ensure_vectors(embed_texts, embed_docs)  # before the commit: a failed embedding writes nothing
        head = f"store: {summary[0]}" + (f" (+{len(summary) - 1} more)" if len(summary) > 1 else "")
        self.repo.commit_files(self.ref, changes, head + "\n\n" + "\n".join(summary[:200]) + "\n")

    # ------------------------------------------------------------------ TTL
    def sweep_ttl(self) -> int:
        """Delete every expired item in one commit; returns how many were removed."""
        with self._write_lock:
            tip = self.repo.tip(self.ref)
            now = _utc(self.clock)
            expired = [
                path
                for path, sha in self._listing(tip).items()
                if path.endswith(".json") and not self._alive(self._load(sha, path), now)
            ]
            if expired:
                self.repo.commit_files(
                    self.ref, dict.fromkeys(expired), f"store: sweep {len(expired)} expired item(s)\n"
                )
            return len(expired)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> concurrent.futures.Future:
        """Sweep expired items periodically in a daemon thread (as ``SqliteStore``).

        Returns:
            A future that finishes when the sweeper stops (cancel it, or call :meth:`stop_ttl_sweeper`).
        """
        future: concurrent.futures.Future = concurrent.futures.Future()
        if self._ttl_thread is not None and self._ttl_thread.is_alive():
            future.add_done_callback(lambda f: self._ttl_stop.set() if f.cancelled() else None)
            return future
        interval = float(sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5)
        self._ttl_stop.clear()

        def loop() -> None:
            try:
                while not self._ttl_stop.wait(interval * 60):
                    try:
                        removed = self.sweep_ttl()
                        if removed:
                            logger.info("GitStore swept %d expired items", removed)
                    except Exception:
                        logger.exception("GitStore TTL sweep failed")
                future.set_result(None)
            except Exception as exc:
                future.set_exception(exc)

        self._ttl_thread = threading.Thread(target=loop, daemon=True, name="got-store-ttl-sweeper")
        self._ttl_thread.start()
        future.add_done_callback(lambda f: self._ttl_stop.set() if f.cancelled() else None)
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; True when it stopped (or was not running)."""
        if self._ttl_thread is None or not self._ttl_thread.is_alive():
            return True
        self._ttl_stop.set()
        self._ttl_thread.join(timeout)
        stopped = not self._ttl_thread.is_alive()
        if stopped:
            self._ttl_thread = None
        return stopped

    def close(self) -> None:
        """Stop the sweeper and release the repository."""
        self.stop_ttl_sweeper(timeout=1)
        self.repo.close()

    def __enter__(self) -> GitStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
