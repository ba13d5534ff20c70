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

The SQL the index runs is observed with SQLite's own trace hook.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

from got_core import Node, ReasoningRepo
from got_core.storage.index_write import TRI_BATCH

ENV = {
    "GIT_AUTHOR_NAME": "stock",
    "GIT_AUTHOR_EMAIL": "stock@example.org",
    "GIT_COMMITTER_NAME": "stock",
    "GIT_COMMITTER_EMAIL": "stock@example.org",
}


def node(thought: str, outcome: str = "success") -> Node:
    return Node(thought, scores={"s_comb": 0.5}, problem_id="p", outcome=outcome, trace=[{"step": 1}])


def stock(gitdir: Path, *args: str) -> str:
    """The real git, with an identity and no user configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(ENV, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    proc = subprocess.run(["git", f"--git-dir={gitdir}", *args], capture_output=True, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


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
