"""The sync a query would pay after our own write is paid by the write (issue 13, part 1).

An agent writes a node, then searches: the write applies its own commit, note and tag to
the derived index (``DerivedIndex.sync_after_write``), so the query right after it runs
no SQLite transaction and lists no ref directory (its inotify watch is quiet). What is
checked, on real repositories, with SQLite's trace hook and the real ``git``:

* the query right after a write syncs nothing, and its answers include the write;
* a process writing many times between queries still syncs once per query;
* a write never waits for an index another process holds: its moves stay pending and
  the next query applies them;
* a change by stock git right after our write is still found.
"""

from __future__ import annotations

import sqlite3

from got_core import ReasoningRepo
from tests.core.test_index_sync import agrees_with_fresh_index, node, stock


def _repo(tmp_path) -> tuple[ReasoningRepo, list[str]]:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for i in range(6):
        repo.commit_node(node(f"alpha history {i}", i / 10))
    repo.grep("alpha")  # opens the index; the next write is after a query
    repo.commit_node(node("alpha opening", 0.2))  # its sync opens the ref watches
    repo.grep("alpha")
    repo.grep("alpha")  # a look whose directories were watched since before it
    index = repo._index
    assert index is not None and index._watch is not None, "inotify is available on Linux's local file systems"
    statements: list[str] = []
    index.db.set_trace_callback(statements.append)
    return repo, statements


def _writes(statements: list[str]) -> list[str]:
    return [s for s in statements if s.startswith(("BEGIN", "INSERT", "DELETE", "COMMIT"))]


def test_the_query_right_after_our_own_write_has_nothing_to_sync(tmp_path):
    repo, statements = _repo(tmp_path)
    # words no hex node id in a message starts with (a digit did, at random: an older
    # commit then matched every keyword and, in the same second, won the tie on its SHA)
    for i in ("kiwi", "lime", "mango"):
        written = repo.commit_node(node(f"alpha fresh {i}", 0.9))
        assert sum(s.startswith("BEGIN IMMEDIATE") for s in statements) == 1, "the write applied itself"
        statements.clear()
        found = {c.oid: (c.score, c.tags) for c in repo.grep(f"fresh {i}")}
        assert found == {written.oid: (0.9, (f"success_{written.node_id}",))}
        assert _writes(statements) == [], "the query after a write must not sync again"
        hits = repo.search(f"alpha fresh {i}", k=1)
        assert hits[0].oid == written.oid and hits[0].score == 0.9
        assert _writes(statements) == []
        statements.clear()
    agrees_with_fresh_index(repo, tmp_path, "after-write")


def test_writes_between_two_queries_sync_once_at_the_query(tmp_path):
    repo, statements = _repo(tmp_path)
    written = [repo.commit_node(node(f"alpha burst {i}", 0.5)).oid for i in range(4)]
    # the first write follows a query and syncs; the others wait for the next query
    assert sum(s.startswith("BEGIN IMMEDIATE") for s in statements) == 1
    statements.clear()
    assert {c.oid for c in repo.grep("burst")} == set(written)
    assert sum(s.startswith("BEGIN IMMEDIATE") for s in statements) == 1
    agrees_with_fresh_index(repo, tmp_path, "burst")


def test_a_write_does_not_wait_for_an_index_another_process_holds(tmp_path):
    repo, statements = _repo(tmp_path)
    other = sqlite3.connect(str(repo.gitdir / "got" / "index.sqlite3"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's sync, in progress
    try:
        written = repo.commit_node(node("alpha while held", 0.4))
        assert not any(s.startswith("COMMIT") for s in statements), "nothing applied while the index is held"
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert written.oid in {c.oid for c in repo.grep("while held")}, "the next query applies the pending move"
    assert written.oid in {c.oid for c in repo.tagged("success_")}
    agrees_with_fresh_index(repo, tmp_path, "held")


def test_stock_git_right_after_our_write_is_found(tmp_path):
    repo, _statements = _repo(tmp_path)
    ours = repo.commit_node(node("alpha ours", 0.3)).oid
    side = stock(repo.gitdir, "commit-tree", "-p", ours, "-m", "alpha stock side", f"{ours}^{{tree}}").strip()
    stock(repo.gitdir, "update-ref", "refs/heads/master", side, ours)  # the ref our write just moved
    stock(repo.gitdir, "tag", "mark-side", side)
    assert {c.oid for c in repo.grep("alpha", refs=["master"])} >= {ours, side}
    assert side in {c.oid for c in repo.tagged("mark-")}
    agrees_with_fresh_index(repo, tmp_path, "stock-after-ours")
