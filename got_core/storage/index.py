"""A derived SQLite index over the repository, so history search is not O(history).

Git stays the source of truth (ARCHITECTURE §5, invariant 2): the index holds nothing
that cannot be rebuilt from the repository, and every query first *syncs* it, at most
once, and cheaply:

* :mod:`got_core.storage.refscan` says which refs may have moved since the last look,
  from the file system's stamps of ``packed-refs``, of the directories under ``refs/``
  and of the loose ref files in the directories that changed (the "racy git" rule
  included). When nothing moved, a sync is one SQLite read and one ``lstat`` per ref
  directory. The observation is stored in the index, so a new process starts from it;
* this process's own ref moves are reported by the ref-transaction primitive
  (:meth:`note_moves`) and are candidates whatever the stamps say;
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

Indexed per commit: the message (FTS5 words for keyword search, FTS5 trigrams for
``--grep`` substrings), trailer fields, which refs reach it, and the blobs it changed
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

import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from got_core.errors import StorageError
from got_core.storage.git import READ_ERRORS, CommitData, GitRepo
from got_core.storage.index_query import MAX_FTS_PHRASE, CommitRow, IndexQueries, RankedRow, register_functions
from got_core.storage.refscan import (
    PACKED,
    Scan,
    Stamp,
    fs_clock,
    packed_names,
    quick_dirty,
    read_packed,
    scan,
    stamp_of,
)
from got_core.types import parse_trailers, trailer_score

__all__ = ["MAX_FTS_PHRASE", "MAX_INDEXED_BLOB", "CommitRow", "DerivedIndex", "RankedRow"]

MAX_INDEXED_BLOB = 1 << 20
SCHEMA_VERSION = "8"
#: commits whose messages wait outside the trigram index before one batch adds them
TRI_BATCH = 64

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS refs(name TEXT PRIMARY KEY, oid TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS commits(
    rowid INTEGER PRIMARY KEY, oid TEXT UNIQUE NOT NULL, time INTEGER, message TEXT,
    parents TEXT, node_id TEXT, problem_id TEXT, outcome TEXT, score REAL);
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
CREATE INDEX IF NOT EXISTS tags_target ON tags(target);
CREATE TABLE IF NOT EXISTS notes(ref TEXT NOT NULL, target TEXT NOT NULL, body TEXT, score REAL,
    PRIMARY KEY(ref, target)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fs_seen(path TEXT PRIMARY KEY, ino INTEGER, mtime INTEGER, size INTEGER,
    racy INTEGER) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fs_loose(dir TEXT NOT NULL, name TEXT NOT NULL, ino INTEGER, mtime INTEGER,
    size INTEGER, racy INTEGER, PRIMARY KEY(dir, name)) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS msg_words USING fts5(message, content='', columnsize=0, detail=none,
    tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS msg_vocab USING fts5vocab(msg_words, 'row');
CREATE VIRTUAL TABLE IF NOT EXISTS msg_tri USING fts5(message, content='', columnsize=0,
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
# What reading a damaged or partial history raises (missing objects, unparsable trees).
_BROKEN = READ_ERRORS
_HEX_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_UNINDEXED = ("refs/tags/", "refs/notes/")  # refs that are not branches: no membership rows


def _indexable_ref(name: str) -> bool:
    """Ref names that are not text (bytes that are not UTF-8) are left out of the index."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _loose_limit(total_refs: int) -> int:
    """Loose refs one directory may hold before a writing process packs refs.

    Every read after a write lists the directories it touched (ARCHITECTURE §3), at a
    cost per loose ref; packing costs per ref of the repository. Packing when a
    directory holds about the square root of all refs balances the two.
    """
    return max(64, min(2048, int(total_refs**0.5)))


def _trailer_fields(message: str) -> tuple[str | None, str | None, str | None, float | None]:
    t = parse_trailers(message)
    return t.get("Node"), t.get("Problem"), t.get("Outcome"), trailer_score(t)


class _Changes:
    """What one sync changed, so the per-sync memos can be brought along instead of recomputed."""

    def __init__(self) -> None:
        self.commits: list[int] = []  # times of commits added to the index
        self.members: dict[str, list[int]] = {}  # ref -> times of commits it now reaches
        self.shrunk: set[str] = set()  # refs that lost memberships
        self.any = False


class DerivedIndex(IndexQueries):
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
        # the lines of packed-refs the index reflects, and the stamp they were read at
        self._packed: tuple[Stamp, frozenset[bytes]] | None = None
        self._clock_probe = self.path.parent / "index.clock"

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
        db.execute("BEGIN IMMEDIATE")  # two processes opening a fresh index must not both reset it
        try:
            try:
                version = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            except sqlite3.DatabaseError:
                version = None
            if version is None or version[0] != SCHEMA_VERSION:
                self._reset(db)
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
            if not name.startswith(("msg_words_", "msg_tri_", "blob_tri_", "sqlite_", "msg_vocab")):
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

    def _hinted_notes(self, prev: str | None, tip: str) -> list[tuple[str, str | None, str | None]] | None:
        """The note changes from ``prev`` to ``tip`` if every commit between was heard of, else None."""
        chain: list[dict[str, str | None]] = []
        at: str | None = tip
        with self._pending_lock:
            while at != prev and at is not None and len(chain) < 64:
                hint = self._notes_hints.get(at)
                if hint is None:
                    return None
                chain.append(hint[1])
                at = hint[0]
        if at != prev:
            return None
        merged: dict[str, str | None] = {}
        for changes in reversed(chain):
            merged.update(changes)
        return [(path, None, blob) for path, blob in merged.items()]

    def sync(self) -> None:
        """Bring the index up to date with the repository (cheap when nothing moved)."""
        with self._lock:
            with self._pending_lock:
                pending, self._pending = self._pending, set()
            try:
                if pending or self._behind():
                    self._sync(pending)
            except BaseException:
                with self._pending_lock:
                    self._pending |= pending
                raise

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
        return notes_behind or quick_dirty(self.git.gitdir, self._seen)

    def _loose_of(self, rel: str) -> dict[str, Stamp]:
        files = self._loose.get(rel)
        if files is None:
            rows = self.db.execute("SELECT name, ino, mtime, size, racy FROM fs_loose WHERE dir=?", (rel,)).fetchall()
            files = self._loose[rel] = {n: Stamp(i, m, s, bool(r)) for n, i, m, s, r in rows}
        return files

    def _sync(self, pending: set[str]) -> None:
        db = self.db
        db.execute("BEGIN IMMEDIATE")  # serialises syncs across processes; the look happens under it
        try:
            obs, data, _notes_behind = self._state()
            self._adopt(obs, data)
            clock = fs_clock(self._clock_probe)
            look = scan(self.git.gitdir, self._seen, self._loose_of, pending, clock)
            delta, packed = self._delta(look)
            changes = _Changes()
            self._apply(delta, changes)
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
            raise
        self._adopt_look(look, new_obs)
        if packed is not None:
            self._packed = packed
        if changes.any:
            self._advance_memo(changes, new_data)
        if pending:
            self._pack_if_long(look)

    def _delta(
        self, look: Scan
    ) -> tuple[dict[str, tuple[str | None, str | None]], tuple[Stamp, frozenset[bytes]] | None]:
        """``{ref: (value indexed, value now)}`` for every ref whose value differs, and the
        packed-refs lines read on the way (None when it did not change)."""
        db = self.db
        packed = None
        candidates = set(look.candidates)
        listed = False
        if look.full:
            lines = read_packed(self.git.gitdir)  # after the scan's stamp: a change meanwhile shows next time
            packed = (look.dirs[PACKED], lines)
            before = self._seen.get(PACKED)
            known = self._packed
            if before is not None and not before.racy and known is not None and known[0].same(before):
                candidates |= packed_names(lines.symmetric_difference(known[1]))
            else:
                listed = True
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

    def _pack_if_long(self, look: Scan) -> None:
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

    def _advance_memo(self, changes: _Changes, gen: str) -> None:
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

    # ------------------------------------------------------------------ applying a delta
    def _apply(self, delta: Mapping[str, tuple[str | None, str | None]], changes: _Changes) -> None:
        db = self.db
        branches = sorted(n for n in delta if not n.startswith(_UNINDEXED))
        for name in branches:
            self._move_branch(name, *delta[name], changes)
        missing: list[str] = []
        for name in sorted(n for n in delta if n.startswith("refs/tags/")):
            short = name[len("refs/tags/") :]
            new = delta[name][1]
            target = self.git.peel_to_commit(new) if new is not None else None
            if target is None:
                db.execute("DELETE FROM tags WHERE name=?", (short,))
            else:
                db.execute("INSERT OR REPLACE INTO tags VALUES(?,?)", (short, target))
                if self._commit_row(target) is None:
                    missing.append(target)
        if missing:  # tagged commits no branch reaches: index them (and what only they reach)
            self._walk_into(None, missing, [o for o in self.git_tips() if self.git.has_object(o)], changes)
        gone = [(name,) for name, (_old, new) in delta.items() if new is None]
        if gone:
            db.executemany("DELETE FROM refs WHERE name=?", gone)
        moved = [(name, new) for name, (_old, new) in delta.items() if new is not None]
        if moved:
            db.executemany("INSERT OR REPLACE INTO refs VALUES(?,?)", moved)
        if delta:
            changes.any = True

    def _move_branch(self, name: str, prev: str | None, oid: str | None, changes: _Changes) -> None:
        """Catch one branch-like ref's memberships up from ``prev`` to ``oid`` (None: deleted)."""
        db = self.db
        tip = self.git.peel_to_commit(oid) if oid is not None else None
        if tip is None:
            db.execute("DELETE FROM member WHERE ref=?", (name,))
            changes.shrunk.add(name)
            return
        base = self.git.peel_to_commit(prev) if prev is not None else None
        if base is not None and self._one_ahead(name, base, tip, changes):
            return
        try:
            ahead = base is not None and self.git.is_ancestor(base, tip)
        except _BROKEN:
            ahead = False
        if not (ahead and base is not None and self._walk_into(name, [tip], [base], changes)):
            db.execute("DELETE FROM member WHERE ref=?", (name,))
            changes.shrunk.add(name)
            self._walk_into(name, [tip], [], changes)

    def _one_ahead(self, name: str, base: str, tip: str, changes: _Changes) -> bool:
        """The common move, one commit on top of the old tip: index it without a history walk."""
        try:
            commit = self.git.read_commit(tip)
        except _BROKEN:
            return False
        if commit.parents != (base,):
            return False
        crow = self._commit_row(tip)
        if crow is None:
            crow = self._add_commit(commit)
            changes.commits.append(commit.time)
        self.db.execute("INSERT OR IGNORE INTO member VALUES(?,?)", (name, crow))
        changes.members.setdefault(name, []).append(commit.time)
        return True

    def _commit_row(self, oid: str) -> int | None:
        row = self.db.execute("SELECT rowid FROM commits WHERE oid=?", (oid,)).fetchone()
        return row[0] if row else None

    def _add_commit(self, c: CommitData) -> int:
        db = self.db
        node, problem, outcome, score = _trailer_fields(c.message)
        cur = db.execute(
            "INSERT INTO commits(oid, time, message, parents, node_id, problem_id, outcome, score)"
            " VALUES(?,?,?,?,?,?,?,?)",
            (c.oid, c.time, c.message, " ".join(c.parents), node, problem, outcome, score),
        )
        crow = cur.lastrowid
        if crow is None:  # sqlite3 sets it after every INSERT
            raise StorageError(f"the search index did not store commit {c.oid}; `got gc` rebuilds it")
        db.execute("INSERT INTO msg_words(rowid, message) VALUES(?,?)", (crow, c.message))
        # the trigram index takes messages in batches (see _tri_batch); grep reads the batch too
        db.execute("INSERT INTO untri VALUES(?)", (crow,))
        db.execute("INSERT INTO unblobbed VALUES(?)", (crow,))  # its files: when pickaxe first asks
        return crow

    def _tri_batch(self) -> None:
        """Add the waiting messages to the trigram index once :data:`TRI_BATCH` of them wait.

        FTS5 writes a segment per transaction and merges segments as they pile up; one
        message per sync made that merging most of a sync's cost. Until a batch is full,
        grep also tests the waiting messages (a handful of ``instr`` calls).
        """
        db = self.db
        if db.execute("SELECT COUNT(*) FROM untri").fetchone()[0] < TRI_BATCH:
            return
        db.execute(
            "INSERT INTO msg_tri(rowid, message) SELECT c.rowid, c.message FROM untri u JOIN commits c ON c.rowid = u.crow"
        )
        db.execute("DELETE FROM untri")

    def blobs_ready(self) -> None:
        """Index the files of every commit indexed without them (see :meth:`_index_blobs`).

        A sync indexes a commit's message, trailers and refs; the blobs it changed are
        only needed by pickaxe (``git log -S``), so they are indexed when it first asks,
        many commits in one transaction, instead of in the sync after every write.
        """
        with self._lock:
            db = self.db
            if db.execute("SELECT 1 FROM unblobbed LIMIT 1").fetchone() is None:
                return
            db.execute("BEGIN IMMEDIATE")
            try:
                rows = db.execute("SELECT u.crow, c.oid FROM unblobbed u JOIN commits c ON c.rowid = u.crow").fetchall()
                for crow, oid in rows:
                    self._index_blobs(crow, oid)
                db.execute("DELETE FROM unblobbed")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def _index_blobs(self, crow: int, oid: str) -> None:
        """The (path, old blob, new blob) changes of one commit, and the text of its new blobs."""
        db = self.db
        try:
            changed = self.git.changed_paths(self.git.read_commit(oid))
        except _BROKEN:
            changed = []  # a tree we cannot read: the message is still searchable
        if changed:
            db.executemany("INSERT INTO changes VALUES(?,?,?,?)", [(crow, p, o, n) for p, o, n in changed])
            blobs = sorted({b for _p, o, n in changed for b in (o, n) if b})
            known: set[str] = set()
            for i in range(0, len(blobs), 500):
                chunk = blobs[i : i + 500]
                marks = ",".join("?" * len(chunk))
                known.update(r[0] for r in db.execute(f"SELECT oid FROM blobs WHERE oid IN ({marks})", chunk))
            for blob in blobs:
                if blob not in known:
                    self._add_blob(blob)

    def _add_blob(self, oid: str) -> None:
        """Index one blob not indexed yet (its text, for pickaxe candidates)."""
        db = self.db
        text = None
        try:
            if self.git.blob_size(oid) <= MAX_INDEXED_BLOB:
                text = self.git.read_blob(oid).decode("utf-8")
        except UnicodeDecodeError:
            text = None  # binary: pickaxe counts its bytes
        except _BROKEN:
            return  # missing or not a blob: nothing to search in it
        cur = db.execute("INSERT INTO blobs(oid, text) VALUES(?,?)", (oid, text))
        if text is not None:
            db.execute("INSERT INTO blob_tri(rowid, text) VALUES(?,?)", (cur.lastrowid, text))

    def _walk_into(self, ref: str | None, tips: list[str], hide: list[str], changes: _Changes) -> bool:
        """Index the commits of ``tips`` not in ``hide``; False when the walk broke off."""
        db = self.db
        reached = changes.members.setdefault(ref, []) if ref is not None else None
        try:
            for c in self.git.walk(tips, hide):
                crow = self._commit_row(c.oid)
                if crow is None:
                    crow = self._add_commit(c)
                    changes.commits.append(c.time)
                elif ref is None:
                    continue
                if ref is not None and reached is not None:
                    db.execute("INSERT OR IGNORE INTO member VALUES(?,?)", (ref, crow))
                    reached.append(c.time)
        except _BROKEN:
            return False  # a missing parent: what was walked stays indexed
        return True

    def git_tips(self) -> list[str]:
        """Commit tips of every indexed branch-like ref (not tags, not notes)."""
        rows = self.db.execute(
            "SELECT oid FROM refs WHERE NOT (name >= 'refs/tags/' AND name < 'refs/tags0') "
            "AND NOT (name >= 'refs/notes/' AND name < 'refs/notes0')"
        ).fetchall()
        return [r[0] for r in rows]

    def _sync_notes(self, changes: _Changes) -> None:
        """Catch the scores of our notes ref up to its indexed value, by a tree diff."""
        db = self.db
        key = "notes:" + self.notes_ref
        row = db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        prev = row[0] if row else None
        found = db.execute("SELECT oid FROM refs WHERE name=?", (self.notes_ref,)).fetchone()
        tip = found[0] if found else None
        if prev == (tip or ""):
            return
        changes.any = True
        if not tip:
            db.execute("DELETE FROM notes WHERE ref=?", (self.notes_ref,))
        else:
            hinted = self._hinted_notes(prev or None, tip)
            if hinted is not None:
                changed = hinted  # our own notes commits: their changes are known
            else:
                try:
                    new_tree = self.git.read_commit(tip).tree
                    old_tree = None
                    if prev and self.git.has_object(prev):
                        old_tree = self.git.read_commit(prev).tree
                    changed = self.git.changed_tree_paths(old_tree, new_tree)
                except _BROKEN:
                    old_tree, changed = None, []  # not a readable notes commit: no scores from it
                if old_tree is None:
                    db.execute("DELETE FROM notes WHERE ref=?", (self.notes_ref,))
            # removals first: a note moved to another fan-out depth (stock git rewrites small
            # notes trees flat) is a removal and an addition of the same target
            for path, _old, new in sorted(changed, key=lambda change: change[2] is not None):
                target = path.replace("/", "")
                if not _HEX_OID.fullmatch(target):
                    continue  # not a note (git notes names each one by its commit's SHA)
                if new is None:
                    db.execute("DELETE FROM notes WHERE ref=? AND target=?", (self.notes_ref, target))
                    continue
                body, score = self._note_body(new)
                db.execute("INSERT OR REPLACE INTO notes VALUES(?,?,?,?)", (self.notes_ref, target, body, score))
        db.execute("INSERT OR REPLACE INTO meta VALUES(?,?)", (key, tip or ""))

    def _note_body(self, blob: str) -> tuple[str | None, float | None]:
        try:
            if self.git.blob_size(blob) > MAX_INDEXED_BLOB:
                return None, None
            body = self.git.read_blob(blob).decode("utf-8", "replace")
        except _BROKEN:
            return None, None
        try:
            data = json.loads(body)
        except ValueError:
            return body, None
        score = data.get("s_comb") if isinstance(data, dict) else None
        if isinstance(score, (int, float)) and not isinstance(score, bool) and score == score:
            return body, float(score)
        return body, None

    def close(self) -> None:
        """Fold the write-ahead log back into the database and close the handle."""
        with self._lock:
            try:
                self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass  # another process is reading; the log is folded by the last one out
            self.db.close()
