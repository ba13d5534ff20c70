"""The store's derived item index: SQLite rows that answer get, search and list_namespaces.

Git stays the truth (ARCHITECTURE §5, invariants 1 and 2): the index is derived from the
store ref's tree, lives in the git directory (``<gitdir>/got/store-<ref hash>-<mode>.sqlite3``,
never in a tracked tree), and can be deleted at any time.

* **Rows.** One per item file: namespace and key (as bytes, see
  :func:`~got_integrations.langgraph._store_doc.ns_blob`), path, blob id, timestamps,
  expiry (exact microseconds), TTL, the ``index`` field list and, for readable stores
  only, the value as JSON (filters run on it in SQLite). A ``spaces`` table holds each
  namespace with its item count and expiry summary, so listing namespaces reads neither
  items nor blobs; a partial index on expiry serves the TTL sweep. A row is found by
  its path through an index of a 63-bit hash of the path (its directory's CRC-32 above its
  name's: ``ph``, :func:`~got_integrations.langgraph._store_query.path_hash`), not of its text.
* **Encrypted stores** (mode ``sealed``) keep no value: only what their item files show
  in clear (namespaces, keys, timestamps, TTL). Filters on values then read and decrypt
  the candidate items at query time.
* **Following git.** Before answering, the caller hands the ref's current tip; when it
  differs from the tip the index was built at, the index is caught up from the *tree
  diff* between the two commits (only changed item files are read). The index records
  the tip under SQLite's write lock after reading the ref under that lock, so processes
  sharing the file move it forward only. A writer in this process hands its own change
  over (:meth:`ItemIndex.apply_own`): no blob is read back and no tree is listed.
* **Freshness, cheaply.** :meth:`ItemIndex.fresh` stats the ref file (or
  ``packed-refs``) instead of reading the ref; a stamp younger than :data:`RACY_NS` is not
  trusted (the clock may not have ticked between two writes), as git itself does. Each
  batch reads inside one SQLite read snapshot, kept open across batches (up to
  :data:`READ_HOLD`) while the stamp holds, so a steady-state read is one statement.
* **Own writes, held.** The rows of this process's latest small commits stay in memory
  (:mod:`got_integrations.langgraph._store_pending`) until a read needs them in the file;
  gets answer from them first. Several puts then cost one index transaction.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from got_core.errors import CorruptRepositoryError, GotError, StorageError
from got_core.repo import ReasoningRepo
from got_integrations.langgraph._store_doc import is_bucket, item_path, legacy_item_path, ns_from_blob
from got_integrations.langgraph._store_pending import DEFER_ROWS, PendingRows
from got_integrations.langgraph._store_query import (
    CHUNK,
    INSERT,
    ItemQueries,
    Row,
    insert_params,
    path_hash,
    prefix_bounds,
    row_of_doc,
)

__all__ = ["RACY_NS", "READ_HOLD", "ItemIndex", "Row", "index_path", "prefix_bounds", "row_of_doc"]

logger = logging.getLogger("got_integrations.langgraph.store")

SCHEMA = "got-store-index/3"
#: A ref stamp this young is not trusted: two writes may share one mtime tick.
RACY_NS = 100_000_000
#: Longest a read snapshot is kept open between calls (an open snapshot keeps SQLite from
#: recycling its write-ahead log past it).
READ_HOLD = 0.5
#: How much of the index file SQLite reads through a memory map (derived data, ours alone).
MMAP_BYTES = 256 << 20
#: Above this many changed files a sync recounts the namespaces in one pass.
_BULK = 2000

_DDL = """
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE IF NOT EXISTS items(
    ns BLOB NOT NULL, key BLOB NOT NULL, path TEXT NOT NULL, blob TEXT NOT NULL,
    created TEXT NOT NULL, updated TEXT NOT NULL, updated_us INTEGER NOT NULL,
    exp INTEGER, ttl REAL, idx TEXT, value TEXT, ph INTEGER NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS items_nk ON items(ns, key);
CREATE INDEX IF NOT EXISTS items_ph ON items(ph);
CREATE INDEX IF NOT EXISTS items_ns_exp ON items(ns, exp) WHERE exp IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_exp ON items(exp) WHERE exp IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_recent ON items(updated_us, ns, key);
CREATE INDEX IF NOT EXISTS items_ns_recent ON items(ns, updated_us, key);
CREATE TABLE IF NOT EXISTS spaces(
    ns BLOB PRIMARY KEY, n INTEGER NOT NULL, forever INTEGER NOT NULL, max_exp INTEGER) WITHOUT ROWID;
"""


def _placed(row: Row, path: str) -> bool:
    """Whether ``path`` is where the item of ``row`` may sit (its fan-out path, or its legacy one)."""
    namespace, key = ns_from_blob(row.ns), row.key.decode("utf-8", "surrogatepass")
    return path == item_path(namespace, key) or (not is_bucket(path) and path == legacy_item_path(namespace, key))


def index_path(gitdir: Path, ref: str, mode: str) -> Path:
    """Where the index of ``ref`` lives (one file per ref and per mode)."""
    digest = hashlib.sha256(ref.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return gitdir / "got" / f"store-{digest}-{mode}.sqlite3"


class ItemIndex(ItemQueries):
    """The derived index of one store ref (see the module doc).

    Args:
        repo: the repository.
        ref: the store's full ref name.
        mode: ``"values"`` (rows hold values) or ``"sealed"`` (they never do).
        row_of: builds the row of an item file from its path and blob id (reads and
            validates the blob; raises CorruptRepositoryError for damage).
        path: the SQLite file (default :func:`index_path`); in memory when the git
            directory cannot be written.
    """

    _pending: PendingRows

    def __init__(
        self,
        repo: ReasoningRepo,
        ref: str,
        mode: str,
        row_of: Callable[[str, str], Row],
        path: Path | None = None,
    ) -> None:
        self.repo = repo
        self.ref = ref
        self.mode = mode
        self.row_of = row_of
        self.path = path or index_path(repo.gitdir, ref, mode)
        # plain strings: os.stat on a Path converts it on every call, and this runs per batch
        self._loose = os.fspath(repo.gitdir / ref)
        self._packed = os.fspath(repo.gitdir / "packed-refs")
        self._stamp_seen: tuple | None = None  # the ref's stamp when the index was last found at its tip
        self._tip: str | None = None  # the tip this connection last saw in the index
        self._reading: float | None = None  # when the read snapshot now open began
        self._pending = PendingRows()  # our latest commits' rows, not yet in the file
        self.db = self._connect(self.path)

    # ------------------------------------------------------------------ the file
    def _connect(self, path: Path) -> sqlite3.Connection:
        try:
            # timeout= is SQLite's busy timeout (60 s): writers of other processes are waited for
            try:
                db = sqlite3.connect(str(path), timeout=60, isolation_level=None, check_same_thread=False)
            except sqlite3.OperationalError:  # no directory yet (the repository's first index)
                path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(str(path), timeout=60, isolation_level=None, check_same_thread=False)
            # reads through a memory map, not a read() per page: at 100k items a get is ~15% faster
            db.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
            if self._schema_ok(db):  # the usual open: one read (WAL mode persists in the file)
                db.execute("PRAGMA synchronous=OFF")
                return db
            db.execute("PRAGMA journal_mode=WAL")
        except (sqlite3.Error, OSError):
            db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA synchronous=OFF")  # derived data: rebuilt when lost
        db.execute("PRAGMA busy_timeout=60000")
        db.execute("BEGIN IMMEDIATE")  # two processes opening a fresh index must not both reset it
        try:
            if not self._schema_ok(db):
                self._reset(db)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return db

    def _schema_ok(self, db: sqlite3.Connection) -> bool:
        try:
            found = dict(db.execute("SELECT k, v FROM meta WHERE k IN ('schema', 'ref', 'mode')").fetchall())
        except sqlite3.DatabaseError:
            return False
        return found == {"schema": SCHEMA, "ref": self.ref, "mode": self.mode}

    def _reset(self, db: sqlite3.Connection) -> None:
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
            if not name.startswith("sqlite_"):
                db.execute(f'DROP TABLE IF EXISTS "{name}"')
        for statement in _DDL.split(";"):
            if statement.strip():
                db.execute(statement)
        db.executemany(
            "INSERT OR REPLACE INTO meta VALUES(?, ?)",
            [("schema", SCHEMA), ("ref", self.ref), ("mode", self.mode), ("total", "0")],
        )
        db.execute("DELETE FROM meta WHERE k='tip'")
        self._tip = None

    def close(self) -> None:
        """Write the held rows and close the SQLite connection."""
        self._flush_quietly()
        try:
            self._end_read()
            self.db.close()
        except sqlite3.Error:
            pass

    # ------------------------------------------------------------------ git's side
    def _stamp(self) -> tuple | None:
        """A cheap fingerprint of the ref's storage, or None when it cannot be trusted."""
        now = time.time_ns()
        try:
            st = os.stat(self._loose)
        except FileNotFoundError:
            st = None
        except OSError:
            return None
        if st is not None:
            # a loose ref is one hex SHA and a newline; anything else (a symbolic ref) is read
            if st.st_size not in (41, 65) or now - st.st_mtime_ns < RACY_NS:
                return None
            return ("loose", st.st_ino, st.st_mtime_ns, st.st_size)
        try:
            st = os.stat(self._packed)
        except FileNotFoundError:
            return ("none",)
        except OSError:
            return None
        if now - st.st_mtime_ns < RACY_NS:
            return None
        return ("packed", st.st_ino, st.st_mtime_ns, st.st_size)

    def fresh(self, *, held_rows: bool = False) -> str | None:
        """Bring the index to the ref's current tip and open a read snapshot of it.

        Returns the tip the snapshot holds: every read until the next call (or write)
        sees that one tip, even while other processes move the index on. When the ref's
        file is unchanged since the index was last found at its tip, the snapshot already
        open is kept (up to :data:`READ_HOLD` seconds): the index only moves when the ref
        does (syncs follow the ref, and a writer's own update comes after its ref move,
        which changes the file), so no statement is needed to know it is current.

        Args:
            held_rows: the caller reads only with :meth:`get` and :meth:`rows_at`, which
                answer from this process's held rows first: while the ref is still at the
                last commit they hold, they stay held (otherwise they are written first).

        Raises:
            CorruptRepositoryError: see :meth:`sync`.
        """
        pending = self._pending
        if pending and not held_rows:
            self._flush_quietly()
        stamp = self._stamp()
        if stamp is not None and stamp == self._stamp_seen:
            if self._reading is not None and time.monotonic() - self._reading < READ_HOLD:
                return pending.tip if pending else self._tip
            self._end_read()
            self._begin_read()
            if self._meta_tip() == self._tip:
                return pending.tip if pending else self._tip
            self._end_read()  # the file moved: the snapshot below is not the one self._tip names
        if (
            pending
            and self._reading is not None
            and time.monotonic() - self._reading < READ_HOLD
            and pending.covers(self._tip)
            and self.repo.git.ref_target(self.ref) == pending.tip
        ):
            # right after our own write: the snapshot still open holds the file at a tip our
            # held rows cover, and the ref is still at our last commit: no statement needed
            self._stamp_seen = stamp
            return pending.tip
        for _ in range(1000):
            self._end_read()
            # read after the stamp: a move in between only costs a re-read. The ref's direct
            # target first: when it is the commit the index holds, nothing needs peeling (a
            # lookup of the commit object, the larger part of reading the tip)
            target = self.repo.git.ref_target(self.ref)
            self._begin_read()
            held = self._meta_tip()
            if pending:
                if target == pending.tip and pending.covers(held):  # the file's rows plus ours: the tip
                    self._tip, self._stamp_seen = held, stamp
                    return pending.tip
                self._end_read()
                self._flush_quietly()  # another writer moved the ref: ours go in first, then catch up
                continue
            if held is not None and target == held:  # the snapshot holds the ref's tip
                self._tip, self._stamp_seen = held, stamp
                return held
            tip = self.repo.tip(self.ref)
            if held == tip:
                self._tip, self._stamp_seen = held, stamp
                return held
            self._end_read()
            self.sync(tip)
        self._end_read()  # pragma: no cover - other processes moving the ref non-stop
        raise StorageError(f"the store index {self.path} kept moving; retry")  # pragma: no cover

    def _begin_read(self) -> None:
        self.db.execute("BEGIN")
        self._reading = time.monotonic()

    def _end_read(self) -> None:
        """Close the read snapshot (before a write, or to see what others wrote)."""
        if self._reading is not None:
            self._reading = None
            if self.db.in_transaction:
                self.db.execute("COMMIT")

    def forget_stamp(self) -> None:
        """Check the ref and the index again next time (after a write of our own)."""
        self._stamp_seen = None

    # ------------------------------------------------------------------ sync
    def _meta_tip(self) -> str | None:
        row = self.db.execute("SELECT v FROM meta WHERE k='tip'").fetchone()
        return row[0] if row else None

    def sync(self, tip: str | None) -> str | None:
        """Bring the index to the ref's tip; returns the tip it now holds.

        ``tip`` is the caller's reading of the ref; when the index is not at it, the ref
        is read again under SQLite's write lock and the index caught up to that, so
        processes sharing the index only ever move it to a tip the ref held.

        Raises:
            CorruptRepositoryError: an item file that is not what the store writes (the
                index is left as it was, so every query keeps reporting it).
        """
        self._flush()
        self._tip = self._meta_tip()
        if self._tip == tip:
            return tip
        with self._write():
            stored = self._meta_tip()
            tip = self.repo.tip(self.ref)
            if stored != tip:
                self._catch_up(stored, tip)
            self._set_tip(tip)
        return tip

    def rebuild(self) -> None:
        """Drop every row and index the ref's tree again."""
        self._pending.clear()
        with self._write():
            self._reset(self.db)
            tip = self.repo.tip(self.ref)
            self._catch_up(None, tip)
            self._set_tip(tip)

    def _catch_up(self, stored: str | None, tip: str | None) -> None:
        if tip is None:
            self._clear()
            return
        try:
            changes = self.repo.changed_files(stored, tip)
        except CorruptRepositoryError:
            if stored is None:
                raise
            self._clear()  # the commit we had indexed is gone (a rewritten ref, then gc)
            stored, changes = None, self.repo.changed_files(None, tip)
        if stored is None:
            self._clear()
        upserts, deletes = [], []
        moved = self._moved_rows(changes) if stored is not None else {}
        for path, _old, new in changes:
            if not path.endswith(".json"):
                continue  # not an item file (a README someone committed, say)
            if new is None:
                deletes.append(path)
            elif (row := moved.get(new)) is not None and _placed(row, path):
                upserts.append(row._replace(path=path))  # the same file at another path: no read
            else:
                upserts.append(self.row_of(path, new))
        self._apply(upserts, deletes)

    def _moved_rows(self, changes: Sequence[tuple[str, str | None, str | None]]) -> dict[str, Row]:
        """The indexed rows of the files a diff deletes, by blob id, when it also adds files:
        a blob deleted at one path and added at another is the same item moved (its content
        names its namespace and key), as the layout move writes it."""
        gone = [p for p, _old, new in changes if new is None and p.endswith(".json")]
        if not gone or len(gone) == len(changes):
            return {}
        return {row.blob: row for row in self.rows_at(gone).values()}

    def apply_own(
        self, parent: str | None, commit: str, upserts: Sequence[Row], deleted: Sequence[Row], *, hold: bool = False
    ) -> None:
        """Record a commit this process just published on ``parent``: its new rows and the
        rows it deleted are known.

        With ``hold``, a small commit's rows stay in memory (``_store_pending``) until a
        read needs them in the file; otherwise they are written now, with any held before.
        When the index is not at ``parent`` (another writer came between), it is caught up
        from git instead.
        """
        pending = self._pending
        if not pending.extends(parent):  # another writer came between: ours first
            self._flush()
        pending.add(parent, commit, upserts, deleted)
        if not hold or len(upserts) + len(deleted) >= DEFER_ROWS or pending.full():
            self._flush()

    def _flush(self) -> None:
        """Write the held rows into the file (one transaction)."""
        if self._pending:
            self._record(*self._pending.take())

    def _flush_quietly(self) -> None:
        """:meth:`_flush`, where a failure only means the next sync catches up from git."""
        try:
            self._flush()
        except (GotError, sqlite3.Error) as exc:
            logger.warning("GitStore index did not record this process's writes (%s); it catches up from git", exc)

    def _record(self, parent: str | None, commit: str, upserts: Sequence[Row], deletes: Sequence[str]) -> None:
        """Bring the index from ``parent`` to ``commit``, whose changed rows are given."""
        with self._write():
            stored = self._meta_tip()
            if stored == commit:
                return
            if stored == parent:
                self._apply(upserts, deletes)
            else:
                self._catch_up(stored, commit)
            self._set_tip(commit)

    def _set_tip(self, tip: str | None) -> None:
        if tip is None:
            self.db.execute("DELETE FROM meta WHERE k='tip'")
        else:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES('tip', ?)", (tip,))
        self._tip = tip

    @contextmanager
    def _write(self) -> Iterator[None]:
        """A write transaction (serialises index writers across processes)."""
        self._end_read()
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            db.execute("ROLLBACK")
            self._tip, self._stamp_seen = None, None
            raise
        try:
            db.execute("COMMIT")
        except sqlite3.Error as err:
            db.execute("ROLLBACK")
            self._tip, self._stamp_seen = None, None
            raise StorageError(f"cannot update the store index {self.path}: {err}") from None

    def _clear(self) -> None:
        self.db.execute("DELETE FROM items")
        self.db.execute("DELETE FROM spaces")
        self.db.execute("UPDATE meta SET v='0' WHERE k='total'")

    def _apply(self, upserts: Sequence[Row], deletes: Sequence[str]) -> None:
        db = self.db
        paths = [r.path for r in upserts] + list(deletes)
        hashes = [path_hash(p) for p in paths]
        wanted = set(paths)
        old: dict[str, bytes] = {}
        for i in range(0, len(paths), CHUNK):
            part = hashes[i : i + CHUNK]
            marks = ",".join("?" * len(part))
            for path, ns in db.execute(f"SELECT path, ns FROM items WHERE ph IN ({marks})", part):
                if path in wanted:  # not another path of the same hash
                    old[path] = ns
        delta: dict[bytes, int] = {}
        for path in deletes:
            if path in old:
                delta[old[path]] = delta.get(old[path], 0) - 1
        for row in upserts:
            if row.path in old:
                delta.setdefault(old[row.path], 0)
            else:
                delta[row.ns] = delta.get(row.ns, 0) + 1
        at = dict(zip(paths, hashes))
        db.executemany("DELETE FROM items WHERE ph=? AND path=?", [(at[p], p) for p in deletes if p in old])
        db.executemany(INSERT, insert_params(upserts))
        self._recount(delta, set(delta) | {r.ns for r in upserts})

    def apply_sweep(
        self, parent: str | None, commit: str, now_us: int, counts: Mapping[bytes, int] | None = None
    ) -> None:
        """Record a TTL sweep this process just published on ``parent``: it deleted exactly
        the items :meth:`expired` listed at ``now_us`` (the index at ``parent`` is the one
        that listed them), so one statement deletes their rows. ``counts`` (namespace -> how
        many of its items that listing held) spares counting them again.
        """
        self._flush()
        with self._write():
            stored = self._meta_tip()
            if stored == commit:
                return
            if stored == parent:
                db = self.db
                where = "FROM items WHERE exp IS NOT NULL AND exp<=?"
                if counts is None:
                    counts = dict(db.execute(f"SELECT ns, count(*) {where} GROUP BY ns", (now_us,)).fetchall())
                delta = {ns: -n for ns, n in counts.items()}
                db.execute(f"DELETE {where}", (now_us,))
                self._recount(delta, set(delta))
            else:
                self._catch_up(stored, commit)
            self._set_tip(commit)

    def _recount(self, delta: dict[bytes, int], touched: set[bytes]) -> None:
        """Move the item total and the ``spaces`` rows of ``touched`` by ``delta`` (items per namespace)."""
        db = self.db
        db.execute("UPDATE meta SET v=CAST(v AS INTEGER)+? WHERE k='total'", (sum(delta.values()),))
        if len(touched) > _BULK:
            db.execute("DELETE FROM spaces")
            db.execute("INSERT INTO spaces SELECT ns, count(*), max(exp IS NULL), max(exp) FROM items GROUP BY ns")
            return
        # one statement per chunk of namespaces (a bulk batch touches a thousand): each row's
        # count moves by its delta; its expiry summary reads only the namespace's items that
        # expire (the partial index items_ns_exp, which items without a TTL never enter, so
        # they cost no index write): an item never expires when the count exceeds theirs
        pairs = [(ns, delta.get(ns, 0)) for ns in touched]
        for i in range(0, len(pairs), CHUNK):
            part = pairs[i : i + CHUNK]
            db.execute(
                f"WITH d(ns, delta) AS (VALUES {','.join(['(?,?)'] * len(part))}), "
                "c(ns, n) AS (SELECT d.ns, coalesce((SELECT n FROM spaces s WHERE s.ns=d.ns), 0) + d.delta FROM d) "
                "INSERT OR REPLACE INTO spaces SELECT c.ns, c.n, "
                "c.n > (SELECT count(*) FROM items i WHERE i.ns=c.ns AND i.exp IS NOT NULL), "
                "(SELECT max(exp) FROM items i WHERE i.ns=c.ns AND i.exp IS NOT NULL) FROM c",
                [v for pair in part for v in pair],
            )
        shrunk = [(ns,) for ns, d in pairs if d < 0]
        if shrunk:
            db.executemany("DELETE FROM spaces WHERE ns=? AND n <= 0", shrunk)
