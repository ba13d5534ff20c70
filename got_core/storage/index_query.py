"""The queries of the derived index (ARCHITECTURE §3, "a read"): rows, grep, ranking, pickaxe, tags.

:class:`IndexQueries` is the read half of :class:`~got_core.storage.index.DerivedIndex`
(which adds the schema and the sync with git); every query here assumes the index was
synced just before. Rows come back typed (:class:`CommitRow`, :class:`RankedRow`).
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from got_core.errors import InvalidInputError
from got_core.storage.git import GitRepo
from got_core.types import CommitInfo, tag_value

__all__ = ["MAX_FTS_PHRASE", "CommitRow", "IndexQueries", "RankedRow", "register_functions"]


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


#: Longest head of a literal handed to the trigram indexes to find candidates (each is then
#: confirmed exactly): every trigram is one more list to read, and a long needle narrows no further.
MAX_FTS_PHRASE = 64


def register_functions(db: sqlite3.Connection) -> None:
    """Register the SQL functions the index uses (``got_suffixes``, ``got_tags_value``) on a connection."""
    db.create_function("got_suffixes", 1, suffix_terms, deterministic=True)
    db.create_function("got_tags_value", 1, _tags_value, deterministic=True)


def _tags_value(joined: str | None) -> float:
    """The retrieval tag term of a commit's tag names as ``commits.tags`` keeps them."""
    return tag_value(_tag_names(joined))[0]


def _newest_first(row: CommitRow) -> tuple[bool, int, int]:
    return (row.time is not None, row.time or 0, row.rowid)


def _fts_phrase(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


#: A run of the characters the suffix index knows (ASCII letters and digits); every other
#: character, non-ASCII letters included, ends a run, in the messages and in a literal alike.
_RUN = re.compile(r"[0-9A-Za-z]+")

#: Suffix terms are cut to this many characters (a run's suffixes cost its length squared otherwise).
SUFFIX_LEN = 16

#: A literal's runs shorter than this are left out of its suffix query (a short prefix
#: matches thousands of terms); a literal with none this long asks the trigram index.
MIN_SUFFIX_RUN = 4


def suffix_terms(message: str | None) -> str:
    """The suffix index's text for a message: every suffix of every run, lowercased, cut to
    :data:`SUFFIX_LEN`, once each (the FTS5 ``ascii`` tokenizer splits it back at the spaces);
    suffixes shorter than :data:`MIN_SUFFIX_RUN` are left out (no query asks for one).

    A text that holds a literal holds each of the literal's runs inside one of its own runs,
    so one of its suffix terms starts with the run's (cut) text, and a run the literal ends
    before a separator is a whole suffix term: :func:`_suffix_query` is a superset of the hits.
    Each run is lowercased on its own (ASCII only): lowercasing the whole text first could
    turn a non-ASCII separator into an ASCII letter and join two runs.
    """
    if not message:
        return ""
    runs = {run.lower() for run in _RUN.findall(message) if len(run) >= MIN_SUFFIX_RUN}
    return " ".join({run[i : i + SUFFIX_LEN] for run in runs for i in range(len(run) - MIN_SUFFIX_RUN + 1)})


def _suffix_query(literal: str) -> str | None:
    """The suffix index's query for a literal (a superset of its hits), or None when no run
    of it is :data:`MIN_SUFFIX_RUN` long.

    A run the literal follows with another character is the end of a run of every text
    that holds it: an exact term. Any other run (the literal's last) only starts a term: a prefix.
    """
    parts = []
    for m in _RUN.finditer(literal):
        run = m.group().lower()
        if len(run) < MIN_SUFFIX_RUN:
            continue
        ended = m.end() < len(literal)
        parts.append(f'"{run[:SUFFIX_LEN]}"' + ("" if ended else "*"))
    return " AND ".join(dict.fromkeys(parts)) or None


def _trigram_query(literal: str) -> str:
    """The trigram index's query for a literal of three characters or more: every distinct
    trigram of its first :data:`MAX_FTS_PHRASE` characters (``detail=none`` keeps no
    positions, so no phrase; the text itself decides)."""
    head = literal[:MAX_FTS_PHRASE]
    grams = dict.fromkeys(head[i : i + 3] for i in range(len(head) - 2))
    return " AND ".join(_fts_phrase(g) for g in grams)


#: A literal's hits in one statement: the index's candidates (the suffix index's, or the
#: trigram index's where the literal has no long run), and the messages still waiting for
#: the next batch (``untri``: a handful) as the second arm of a ``UNION ALL`` (as one OR,
#: SQLite tested every candidate against both terms; as two statements, each paid its
#: own), each confirmed by ``instr`` before its score and tags are looked up. The arms are
#: disjoint: a batch moves messages from ``untri`` to both indexes in one transaction.
#: ``CROSS JOIN`` keeps ``untri`` the outer loop (SQLite otherwise scanned every commit).
_LITERAL_HITS = (
    "c.rowid IN (SELECT rowid FROM {table} WHERE {table} MATCH ? "
    "UNION ALL SELECT u.crow FROM untri u CROSS JOIN commits w ON w.rowid = u.crow WHERE instr(w.message, ?) > 0) "
    "AND instr(c.message, ?) > 0"
)


def _literal_hits(literal: str) -> tuple[str, list[object]]:
    """The WHERE clause and parameters of a literal's hits (see :data:`_LITERAL_HITS`)."""
    query = _suffix_query(literal)
    table = "msg_sfx"
    if query is None:
        table, query = "msg_tri", _trigram_query(literal)
    return _LITERAL_HITS.format(table=table), [query, literal, literal]


#: A hit as :meth:`IndexQueries._infos` reads it: the sort key (time known, time, rowid),
#: then oid, message, parents, time, score (the note's, else the trailer's) and the tag
#: names joined by NUL (a byte no ref name holds), kept on the row (``commits.tags``).
_INFO_SELECT = (
    "SELECT c.time IS NOT NULL, IFNULL(c.time, 0), c.rowid, c.oid, c.message, c.parents, c.time, "
    "COALESCE(n.score, c.score), c.tags FROM commits c LEFT JOIN notes n ON n.ref=? AND n.target=c.oid "
)


def _tag_names(joined: str | None) -> tuple[str, ...]:
    """The tag names :data:`_INFO_SELECT` joined, in name order (as :meth:`IndexQueries.tags_for`)."""
    if not joined:
        return ()
    if "\0" not in joined:
        return (joined,)
    return tuple(sorted(joined.split("\0")))


class IndexQueries:
    """The read queries over the index tables (mixed into :class:`~got_core.storage.index.DerivedIndex`).

    Attributes the host provides: ``db`` (the SQLite connection), ``git`` (the
    repository), ``notes_ref``, ``_lock`` (serialises use of ``db``), and the per-sync
    memo ``_count`` / ``_times`` that the host's sync keeps true.
    """

    db: sqlite3.Connection
    git: GitRepo
    notes_ref: str
    _lock: threading.RLock
    _count: int | None
    _times: dict[tuple[str, ...] | None, tuple[int, int]]

    _SELECT = (
        "SELECT c.rowid, c.oid, c.message, c.time, c.parents, "
        "COALESCE(n.score, c.score), c.node_id, c.problem_id FROM commits c "
        "LEFT JOIN notes n ON n.ref=? AND n.target=c.oid "
    )

    def blobs_ready(self) -> None:
        """Make sure every indexed commit's changed files are indexed (the host defers them)."""

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
        *,
        keep: Callable[[str], object] | None = None,
    ) -> list[CommitRow]:
        """The rows ``where`` selects (those whose message ``keep`` accepts, when given),
        newest first (time, then rowid; a NULL time last).

        Sorted here, not by SQLite: SQLite sorts the whole rows, messages included, in a
        temporary B-tree; at 100k commits a common word's few thousand grep hits spent a
        third of the query there.
        """
        scope, sparams = self._scope_sql(refs)
        sql = self._SELECT + f"WHERE {where}{scope}"
        with self._lock:
            rows = [CommitRow(*r) for r in self.db.execute(sql, [self.notes_ref, *params, *sparams])]
        if keep is not None:  # before sorting: a regular expression scans every message
            rows = [r for r in rows if keep(r.message)]
        rows.sort(key=_newest_first, reverse=True)  # ORDER BY c.time DESC, c.rowid DESC
        return rows

    def by_oids(self, oids: Sequence[str]) -> list[CommitRow]:
        """The indexed rows of these commits (any order; unknown SHAs are left out)."""
        out: list[CommitRow] = []
        oids = list(oids)
        for i in range(0, len(oids), 500):
            chunk = oids[i : i + 500]
            out += self._rows("c.oid IN ({})".format(",".join("?" * len(chunk))), chunk)
        return out

    def _grep_plan(self, pattern: str, *, fixed: bool, ignore_case: bool) -> tuple[re.Pattern[str], str | None]:
        """The compiled pattern, and the literal text the trigram index can find (None: scan)."""
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
            return rx, literal
        return rx, None

    def grep(self, pattern: str, *, fixed: bool, ignore_case: bool, refs: Sequence[str] | None) -> list[CommitRow]:
        """Commits whose message matches (``git log --grep`` with -F / -P semantics)."""
        rx, literal = self._grep_plan(pattern, fixed=fixed, ignore_case=ignore_case)
        if literal is not None:
            rows = self._rows(*_literal_hits(literal), refs)
        else:
            rows = self._rows("1", (), refs, keep=rx.search)
        return [r for r in rows if rx.search(r.message)]

    def grep_infos(
        self, pattern: str, *, fixed: bool, ignore_case: bool, refs: Sequence[str] | None
    ) -> list[CommitInfo]:
        """:meth:`grep`'s commits as :class:`CommitInfo` s, with their tags and scores.

        A literal of three characters or more (the usual query) is one statement: the
        trigram index's hits and the messages still waiting for its batch, each with its
        score and its tags joined in; the rows come back as plain tuples and each hit
        becomes one object (no row object, no second statement for the tags).
        """
        rx, literal = self._grep_plan(pattern, fixed=fixed, ignore_case=ignore_case)
        if literal is None:
            rows = self._rows("1", (), refs, keep=rx.search)
            rows = [r for r in rows if rx.search(r.message)]
            tags = self.tags_for(r.oid for r in rows)
            return [
                CommitInfo.indexed(r.oid, r.message, r.parent_list, r.time, tuple(tags.get(r.oid, ())), r.score)
                for r in rows
            ]
        # the index gives candidates; instr, in the statement, decides (a literal: the pattern's test)
        return self._infos(*_literal_hits(literal), refs)

    def _infos(
        self,
        where: str,
        params: Iterable[object],
        refs: Sequence[str] | None,
        *,
        keep: Callable[[str], object] | None = None,
    ) -> list[CommitInfo]:
        """:meth:`_rows` as :class:`CommitInfo` s from one statement (tags and score joined), same order."""
        scope, sparams = self._scope_sql(refs)
        sql = _INFO_SELECT + f"WHERE {where}{scope}"
        with self._lock:
            rows = self.db.execute(sql, [self.notes_ref, *params, *sparams]).fetchall()
        if keep is not None:
            rows = [r for r in rows if keep(r[4])]
        # newest first: the rows start with (time known, time, rowid), and a rowid is unique
        rows.sort(reverse=True)
        build = CommitInfo.indexed
        return [build(r[3], r[4], tuple(r[5].split()) if r[5] else (), r[6], _tag_names(r[8]), r[7]) for r in rows]

    def doc_freq(self, stem: str) -> int:
        """How many commit messages hold a word starting with ``stem`` (from the FTS vocabulary)."""
        row = self.db.execute(
            "SELECT COALESCE(SUM(doc), 0) FROM msg_vocab WHERE term >= ? AND term < ?", (stem, stem + "\U0010ffff")
        ).fetchone()
        return int(row[0])

    def commit_count(self) -> int:
        """Number of indexed commits (memoised until the next sync).

        The largest rowid, one B-tree descent: rows are only ever added (a rebuild starts
        the table afresh) and a rolled-back insert gives its rowid back, so the rowids are
        1..n. ``COUNT(*)`` read a whole index: 3 ms of a new process's first search at 100k.
        """
        if self._count is None:
            self._count = int(self.db.execute("SELECT IFNULL(MAX(rowid), 0) FROM commits").fetchone()[0])
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
            tag_sql = "got_tags_value(c.tags)"  # the names kept on the row: no lookup per candidate
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
        self.blobs_ready()
        with self._lock:
            db = self.db
            if len(needle) >= 3:
                cand = db.execute(
                    "SELECT oid, text FROM blobs WHERE rowid IN (SELECT rowid FROM blob_tri WHERE blob_tri MATCH ?) "
                    "AND instr(text, ?) > 0",
                    (_fts_phrase(needle[:MAX_FTS_PHRASE]), needle),
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
        # one statement whatever the number of commits (the SHAs as one JSON array: a
        # statement of its own per 500 placeholders cost more than the lookups), answered
        # from the (target, name) index alone, already in name order per commit
        with self._lock:
            for name, target in self.db.execute(
                "SELECT name, target FROM tags WHERE target IN (SELECT value FROM json_each(?)) ORDER BY target, name",
                (json.dumps(oids),),
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
                if refs is None:
                    # two descents of the time index: MIN and MAX in one SELECT scan every row
                    row = self.db.execute(
                        "SELECT (SELECT MIN(time) FROM commits), (SELECT MAX(time) FROM commits)"
                    ).fetchone()
                else:
                    scope, sparams = self._scope_sql(refs)
                    row = self.db.execute(
                        f"SELECT MIN(c.time), MAX(c.time) FROM commits c WHERE 1{scope}", sparams
                    ).fetchone()
                self._times[key] = (row[0] or 0, row[1] or 0)
            return self._times[key]
