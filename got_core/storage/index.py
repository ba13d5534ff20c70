"""A derived SQLite index over the repository, so history search is not O(history).

Git stays the source of truth (ARCHITECTURE §6): the index holds nothing that cannot be
rebuilt from the repository, and every query first *syncs* it:

* the ref fingerprint (``packed-refs`` plus the mtime of every directory under
  ``refs/``) is compared with the one stored at the last sync; ref updates rename
  a lock file into place, so any change touches a directory. A fingerprint taken
  within :data:`RACY_NS` of a directory's mtime is not trusted (the "racy git"
  rule: the clock may not have ticked), so the next query re-lists refs;
* when refs changed, each indexed ref is caught up by walking only the commits
  between its old and new tip; a rewound or deleted ref drops its memberships;
* the notes ref is caught up by a tree diff between its old and new notes commit.

Indexed per commit: the message (FTS5 words for keyword search, FTS5 trigrams for
``--grep`` substrings), trailer fields, which refs reach it, and the blobs it
changed (trigram-indexed text, for ``-S`` pickaxe candidates, confirmed exactly).
The index file lives inside the git directory (``got/index.sqlite3``); delete it
at any time, or call :meth:`DerivedIndex.rebuild`.

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
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from pygit2 import GitError

from got_core.errors import CorruptRepositoryError, InvalidInputError, StorageError
from got_core.storage.git import CommitData, GitRepo
from got_core.types import parse_trailers, tag_value, trailer_score

__all__ = ["MAX_INDEXED_BLOB", "RACY_NS", "CommitRow", "DerivedIndex", "RankedRow"]

RACY_NS = 100_000_000  # 100 ms: well above the coarse kernel clock tick
MAX_INDEXED_BLOB = 1 << 20
SCHEMA_VERSION = "5"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS refs(name TEXT PRIMARY KEY, oid TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS commits(
    rowid INTEGER PRIMARY KEY, oid TEXT UNIQUE NOT NULL, time INTEGER, message TEXT,
    parents TEXT, node_id TEXT, problem_id TEXT, outcome TEXT, score REAL);
CREATE INDEX IF NOT EXISTS commits_node ON commits(node_id);
CREATE TABLE IF NOT EXISTS member(ref TEXT NOT NULL, crow INTEGER NOT NULL, PRIMARY KEY(ref, crow)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS member_crow ON member(crow);
CREATE TABLE IF NOT EXISTS changes(crow INTEGER NOT NULL, path TEXT, old TEXT, new TEXT);
CREATE INDEX IF NOT EXISTS changes_crow ON changes(crow);
CREATE INDEX IF NOT EXISTS changes_old ON changes(old);
CREATE INDEX IF NOT EXISTS changes_new ON changes(new);
CREATE TABLE IF NOT EXISTS blobs(rowid INTEGER PRIMARY KEY, oid TEXT UNIQUE NOT NULL, text TEXT);
CREATE TABLE IF NOT EXISTS tags(name TEXT PRIMARY KEY, target TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS tags_target ON tags(target);
CREATE TABLE IF NOT EXISTS notes(ref TEXT NOT NULL, target TEXT NOT NULL, body TEXT, score REAL,
    PRIMARY KEY(ref, target)) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS msg_words USING fts5(message, content='', tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS msg_vocab USING fts5vocab(msg_words, 'row');
CREATE VIRTUAL TABLE IF NOT EXISTS msg_tri USING fts5(message, content='', tokenize='trigram case_sensitive 1');
CREATE VIRTUAL TABLE IF NOT EXISTS blob_tri USING fts5(text, content='', tokenize='trigram case_sensitive 1');
"""


class CommitRow(NamedTuple):
    """One indexed commit, as queries return it (``score``: the note's, else the trailer's)."""

    rowid: int
    oid: str
    message: str
    time: int
    parents: str  # space-separated parent SHAs
    score: float | None
    node_id: str | None
    problem_id: str | None

    @property
    def parent_list(self) -> tuple[str, ...]:
        """The parent SHAs."""
        return tuple(self.parents.split()) if self.parents else ()


class RankedRow(NamedTuple):
    """A keyword hit ranked by ρ (see :mod:`got_core.repo.retrieval`)."""

    rowid: int
    oid: str
    message: str
    time: int
    parents: str
    score: float | None
    node_id: str | None
    problem_id: str | None
    tag: float
    match: float
    recency: float
    rho: float


class _TagValue:
    """SQLite aggregate over a commit's tag names: the retrieval tag term of
    :func:`got_core.types.tag_value` (the one definition of the tag rule)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def step(self, name: str | None) -> None:
        if name is not None:
            self.names.append(name)

    def finalize(self) -> float:
        return tag_value(self.names)[0]


# What reading a damaged or partial history raises (missing objects, unparsable trees).
_BROKEN = (CorruptRepositoryError, GitError)
_HEX_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _indexable_ref(name: str) -> bool:
    """Ref names that are not text (bytes that are not UTF-8) are left out of the index."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _trailer_fields(message: str) -> tuple[str | None, str | None, str | None, float | None]:
    t = parse_trailers(message)
    return t.get("Node"), t.get("Problem"), t.get("Outcome"), trailer_score(t)


#: Longest phrase handed to FTS5 to find candidates (each is then confirmed exactly):
#: phrase matching costs phrase length x document length, and a long needle narrows no further.
MAX_FTS_PHRASE = 64


def _fts_phrase(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


class DerivedIndex:
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
        self._fp_dirs: list[str] = []
        # per-sync memo: the commit count, and time ranges by scope
        self._count: int | None = None
        self._times: dict[tuple[str, ...] | None, tuple[int, int]] = {}

    def _connect(self, path: Path) -> sqlite3.Connection:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(path), timeout=60, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
        except (sqlite3.Error, OSError):
            db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA synchronous=OFF")  # derived data: rebuilt when lost
        db.execute("PRAGMA busy_timeout=60000")
        # typeshed types an aggregate's step and finalize as int only; SQLite passes and takes any value
        db.create_aggregate("got_tag_value", 1, _TagValue)  # type: ignore[arg-type]
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
            self._fp_dirs = []
            self.sync()

    # ------------------------------------------------------------------ sync
    def _fingerprint(self) -> str | None:
        now = time.time_ns()
        gitdir = self.git.gitdir
        parts = []
        racy = False
        for rel in ["packed-refs", *(self._fp_dirs or ["refs"])]:
            try:
                st = os.stat(gitdir / rel)
            except FileNotFoundError:
                parts.append(f"{rel}:-")
                continue
            if now - st.st_mtime_ns < RACY_NS:
                racy = True
            parts.append(f"{rel}:{st.st_mtime_ns}:{st.st_size}:{st.st_ino}")
        return None if racy else "|".join(parts)

    def _ref_dirs(self) -> list[str]:
        gitdir = self.git.gitdir
        dirs = []
        stack = ["refs"]
        while stack:
            rel = stack.pop()
            dirs.append(rel)
            try:
                with os.scandir(gitdir / rel) as it:
                    for entry in it:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(f"{rel}/{entry.name}")
            except OSError:
                continue
        return sorted(dirs)

    def sync(self) -> None:
        """Bring the index up to date with the repository (cheap when nothing changed)."""
        with self._lock:
            if self._fp_dirs:
                fp = self._fingerprint()
                stored = self.db.execute("SELECT value FROM meta WHERE key='fp'").fetchone()
                if fp is not None and stored is not None and stored[0] == fp:
                    return
            db = self.db
            db.execute("BEGIN IMMEDIATE")  # serialises syncs across processes
            try:
                self._fp_dirs = self._ref_dirs()
                fp = self._fingerprint()
                refs = {n: o for n, o in self.git.list_refs("refs/").items() if _indexable_ref(n)}
                self._sync_refs(refs)
                self._sync_tags(refs)
                self._sync_notes(refs.get(self.notes_ref))
                db.execute("INSERT OR REPLACE INTO meta VALUES('fp', ?)", (fp or "",))
                db.execute("COMMIT")
                self._count = None
                self._times.clear()
            except BaseException:
                db.execute("ROLLBACK")
                raise

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
        db.execute("INSERT INTO msg_tri(rowid, message) VALUES(?,?)", (crow, c.message))
        try:
            changed = self.git.changed_paths(c)
        except _BROKEN:
            changed = []  # a tree we cannot read: the message is still searchable
        for path, old, new in changed:
            db.execute("INSERT INTO changes VALUES(?,?,?,?)", (crow, path, old, new))
            for blob in (old, new):
                if blob:
                    self._add_blob(blob)
        return crow

    def _add_blob(self, oid: str) -> None:
        db = self.db
        if db.execute("SELECT 1 FROM blobs WHERE oid=?", (oid,)).fetchone():
            return
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

    def _walk_into(self, ref: str | None, tips: list[str], hide: list[str]) -> bool:
        """Index the commits of ``tips`` not in ``hide``; False when the walk broke off."""
        db = self.db
        try:
            for c in self.git.walk(tips, hide):
                crow = self._commit_row(c.oid)
                if crow is None:
                    crow = self._add_commit(c)
                elif ref is None:
                    continue
                if ref is not None:
                    db.execute("INSERT OR IGNORE INTO member VALUES(?,?)", (ref, crow))
        except _BROKEN:
            return False  # a missing parent: what was walked stays indexed
        return True

    def _sync_refs(self, refs: dict[str, str]) -> None:
        db = self.db
        indexed = {n: o for n, o in refs.items() if not n.startswith(("refs/tags/", "refs/notes/"))}
        old = dict(db.execute("SELECT name, oid FROM refs").fetchall())
        for name in old.keys() - indexed.keys():
            db.execute("DELETE FROM member WHERE ref=?", (name,))
            db.execute("DELETE FROM refs WHERE name=?", (name,))
        for name, oid in indexed.items():
            prev = old.get(name)
            if prev == oid:
                continue
            tip = self.git.peel_to_commit(oid)
            if tip is None:
                continue
            try:
                ahead = prev is not None and self.git.has_object(prev) and self.git.is_ancestor(prev, tip)
            except _BROKEN:
                ahead = False
            if not (ahead and prev is not None and self._walk_into(name, [tip], [prev])):
                db.execute("DELETE FROM member WHERE ref=?", (name,))
                self._walk_into(name, [tip], [])
            db.execute("INSERT OR REPLACE INTO refs VALUES(?,?)", (name, oid))

    def _sync_tags(self, refs: dict[str, str]) -> None:
        db = self.db
        tags = {}
        for name, oid in refs.items():
            if name.startswith("refs/tags/"):
                target = self.git.peel_to_commit(oid)
                if target:
                    tags[name[len("refs/tags/") :]] = target
        old = dict(db.execute("SELECT name, target FROM tags").fetchall())
        if old == tags:
            return
        db.execute("DELETE FROM tags")
        db.executemany("INSERT INTO tags VALUES(?,?)", tags.items())
        missing = [t for t in set(tags.values()) if self._commit_row(t) is None]
        if missing:
            self._walk_into(None, missing, [o for o in self.git_tips() if self.git.has_object(o)])

    def git_tips(self) -> list[str]:
        """Commit tips of every indexed ref."""
        return [r[0] for r in self.db.execute("SELECT oid FROM refs").fetchall()]

    def _sync_notes(self, tip: str | None) -> None:
        db = self.db
        key = "notes:" + self.notes_ref
        row = db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        prev = row[0] if row else None
        if prev == (tip or ""):
            return
        if not tip:
            db.execute("DELETE FROM notes WHERE ref=?", (self.notes_ref,))
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
            for path, _old, new in changed:
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

    # ------------------------------------------------------------------ queries
    _SELECT = (
        "SELECT c.rowid, c.oid, c.message, c.time, c.parents, "
        "COALESCE(n.score, c.score), c.node_id, c.problem_id FROM commits c "
        "LEFT JOIN notes n ON n.ref=? AND n.target=c.oid "
    )

    def _scope_sql(self, refs: Sequence[str] | None) -> tuple[str, list[str]]:
        if refs is None:
            return "", []
        marks = ",".join("?" * len(refs))
        return f" AND c.rowid IN (SELECT crow FROM member WHERE ref IN ({marks}))", list(refs)

    def _rows(
        self,
        where: str = "1",
        params: Iterable[object] = (),
        refs: Sequence[str] | None = None,
        order: str = "c.time DESC, c.rowid DESC",
        limit: int | None = None,
    ) -> list[CommitRow]:
        scope, sparams = self._scope_sql(refs)
        sql = self._SELECT + f"WHERE {where}{scope} ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._lock:
            return [CommitRow(*r) for r in self.db.execute(sql, [self.notes_ref, *params, *sparams])]

    def by_oids(self, oids: Sequence[str]) -> list[CommitRow]:
        """The indexed rows of these commits (any order; unknown SHAs are left out)."""
        out: list[CommitRow] = []
        oids = list(oids)
        for i in range(0, len(oids), 500):
            chunk = oids[i : i + 500]
            out += self._rows("c.oid IN ({})".format(",".join("?" * len(chunk))), chunk)
        return out

    def grep(self, pattern: str, *, fixed: bool, ignore_case: bool, refs: Sequence[str] | None) -> list[CommitRow]:
        """Commits whose message matches (``git log --grep`` with -F / -P semantics)."""
        flags = re.MULTILINE | (re.IGNORECASE if ignore_case else 0)
        try:
            rx = re.compile(re.escape(pattern) if fixed else pattern, flags)
        except (re.error, RecursionError, OverflowError) as exc:
            raise InvalidInputError(
                f"{pattern[:80]!r} is not a valid regular expression ({exc}); "
                "fix it, or pass fixed=True (`got grep -F`) to search for the text"
            ) from None
        literal = pattern if fixed else (pattern if not re.search(r"[\\.^$*+?{}\[\]|()]", pattern) else None)
        if literal is not None and len(literal) >= 3 and not ignore_case:
            where = "c.rowid IN (SELECT rowid FROM msg_tri WHERE msg_tri MATCH ?)"
            rows = self._rows(where, [_fts_phrase(literal[:MAX_FTS_PHRASE])], refs)
        else:
            rows = self._rows("1", (), refs)
        return [r for r in rows if rx.search(r.message)]

    def doc_freq(self, stem: str) -> int:
        """How many commit messages hold a word starting with ``stem`` (from the FTS vocabulary)."""
        row = self.db.execute(
            "SELECT COALESCE(SUM(doc), 0) FROM msg_vocab WHERE term >= ? AND term < ?", (stem, stem + "\U0010ffff")
        ).fetchone()
        return int(row[0])

    def commit_count(self) -> int:
        """Number of indexed commits (memoised until the next sync)."""
        if self._count is None:
            self._count = int(self.db.execute("SELECT COUNT(*) FROM commits").fetchone()[0])
        return self._count

    def ranked(
        self,
        stems: Sequence[str],
        refs: Sequence[str] | None,
        weights: dict[str, float],
        k: int,
        extra: Sequence[int] = (),
        max_df: float = 0.1,
    ) -> list[RankedRow]:
        """Keyword hits ranked by ρ in SQL (see :mod:`got_core.repo.retrieval`), best first.

        Each stem matches words that start with it. Stems found in more than ``max_df``
        of all messages are dropped (they select everything and discriminate nothing),
        keeping at least the rarest one — an IDF cut that keeps queries fast at 10k+.
        ``extra`` adds candidate rowids (pickaxe hits).

        Returns :class:`RankedRow` s, best first.
        """
        with self._lock:
            n = max(self.commit_count(), 1)
            dfs = sorted((self.doc_freq(s), s) for s in dict.fromkeys(stems))
            kept = [s for df, s in dfs if df and df <= max(max_df * n, 50)]
            if not kept and dfs and dfs[0][0]:
                kept = [dfs[0][1]]
            if not kept and not extra:
                return []
            tmin, tmax = self.time_range(refs)
            span = max(tmax - tmin, 1)
            terms = [_fts_phrase(s) + "*" for s in kept]
            conds, params = [], []
            if terms:
                conds.append("c.rowid IN (SELECT rowid FROM msg_words WHERE msg_words MATCH ?)")
                params.append(" OR ".join(terms))
            if extra:
                conds.append("c.rowid IN ({})".format(",".join(str(int(r)) for r in extra)))
            match_sql = (
                " + ".join("(c.rowid IN (SELECT rowid FROM msg_words WHERE msg_words MATCH ?))" for _ in terms) or "0"
            )
            match_params = list(terms)
            scope, sparams = self._scope_sql(refs)
            # an aggregate over no rows is NULL in Python's sqlite3: the untagged value then
            untagged = tag_value(())[0]
            tag_sql = f"COALESCE((SELECT got_tag_value(t.name) FROM tags t WHERE t.target = c.oid), {untagged!r})"
            sql = (
                "SELECT rowid, oid, message, time, parents, sc, node_id, problem_id, tg, m, rec, "
                "(? * COALESCE(sc, 0) + ? * tg + ? * rec + ? * m) AS rho FROM ("
                "SELECT c.rowid AS rowid, c.oid AS oid, c.message AS message, c.time AS time, "
                "c.parents AS parents, COALESCE(n.score, c.score) AS sc, c.node_id AS node_id, "
                f"c.problem_id AS problem_id, {tag_sql} AS tg, "
                f"(({match_sql}) * 1.0 / ?) AS m, ((c.time - ?) * 1.0 / ?) AS rec "
                "FROM commits c LEFT JOIN notes n ON n.ref = ? AND n.target = c.oid "
                f"WHERE ({' OR '.join(conds)}){scope}) "
                "ORDER BY rho DESC, m DESC, time DESC, oid LIMIT ?"
            )
            args = [
                weights["score"],
                weights["tag"],
                weights["recency"],
                weights["match"],
                *match_params,
                max(len(terms), 1),
                tmin,
                span,
                self.notes_ref,
                *params,
                *sparams,
                int(k),
            ]
            return [RankedRow(*r) for r in self.db.execute(sql, args)]

    def pickaxe(self, needle: str, refs: Sequence[str] | None, *, added_only: bool = False) -> list[CommitRow]:
        """Commits that change the number of occurrences of ``needle`` in some file (``git log -S``).

        With ``added_only``, only commits where the count grows (the one that introduced it).
        """
        with self._lock:
            db = self.db
            if len(needle) >= 3:
                cand = db.execute(
                    "SELECT oid, text FROM blobs WHERE rowid IN (SELECT rowid FROM blob_tri WHERE blob_tri MATCH ?)",
                    (_fts_phrase(needle[:MAX_FTS_PHRASE]),),
                ).fetchall()
            else:
                cand = db.execute("SELECT oid, text FROM blobs WHERE instr(text, ?) > 0", (needle,)).fetchall()
            texts = dict(cand)
            raw_needle = needle.encode("utf-8")
            for (oid,) in db.execute("SELECT oid FROM blobs WHERE text IS NULL").fetchall():
                if raw_needle in self.git.read_blob(oid):
                    texts[oid] = None  # counted from bytes below
            if not texts:
                return []
            marks = ",".join("?" * len(texts))
            changes = db.execute(
                f"SELECT crow, old, new FROM changes WHERE old IN ({marks}) OR new IN ({marks})", [*texts, *texts]
            ).fetchall()

        def count(blob: str | None) -> int:
            if blob is None:
                return 0
            if blob in texts:
                text = texts[blob]
                return text.count(needle) if text is not None else self.git.read_blob(blob).count(raw_needle)
            return 0  # blobs outside the candidate set do not contain the needle

        if added_only:
            crows = {crow for crow, old, new in changes if count(new) > count(old)}
        else:
            crows = {crow for crow, old, new in changes if count(old) != count(new)}
        if not crows:
            return []
        rows = self._rows("c.rowid IN ({})".format(",".join(str(c) for c in crows)), (), refs)
        return [r for r in rows if len(r.parent_list) < 2]  # git log -S skips merge diffs

    def tags_for(self, oids: Iterable[str]) -> dict[str, list[str]]:
        """Tag names per commit SHA."""
        oids = list(oids)
        out: dict[str, list[str]] = {}
        if not oids:
            return out
        with self._lock:
            for i in range(0, len(oids), 500):
                chunk = oids[i : i + 500]
                marks = ",".join("?" * len(chunk))
                for name, target in self.db.execute(
                    f"SELECT name, target FROM tags WHERE target IN ({marks}) ORDER BY name", chunk
                ):
                    out.setdefault(target, []).append(name)
        return out

    def tagged(self, prefix: str) -> list[CommitRow]:
        """Commits carrying a tag that starts with ``prefix``."""
        with self._lock:
            targets = [
                r[0]
                for r in self.db.execute(
                    "SELECT DISTINCT target FROM tags WHERE substr(name, 1, ?) = ?", (len(prefix), prefix)
                )
            ]
        if not targets:
            return []
        marks = ",".join("?" * len(targets))
        return self._rows(f"c.oid IN ({marks})", targets)

    def frontier(self, base: str, tip: str) -> list[CommitRow]:
        """Commits reachable from ``tip`` and not from ``base`` (``git log base..tip``)."""
        return self._rows(
            "c.rowid IN (SELECT crow FROM member WHERE ref=?) AND c.rowid NOT IN (SELECT crow FROM member WHERE ref=?)",
            [tip, base],
        )

    def by_node_id(self, node_id: str) -> list[CommitRow]:
        """Commits whose ``Got-Node`` trailer is ``node_id``."""
        return self._rows("c.node_id = ?", [node_id])

    def time_range(self, refs: Sequence[str] | None) -> tuple[int, int]:
        """(oldest, newest) commit time in scope (memoised until the next sync)."""
        key = tuple(refs) if refs is not None else None
        with self._lock:
            if key not in self._times:
                scope, sparams = self._scope_sql(refs)
                row = self.db.execute(
                    f"SELECT MIN(c.time), MAX(c.time) FROM commits c WHERE 1{scope}", sparams
                ).fetchone()
                self._times[key] = (row[0] or 0, row[1] or 0)
            return self._times[key]

    def close(self) -> None:
        """Fold the write-ahead log back into the database and close the handle."""
        with self._lock:
            try:
                self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass  # another process is reading; the log is folded by the last one out
            self.db.close()
