"""A literal grep's candidates, and what finding them reads from the index (issue 13).

``git log --grep -F`` is a substring match, case-sensitive. The index finds a literal's
candidates in a suffix index of the messages' ASCII letter-and-digit runs (every suffix of
every run, lowercased, cut to :data:`SUFFIX_LEN`, without positions), or, for a literal with
no run :data:`MIN_SUFFIX_RUN` long, in a trigram index without positions; ``instr`` in the
same statement confirms each one. Checked here, with the real ``git`` as the oracle:

* grep answers what ``git log --grep -F`` answers for needles inside, at the ends of and
  across runs, in other case, next to non-ASCII letters, longer than a suffix term, with
  quotes and FTS5 syntax in them, with no ASCII run at all and with short runs only; from
  the index's batches and from the messages still waiting for the next one, scoped and
  not; pickaxe (``git log -S``) answers as git does too;
* what the query reads: the index entries of the terms it asks (FTS5 decodes every entry
  of every term a query names: one per row without positions, one per occurrence with
  them) are about the hits, not the occurrences of the needle's trigrams. Before, a common
  word's trigram phrase read every occurrence of its trigrams; at 100k commits that was
  most of the first query;
* an index file of the schema before (trigram positions, no suffix index) is rebuilt once
  when a new process opens it, and answers the same.

The SQL the index runs is observed with SQLite's own trace hook; the entries a term holds
come from FTS5's own ``fts5vocab`` tables.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from gitcli import stock

from got_core import Node, ReasoningRepo
from got_core.storage.index_write import TRI_BATCH
from got_core.types import tag_value


def git_grep(gitdir: Path, needle: str, *revs: str) -> set[str]:
    return set(stock(gitdir, "log", *(revs or ("--all",)), "-F", f"--grep={needle}", "--format=%H").split())


THOUGHTS = [
    "alpha kalomi beta",
    "xkalomi inside a longer word",
    "kalomix at the start of one",
    "KALOMI in capitals, and Kalomi",
    "café kalomi naïve",  # next to non-ASCII letters
    "caféine and naïveté",
    "needle-06 needle-061 needle_06",
    'a "quoted" word and a * star and (parens) and NEAR/2 and AND OR NOT',
    "supercalifragilisticexpialidocious and supercalifragilisticexpialidociouser",
    "ab cd ef gh",
    "über straße größe",
    "tab\tseparated\tvalues",
    "digits 1234567890 0123",
    "e\u0301 combining accent kalo\u0301mi",
    "日本語のテキスト kalomi",
]

NEEDLES = [
    "kalomi",
    "Kalomi",
    "KALOMI",
    "alomi",
    "kalomix",
    "xkalomi",
    "kalomi ",
    " kalomi",
    " kalomi beta",
    "alpha kalomi",
    "café",
    "fé kal",
    "éine",
    "naïve",
    "needle-06",
    "needle-061",
    "eedle-0",
    "le_06",
    '"quoted"',
    "* star",
    "(parens)",
    "NEAR/2",
    "AND OR",
    "supercalifragilisticexpialidocious",
    "califragilisticexpialidociouser",
    "ragilisticexpialidocious and",
    "ab cd",
    "b cd e",
    "über",
    "straße",
    "größe",
    "ße gr",
    "tab\tsep",
    "34567",
    "0123",
    "kalo\u0301mi",
    "日本語",
    "テキスト kalo",
    "absent-word",
    "xyz",
    '"qu',  # no run of four: the trigram index, with FTS5's quote and operators in the text
    "* s",
    "d (p",
    '"a"',
]


def build(tmp_path: Path) -> ReasoningRepo:
    """The thoughts in the index's batch (a full one, by padding), then again waiting for the next."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for i, thought in enumerate(THOUGHTS):
        repo.commit_node(Node(thought, scores={"s_comb": 0.5}, problem_id="p", outcome="success"))
        if i == 4:
            repo.create_branch("side", "master")
    for n in range(TRI_BATCH):
        repo.commit_node(Node(f"padding {n}", scores={"s_comb": 0.5}, problem_id="p", outcome="failed"))
    repo.grep("sync")  # a full batch: everything so far goes to the indexes
    for thought in THOUGHTS[::2]:
        repo.commit_node(Node(thought + " again", scores={"s_comb": 0.5}, problem_id="p", outcome="success"))
    repo.grep("sync")
    return repo


def test_a_literal_grep_answers_as_git_from_the_indexes_and_the_waiting_messages(tmp_path):
    repo = build(tmp_path)
    index = repo._index
    assert index is not None
    assert 0 < index.db.execute("SELECT COUNT(*) FROM untri").fetchone()[0] < TRI_BATCH, "some messages wait"
    for needle in NEEDLES:
        hits = [h.oid for h in repo.grep(needle, fixed=True)]
        assert set(hits) == git_grep(repo.gitdir, needle), needle
        assert len(hits) == len(set(hits)), f"{needle!r}: a commit answered twice"
        side = {h.oid for h in repo.grep(needle, fixed=True, refs=["side"])}
        assert side == git_grep(repo.gitdir, needle, "refs/heads/side"), needle
    assert len(repo.grep("kalomi", fixed=True)) >= 8, "the needle is asked in both places"
    repo.close()


def test_pickaxe_answers_as_git(tmp_path):
    repo = build(tmp_path)
    for needle in ("kalomi", "Kalomi", "café", "needle-06", "xyz", "ab", "größe", "supercalifragilistic"):
        want = set(stock(repo.gitdir, "log", "--all", "-S", needle, "--format=%H").split())
        assert {r.oid for r in repo.pickaxe(needle)} == want, needle
    repo.close()


# ---------------------------------------------------------------- what finding the candidates reads
_MATCH = re.compile(r"FROM (\w+) WHERE \1 MATCH '((?:[^']|'')*)'")
_TERM = re.compile(r'"((?:[^"]|"")*)"(\*?)')


def entries_read(db: sqlite3.Connection, sql: str) -> tuple[str, int]:
    """The FTS5 table a traced statement asks, and the index entries its terms hold.

    FTS5 decodes a term's whole list to answer a query: one entry per row that holds the
    term (``detail=none``) or one per occurrence (positions kept). A prefix term reads
    every term it starts; a trigram table's string asks each of its trigrams.
    """
    found = _MATCH.search(sql)
    assert found, sql
    table, query = found.group(1), found.group(2).replace("''", "'")
    db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.v_{table} USING fts5vocab(main, {table}, 'row')")
    tokenizer = db.execute("SELECT sql FROM sqlite_master WHERE name=?", (table,)).fetchone()[0]
    total = 0
    for text, star in _TERM.findall(query):
        text = text.replace('""', '"')
        if "trigram" in tokenizer:
            terms = [text[i : i + 3] for i in range(len(text) - 2)]
        else:
            terms = [text.lower()]
        for term in terms:
            if star:
                row = db.execute(
                    f"SELECT SUM(cnt) FROM temp.v_{table} WHERE term >= ? AND term < ?", (term, term + "\U0010ffff")
                ).fetchone()
            else:
                row = db.execute(f"SELECT cnt FROM temp.v_{table} WHERE term = ?", (term,)).fetchone()
            total += (row[0] or 0) if row else 0
    return table, total


def test_a_common_word_s_candidates_read_about_its_hits_not_its_trigrams_occurrences(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    words = ["kalomi", "kalosi", "kalonu", "mikalo", "lomika", "alomin", "omikal", "salomi"]
    for n in range(3 * TRI_BATCH):  # three full batches: the waiting messages are none or few
        thought = " ".join(words[(n * 7 + k) % len(words)] for k in range(12))
        if n % 4 == 0:
            thought += " target"
        repo.commit_node(Node(thought, scores={"s_comb": 0.5}, problem_id="p", outcome="success"))
    repo.grep("sync")
    index = repo._index
    assert index is not None
    statements: list[str] = []
    index.db.set_trace_callback(statements.append)
    for needle in ("kalomi", "target", "omika"):
        statements.clear()
        hits = repo.grep(needle, fixed=True)
        assert {h.oid for h in hits} == git_grep(repo.gitdir, needle), needle
        query = [s for s in statements if "MATCH" in s and not s.startswith("--")]
        assert len(query) == 1, query
        table, read = entries_read(index.db, query[0])
        # one entry per hit, and a few for case variants and the other words a prefix starts
        assert read <= 2 * len(hits) + 8, f"{needle}: {read} index entries in {table} for {len(hits)} hits"
    repo.close()


def test_an_index_of_the_schema_before_is_rebuilt_once_and_answers_the_same(tmp_path):
    repo = build(tmp_path)
    before = {n: {h.oid for h in repo.grep(n, fixed=True)} for n in NEEDLES[:12]}
    path = repo.gitdir / "got" / "index.sqlite3"
    repo.close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("DROP TABLE msg_sfx")  # as the release before wrote it: trigram positions, no suffixes
    db.execute("DROP TABLE msg_tri")
    db.execute(
        "CREATE VIRTUAL TABLE msg_tri USING fts5(message, content='', columnsize=0, tokenize='trigram case_sensitive 1')"
    )
    db.execute("UPDATE meta SET value='8' WHERE key='schema'")
    db.close()
    again = ReasoningRepo(repo.gitdir)
    assert {n: {h.oid for h in again.grep(n, fixed=True)} for n in before} == before
    index = again._index
    assert index is not None
    statements: list[str] = []
    index.db.set_trace_callback(statements.append)
    again.grep("kalomi", fixed=True)
    assert not any(s.startswith(("INSERT", "DROP", "CREATE")) for s in statements), "rebuilt twice"
    again.close()


# ---------------------------------------------------------------- the tag names kept on each row
def _points_at(gitdir: Path, oid: str) -> tuple[str, ...]:
    out = stock(gitdir, "for-each-ref", "--points-at", oid, "--format=%(refname:lstrip=2)", "refs/tags")
    return tuple(sorted(out.split()))


def _check_tags(repo: ReasoningRepo) -> None:
    """Every hit's tags (grep) and tag term (search) are what git's tags say now."""
    hits = repo.grep("alpha", fixed=True)
    assert {h.oid for h in hits} == git_grep(repo.gitdir, "alpha")
    for h in hits:
        assert h.tags == _points_at(repo.gitdir, h.oid), h.oid
    # only the tag term counts: rho is the tag value of the commit's tags as git has them
    ranked = repo.search("alpha", k=100, weights={"score": 0.0, "recency": 0.0, "tag": 1.0})
    assert {r.oid for r in ranked} == {h.oid for h in hits}
    for r in ranked:
        assert r.rho == tag_value(_points_at(repo.gitdir, r.oid))[0], r.oid


def test_the_tags_kept_on_each_row_follow_git_as_tags_move_vanish_and_arrive(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for n in range(6):
        repo.commit_node(Node(f"alpha {n}", scores={"s_comb": 0.5}, problem_id="p", outcome="unknown"))
    oids = stock(repo.gitdir, "rev-list", "refs/heads/master").split()
    _check_tags(repo)
    stock(repo.gitdir, "tag", "success_a", oids[1])
    stock(repo.gitdir, "tag", "zz", oids[1])
    stock(repo.gitdir, "tag", "failed_b", oids[2])
    _check_tags(repo)
    stock(repo.gitdir, "tag", "-f", "success_a", oids[3])  # moved: the old commit loses it
    stock(repo.gitdir, "tag", "-d", "failed_b")  # deleted
    stock(repo.gitdir, "tag", "-a", "-m", "annotated", "best", oids[2])  # peeled to its commit
    _check_tags(repo)
    # a tag on a commit no branch reaches: indexed with its tag from the start
    tree = stock(repo.gitdir, "mktree").strip()
    lone = stock(repo.gitdir, "commit-tree", "-m", "alpha lone", tree).strip()
    stock(repo.gitdir, "tag", "failed_lone", lone)
    _check_tags(repo)
    repo.close()
    # while no process of ours runs: the next one's first query sees it
    stock(repo.gitdir, "tag", "-d", "zz")
    stock(repo.gitdir, "tag", "success_c", oids[4])
    stock(repo.gitdir, "pack-refs", "--all")
    again = ReasoningRepo(repo.gitdir)
    _check_tags(again)
    again.reindex()
    _check_tags(again)
    again.close()


# ---------------------------------------------------------------- what a new process's first search reads
def test_a_new_process_first_search_scans_no_table_or_index_of_commits(tmp_path):
    """The commit count (the IDF cut) and the time range (recency) are B-tree descents, not scans."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for n in range(12):
        repo.commit_node(Node(f"alpha beta {n}", scores={"s_comb": n / 12}, problem_id="p", outcome="success"))
    want = [h.oid for h in repo.search("alpha beta", k=3)]
    repo.close()
    fresh = ReasoningRepo(repo.gitdir)
    fresh.grep("open the index")
    index = fresh._index
    assert index is not None
    index._count = None  # as a new process: nothing memoised (the grep's sync may have filled it)
    index._times.clear()
    statements: list[str] = []
    index.db.set_trace_callback(statements.append)
    assert [h.oid for h in fresh.search("alpha beta", k=3)] == want
    index.db.set_trace_callback(None)
    ours = [s for s in statements if not s.startswith("--") and "FROM commits" in s]
    assert len(ours) >= 3, ours  # the count, the time range, the ranking
    for sql in ours:
        plan = " ".join(str(r[3]) for r in index.db.execute("EXPLAIN QUERY PLAN " + sql))
        assert "SCAN c" not in plan and "SCAN commits" not in plan, f"{sql[:80]}: {plan}"
    assert index.commit_count() == int(stock(repo.gitdir, "rev-list", "--count", "--branches", "--tags"))
    oldest, newest = index.time_range(None)
    times = [int(t) for t in stock(repo.gitdir, "log", "--branches", "--tags", "--format=%ct").split()]
    assert (oldest, newest) == (min(times), max(times))
    fresh.close()
