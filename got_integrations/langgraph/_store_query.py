"""The store index's rows and the queries over them.

:class:`Row` is one indexed item file; :class:`ItemQueries` is the read side of
:class:`~got_integrations.langgraph._store_index.ItemIndex` (one SQLite statement per
question; questions about single items look at this process's held rows first).
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from got_integrations.langgraph._store_doc import key_blob, ns_blob, to_us, value_json

__all__ = ["CHUNK", "INSERT", "ItemQueries", "Row", "insert_params", "path_hash", "prefix_bounds", "row_of_doc"]

#: Most values bound in one statement.
CHUNK = 500


class Row(NamedTuple):
    """One indexed item (``value``: its JSON, readable stores only)."""

    ns: bytes
    key: bytes
    path: str
    blob: str
    created: str
    updated: str
    updated_us: int
    exp: int | None
    ttl: float | None
    idx: str | None
    value: str | None


_COLS = ", ".join(Row._fields)
#: A row and its :func:`path_hash` (the ``ph`` column, which :func:`insert_params` appends).
INSERT = f"INSERT OR REPLACE INTO items({_COLS}, ph) VALUES({', '.join('?' * (len(Row._fields) + 1))})"


def path_hash(path: str) -> int:
    """The ``ph`` column of the row at ``path``: the CRC-32 of its directory (31 bits) above
    the CRC-32 of its file name, as one non-negative 63-bit integer.

    Rows are found by path through an index of this number rather than of the path's text:
    an entry of 8 bytes, not of the ~40-byte path, costs less to insert and to delete, and
    the items of one namespace stay next to each other in it (as they were in an index of the
    paths), so a sweep or a batch within a few namespaces touches a few of its pages. A query
    by path matches ``ph`` and then the path itself, so two paths sharing a hash are told apart.
    """
    folder, _, name = path.rpartition("/")
    high = zlib.crc32(folder.encode("utf-8", "surrogatepass")) & 0x7FFFFFFF
    return high << 32 | zlib.crc32(name.encode("utf-8", "surrogatepass"))


def insert_params(rows: Iterable[Row]) -> list[tuple[Any, ...]]:
    """The parameters of :data:`INSERT` for ``rows``."""
    return [(*row, path_hash(row.path)) for row in rows]


_LIVE = "(exp IS NULL OR exp > ?)"


def row_of_doc(doc: dict[str, Any], path: str, blob: str, *, values: bool) -> Row:
    """The row of an item document (its value only with ``values``: readable stores)."""
    expires = doc.get("expires_at")
    ttl = doc.get("ttl")
    return Row(
        ns_blob(tuple(doc["namespace"])),
        key_blob(doc["key"]),
        path,
        blob,
        doc["created_at"],
        doc["updated_at"],
        to_us(doc["updated_at"]),
        to_us(expires) if expires is not None else None,
        float(ttl) if ttl is not None else None,
        json.dumps(doc.get("index")),
        value_json(doc["value"]) if values else None,
    )


def prefix_bounds(prefix: bytes) -> tuple[bytes, bytes]:
    """``[lo, hi)`` holding exactly the namespaces equal to ``prefix`` or below it."""
    return prefix, prefix + b"\x01"


class HeldRows(Protocol):
    """What the queries read of this process's held rows (``_store_pending.PendingRows``)."""

    by_path: dict[str, Row | None]
    by_key: dict[tuple[bytes, bytes], Row | None]

    def __bool__(self) -> bool: ...


class ItemQueries:
    """The queries of the item index (the host holds the connection and the held rows)."""

    db: sqlite3.Connection
    _pending: HeldRows

    def _flush_quietly(self) -> None:  # pragma: no cover - the host defines it
        raise NotImplementedError

    def _settle(self) -> None:
        """Held rows into the file before a query only the file answers (callers ask
        :meth:`fresh` without ``held_rows`` first, so this is a safety net)."""
        if self._pending:
            self._flush_quietly()

    def get(self, ns: bytes, key: bytes) -> Row | None:
        """The row of one item, or None (this process's held rows first)."""
        if self._pending:
            held = self._pending.by_key
            if (ns, key) in held:
                return held[(ns, key)]
        row = self.db.execute(f"SELECT {_COLS} FROM items WHERE ns=? AND key=?", (ns, key)).fetchone()
        return Row(*row) if row else None

    def rows_of(self, items: Mapping[str, tuple[bytes, bytes]]) -> dict[str, Row]:
        """The rows of the items named ``{name: (ns, key)}``, by name (absent ones left out;
        held rows first). An item's row may sit at another path than the name (a legacy one)."""
        out: dict[str, Row] = {}
        wanted = dict(items)
        if self._pending:
            held = self._pending.by_key
            for name, nk in list(wanted.items()):
                if nk in held:
                    row = held[nk]
                    if row is not None:
                        out[name] = row
                    del wanted[name]
        if len(wanted) <= 4:  # a put or two: the unique index, one statement each
            for name, (ns, key) in wanted.items():
                found = self.db.execute(f"SELECT {_COLS} FROM items WHERE ns=? AND key=?", (ns, key)).fetchone()
                if found:
                    out[name] = Row(*found)
            return out
        names = {nk: name for name, nk in wanted.items()}
        pairs = list(names)
        for i in range(0, len(pairs), CHUNK // 2):
            part = pairs[i : i + CHUNK // 2]
            sql = (
                f"WITH k(ns, key) AS (VALUES {','.join(['(?,?)'] * len(part))}) "
                f"SELECT {', '.join('items.' + c for c in Row._fields)} FROM k JOIN items ON items.ns=k.ns AND items.key=k.key"
            )
            for found in self.db.execute(sql, [v for pair in part for v in pair]):
                row = Row(*found)
                out[names[(row.ns, row.key)]] = row
        return out

    def rows_at(self, paths: Iterable[str]) -> dict[str, Row]:
        """The rows of the item files at ``paths`` (absent ones left out; held rows first)."""
        paths = list(paths)
        out: dict[str, Row] = {}
        if self._pending:
            held = self._pending.by_path
            out = {p: r for p in paths if (r := held.get(p)) is not None}
            paths = [p for p in paths if p not in held]
        wanted = set(paths)
        for i in range(0, len(paths), CHUNK):
            part = paths[i : i + CHUNK]
            marks = ",".join("?" * len(part))
            for row in self.db.execute(
                f"SELECT {_COLS} FROM items WHERE ph IN ({marks})", [path_hash(p) for p in part]
            ):
                if row[2] in wanted:  # not another path of the same hash
                    out[row[2]] = Row(*row)
        return out

    def all_rows(self) -> Iterator[Row]:
        """Every row of the index file (held rows are written first)."""
        self._settle()
        for row in self.db.execute(f"SELECT {_COLS} FROM items"):
            yield Row(*row)

    def count(self, prefix: bytes | None) -> int:
        """Items under a namespace prefix (None: all), live or not."""
        self._settle()
        if prefix is None:
            row = self.db.execute("SELECT v FROM meta WHERE k='total'").fetchone()
            return int(row[0]) if row else 0
        lo, hi = prefix_bounds(prefix)
        return int(
            self.db.execute("SELECT coalesce(sum(n), 0) FROM spaces WHERE ns>=? AND ns<?", (lo, hi)).fetchone()[0]
        )

    def search(
        self,
        prefix: bytes | None,
        now_us: int,
        where: Sequence[str] = (),
        params: Sequence[Any] = (),
        *,
        want: int | None = None,
    ) -> Iterator[Row]:
        """Live rows under ``prefix``, newest first, passing the SQL conditions ``where``.

        ``want`` (how many rows the caller expects to keep) picks the plan: walking the
        recency index until enough rows matched, or reading the prefix's range and sorting.
        """
        self._settle()
        clauses: list[str] = [_LIVE, *where]
        args: list[Any] = [now_us, *params]
        plan = "items_recent"  # newest first over everything: stop once enough rows matched
        if prefix is not None:
            lo, hi = prefix_bounds(prefix)
            spaces = self.db.execute("SELECT ns FROM spaces WHERE ns>=? AND ns<? LIMIT 2", (lo, hi)).fetchall()
            if not spaces:
                return
            if len(spaces) == 1:  # one namespace: its own recency order, no sort
                clauses.append("ns=?")
                args.append(spaces[0][0])
                plan = "items_ns_recent"
            else:
                clauses.append("ns>=? AND ns<?")
                args += [lo, hi]
                here, total = self.count(prefix), self.count(None)
                if want is None or here * here <= 8 * want * max(total, 1):
                    plan = "items_nk"  # a small part of the store: read its range, then sort
        sql = (
            f"SELECT {_COLS} FROM items INDEXED BY {plan} WHERE {' AND '.join(clauses)} "
            "ORDER BY updated_us DESC, ns DESC, key DESC"
        )
        for row in self.db.execute(sql, args):
            yield Row(*row)

    def namespaces(self, now_us: int, prefix: bytes | None = None) -> Iterator[bytes]:
        """Namespaces holding a live item, in tuple order, optionally under ``prefix``."""
        self._settle()
        sql = "SELECT ns FROM spaces WHERE (forever OR max_exp > ?)"
        args: list[Any] = [now_us]
        if prefix is not None:
            sql += " AND ns>=? AND ns<?"
            args += prefix_bounds(prefix)
        for (ns,) in self.db.execute(sql + " ORDER BY ns", args):
            yield ns

    def expired_by_namespace(self, now_us: int) -> dict[bytes, list[str]]:
        """Paths of the items expired at ``now_us``, by namespace (from the expiry index)."""
        self._settle()
        out: dict[bytes, list[str]] = {}
        for ns, path in self.db.execute("SELECT ns, path FROM items WHERE exp IS NOT NULL AND exp<=?", (now_us,)):
            out.setdefault(ns, []).append(path)
        return out

    def expired(self, now_us: int) -> list[str]:
        """Paths of the items expired at ``now_us`` (from the expiry index)."""
        self._settle()
        return [p for (p,) in self.db.execute("SELECT path FROM items WHERE exp IS NOT NULL AND exp<=?", (now_us,))]
