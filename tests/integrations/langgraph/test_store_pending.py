"""GitStore's held index rows: a process's latest small commits stay in memory until a read
needs them in the index file; gets answer from them, every other read, another writer's
move, close and a killed process all leave the index agreeing with git."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from gitcli import git, store_items
from langgraph.store.base import GetOp, PutOp

from got_integrations.langgraph import GitStore
from got_integrations.langgraph._store_pending import MAX_COMMITS


def _file_tip(store: GitStore) -> str | None:
    """The tip the index *file* records, read through a connection of its own."""
    db = sqlite3.connect(store.index.path)
    try:
        row = db.execute("SELECT v FROM meta WHERE k='tip'").fetchone()
    finally:
        db.close()
    return row[0] if row else None


def _truth(gitdir: Path) -> dict[tuple[tuple[str, ...], str], object]:
    return store_items(gitdir)


def _answers(store: GitStore) -> dict[tuple[tuple[str, ...], str], dict]:
    return {(i.namespace, i.key): i.value for i in store.search((), limit=100_000)}


def test_puts_are_one_index_transaction_and_gets_see_them_first(tmp_path):
    gitdir = tmp_path / "h.git"
    store = GitStore(gitdir)
    store.batch([PutOp(("docs",), f"seed{i}", {"v": i}) for i in range(70)])  # a big commit: written at once
    seeded = store.repo.tip(store.ref)
    assert _file_tip(store) == seeded
    store.put(("docs",), "a", {"v": 1})
    first = store.get(("docs",), "a")
    store.put(("docs",), "a", {"v": 2})  # an overwrite of a held row keeps its creation time
    store.put(("docs", "deep"), "b", {"v": 3})
    store.delete(("docs",), "seed0")
    assert _file_tip(store) == seeded  # four commits, none written to the file yet
    again = store.get(("docs",), "a")
    assert again.value == {"v": 2} and again.created_at == first.created_at and again.updated_at > first.updated_at
    assert store.get(("docs",), "seed0") is None and store.get(("docs", "deep"), "b").value == {"v": 3}
    got, missing = store.batch([GetOp(("docs",), "seed1"), GetOp(("docs",), "nothing")])
    assert got.value == {"v": 1} and missing is None
    assert _file_tip(store) == seeded
    # a read the file answers writes them all first
    assert store.list_namespaces() == [("docs",), ("docs", "deep")]
    assert _file_tip(store) == store.repo.tip(store.ref)
    assert _answers(store) == _truth(gitdir)
    store.reindex()
    assert _answers(store) == _truth(gitdir)


def test_a_long_chain_of_puts_is_written_out_and_close_writes_the_rest(tmp_path):
    store = GitStore(tmp_path / "c.git")
    for i in range(MAX_COMMITS + 3):
        store.put(("n",), f"k{i}", {"i": i})
    tip_file = _file_tip(store)
    assert tip_file is not None and tip_file != store.repo.tip(store.ref)  # the first chain went out
    store.close()
    reopened = GitStore(tmp_path / "c.git")
    assert _file_tip(reopened) == reopened.repo.tip(reopened.ref)
    assert len(_answers(reopened)) == MAX_COMMITS + 3


def test_held_rows_expire_like_written_ones(tmp_path):
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    store = GitStore(tmp_path / "t.git", clock=lambda: now[0])
    store.put(("a",), "k", {"v": 1}, ttl=1.0)
    assert store.get(("a",), "k").value == {"v": 1}
    now[0] += timedelta(minutes=2)
    assert store.get(("a",), "k") is None and store.list_namespaces() == []
    assert store.sweep_ttl() == 1 and _truth(tmp_path / "t.git") == {}


def test_another_writer_between_our_puts(tmp_path):
    gitdir = tmp_path / "w.git"
    a, b = GitStore(gitdir), GitStore(gitdir)  # two connections to one index file
    a.put(("x",), "1", {"by": "a"})
    b.put(("x",), "2", {"by": "b"})  # b catches up from the tree diff, then holds its own
    a.put(("x",), "3", {"by": "a"})  # on b's commit: a's held row goes in first
    b.delete(("x",), "1")
    for store in (a, b):
        assert store.get(("x",), "1") is None and store.get(("x",), "2").value == {"by": "b"}
        assert store.get(("x",), "3").value == {"by": "a"}
        assert _answers(store) == _truth(gitdir) == {(("x",), "2"): {"by": "b"}, (("x",), "3"): {"by": "a"}}


_KILLED = textwrap.dedent(
    """
    import os, sys
    from got_integrations.langgraph import GitStore
    store = GitStore(sys.argv[1])
    for i in range(10):
        store.put(("k",), f"k{i}", {"i": i})
    store.delete(("k",), "k3")
    os._exit(0)  # no close: the held rows are lost with the process
    """
)


def test_a_killed_process_loses_only_held_rows_and_the_index_catches_up(tmp_path):
    gitdir = tmp_path / "k.git"
    store = GitStore(gitdir)
    store.put(("k",), "before", {"i": -1})
    store.close()
    subprocess.run([sys.executable, "-c", _KILLED, str(gitdir)], check=True)
    reopened = GitStore(gitdir)
    assert _file_tip(reopened) != reopened.repo.tip(reopened.ref)  # the killed process wrote no row
    assert reopened.get(("k",), "k9").value == {"i": 9} and reopened.get(("k",), "k3") is None
    assert _answers(reopened) == _truth(gitdir) and len(_truth(gitdir)) == 10


def _rows(store: GitStore) -> list[tuple]:
    store.list_namespaces()  # held rows into the file
    db = sqlite3.connect(store.index.path)
    try:
        return db.execute("SELECT * FROM items ORDER BY path").fetchall()
    finally:
        db.close()


def test_the_rows_a_write_hands_over_are_the_rows_a_rebuild_reads(tmp_path):
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"r" * 16)
    now = [datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)]
    for name, options in (
        ("plain", {}),
        ("sealed", {"serde": serde}),
        ("both", {"serde": JsonPlusSerializer(), "readable": True}),
    ):
        store = GitStore(tmp_path / f"{name}.git", clock=lambda: now[0], **options)
        store.batch(
            [PutOp(("big", f"n{i % 3}"), f"k{i}", {"i": i, "t": ("a", i)}, index=["i"]) for i in range(70)]
        )  # a bulk commit (written at once) ...
        store.put(("ü", "läbel"), "kéy\x00nul", {"text": "ünïcode", "nested": {"x": [1, 2.5, None]}})
        now[0] += timedelta(seconds=1)
        store.put(("ttl",), "t", {"v": 1}, ttl=1.5, index=False)  # ... and held ones
        store.put(("big", "n1"), "k1", {"i": -1})  # an overwrite keeps the creation time
        store.delete(("big", "n2"), "k2")
        written = _rows(store)
        store.reindex()
        assert written == _rows(store), name


def test_namespace_summaries_follow_items_with_and_without_ttl(tmp_path):
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    store = GitStore(tmp_path / "m.git", clock=lambda: now[0])

    def summaries_agree_with_items() -> None:
        store.list_namespaces()  # held rows into the file
        db = sqlite3.connect(store.index.path)
        try:
            kept = db.execute("SELECT ns, n, forever, max_exp FROM spaces ORDER BY ns").fetchall()
            counted = db.execute(
                "SELECT ns, count(*), max(exp IS NULL), max(exp) FROM items GROUP BY ns ORDER BY ns"
            ).fetchall()
        finally:
            db.close()
        assert kept == counted

    store.put(("m",), "short", {"v": 1}, ttl=1.0)
    store.put(("m",), "kept", {"v": 2})
    store.batch([PutOp(("bulk", f"b{i % 2}"), f"k{i}", {"i": i}, ttl=1.0 if i % 3 else None) for i in range(80)])
    summaries_agree_with_items()
    now[0] += timedelta(minutes=2)
    assert store.list_namespaces() == [("bulk", "b0"), ("bulk", "b1"), ("m",)]  # each keeps an item without TTL
    store.delete(("m",), "kept")
    summaries_agree_with_items()
    assert store.list_namespaces() == [("bulk", "b0"), ("bulk", "b1")]  # only an expired item is left in m
    store.put(("m",), "later", {"v": 3}, ttl=5.0)
    assert ("m",) in store.list_namespaces()
    assert store.sweep_ttl() == 1 + sum(1 for i in range(80) if i % 3)
    summaries_agree_with_items()
    now[0] += timedelta(minutes=10)
    assert store.list_namespaces() == [("bulk", "b0"), ("bulk", "b1")]
    store.reindex()
    summaries_agree_with_items()


_WRITER = textwrap.dedent(
    """
    import sys
    from got_integrations.langgraph import GitStore
    store = GitStore(sys.argv[1])
    for i in range(int(sys.argv[2])):
        store.put(("w", "other"), f"k{i % 5}", {"i": i})
        if i % 4 == 3:
            store.delete(("w", "other"), f"k{(i * 3) % 5}")
    """
)


@pytest.mark.slow
def test_our_held_puts_racing_another_writer_process_agree_with_git(tmp_path):
    gitdir = tmp_path / "race.git"
    store = GitStore(gitdir)
    store.put(("w", "seed"), "k", {"i": -1})
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(gitdir), "80"])
    rounds = checked = 0
    while writer.poll() is None or not checked:
        store.put(("w", "mine"), f"k{rounds % 6}", {"i": rounds})  # held, on whatever the other wrote
        rounds += 1
        before = store.repo.tip(store.ref)
        mine = {k: store.get(("w", "mine"), k) for k in (f"k{j}" for j in range(6))}
        theirs = {k: store.get(("w", "other"), k) for k in (f"k{j}" for j in range(5))}
        if store.repo.tip(store.ref) == before:  # nothing moved during the gets: compare with git
            truth = _truth_at(gitdir, before)
            assert {k: i.value for k, i in mine.items() if i} == truth.get(("w", "mine"), {})
            assert {k: i.value for k, i in theirs.items() if i} == truth.get(("w", "other"), {})
            checked += 1
    assert writer.wait() == 0
    assert _answers(store) == _truth(gitdir) == _answers(GitStore(gitdir))


def _truth_at(gitdir: Path, rev: str) -> dict[tuple[str, ...], dict[str, dict]]:
    """namespace -> key -> value on ``rev``, read by the git binary."""
    out: dict[tuple[str, ...], dict[str, dict]] = {}
    for entry in filter(None, git(gitdir, "ls-tree", "-r", "-z", rev).split("\x00")):
        meta, _path = entry.split("\t", 1)
        doc = json.loads(git(gitdir, "cat-file", "blob", meta.split()[2]))
        out.setdefault(tuple(doc["namespace"]), {})[doc["key"]] = doc["value"]
    return out
