"""The index's write path: what a sync applies (ARCHITECTURE §3, "a read", step 1).

:class:`IndexWriter` is the half of :class:`~got_core.storage.index.DerivedIndex` that
turns a *delta* (refs whose values differ from the ones indexed) into rows: a branch
walks only the commits between its old and new tip (one commit on top of the old tip
without a walk), a tag updates its one row (and the tag names kept on its commit's row), our
notes ref is caught up by a tree diff or by the changes our own notes commits reported;
commit messages join the suffix and trigram indexes in batches of :data:`TRI_BATCH`; the
blobs a commit changed are indexed when pickaxe first asks (:meth:`IndexWriter.blobs_ready`).
Deciding *which* refs moved is the host's job (:mod:`got_core.storage.refscan`,
``DerivedIndex.sync``).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Mapping

from got_core.errors import StorageError
from got_core.storage.git import READ_ERRORS, CommitData, GitRepo
from got_core.storage.objects import note_target
from got_core.types import parse_trailers, trailer_score

__all__ = ["MAX_INDEXED_BLOB", "TRI_BATCH", "Changes", "IndexWriter"]

MAX_INDEXED_BLOB = 1 << 20
#: commits whose messages wait outside the suffix and trigram indexes before one batch adds them
TRI_BATCH = 64

# What reading a damaged or partial history raises (missing objects, unparsable trees).
_BROKEN = READ_ERRORS
_UNINDEXED = ("refs/tags/", "refs/notes/")  # refs that are not branches: no membership rows

#: A commit's tag names, sorted, joined by NUL (a byte no ref name holds), NULL when it has
#: none: kept on its ``commits`` row (``commits.tags``), so a query's hits need no tag lookup.
_TAGS_OF = "(SELECT group_concat(name, char(0)) FROM (SELECT name FROM tags WHERE target = {} ORDER BY name))"


#: Where our notes ref's scores were indexed, and the ref's indexed value (NULL: none).
_NOTES_STATE = "SELECT (SELECT value FROM meta WHERE key=?), (SELECT oid FROM refs WHERE name=?)"


def _trailer_fields(message: str) -> tuple[str | None, str | None, str | None, float | None]:
    t = parse_trailers(message)
    return t.get("Node"), t.get("Problem"), t.get("Outcome"), trailer_score(t)


class Changes:
    """What one sync changed, so the per-sync memos can be brought along instead of recomputed."""

    def __init__(self) -> None:
        self.commits: list[int] = []  # times of commits added to the index
        self.members: dict[str, list[int]] = {}  # ref -> times of commits it now reaches
        self.shrunk: set[str] = set()  # refs that lost memberships
        self.added: set[str] = set()  # commits added to the index
        self.any = False


class IndexWriter:
    """Applies a sync's delta to the index tables (mixed into :class:`~got_core.storage.index.DerivedIndex`).

    Attributes the host provides: ``db`` (the SQLite connection, inside the sync's
    transaction when a delta is applied), ``git``, ``notes_ref``, ``_lock`` (serialises
    use of ``db``), ``_pending_lock`` and ``_notes_hints`` (the notes commits this process
    wrote: commit -> (parent, {path: blob or None})).
    """

    db: sqlite3.Connection
    git: GitRepo
    notes_ref: str
    _lock: threading.RLock
    _pending_lock: threading.Lock
    _notes_hints: dict[str, tuple[str | None, dict[str, str | None]]]
    _known_commits: dict[str, CommitData]
    _known_blobs: dict[str, bytes]

    def _read_commit(self, oid: str) -> CommitData:
        """A commit, from what our own write said about it when it did, else from git."""
        known = self._known_commits.get(oid)
        return known if known is not None else self.git.read_commit(oid)

    def _peel(self, oid: str) -> str | None:
        """The commit ``oid`` peels to (a commit we wrote is itself), else None."""
        return oid if oid in self._known_commits else self.git.peel_to_commit(oid)

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

    def _apply(self, delta: Mapping[str, tuple[str | None, str | None]], changes: Changes) -> None:
        db = self.db
        # tags first: a commit the branches then add takes its tag names in its INSERT
        # (commits.tags); growing every row afterwards split the pages of a fresh index
        targets: list[str] = []
        retagged: set[str] = set()  # commits whose tag names changed
        for name in sorted(n for n in delta if n.startswith("refs/tags/")):
            short = name[len("refs/tags/") :]
            new = delta[name][1]
            target = self._peel(new) if new is not None else None
            before = db.execute("SELECT target FROM tags WHERE name=?", (short,)).fetchone()
            if before is not None:
                retagged.add(before[0])
            if target is None:
                db.execute("DELETE FROM tags WHERE name=?", (short,))
            else:
                db.execute("INSERT OR REPLACE INTO tags VALUES(?,?)", (short, target))
                retagged.add(target)
                targets.append(target)
        branches = sorted(n for n in delta if not n.startswith(_UNINDEXED))
        for name in branches:
            self._move_branch(name, *delta[name], changes)
        missing = [t for t in dict.fromkeys(targets) if t not in changes.added and self._commit_row(t) is None]
        if missing:  # tagged commits no branch reaches: index them (and what only they reach)
            self._walk_into(None, missing, [o for o in self.git_tips() if self.git.has_object(o)], changes)
        stale = sorted(retagged - changes.added)  # rows added in this sync already hold their names
        if stale:
            db.execute(
                f"UPDATE commits SET tags = {_TAGS_OF.format('commits.oid')} "
                "WHERE oid IN (SELECT value FROM json_each(?))",
                (json.dumps(stale),),
            )
        gone = [(name,) for name, (_old, new) in delta.items() if new is None]
        if gone:
            db.executemany("DELETE FROM refs WHERE name=?", gone)
        moved = [(name, new) for name, (_old, new) in delta.items() if new is not None]
        if moved:
            db.executemany("INSERT OR REPLACE INTO refs VALUES(?,?)", moved)
        if delta:
            changes.any = True

    def _move_branch(self, name: str, prev: str | None, oid: str | None, changes: Changes) -> None:
        """Catch one branch-like ref's memberships up from ``prev`` to ``oid`` (None: deleted)."""
        db = self.db
        tip = self._peel(oid) if oid is not None else None
        if tip is None:
            db.execute("DELETE FROM member WHERE ref=?", (name,))
            changes.shrunk.add(name)
            return
        # a branch moved one commit on from a commit (its tip's only parent) needs no peel of the old value
        if prev is not None and self._one_ahead(name, prev, tip, changes):
            return
        base = self._peel(prev) if prev is not None else None
        if base is not None and base != prev and self._one_ahead(name, base, tip, changes):
            return
        try:
            ahead = base is not None and self.git.is_ancestor(base, tip)
        except _BROKEN:
            ahead = False
        if not (ahead and base is not None and self._walk_into(name, [tip], [base], changes)):
            db.execute("DELETE FROM member WHERE ref=?", (name,))
            changes.shrunk.add(name)
            self._walk_into(name, [tip], [], changes)

    def _one_ahead(self, name: str, base: str, tip: str, changes: Changes) -> bool:
        """The common move, one commit on top of the old tip: index it without a history walk."""
        try:
            commit = self._read_commit(tip)
        except _BROKEN:
            return False
        if commit.parents != (base,):
            return False
        crow = self._commit_row(tip)
        if crow is None:
            crow = self._add_commit(commit)
            changes.commits.append(commit.time)
            changes.added.add(tip)
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
            "INSERT INTO commits(oid, time, message, parents, node_id, problem_id, outcome, score, tags)"
            f" VALUES(?,?,?,?,?,?,?,?,{_TAGS_OF.format('?')})",
            (c.oid, c.time, c.message, " ".join(c.parents), node, problem, outcome, score, c.oid),
        )
        crow = cur.lastrowid
        if crow is None:  # sqlite3 sets it after every INSERT
            raise StorageError(f"the search index did not store commit {c.oid}; `got gc` rebuilds it")
        db.execute("INSERT INTO msg_words(rowid, message) VALUES(?,?)", (crow, c.message))
        # the suffix and trigram indexes take messages in batches (see _tri_batch); grep reads the batch too
        db.execute("INSERT INTO untri VALUES(?)", (crow,))
        db.execute("INSERT INTO unblobbed VALUES(?)", (crow,))  # its files: when pickaxe first asks
        return crow

    def _tri_batch(self) -> None:
        """Add the waiting messages to the suffix and trigram indexes once :data:`TRI_BATCH` of them wait.

        FTS5 writes a segment per transaction and merges segments as they pile up; one
        message per sync made that merging most of a sync's cost. Until a batch is full,
        grep also tests the waiting messages (a handful of ``instr`` calls).
        """
        db = self.db
        if db.execute("SELECT COUNT(*) FROM untri").fetchone()[0] < TRI_BATCH:
            return
        waiting = "FROM untri u JOIN commits c ON c.rowid = u.crow"
        db.execute(f"INSERT INTO msg_sfx(rowid, suffixes) SELECT c.rowid, got_suffixes(c.message) {waiting}")
        db.execute(f"INSERT INTO msg_tri(rowid, message) SELECT c.rowid, c.message {waiting}")
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

    def _walk_into(self, ref: str | None, tips: list[str], hide: list[str], changes: Changes) -> bool:
        """Index the commits of ``tips`` not in ``hide``; False when the walk broke off."""
        db = self.db
        reached = changes.members.setdefault(ref, []) if ref is not None else None
        try:
            for c in self.git.walk(tips, hide):
                crow = self._commit_row(c.oid)
                if crow is None:
                    crow = self._add_commit(c)
                    changes.commits.append(c.time)
                    changes.added.add(c.oid)
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

    def _sync_notes(self, changes: Changes) -> None:
        """Catch the scores of our notes ref up to its indexed value, by a tree diff."""
        db = self.db
        key = "notes:" + self.notes_ref
        # the value its scores were indexed at and the ref's indexed value, in one statement
        prev, tip = db.execute(_NOTES_STATE, (key, self.notes_ref)).fetchone()
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
                target = note_target(path)  # any fan-out depth, mixed: what git reads as a note
                if target is None:
                    continue  # not a note (git notes names each one by its commit's SHA)
                if new is None:
                    db.execute("DELETE FROM notes WHERE ref=? AND target=?", (self.notes_ref, target))
                    continue
                body, score = self._note_body(new)
                db.execute("INSERT OR REPLACE INTO notes VALUES(?,?,?,?)", (self.notes_ref, target, body, score))
        db.execute("INSERT OR REPLACE INTO meta VALUES(?,?)", (key, tip or ""))

    def _note_body(self, blob: str) -> tuple[str | None, float | None]:
        raw = self._known_blobs.get(blob)  # a note this process wrote: its bytes are known
        if raw is None:
            try:
                if self.git.blob_size(blob) > MAX_INDEXED_BLOB:
                    return None, None
                raw = self.git.read_blob(blob)
            except _BROKEN:
                return None, None
        body = raw.decode("utf-8", "replace")
        try:
            data = json.loads(body)
        except ValueError:
            return body, None
        score = data.get("s_comb") if isinstance(data, dict) else None
        if isinstance(score, (int, float)) and not isinstance(score, bool) and score == score:
            return body, float(score)
        return body, None
