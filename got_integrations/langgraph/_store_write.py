"""The store's write path: a batch's puts, deletes and TTL refreshes as one commit.

:class:`StoreWritesMixin` turns the puts of one batch into item files (encoded by the
store's codec), the rows the derived index learns from them, and one commit on the store
ref through ``repo.update_ref`` (loose objects for a few files, one pack for many: see
:mod:`got_integrations.langgraph._store_bulk`). The index is told about the commit from the
rows built here, so nothing is read back (ARCHITECTURE §3: one write).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

from langgraph.store.base import PutOp

from got_core.errors import ConcurrentUpdateError, GotError, InvalidInputError
from got_core.repo import Publish, ReasoningRepo
from got_integrations.langgraph._layout import LRU, blob_sha, one_line, parse_json
from got_integrations.langgraph._store_bulk import BulkWriter
from got_integrations.langgraph._store_doc import (
    ItemCodec,
    dump,
    key_blob,
    loads_value,
    ns_blob,
    ns_from_blob,
    to_us,
    value_json,
)
from got_integrations.langgraph._store_index import ItemIndex, Row

__all__ = ["EmbedDocs", "StaleTipError", "StoreWritesMixin", "redone"]

logger = logging.getLogger("got_integrations.langgraph.store")

#: How many of a batch's puts and deletes a commit message lists (the rest are counted).
SUMMARY_LINES = 200

#: The embedding call a batch makes: texts -> vectors.
EmbedDocs = Callable[[list[str]], list[list[float]]]

#: How many times a batch is planned again because another writer moved the ref meanwhile.
REPLANS = 1000

T = TypeVar("T")


class StaleTipError(Exception):
    """The store ref moved after a batch read its state: the batch must be planned again.

    A batch's changes are computed from the index at one tip (the items it refreshes, the
    ``created_at`` it keeps, the expired items a sweep deletes). Applied on another tip they
    would undo what the other writer did (a sweep deleting an item another process just put
    again, a TTL refresh writing back an old value), so the builder refuses any tip but the
    one the plan was made on, and :func:`redone` plans again on the new one. Never leaves
    the store (internal, so not a ``GotError``).
    """

    def __init__(self, planned: str | None, current: str | None) -> None:
        super().__init__(f"planned on {planned or 'nothing'}, the ref is at {current or 'nothing'}")
        self.planned, self.current = planned, current


def redone(attempt: Callable[[], T], ref: str) -> T:
    """``attempt()``, called again each time it raises :class:`StaleTipError`.

    Raises:
        ConcurrentUpdateError: the ref kept moving for :data:`REPLANS` attempts.
    """
    for _ in range(REPLANS):
        try:
            return attempt()
        except StaleTipError:
            continue
    raise ConcurrentUpdateError(f"{ref} kept moving while a store batch was planned; retry")


class StoreWritesMixin:
    """``GitStore``'s writes (the host provides the codec, the index, the bulk writer)."""

    repo: ReasoningRepo
    ref: str
    readable: bool
    index: ItemIndex
    index_config: dict[str, Any] | None
    _codec: ItemCodec
    _docs: LRU
    _bulk: BulkWriter

    # the host's embedding helpers
    def _texts(self, doc: dict[str, Any]) -> list[tuple[str, str]]:  # pragma: no cover - the host defines it
        raise NotImplementedError

    def _ensure_vectors(
        self, texts: Iterable[str], embed_docs: EmbedDocs | None
    ) -> None:  # pragma: no cover - the host defines it
        raise NotImplementedError

    @staticmethod
    def _index_field(row: Row) -> list[str] | bool | None:  # pragma: no cover - the host defines it
        raise NotImplementedError

    def _write(
        self,
        tip: str | None,
        puts: dict[str, PutOp],
        existing: dict[str, Row],
        refresh: dict[str, Row],
        now: datetime,
        embed_docs: EmbedDocs | None,
    ) -> None:
        changes: dict[str, bytes | None] = {}
        ids: dict[str, str | None] = {}  # the blob ids of ``changes`` (None deletes)
        upserts: list[Row] = []
        summary: list[str] = []  # the message's lines: the first SUMMARY_LINES are written out
        counted = 0  # the lines not written out
        embed_texts: list[str] = []
        deleted: list[Row] = []
        now_iso, now_us = now.isoformat(), to_us(now)
        readable, sealed = self.readable, not self.readable
        embedding = bool(self.index_config)
        for path, op in puts.items():
            old = existing.get(path)
            if old is not None:
                refresh.pop(old.path, None)
                if old.path != path or op.value is None:  # deleted, or moved out of a legacy directory
                    changes[old.path] = ids[old.path] = None
                    deleted.append(old)
            if op.value is None:
                if old is not None:
                    if len(summary) < SUMMARY_LINES:
                        summary.append("delete " + one_line("/".join(op.namespace) + ":" + op.key, 80))
                    else:
                        counted += 1
                continue
            if not isinstance(op.value, Mapping):
                raise InvalidInputError(f"store values are mappings (dicts), not {type(op.value).__name__}")
            alive = old is not None and (old.exp is None or old.exp > now_us)
            ttl = op.ttl if op.ttl is not None else None
            expires = now + timedelta(minutes=float(ttl)) if ttl is not None else None
            created = old.created if old is not None and alive else now_iso
            index = op.index if op.index is False or op.index is None else list(op.index)
            doc = {
                "namespace": list(op.namespace),
                "key": op.key,
                "value": dict(op.value),
                "created_at": created,
                "updated_at": now_iso,
                "ttl": ttl,
                "expires_at": expires.isoformat() if expires is not None else None,
                "index": index,
            }
            data, text = self._codec.encode_readable(doc)
            changes[path] = data
            sha = ids[path] = blob_sha(data)
            # the row ``row_of_doc`` would build from the file, from what is at hand (no re-parsing)
            if readable and text is None:
                text = value_json(doc["value"])
            upserts.append(
                Row(
                    ns_blob(op.namespace),
                    key_blob(op.key),
                    path,
                    sha,
                    created,
                    now_iso,
                    now_us,
                    to_us(expires) if expires is not None else None,
                    float(ttl) if ttl is not None else None,
                    "null" if index is None else "false" if index is False else json.dumps(index),
                    text if readable else None,
                )
            )
            if sealed:  # what a reader decoding the file gets back
                self._docs.put(sha, {**doc, "value": loads_value(value_json(doc["value"]))}, 512)
            if embedding:
                embed_texts.extend(t for _, t in self._texts(doc))
            if len(summary) < SUMMARY_LINES:
                summary.append("put " + one_line("/".join(op.namespace) + ":" + op.key, 80))
            else:
                counted += 1
        for path, row in refresh.items():
            expires = now + timedelta(minutes=float(row.ttl or 0))
            data = changes[path] = self._refreshed(row, expires)
            sha = ids[path] = blob_sha(data)
            upserts.append(row._replace(blob=sha, exp=to_us(expires)))
        if refresh:
            if len(summary) < SUMMARY_LINES:
                summary.append(f"refresh ttl of {len(refresh)} item(s)")
            else:
                counted += 1
        if not changes:
            return
        self._ensure_vectors(embed_texts, embed_docs)  # before the commit: a failed embedding writes nothing
        more = len(summary) - 1 + counted
        head = f"store: {summary[0]}" + (f" (+{more} more)" if more else "")
        self._commit(tip, changes, head + "\n\n" + "\n".join(summary) + "\n", upserts, deleted, ids=ids)

    def _refreshed(self, row: Row, expires: datetime) -> bytes:
        """The item file of ``row`` with a new expiry (from the index when it holds the value)."""
        if row.value is not None:
            doc = {
                "namespace": list(ns_from_blob(row.ns)),
                "key": row.key.decode("utf-8", "surrogatepass"),
                "value": loads_value(row.value),
                "created_at": row.created,
                "updated_at": row.updated,
                "ttl": row.ttl,
                "expires_at": expires.isoformat(),
                "index": self._index_field(row),
            }
            return self._codec.encode(doc)
        raw = parse_json(self.repo.read_blob(row.blob), f"store item {row.path}")  # keeps the ciphertext as is
        raw["expires_at"] = expires.isoformat()
        return dump(raw)

    def _commit(
        self,
        tip: str | None,
        changes: dict[str, bytes | None],
        message: str,
        upserts: list[Row],
        deleted: list[Row],
        swept_at: int | None = None,
        *,
        ids: Mapping[str, str | None] | None = None,
        swept: Mapping[bytes, int] | None = None,
    ) -> str:
        """One commit of ``changes`` on the store ref; the index learns it from the rows given
        (new ones and the deleted ones; for a TTL sweep at ``swept_at``, from the expiry it
        swept). A small commit's rows are held in memory until a read needs them in the file.

        The commit's parent is ``tip``, the tip the changes were planned on, or nothing moves.

        Raises:
            StaleTipError: the ref is no longer at ``tip`` (the caller plans again: :func:`redone`).
        """
        # every commit, a single put too, builds its trees from the writer's copies (the trees it
        # wrote lately, raw, and the namespace directories it parsed): the ref move writes one
        # pack whatever builds it, and libgit2's handle would read each base tree back from the
        # object database and parse the namespace's directory again (both check every path and size)
        if self._bulk.wanted(changes, always=True):
            inner = self._bulk.builder(changes, message, ids=ids)
        else:  # not a SHA-1 repository: libgit2 writes the objects
            inner = self._bulk.loose_builder(changes, message)

        def build(current: str | None) -> Publish:
            if current != tip:  # another writer moved the ref after the batch read it: plan again
                raise StaleTipError(tip, current)
            return inner(current)

        commit, parent = self.repo.update_ref(self.ref, build, tip_hint=tip)
        self.index.forget_stamp()
        try:
            if swept_at is not None:
                self.index.apply_sweep(parent, commit, swept_at, swept)
            else:
                self.index.apply_own(parent, commit, upserts, deleted, hold=True)
        except (GotError, sqlite3.Error) as exc:  # the write is in git; the next read catches up
            logger.warning("GitStore index did not record commit %s (%s); the next read catches up", commit, exc)
        return commit
