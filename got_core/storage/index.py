"""A derived SQLite index over the repository, so history search is not O(history).

Git stays the source of truth (ARCHITECTURE §5, invariant 2): the index holds nothing
that cannot be rebuilt from the repository, and every query first *syncs* it, at most
once, and cheaply:

* :mod:`got_core.storage.refscan` says which refs may have moved since the last look,
  from the file system's stamps of ``packed-refs``, of the directories under ``refs/``
  and of the loose ref files in the directories that changed (the "racy git" rule
  included). When nothing moved, a sync is one SQLite read and one ``lstat`` per ref
  directory. The observation is stored in the index, so a new process starts from it;
* on Linux, inotify watches on the ref directories (:mod:`got_core.storage.refwatch`)
  say which entries of a changed directory changed, so it is not listed again;
* this process's own ref moves are reported by the ref-transaction primitive
  (:meth:`note_moves`) and are candidates whatever the stamps say; the commits and note
  blobs it wrote are handed over too (:meth:`note_objects`), so applying our own write
  reads nothing from git;
* after ``packed-refs`` changed, its lines are compared with the ones read last time
  (kept in memory); a process that has none lists every ref once;
* only the candidates' values are read and compared with the values the index last
  applied; each difference is applied on its own: a branch walks only the commits
  between its old and new tip (a rewound or deleted ref drops its memberships), a tag
  updates its one row, the notes ref is caught up by a tree diff between its old and
  new notes commit;
* a process that writes packs loose refs (as ``got gc`` does) once a directory it
  listed holds more than :func:`_loose_limit` of them, so the directories a write
  touches, which every read after it lists again, stay short.

Indexed per commit: the message (FTS5 words for keyword search; for ``--grep``
substrings, FTS5 over every suffix of its ASCII letter-and-digit runs, and trigrams for a
literal with no long run, both without positions, candidates confirmed exactly), trailer
fields, its tag names (also in ``tags``), which refs reach it, and the blobs it changed
(trigram-indexed text, for ``-S`` pickaxe candidates, confirmed exactly). The index file
lives inside the git directory (``got/index.sqlite3``); delete it at any time, or call
:meth:`DerivedIndex.rebuild`. The queries are in :mod:`got_core.storage.index_query`.

Anything a valid git tree or history can hold must not break the index, since a
fetched ref may come from anyone: refs whose names are not UTF-8 are not indexed,
file names that are not UTF-8 are stored with ``\\xNN`` escapes, gitlinks are
skipped, blobs over :data:`MAX_INDEXED_BLOB` are not read for text, a commit whose
trees cannot be read is indexed by its message alone, and a ref whose history
cannot be walked is indexed as far as it can be (``got fsck`` reports the damage).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TypeVar

from got_core.errors import GotError
from got_core.storage.git import READ_ERRORS, CommitData, GitRepo
from got_core.storage.index_query import MAX_FTS_PHRASE, CommitRow, IndexQueries, RankedRow, register_functions
from got_core.storage.index_write import MAX_INDEXED_BLOB, Changes, IndexWriter
from got_core.storage.refscan import (
    PACKED,
    Scan,
    Stamp,
    fs_clock,
    packed_names,
    quick_dirty,
    read_packed,
    read_packed_digest,
    scan,
    stamp_of,
)
from got_core.storage.refwatch import RefWatch, open_watch

__all__ = ["MAX_FTS_PHRASE", "MAX_INDEXED_BLOB", "CommitRow", "DerivedIndex", "RankedRow"]

SCHEMA_VERSION = "10"

_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS refs(name TEXT PRIMARY KEY, oid TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS commits(
    rowid INTEGER PRIMARY KEY, oid TEXT UNIQUE NOT NULL, time INTEGER, message TEXT,
    parents TEXT, node_id TEXT, problem_id TEXT, outcome TEXT, score REAL, tags TEXT);
CREATE INDEX IF NOT EXISTS commits_node ON commits(node_id);
CREATE INDEX IF NOT EXISTS commits_time ON commits(time);
CREATE TABLE IF NOT EXISTS member(ref TEXT NOT NULL, crow INTEGER NOT NULL, PRIMARY KEY(ref, crow)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS member_crow ON member(crow);
CREATE TABLE IF NOT EXISTS changes(crow INTEGER NOT NULL, path TEXT, old TEXT, new TEXT);
CREATE INDEX IF NOT EXISTS changes_crow ON changes(crow);
CREATE INDEX IF NOT EXISTS changes_old ON changes(old);
CREATE INDEX IF NOT EXISTS changes_new ON changes(new);
CREATE TABLE IF NOT EXISTS blobs(rowid INTEGER PRIMARY KEY, oid TEXT UNIQUE NOT NULL, text TEXT);
CREATE TABLE IF NOT EXISTS unblobbed(crow INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS untri(crow INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS tags(name TEXT PRIMARY KEY, target TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS tags_target_name ON tags(target, name);
CREATE TABLE IF NOT EXISTS notes(ref TEXT NOT NULL, target TEXT NOT NULL, body TEXT, score REAL,
    PRIMARY KEY(ref, target)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fs_seen(path TEXT PRIMARY KEY, ino INTEGER, mtime INTEGER, size INTEGER,
    racy INTEGER) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fs_loose(dir TEXT NOT NULL, name TEXT NOT NULL, ino INTEGER, mtime INTEGER,
    size INTEGER, racy INTEGER, PRIMARY KEY(dir, name)) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS msg_words USING fts5(message, content='', columnsize=0, detail=none,
    tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS msg_vocab USING fts5vocab(msg_words, 'row');
CREATE VIRTUAL TABLE IF NOT EXISTS msg_sfx USING fts5(suffixes, content='', columnsize=0, detail=none,
    tokenize='ascii');
CREATE VIRTUAL TABLE IF NOT EXISTS msg_tri USING fts5(message, content='', columnsize=0, detail=none,
    tokenize='trigram case_sensitive 1');
CREATE VIRTUAL TABLE IF NOT EXISTS blob_tri USING fts5(text, content='', columnsize=0,
    tokenize='trigram case_sensitive 1');
"""

# One read says whether the index may be behind: the observation's and the data's
# generation tokens (random, so a rebuilt index never repeats one), and whether our
# notes ref's scores were indexed at its current value.
_STATE = (
    "SELECT (SELECT value FROM meta WHERE key='obs_gen'), (SELECT value FROM meta WHERE key='data_gen'), "
    "(SELECT value FROM meta WHERE key=?), (SELECT oid FROM refs WHERE name=?)"
)


def _indexable_ref(name: str) -> bool:
    """Ref names that are not text (bytes that are not UTF-8) are left out of the index."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: What a write's own sync may meet (a held or damaged index, an unreadable object): the
#: write is published, so the moves stay pending and the next query syncs (and raises).
_AFTER_WRITE_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error, OSError, GotError, *READ_ERRORS)

#: Objects of our own writes kept for the next syncs (see DerivedIndex.note_objects).
_KNOWN_LIMIT = 512


def _remember(cache: dict[str, _T], key: str, value: _T) -> None:
    """Keep ``value`` under ``key``, dropping the oldest entry once the cache is full."""
    cache.pop(key, None)
    if len(cache) >= _KNOWN_LIMIT:
        del cache[next(iter(cache))]
    cache[key] = value


def _loose_limit(total_refs: int) -> int:
    """Loose refs one directory may hold before a writing process packs refs.

    Every read after a write lists the directories it touched (ARCHITECTURE §3), at a
    cost per loose ref; packing costs per ref of the repository. Packing when a
    directory holds about the square root of all refs balances the two.
    """
    return max(64, min(2048, int(total_refs**0.5)))


def _current(db: sqlite3.Connection) -> bool:
    """Whether the index file is of this schema version with what :func:`_upgrade` adds."""
    try:
        version = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        names = db.execute(
            "SELECT name FROM sqlite_master WHERE type='index' AND name IN ('tags_target_name', 'tags_target')"
        ).fetchall()
    except sqlite3.DatabaseError:
        return False
    return version is not None and version[0] == SCHEMA_VERSION and names == [("tags_target_name",)]


def _upgrade(db: sqlite3.Connection) -> None:
    """Bring an index of this schema version written by an earlier release up to date
    (indexes only: what needs no re-reading of git; no-ops once done)."""
    # tags looked up by commit answer from the index alone, in name order (tags_for)
    db.execute("CREATE INDEX IF NOT EXISTS tags_target_name ON tags(target, name)")
    db.execute("DROP INDEX IF EXISTS tags_target")


class DerivedIndex(IndexWriter, IndexQueries):
    """SQLite index kept consistent with a :class:`GitRepo` (see module docstring).

    Args:
        git: the repository.
        notes_ref: the notes ref whose scores are indexed.
        path: database file; default ``<gitdir>/got/index.sqlite3`` (in memory when
            the git directory is read-only).
    """

    def __init__(self, git: GitRepo, notes_ref: str, path: Path | None = None) -> None:
        self.git = git
        self.notes_ref = notes_ref
        self._lock = threading.RLock()
        if path is None:
            path = git.gitdir / "got" / "index.sqlite3"
        self.path = path
        self.db = self._connect(path)
        # the refs observation as stored in the index at generation _obs_gen (refscan)
        self._seen: dict[str, Stamp] = {}
        self._loose: dict[str, dict[str, Stamp]] = {}
        self._obs_gen: str | None = None
        # per-sync memo of the queries (commit count, time ranges by scope), true at _data_gen
        self._count: int | None = None
        self._times: dict[tuple[str, ...] | None, tuple[int, int]] = {}
        self._data_gen: str | None = None
        # refs this process moved since its last sync (reported by the write path)
        self._pending: set[str] = set()
        self._pending_lock = threading.Lock()
        # notes commits this process wrote: commit -> (parent, {path: blob or None})
        self._notes_hints: dict[str, tuple[str | None, dict[str, str | None]]] = {}
        # commits and note blobs this process wrote, by id (content-addressed, so true for
        # good): a sync after our own write applies it without reading git (index_write)
        self._known_commits: dict[str, CommitData] = {}
        self._known_blobs: dict[str, bytes] = {}
        # the lines of packed-refs the index reflects, and the stamp they were read at
        self._packed: tuple[Stamp, frozenset[bytes]] | None = None
        self._clock_probe = self.path.parent / "index.clock"
        # inotify watches on the ref directories, so a sync after a write lists none (refwatch);
        # opened at the first sync after a write of this process (a reader never pays for it;
        # GOT_REF_WATCH=always opens it at the first sync, =0 never)
        self._watch: RefWatch | None = None
        self._watch_tried = False
        # a query ran since the last sync our own write made (see sync_after_write)
        self._queried = False

    def _connect(self, path: Path) -> sqlite3.Connection:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(path), timeout=60, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
        except (sqlite3.Error, OSError):
            db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA synchronous=OFF")  # derived data: rebuilt when lost
        db.execute("PRAGMA busy_timeout=60000")
        # reads through a memory map, and a larger page cache: a sync after a write touches
        # a few random B-tree pages of every table, which otherwise cost a read() each
        db.execute("PRAGMA mmap_size=1073741824")
        db.execute("PRAGMA cache_size=-32768")
        register_functions(db)
        if _current(db):  # the usual open: one read, no write lock to wait for
            return db
        db.execute("BEGIN IMMEDIATE")  # two processes opening a fresh index must not both reset it
        try:
            try:
                version = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            except sqlite3.DatabaseError:
                version = None
            if version is None or version[0] != SCHEMA_VERSION:
                self._reset(db)
            else:
                _upgrade(db)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return db

    @staticmethod
    def _reset(db: sqlite3.Connection) -> None:
        tables = [
            r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND sql IS NOT NULL").fetchall()
        ]
        for name in tables:
            if not name.startswith(("msg_words_", "msg_sfx_", "msg_tri_", "blob_tri_", "sqlite_", "msg_vocab")):
                db.execute(f'DROP TABLE IF EXISTS "{name}"')
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute("INSERT OR REPLACE INTO meta VALUES('schema', ?)", (SCHEMA_VERSION,))

    def rebuild(self) -> None:
        """Drop everything and re-index from the repository."""
        with self._lock:
            self.db.execute("BEGIN IMMEDIATE")
            self._reset(self.db)
            self.db.execute("COMMIT")
            self._obs_gen = self._data_gen = None
            self.sync()
            self.blobs_ready()

    # ------------------------------------------------------------------ sync
    def note_moves(self, moves: Iterable[tuple[str, str | None, str | None]]) -> None:
        """Hear of ref moves this process made (``(ref, old, new)``): the next sync reads those refs.

        Called by the write path after each published ref transaction; it never waits
        for a sync in progress.
        """
        with self._pending_lock:
            self._pending.update(name for name, _old, _new in moves)

    def note_notes_commit(self, commit: str, parent: str | None, changes: Mapping[str, str | None]) -> None:
        """Hear that ``commit`` (on our notes ref) is ``parent``'s notes tree with ``changes``.

        Commits are named by their content, so this is true for good; the next sync
        applies the changes of a run of such commits without diffing notes trees.
        """
        with self._pending_lock:
            if len(self._notes_hints) >= 256:
                self._notes_hints.clear()
            self._notes_hints[commit] = (parent, dict(changes))

    def note_objects(self, commits: Iterable[CommitData] = (), blobs: Mapping[str, bytes] | None = None) -> None:
        """Hear of objects this process wrote (commits, and blobs by id -> content).

        An object's id names its content, so what is heard stays true; the sync that
        applies a ref moved to one of these commits (or a note held in one of these
        blobs) reads nothing from git for it. At most :data:`_KNOWN_LIMIT` of each are
        kept (the oldest go first); an object not kept is read from git as before.
        """
        with self._pending_lock:
            for c in commits:
                _remember(self._known_commits, c.oid, c)
            for oid, data in (blobs or {}).items():
                if len(data) <= MAX_INDEXED_BLOB:
                    _remember(self._known_blobs, oid, bytes(data))

    def sync(self) -> None:
        """Bring the index up to date with the repository (cheap when nothing moved)."""
        with self._lock:
            self._queried = True
            with self._pending_lock:
                pending, self._pending = self._pending, set()
            try:
                if pending or self._behind():
                    self._sync(pending)
            except BaseException:
                with self._pending_lock:
                    self._pending |= pending
                raise

    def sync_after_write(self) -> bool:
        """Apply this process's latest ref moves now, in the write, not in the next query.

        An agent writes, then reads: the sync the read would pay (one SQLite transaction
        applying the commit, note and tag the write handed over, and the look at the
        directories it touched) is paid by the write instead, as a database updates its
        own full-text index in the writing transaction; the query after it finds nothing
        to do (its inotify watch is quiet). Only after a query of this index (a process
        that writes many times between queries syncs once, at the query), and never
        waiting: when another thread or process holds the index, or the sync fails, the
        moves stay pending and the next query applies them (and raises what it raises).

        Returns:
            Whether the moves were applied.
        """
        if not self._queried or not self._lock.acquire(blocking=False):
            return False
        try:
            self._queried = False
            with self._pending_lock:
                pending, self._pending = self._pending, set()
            if not pending:
                return False
            try:
                self._sync(pending, wait=False)
            except _AFTER_WRITE_ERRORS:
                # the write is published; the query that follows syncs (and reports a real fault)
                with self._pending_lock:
                    self._pending |= pending
                return False
            return True
        finally:
            self._lock.release()

    def _state(self) -> tuple[str, str, bool]:
        """(observation token, data token, whether our notes ref's scores are behind)."""
        obs, data, noted, tip = self.db.execute(_STATE, ("notes:" + self.notes_ref, self.notes_ref)).fetchone()
        return obs or "", data or "", (noted or "") != (tip or "")

    def _adopt(self, obs: str, data: str) -> None:
        """Drop cached observation and memos that another process's sync made stale."""
        if obs != self._obs_gen:
            self._seen = {
                p: Stamp(i, m, s, bool(r)) for p, i, m, s, r in self.db.execute("SELECT * FROM fs_seen").fetchall()
            }
            self._loose = {}
            self._obs_gen = obs
        if data != self._data_gen:
            self._count = None
            self._times.clear()
            self._data_gen = data

    def _behind(self) -> bool:
        obs, data, notes_behind = self._state()
        self._adopt(obs, data)
        return notes_behind or quick_dirty(self.git.gitdir, self._seen, self._watch)

    def _loose_of(self, rel: str) -> dict[str, Stamp]:
        files = self._loose.get(rel)
        if files is None:
            rows = self.db.execute("SELECT name, ino, mtime, size, racy FROM fs_loose WHERE dir=?", (rel,)).fetchall()
            files = self._loose[rel] = {n: Stamp(i, m, s, bool(r)) for n, i, m, s, r in rows}
        return files

    def _sync(self, pending: set[str], wait: bool = True) -> None:
        db = self.db
        if wait:
            db.execute("BEGIN IMMEDIATE")  # serialises syncs across processes; the look happens under it
        else:  # a write's own sync does not wait for another process's
            db.execute("PRAGMA busy_timeout=0")
            try:
                db.execute("BEGIN IMMEDIATE")
            finally:
                db.execute("PRAGMA busy_timeout=60000")
        try:
            obs, data, notes_behind = self._state()
            self._adopt(obs, data)
            if not self._watch_tried and (pending or os.environ.get("GOT_REF_WATCH") == "always"):
                self._watch_tried = True
                self._watch = open_watch(self.git.gitdir)
            clock = fs_clock(self._clock_probe)
            look = scan(self.git.gitdir, self._seen, self._loose_of, pending, clock, self._watch)
            delta, packed = self._delta(look)
            if packed is not None:  # the bytes of packed-refs this sync made the index reflect
                db.execute("INSERT OR REPLACE INTO meta VALUES('packed_digest', ?)", (packed[2],))
            changes = Changes()
            self._apply(delta, changes)
            if notes_behind or self.notes_ref in delta:
                self._sync_notes(changes)
            if changes.any:
                self._tri_batch()
            self._store(look)
            new_obs, new_data = os.urandom(8).hex(), os.urandom(8).hex()
            gens = [("obs_gen", new_obs), ("data_gen", new_data)] if changes.any else [("obs_gen", new_obs)]
            db.executemany("INSERT OR REPLACE INTO meta VALUES(?, ?)", gens)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            self._obs_gen = self._data_gen = None  # reload both from the database next time
            self._loose = {}
            if self._watch is not None:
                self._watch.reset()  # the events this look read are not in the index
            raise
        self._adopt_look(look, new_obs)
        if packed is not None:
            self._packed = (packed[0], packed[1])
        if changes.any:
            self._advance_memo(changes, new_data)
        if pending:
            self._pack_if_long(look, wait)

    def _delta(
        self, look: Scan
    ) -> tuple[dict[str, tuple[str | None, str | None]], tuple[Stamp, frozenset[bytes], str] | None]:
        """``{ref: (value indexed, value now)}`` for every ref whose value differs, and the
        packed-refs stamp, lines and digest read on the way (None when it did not change).

        A changed ``packed-refs`` is compared line by line with the lines this process read
        last; a process without them (a new one) compares the file's digest with the one
        stored by the sync that last read it: the same bytes hold no change the index
        lacks. Only when both fail is every ref listed."""
        db = self.db
        packed = None
        candidates = set(look.candidates)
        listed = False
        if look.full:
            # read after the scan's stamp: a change meanwhile shows next time
            lines, digest = read_packed_digest(self.git.gitdir)
            digest = digest or "absent"
            packed = (look.dirs[PACKED], lines, digest)
            before = self._seen.get(PACKED)
            known = self._packed
            if before is not None and not before.racy and known is not None and known[0].same(before):
                candidates |= packed_names(lines.symmetric_difference(known[1]))
            else:
                stored = db.execute("SELECT value FROM meta WHERE key='packed_digest'").fetchone()
                listed = stored is None or stored[0] != digest
        if listed:
            now: dict[str, str | None] = {n: o for n, o in self.git.list_refs("refs/").items() if _indexable_ref(n)}
            was = dict(db.execute("SELECT name, oid FROM refs").fetchall())
        else:
            names = sorted(n for n in candidates if _indexable_ref(n))
            now = dict(self.git.direct_targets(names))
            was = {}
            for i in range(0, len(names), 500):
                chunk = names[i : i + 500]
                marks = ",".join("?" * len(chunk))
                was.update(db.execute(f"SELECT name, oid FROM refs WHERE name IN ({marks})", chunk).fetchall())
        delta = {n: (was.get(n), now.get(n)) for n in was.keys() | now.keys() if was.get(n) != now.get(n)}
        return delta, packed

    def _pack_if_long(self, look: Scan, wait: bool = True) -> None:
        """Pack loose refs when a directory this sync listed has grown long (see :func:`_loose_limit`)."""
        packed = self._packed
        total = len(packed[1]) if packed is not None else 0
        longest = max((len(files) for files in look.files.values() if files), default=0)
        if longest <= _loose_limit(total + longest):
            return
        here = look.dirs.get(PACKED)
        if here is not None and not here.racy and (packed is None or not packed[0].same(here)):
            # the index reflects packed-refs as stamped `here`: its lines, read now if unchanged,
            # let the sync after the packing compare lines instead of listing every ref
            lines = read_packed(self.git.gitdir)
            if stamp_of(self.git.gitdir / PACKED).same(here):
                self._packed = (here, lines)
        self.git.compress_refs()
        # take in the packing now (a line diff of packed-refs), so the stored digest is of the
        # packed file: a process that starts after this one compares digests, not every ref
        self._sync(set(), wait)

    def _store(self, look: Scan) -> None:
        """Write the new observation (only what differs from the stored one)."""
        db = self.db
        gone_dirs = [(rel,) for rel in self._seen.keys() - look.dirs.keys()]
        if gone_dirs:
            db.executemany("DELETE FROM fs_seen WHERE path=?", gone_dirs)
        fresh_dirs = [(rel, *stamp) for rel, stamp in look.dirs.items() if self._seen.get(rel) != stamp]
        if fresh_dirs:
            db.executemany("INSERT OR REPLACE INTO fs_seen VALUES(?,?,?,?,?)", fresh_dirs)
        for rel, files in look.files.items():
            if files is None:
                db.execute("DELETE FROM fs_loose WHERE dir=?", (rel,))
                continue
            old = self._loose_of(rel) if rel in self._seen else {}
            gone = [(rel, n) for n in old.keys() - files.keys()]
            if gone:
                db.executemany("DELETE FROM fs_loose WHERE dir=? AND name=?", gone)
            fresh = [(rel, n, *s) for n, s in files.items() if old.get(n) != s]
            if fresh:
                db.executemany("INSERT OR REPLACE INTO fs_loose VALUES(?,?,?,?,?,?)", fresh)

    def _adopt_look(self, look: Scan, gen: str) -> None:
        self._seen = dict(look.dirs)
        for rel, files in look.files.items():
            if files is None:
                self._loose.pop(rel, None)
            else:
                self._loose[rel] = files
        self._obs_gen = gen

    def _advance_memo(self, changes: Changes, gen: str) -> None:
        """Bring the memoised commit count and time ranges along with what this sync added.

        The memo was true at the data this sync started from (``_adopt`` dropped it
        otherwise), so adding this sync's changes keeps it true.
        """
        if self._count is not None:
            self._count += len(changes.commits)
        for key in list(self._times):
            times = changes.commits if key is None else [t for r in key for t in changes.members.get(r, ())]
            if (key is not None and changes.shrunk.intersection(key)) or (times and self._times[key] == (0, 0)):
                del self._times[key]  # lost commits, or was empty: recomputed when next asked
            elif times:
                lo, hi = self._times[key]
                self._times[key] = (min(lo, *times), max(hi, *times))
        self._data_gen = gen

    def close(self) -> None:
        """Fold the write-ahead log back into the database and close the handle."""
        with self._lock:
            try:
                # not waiting for another process's transaction (the busy timeout is 60 s):
                # the log is folded by the last one out
                self.db.execute("PRAGMA busy_timeout=0")
                self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass  # another process is reading; the log is folded by the last one out
            self.db.close()
            if self._watch is not None:
                self._watch.close()
