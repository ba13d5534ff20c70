"""What the first query of a new process costs in SQLite, and that its answers did not change.

Issue 13 ("first query of a new process"): a new process's first grep spends almost all
its time in the query itself, not in the sync (nothing moved: one SQLite read and a few
``lstat`` calls). Its fixed costs, measured at 100k commits, were the tags of the hits
looked up with a statement of its own per 500 commits, the hits' rows (messages
included) sorted by SQLite in a temporary B-tree, and an OR that made SQLite test every
trigram hit against the messages still waiting for the trigram batch. What is checked
here, with the real ``git`` as the oracle where it has an answer:

* grep answers what ``git log --grep -F`` answers, in the index's order (time, then
  row, newest first: the order the query had when SQLite sorted), with messages in the
  trigram index and messages still waiting for its batch, scoped and not;
* the tags of any number of commits come from one statement answered from an index
  alone, each commit's names sorted, as ``git for-each-ref --points-at`` lists them;
* an index file written before the (target, name) index gains it when it is opened,
  answers the same, and a new process still sees what stock git changed while no
  process ran.

Then what each hit cost (a row object, a second statement for its tags, a third for the
messages still waiting for the trigram batch, a ``CommitInfo`` built field by field through
the frozen dataclass's ``__setattr__``):

* a grep of a literal is one statement (the sync's state read aside): the trigram index's
  hits and the waiting messages' as one ``UNION ALL``, each hit's score and tags joined
  in; no row object is built, and one ``CommitInfo`` per hit, not through ``__init__``;
* its answers are what git says (``git log --grep``, the notes, ``for-each-ref
  --points-at``), what the row path (``grep`` + ``rows_to_infos``) answers, in the same
  order, and what a fresh rebuild of the index answers;
* ``CommitInfo.indexed`` builds the same object as the constructor.

The SQL the index runs is observed with SQLite's own trace hook.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest
from gitcli import stock

from got_core import Node, ReasoningRepo
from got_core.repo.retrieval import rows_to_infos
from got_core.storage import index_query
from got_core.storage.index_query import MAX_FTS_PHRASE
from got_core.storage.index_write import TRI_BATCH
from got_core.types import CommitInfo


def node(thought: str, outcome: str = "success") -> Node:
    return Node(thought, scores={"s_comb": 0.5}, problem_id="p", outcome=outcome, trace=[{"step": 1}])


def traced(repo: ReasoningRepo) -> list[str]:
    """Every SQL statement the repository's index runs from now on."""
    repo.grep("open the index")
    index = repo._index
    assert index is not None
    statements: list[str] = []
    index.db.set_trace_callback(statements.append)
    return statements


def sorted_by_sqlite(repo: ReasoningRepo, oids: list[str]) -> list[str]:
    """``oids`` in the order the query had when SQLite sorted its rows (the oracle for the order)."""
    index = repo._index
    assert index is not None
    marks = ",".join("?" * len(oids))
    rows = index.db.execute(
        f"SELECT oid FROM commits WHERE oid IN ({marks}) ORDER BY time DESC, rowid DESC", oids
    ).fetchall()
    return [r[0] for r in rows]


def git_grep(gitdir: Path, needle: str, *revs: str) -> set[str]:
    return set(stock(gitdir, "log", *(revs or ("--all",)), "-F", f"--grep={needle}", "--format=%H").split())


def test_grep_answers_as_git_in_the_index_order_from_the_trigram_batch_and_the_waiting_messages(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    # more than a trigram batch, so some messages are in msg_tri and the last ones still wait
    for n in range(TRI_BATCH + 5):
        repo.commit_node(node(f"alpha needle-{n:03d} {'odd' if n % 2 else 'even'}"))
        if n == TRI_BATCH // 2:
            repo.create_branch("side", "master")
        if n == TRI_BATCH:
            repo.grep("sync")  # the messages so far go to msg_tri as one batch; the next ones wait
    repo.grep("sync")
    index = repo._index
    assert index is not None
    waiting = index.db.execute("SELECT COUNT(*) FROM untri").fetchone()[0]
    assert 0 < waiting < TRI_BATCH + 5, "both the trigram index and the waiting messages are asked"
    for needle, revs in (("needle-", ()), ("odd", ()), ("even", ("side",)), ("needle-06", ()), ("absent", ())):
        hits = [c.oid for c in repo.grep(needle, refs=list(revs) or None, fixed=True)]
        assert set(hits) == git_grep(repo.gitdir, needle, *[f"refs/heads/{r}" for r in revs]), needle
        assert len(hits) == len(set(hits)), f"{needle}: a commit answered twice"
        assert hits == sorted_by_sqlite(repo, hits), needle
    assert len(repo.grep("needle-")) == TRI_BATCH + 5
    repo.close()


def test_grep_has_sqlite_sort_no_rows(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for n in range(TRI_BATCH + 5):
        repo.commit_node(node(f"alpha needle-{n:03d}"))
    statements = traced(repo)
    assert len(repo.grep("needle-")) == TRI_BATCH + 5
    index = repo._index
    assert index is not None
    queries = [s for s in statements if s.lstrip().startswith("SELECT") and "FROM commits c" in s]
    assert queries
    for sql in queries:
        # the statements as traced hold their parameters inline; EXPLAIN QUERY PLAN takes them so
        plan = " ".join(str(r[3]) for r in index.db.execute("EXPLAIN QUERY PLAN " + sql))
        assert "TEMP B-TREE" not in plan, f"SQLite sorts the hits' rows: {plan}"
    repo.close()


def test_the_tags_of_many_commits_are_one_statement_from_an_index_alone_sorted_per_commit(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for n in range(1200):  # above the 500 placeholders a statement used to take
        repo.commit_node(node(f"alpha {n}", outcome="success" if n % 3 else "failed"))
    oids = stock(repo.gitdir, "rev-list", "refs/heads/master").split()
    for i, oid in enumerate(oids[:40]):
        stock(repo.gitdir, "tag", f"zz-mark-{i}", oid)
        stock(repo.gitdir, "tag", f"aa-mark-{i}", oid)
    statements = traced(repo)
    index = repo._index
    assert index is not None
    tags = index.tags_for(oids)
    lookups = [s for s in statements if "FROM tags" in s]
    assert len(lookups) == 1, f"{len(lookups)} statements for the tags of {len(oids)} commits"
    plan = " ".join(str(r[3]) for r in index.db.execute("EXPLAIN QUERY PLAN " + lookups[0]))
    assert "COVERING INDEX" in plan and "TEMP B-TREE" not in plan, plan
    for oid in oids[:60] + oids[-5:]:
        want = stock(repo.gitdir, "for-each-ref", "--points-at", oid, "--format=%(refname:lstrip=2)", "refs/tags")
        assert tags.get(oid, []) == sorted(want.split()), oid
    assert index.tags_for([]) == {}
    assert index.tags_for(["0" * 40]) == {}
    repo.close()


def test_an_index_written_before_the_tags_index_gains_it_and_a_new_process_still_sees_stock_git(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for n in range(5):
        repo.commit_node(node(f"alpha {n}"))
    before = {c.oid: c.tags for c in repo.grep("alpha")}
    path = repo.gitdir / "got" / "index.sqlite3"
    repo.close()
    # the file as the release before wrote it: tags looked up by target through the rowid
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("DROP INDEX tags_target_name")
    db.execute("CREATE INDEX tags_target ON tags(target)")
    db.close()
    # while no process of ours runs, stock git tags a commit and moves a branch
    oids = stock(repo.gitdir, "rev-list", "refs/heads/master").split()
    stock(repo.gitdir, "tag", "mark-stock", oids[2])
    stock(repo.gitdir, "update-ref", "refs/heads/stock", oids[3])
    again = ReasoningRepo(repo.gitdir)
    after = {c.oid: c.tags for c in again.grep("alpha")}
    assert after.pop(oids[2]) == tuple(sorted([*before.pop(oids[2]), "mark-stock"]))
    assert after == before
    assert {c.oid for c in again.grep("alpha", refs=["stock"])} == git_grep(again.gitdir, "alpha", "refs/heads/stock")
    names = {r[0] for r in again._index.db.execute("SELECT name FROM sqlite_master WHERE tbl_name='tags'")}
    assert "tags_target_name" in names and "tags_target" not in names
    again.close()


def test_a_new_process_first_query_takes_no_write_lock_when_nothing_moved(tmp_path):
    """Opening a current index is one read: a reader is not held up by a writer's transaction."""
    import threading

    from timeouts import TEST_TIMEOUT

    repo = ReasoningRepo.init(tmp_path / "r.git")
    for n in range(3):
        repo.commit_node(node(f"alpha {n}"))
    want = [c.oid for c in repo.grep("alpha")]
    repo.close()
    holder = sqlite3.connect(repo.gitdir / "got" / "index.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's sync, in the middle of its transaction
    got: list[object] = []
    fresh = ReasoningRepo(repo.gitdir)
    worker = threading.Thread(target=lambda: got.append(_first_query(fresh)))
    worker.start()
    worker.join(TEST_TIMEOUT)
    holder.execute("ROLLBACK")
    holder.close()
    worker.join(TEST_TIMEOUT)
    fresh.close()
    assert got == [want], "the first query waited for the writer (or failed)"


def _first_query(repo: ReasoningRepo) -> object:
    try:
        return [c.oid for c in repo.grep("alpha")]
    except sqlite3.OperationalError as exc:  # busy: it wanted the write lock
        return exc


#: longer than the phrase handed to FTS5, so the text decides past it
LONG = "x" * (MAX_FTS_PHRASE + 8)


def build(tmp_path) -> ReasoningRepo:
    """More than a trigram batch (some messages wait), a side branch, rescored notes and extra tags."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for n in range(TRI_BATCH + 6):
        tail = f" {LONG}-{n % 3}" if n % 5 == 0 else ""
        repo.commit_node(
            node(f"alpha needle-{n:03d} {'odd' if n % 2 else 'even'}{tail}", "success" if n % 3 else "failed")
        )
        if n == TRI_BATCH // 2:
            repo.create_branch("side", "master")
        if n == TRI_BATCH:
            repo.grep("sync")  # the messages so far go to msg_tri as one batch; the next ones wait
    oids = stock(repo.gitdir, "rev-list", "refs/heads/master").split()
    for i, oid in enumerate(oids[:12]):
        stock(repo.gitdir, "tag", f"zz-mark-{i}", oid)  # several tags on one commit, out of name order
        stock(repo.gitdir, "tag", f"aa-mark-{i}", oid)
    repo.set_notes({oid: {"s_comb": 0.25 + i / 100} for i, oid in enumerate(oids[3:9])})
    # a commit with no note and no Got-Score trailer: its score is None
    empty = stock(repo.gitdir, "mktree").strip()
    plain = stock(repo.gitdir, "commit-tree", "-m", "plain needle-999 commit", "-p", oids[0], empty).strip()
    stock(repo.gitdir, "update-ref", "refs/heads/plain", plain)
    repo.grep("sync")
    return repo


NEEDLES = (
    ("needle-", ()),
    ("odd", ()),
    ("even", ("side",)),
    ("needle-06", ()),
    (LONG + "-1", ()),
    ("absent", ()),
)


def test_a_literal_grep_is_one_statement_no_row_object_and_one_result_object_per_hit(tmp_path, monkeypatch):
    repo = build(tmp_path)
    index = repo._index
    assert index is not None
    assert 0 < index.db.execute("SELECT COUNT(*) FROM untri").fetchone()[0] < TRI_BATCH, "some messages wait"
    rows_built: list[object] = []
    plain_row = index_query.CommitRow

    class CountedRow(plain_row):  # type: ignore[misc,valid-type]
        def __new__(cls, *args: object) -> CountedRow:
            rows_built.append(args)
            return super().__new__(cls, *args)

    monkeypatch.setattr(index_query, "CommitRow", CountedRow)
    inits: list[object] = []
    plain_init = CommitInfo.__init__

    def counted_init(self: CommitInfo, *args: object, **kwargs: object) -> None:
        inits.append(args)
        plain_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(CommitInfo, "__init__", counted_init)
    statements = traced(repo)
    for needle, revs in NEEDLES:
        statements.clear()
        rows_built.clear()
        inits.clear()
        hits = repo.grep(needle, refs=list(revs) or None, fixed=True)
        # FTS5's own statements on its shadow tables come as "-- ..." lines; the sync's state read is one more
        ours = [s for s in statements if not s.startswith("--") and "FROM meta WHERE key='obs_gen'" not in s]
        assert len(ours) == 1, f"{needle}: {len(ours)} statements: {ours}"
        assert "untri" in ours[0] and ("msg_sfx" in ours[0] or "msg_tri" in ours[0])
        # the tag names are on the hit's row: no lookup in the tags table per hit
        assert "FROM tags" not in ours[0] and "c.tags" in ours[0], ours[0]
        assert rows_built == [], f"{needle}: {len(rows_built)} row objects for {len(hits)} hits"
        assert inits == [], f"{needle}: {len(inits)} CommitInfo built through __init__"
        assert all(type(h) is CommitInfo for h in hits)
    assert len(repo.grep("needle-", fixed=True)) == TRI_BATCH + 7
    repo.close()


def test_a_literal_grep_answers_as_git_as_the_row_path_and_as_a_fresh_rebuild(tmp_path):
    repo = build(tmp_path)
    index = repo._index
    assert index is not None
    answers = {}
    for needle, revs in NEEDLES:
        refs = [f"refs/heads/{r}" for r in revs]
        hits = repo.grep(needle, refs=list(revs) or None, fixed=True)
        answers[needle] = hits
        assert {h.oid for h in hits} == git_grep(repo.gitdir, needle, *refs), needle
        assert len(hits) == len({h.oid for h in hits}), f"{needle}: a commit answered twice"
        # the row path, as the query was before: same objects, same order
        assert hits == rows_to_infos(index, index.grep(needle, fixed=True, ignore_case=False, refs=refs or None))
        for h in hits:
            raw = stock(repo.gitdir, "show", "-s", "--format=%P%x00%ct%x00%B", h.oid)
            parents, when, message = raw.split("\0")
            assert h.parents == tuple(parents.split()) and h.time == int(when)
            assert h.message == message[:-1]  # git adds the newline after %B
            tags = stock(repo.gitdir, "for-each-ref", "--points-at", h.oid, "--format=%(refname:lstrip=2)", "refs/tags")
            assert h.tags == tuple(sorted(tags.split())), h.oid
            note = stock(repo.gitdir, "notes", "--ref=refs/notes/got", "list")
            noted = dict(line.split()[::-1] for line in note.splitlines())
            if h.oid in noted:
                want = json.loads(stock(repo.gitdir, "cat-file", "blob", noted[h.oid]))["s_comb"]
            else:
                want = h.trailers().get("Score")
                want = float(want) if want is not None else None
            assert h.score == want, h.oid
    assert any(len(h.tags) > 1 for h in answers["needle-"]), "a commit with several tags was asked"
    assert any(h.score is None for h in answers["needle-"]), "a commit with no score was asked"
    # a rebuild indexes the commits in another order: commits of the same second come in
    # another row order (the tie-break), the same objects
    repo.reindex()
    for needle, revs in NEEDLES:
        again = repo.grep(needle, refs=list(revs) or None, fixed=True)
        assert {h.oid: h for h in again} == {h.oid: h for h in answers[needle]}, needle
        assert [h.time for h in again] == sorted((h.time for h in again), reverse=True)
    repo.close()
    fresh = ReasoningRepo(repo.gitdir)  # a new process's first query reads what this one wrote
    assert {h.oid: h for h in fresh.grep("needle-", fixed=True)} == {h.oid: h for h in answers["needle-"]}
    fresh.close()


def test_commit_info_indexed_is_the_constructor_s_object():
    args = ("a" * 40, "msg\n\nGot-Score: 0.5\n", ("b" * 40,), 17, ("aa", "zz"), 0.5)
    fast = CommitInfo.indexed(*args)
    slow = CommitInfo(args[0], args[1], args[2], args[3], "", (), args[4], args[5])
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert dataclasses.asdict(fast) == dataclasses.asdict(slow)
    assert dataclasses.replace(fast, score=1.0) == dataclasses.replace(slow, score=1.0)
    assert fast.summary == "msg" and fast.trailers() == {"Score": "0.5"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.score = 1.0  # type: ignore[misc]
