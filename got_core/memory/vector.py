"""The ``vector`` backend: a persistent chromadb collection, MiniLM embeddings, cosine k-NN.

§3.4 of the paper (arXiv 2606.14470): lessons are embedded with
all-MiniLM-L6-v2 and retrieved by cosine nearest neighbour. Embeddings are
computed by *our* embedder (:mod:`got_core.memory.embeddings`) and handed to
chromadb explicitly on every add and query: the collection is created with
``embedding_function=None``, because chromadb's default embedding function
downloads a model at run time. Telemetry is off, so opening, writing and
querying never touch the network.

The embedder's name and dimension are stored in the collection metadata; a
store written with one embedder refuses to be read with another.

Loading the embedding model (and its first inference) happens once, on the first write or
query that needs a vector; ``stats()["load_ms"]`` reports it, apart from ``write_ms`` and
``read_ms``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from got_core.errors import (
    ConfigError,
    CorruptRepositoryError,
    GotError,
    MissingExtraError,
    RepositoryNotFoundError,
    StorageError,
)
from got_core.memory.base import BaseMemory, Lesson, stored_lesson
from got_core.memory.embeddings import Embedder, get_embedder

__all__ = ["COLLECTION", "VectorMemory", "lesson_id"]

#: The default collection name inside the backend directory.
COLLECTION = "got_lessons"
_CHROMA_FILE = "chroma.sqlite3"
_COLLECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$")


def _chromadb() -> Any:
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError as exc:
        raise MissingExtraError("the vector memory", "vector", exc) from None
    return chromadb, Settings


def lesson_id(lesson: Lesson) -> str:
    """A content hash of outcome, topic and text: re-adding the same lesson updates it."""
    key = "\x1f".join((lesson.outcome, lesson.topic_key, lesson.text))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


class VectorMemory(BaseMemory):
    """Lessons in a persistent chromadb collection, retrieved by cosine similarity.

    ``relevance`` on returned lessons is the cosine similarity between the
    query and the lesson embeddings.

    Args:
        path: the backend directory (chromadb's files live in it; created if missing).
        read_only: refuse writes silently; a missing store reads as empty and
            nothing is created on disk.
        embedder: an :class:`~got_core.memory.embeddings.Embedder`; the shared
            MiniLM embedder by default. Tests of *other* modules may pass
            :class:`got_core.testing.HashEmbedder`.
        collection: the collection name.
        create: when false the store (and its collection) must exist already; nothing
            is created.

    Raises:
        RepositoryNotFoundError: ``create=False`` and no vector memory at ``path``.
        ConfigError: no path, a collection name chromadb rejects, or the store
            was written with a different embedder.
        StorageError: the directory cannot be created or opened.
        MissingExtraError: chromadb / sentence-transformers are not installed.
    """

    name = "vector"
    supports_semantic_search = True
    path: Path  # never None here: __init__ refuses a missing path

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        read_only: bool = False,
        embedder: Embedder | None = None,
        collection: str = COLLECTION,
        create: bool = True,
    ) -> None:
        if path is None:
            raise ConfigError("the vector memory needs a directory path, e.g. path='runs/memory'")
        if not isinstance(collection, str) or not _COLLECTION_NAME.match(collection):
            raise ConfigError(
                f"collection name {collection!r} must be 3-512 characters from "
                "[A-Za-z0-9._-], starting and ending with a letter or digit"
            )
        super().__init__(path, read_only=read_only)
        self.embedder: Embedder = embedder if embedder is not None else get_embedder()
        self.embedder_name = str(getattr(self.embedder, "name", type(self.embedder).__name__))
        self.collection_name = collection
        self._lock = threading.Lock()
        self._client: Any = None
        self._col: Any = None
        self._closed = False
        self._embedder_ready = False
        try:
            if self.path.exists() and not self.path.is_dir():
                raise StorageError(
                    f"vector memory path {self.path} is a file, not a directory; "
                    "pass the directory that should hold the chromadb store"
                )
            stored = (self.path / _CHROMA_FILE).exists()
        except PermissionError as exc:
            raise StorageError(
                f"permission denied: cannot read the vector memory at {self.path} "
                f"({exc}); fix its permissions or choose another path"
            ) from None
        if not create and not stored:
            raise RepositoryNotFoundError(
                f"no vector memory at {self.path} (no {_CHROMA_FILE} there); check the path, "
                "or store a lesson there first to create one"
            )
        if read_only and not stored:
            return  # nothing stored yet, and a read-only memory must not create a store
        self._open(create=create and not read_only, required=not create)

    def _open(self, create: bool, required: bool = False) -> None:
        chromadb, Settings = _chromadb()
        if create:
            try:
                self.path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(
                    f"cannot create vector memory at {self.path}: {exc}; pick a writable directory"
                ) from None
        settings = Settings(anonymized_telemetry=False, allow_reset=False)
        try:
            self._client = chromadb.PersistentClient(path=str(self.path), settings=settings)
            if create:
                self._col = self._client.get_or_create_collection(
                    self.collection_name,
                    embedding_function=None,  # never chromadb's downloading default
                    configuration={"hnsw": {"space": "cosine"}},
                    metadata={"got_embedder": self.embedder_name, "got_dims": int(self.embedder.dims)},
                )
            else:
                self._col = self._client.get_collection(self.collection_name, embedding_function=None)
        except Exception as exc:  # chromadb raises ValueError/NotFoundError/sqlite errors
            if _damaged(exc):
                raise self._corrupt(exc) from None
            if not create and type(exc).__name__ == "NotFoundError":
                if required:
                    raise RepositoryNotFoundError(
                        f"the vector memory at {self.path} has no collection {self.collection_name!r}; "
                        "check the path and the collection name"
                    ) from None
                self._col = None
                return
            raise StorageError(f"cannot open the chromadb store at {self.path}: {exc}") from None
        meta = self._col.metadata or {}
        stored = (meta.get("got_embedder"), meta.get("got_dims"))
        if stored != (self.embedder_name, int(self.embedder.dims)):
            raise ConfigError(
                f"the vector memory at {self.path} was written with embedder {stored[0]!r} "
                f"({stored[1]} dims), not {self.embedder_name!r} ({self.embedder.dims} dims); "
                "open it with the same embedder or use a new directory"
            )

    def _embed(self, texts: list[str]) -> list[list[float]]:
        if not self._embedder_ready:
            # the first call loads the model (MiniLM: seconds); meter it as load_ms, not as this write or read
            self._timed_load(lambda: self.embedder.embed(["warm up"]))
            self._embedder_ready = True
        vecs = self.embedder.embed(texts)
        if len(vecs) != len(texts) or (len(vecs) and len(vecs[0]) != self.embedder.dims):
            raise ConfigError(
                f"embedder {self.embedder_name!r} returned vectors of the wrong "
                f"shape (expected {len(texts)} x {self.embedder.dims})"
            )
        return [[float(x) for x in row] for row in vecs]

    # -- BaseMemory hooks --------------------------------------------------------------
    def _store(self, lesson: Lesson) -> Lesson:
        return self._store_many([lesson])[0]

    def _store_many(self, lessons: list[Lesson]) -> list[Lesson]:
        # One embedding batch and one upsert: chromadb's per-call cost dominates small writes.
        vecs = self._embed([lesson.text for lesson in lessons])
        metadatas = [
            {
                "topic_key": lesson.topic_key,
                "source_problem": lesson.source_problem,
                "outcome": lesson.outcome,
                "score": float(lesson.score),
                "created": float(lesson.created),
                "meta_json": json.dumps(lesson.meta, sort_keys=True, default=str),
            }
            for lesson in lessons
        ]
        ids = [lesson_id(lesson) for lesson in lessons]
        unique = {i: n for n, i in enumerate(ids)}  # chromadb refuses duplicate ids in one call
        keep = sorted(unique.values())
        with self._lock:
            self._check_open()
            try:
                step = max(1, int(self._client.get_max_batch_size()))  # chromadb caps one call's size
                for start in range(0, len(keep), step):
                    part = keep[start : start + step]
                    self._col.upsert(
                        ids=[ids[n] for n in part],
                        embeddings=[vecs[n] for n in part],
                        documents=[lessons[n].text for n in part],
                        metadatas=[metadatas[n] for n in part],
                    )
            except Exception as exc:
                raise StorageError(f"chromadb refused the write at {self.path}: {exc}") from None
        return lessons

    def _corrupt(self, exc: BaseException) -> CorruptRepositoryError:
        return CorruptRepositoryError(
            f"the chromadb store at {self.path} is damaged ({str(exc)[:160]}); it was left untouched: "
            "restore it from a backup, or move it away and rebuild it from its source lessons"
        )

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Turn chromadb's errors on reads into ours: damage is a CorruptRepositoryError."""
        try:
            yield
        except GotError:
            raise
        except Exception as exc:
            if _damaged(exc):
                raise self._corrupt(exc) from None
            raise StorageError(f"chromadb could not read the vector memory at {self.path}: {exc}") from None

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"the vector memory at {self.path} is closed; reopen it")

    def _query(self, query: str, k: int) -> list[Lesson]:
        self._check_open()
        if self._col is None:
            return []
        with self._lock, self._reading():
            n = self._col.count()
        if n == 0:
            return []  # without loading the embedding model
        qvec = self._embed([query])
        with self._lock, self._reading():
            self._check_open()
            res = self._col.query(
                query_embeddings=qvec, n_results=min(k, n), include=["documents", "metadatas", "distances"]
            )
        out = []
        for ident, doc, meta, dist in zip(res["ids"][0], res["documents"][0], res["metadatas"][0], res["distances"][0]):
            # chromadb's cosine space reports distance = 1 - cosine similarity.
            out.append(_to_lesson(doc, meta, relevance=round(1.0 - float(dist), 6), where=(self.path, ident)))
        return out

    def _all(self) -> list[Lesson]:
        self._check_open()
        if self._col is None:
            return []
        with self._lock, self._reading():
            res = self._col.get(include=["documents", "metadatas"])
        lessons = [
            _to_lesson(d, m, where=(self.path, i)) for i, d, m in zip(res["ids"], res["documents"], res["metadatas"])
        ]
        return sorted(lessons, key=lambda l: l.created)

    def __len__(self) -> int:
        self._check_open()
        if self._col is None:
            return 0
        with self._lock, self._reading():
            return int(self._col.count())

    def close(self) -> None:
        """Drop the handles (chromadb persists on every write; nothing to flush).

        Later reads and writes on this object raise :class:`StorageError`.
        """
        with self._lock:
            self._closed = True
            self._col = None
            self._client = None


#: sqlite's SQLITE_CORRUPT (11) and SQLITE_NOTADB (26), as chromadb reports them.
_DAMAGE = ("(code: 11)", "(code: 26)", "malformed", "not a database")


def _damaged(exc: BaseException) -> bool:
    text = str(exc)
    return any(marker in text for marker in _DAMAGE)


def _to_lesson(
    doc: str, meta: dict[str, Any] | None, relevance: float = 0.0, where: tuple[Path | None, str] = (None, "?")
) -> Lesson:
    try:
        meta = meta or {}
        extra = json.loads(meta.get("meta_json") or "{}")
        return stored_lesson(
            {
                "text": doc,
                "topic_key": meta.get("topic_key", ""),
                "source_problem": meta.get("source_problem", ""),
                "outcome": meta.get("outcome", "insight"),
                "score": meta.get("score", 0.5),
                "created": meta.get("created", 0.0),
                "meta": extra if isinstance(extra, dict) else {},
                "relevance": relevance,
            }
        )
    except (TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise CorruptRepositoryError(
            f"record {where[1]} of the vector memory at {where[0]} is damaged ({str(exc)[:120]}); "
            "rebuild the store from its source lessons"
        ) from None
