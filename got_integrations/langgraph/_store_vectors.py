"""Semantic search for the store: which texts of an item are embedded, and the vector cache.

Vectors are derived data (ARCHITECTURE §5, invariant 2): kept in memory and, for readable
stores, in ``<gitdir>/got/store-vectors.sqlite3`` keyed by the text's SHA-256 and the
embedding model (delete it any time). Stores whose values are not readable keep vectors
in memory only: a vector, or the hash of a text, tells of the value.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
import threading
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from langgraph.store.base import get_text_at_path, tokenize_path

__all__ = ["VectorCache", "cosine", "item_texts"]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity (0 for a zero vector)."""
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def item_texts(
    value: dict[str, Any], index: list[str] | bool | None, fields: list[tuple[str, Any]]
) -> list[tuple[str, str]]:
    """(field path, text) pairs an item is embedded under.

    Args:
        value: the item's value.
        index: the item's own ``index`` field (False: not embedded; None: the store's fields).
        fields: the store's tokenized field paths.
    """
    if index is False:
        return []
    paths = fields if index is None or index is True else [(p, tokenize_path(p)) for p in index]
    out: list[tuple[str, str]] = []
    for path, tokens in paths:
        texts = get_text_at_path(value, tokens)
        out.extend((f"{path}.{i}" if len(texts) > 1 else path, t) for i, t in enumerate(texts))
    return out


class VectorCache:
    """Text -> vector, in memory and (optionally) in a rebuildable SQLite file.

    Args:
        path: the SQLite file, or None for memory only.
        model: names the embedding model (vectors of other models are never mixed in).
    """

    def __init__(self, path: Path | None, model: str) -> None:
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
        """The cached vector of ``text``, or None."""
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
        """Remember vectors (a failed write to the file only costs a re-embedding later)."""
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
                    pass

    def close(self) -> None:
        """Close the file."""
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
