"""GitStore's big commits (a batch of many puts, a TTL sweep) are one pack, not a file per
item: what they store is what git reads, and the index follows them like any commit."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from gitcli import fsck_clean, git
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from timeouts import TEST_TIMEOUT

from got_core.errors import PayloadTooLargeError
from got_core.repo import ReasoningRepo
from got_integrations.langgraph import GitStore
from got_integrations.langgraph._store_bulk import PACK_MIN


def _loose(gitdir: Path) -> int:
    return sum(1 for d in (gitdir / "objects").iterdir() if len(d.name) == 2 for _ in d.iterdir())


def _packs(gitdir: Path) -> int:
    return len(list((gitdir / "objects" / "pack").glob("pack-*.idx")))


def _ops(n: int, tag: str = "v", ttl: float | None = None) -> list[PutOp]:
    return [PutOp(("users", f"u{i % 7}", "notes"), f"k{i}", {"text": f"{tag} {i}", "n": i}, ttl=ttl) for i in range(n)]


def test_a_big_batch_is_one_pack_and_one_commit(tmp_path: Path) -> None:
    gitdir = tmp_path / "s.git"
    store = GitStore(gitdir)
    store.put(("users", "u0", "notes"), "first", {"text": "a small write is a pack of its own"})
    assert (_packs(gitdir), _loose(gitdir)) == (1, 0)
    store.batch(_ops(3 * PACK_MIN))
    assert (_packs(gitdir), _loose(gitdir)) == (2, 0)  # every blob and tree, and the commit, in one pack
    assert git(gitdir, "rev-list", "--count", "refs/got/store").strip() == "2"
    assert fsck_clean(gitdir)[0]
    doc = json.loads(
        git(gitdir, "cat-file", "blob", f"refs/got/store:{GitStore.namespace_path(('users', 'u3', 'notes'))}/k10.json")
    )
    assert doc["value"] == {"text": "v 10", "n": 10}
    assert store.get(("users", "u3", "notes"), "k10").value == {"text": "v 10", "n": 10}
    store.close()
    for f in (gitdir / "got").glob("store-*.sqlite3*"):
        f.unlink()  # rebuilt from git alone: the pack holds everything
    again = GitStore(gitdir)
    assert len(again.search(("users",), limit=1000)) == 3 * PACK_MIN + 1
    assert again.list_namespaces(prefix=("users",)) == [("users", f"u{i}", "notes") for i in range(7)]
    again.close()


def test_overwrites_and_deletes_in_one_big_batch(tmp_path: Path) -> None:
    gitdir = tmp_path / "s.git"
    store = GitStore(gitdir)
    store.batch(_ops(2 * PACK_MIN))
    ops = [PutOp(op.namespace, op.key, None if i % 2 else {"text": "new"}) for i, op in enumerate(_ops(2 * PACK_MIN))]
    store.batch(ops)
    assert _packs(gitdir) == 2
    assert fsck_clean(gitdir)[0]
    listed = git(gitdir, "ls-tree", "-r", "--name-only", "refs/got/store").split()
    assert len(listed) == PACK_MIN
    assert store.get(("users", "u1", "notes"), "k1") is None
    assert store.get(("users", "u2", "notes"), "k2").value == {"text": "new"}
    store.batch([PutOp(op.namespace, op.key, None) for op in _ops(2 * PACK_MIN)])  # everything deleted
    assert git(gitdir, "ls-tree", "-r", "refs/got/store") == ""
    assert store.search((), limit=10) == []
    assert fsck_clean(gitdir)[0]


def test_the_ttl_sweep_of_many_items_is_one_pack(tmp_path: Path) -> None:
    gitdir = tmp_path / "s.git"
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    store = GitStore(gitdir, clock=lambda: now[0])
    store.batch(_ops(PACK_MIN - 1, ttl=1.0))  # under the threshold: the ref move's own pack
    store.batch([PutOp(("keep",), f"k{i}", {"i": i}) for i in range(PACK_MIN + 5)])
    packs = _packs(gitdir)
    now[0] += timedelta(minutes=2)
    assert store.sweep_ttl() == PACK_MIN - 1
    assert _packs(gitdir) == packs + 1  # a sweep under the threshold: one pack too
    store.batch(_ops(2 * PACK_MIN, ttl=1.0))
    now[0] += timedelta(minutes=2)
    assert store.sweep_ttl() == 2 * PACK_MIN
    assert (_packs(gitdir), _loose(gitdir)) == (packs + 3, 0)
    kept = git(gitdir, "ls-tree", "-r", "--name-only", "refs/got/store").split()
    assert {p.rpartition("/")[0] for p in kept} == {GitStore.namespace_path(("keep",))}
    assert fsck_clean(gitdir)[0]
    # the index dropped the swept rows as a rebuild from git would have it
    assert store.list_namespaces() == [("keep",)]
    assert store.index.count(None) == PACK_MIN + 5
    store.reindex()
    assert store.list_namespaces() == [("keep",)]
    assert store.index.count(None) == PACK_MIN + 5


def test_abatch_with_many_puts_is_one_commit(tmp_path: Path) -> None:
    gitdir = tmp_path / "s.git"
    store = GitStore(gitdir)
    asyncio.run(store.abatch(_ops(2 * PACK_MIN, tag="async")))
    assert git(gitdir, "rev-list", "--count", "refs/got/store").strip() == "1"
    assert _packs(gitdir) == 1
    assert asyncio.run(store.aget(("users", "u5", "notes"), "k5")).value == {"text": "async 5", "n": 5}


def test_a_second_process_reads_a_packed_batch(tmp_path: Path) -> None:
    gitdir = tmp_path / "s.git"
    reader = GitStore(gitdir)
    assert reader.get(("users", "u1", "notes"), "k1") is None  # its index and handle are open
    writer = GitStore(gitdir)
    writer.batch(_ops(2 * PACK_MIN))
    assert reader.get(("users", "u1", "notes"), "k1").value == {"text": "v 1", "n": 1}
    assert len(reader.search(("users", "u4"), limit=100)) == len([i for i in range(2 * PACK_MIN) if i % 7 == 4])


def test_an_oversized_item_in_a_big_batch_writes_nothing(tmp_path: Path) -> None:
    gitdir = tmp_path / "s.git"
    store = GitStore(ReasoningRepo.open(gitdir, max_file_bytes=4096))
    ops = _ops(2 * PACK_MIN)
    ops[77] = PutOp(("users", "u0", "notes"), "big", {"text": "x" * 5000})
    with pytest.raises(PayloadTooLargeError):
        store.batch(ops)
    assert _packs(gitdir) == 0
    assert git(gitdir, "for-each-ref") == ""
    assert store.search((), limit=10) == []


_LABELS = st.sampled_from(["users", "docs", "a", "b-1", "x y", "ü", "sl/ash", "%41"])
_NS = st.lists(_LABELS, min_size=1, max_size=3).map(tuple)
_KEY = st.sampled_from(["k1", "k2", "..", "a/b", "Ω", "x" * 300]) | st.integers(0, 40).map(str)
_VALUE = st.one_of(st.fixed_dictionaries({"n": st.integers(0, 3)}), st.fixed_dictionaries({"t": st.text(max_size=3)}))


def _batch(values: st.SearchStrategy) -> st.SearchStrategy:
    """A big batch: distinct (namespace, key) pairs, so its commit changes that many files."""
    ops = st.tuples(_NS, _KEY, values)
    return st.lists(ops, min_size=PACK_MIN + 8, max_size=PACK_MIN + 40, unique_by=lambda op: (op[0], op[1]))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(first=_batch(_VALUE), later=st.lists(_batch(st.none() | _VALUE), max_size=2))
def test_big_batches_match_the_in_memory_store(
    tmp_path_factory: pytest.TempPathFactory, first: list, later: list
) -> None:
    gitdir = tmp_path_factory.mktemp("bulk") / "s.git"
    store, ref = GitStore(gitdir), InMemoryStore()
    for ops in [first, *later]:
        puts = [PutOp(ns, key, value) for ns, key, value in ops]
        store.batch(puts)
        ref.batch(puts)

    def plain(items: list) -> list:
        return sorted((tuple(i.namespace), i.key, repr(sorted(i.value.items()))) for i in items)

    assert plain(store.search((), limit=10_000)) == plain(ref.search((), limit=10_000))
    live = sorted({tuple(i.namespace) for i in ref.search((), limit=10_000)})
    assert store.list_namespaces(limit=10_000) == live
    assert _packs(gitdir) >= 1  # the first batch took the big-commit path
    assert fsck_clean(gitdir)[0]
    store.close()


def test_concurrent_big_batches_lose_nothing(tmp_path: Path) -> None:
    # two stores (as two processes would) race big batches on one ref: a lost compare-and-swap
    # builds again on the winner's tree, read from the winner's pack
    gitdir = tmp_path / "s.git"
    stores = [GitStore(gitdir), GitStore(gitdir)]
    errors: list[BaseException] = []

    def write(w: int) -> None:
        try:
            for b in range(4):
                stores[w].batch(
                    [PutOp(("w", str(w), f"b{b}"), f"k{i}", {"w": w, "b": b, "i": i}) for i in range(PACK_MIN + 6)]
                )
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TEST_TIMEOUT)
    assert not errors
    assert git(gitdir, "rev-list", "--count", "refs/got/store").strip() == "8"
    assert len(git(gitdir, "ls-tree", "-r", "--name-only", "refs/got/store").split()) == 8 * (PACK_MIN + 6)
    assert fsck_clean(gitdir)[0]
    for store in stores:
        assert len(store.search(("w",), limit=10_000)) == 8 * (PACK_MIN + 6)
        store.close()


def _sqlite_store() -> SqliteStore:
    store = SqliteStore(sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None))
    store.setup()
    return store


def _items(store: Any, prefix: tuple[str, ...] = ()) -> list[tuple]:
    return sorted(
        (tuple(i.namespace), i.key, json.dumps(i.value, sort_keys=True)) for i in store.search(prefix, limit=100_000)
    )


def test_a_second_batch_parses_no_namespace_tree_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a batch over many namespaces rewrites each namespace's directory: the next batch builds on
    # the entries the writer kept, instead of reading and parsing every directory again
    import got_core.storage.packs as packs

    gitdir = tmp_path / "s.git"
    store = GitStore(gitdir)
    store.batch([PutOp(("mem", f"u{i % 40}"), f"k{i}", {"i": i}) for i in range(40 * 20)])
    parsed: list[str] = []
    real = packs._read_tree
    monkeypatch.setattr(packs, "_read_tree", lambda read_raw, oid: parsed.append(oid) or real(read_raw, oid))
    store.batch([PutOp(("mem", f"u{i % 40}"), f"new{i}", {"i": i}) for i in range(40 * 3)])
    assert parsed == []  # 40 on the code before (one per namespace directory)
    assert fsck_clean(gitdir)[0]
    assert len(git(gitdir, "ls-tree", "-r", "--name-only", "refs/got/store").split()) == 40 * 23
    store.close()
    for f in (gitdir / "got").glob("store-*.sqlite3*"):
        f.unlink()
    again = GitStore(gitdir)
    assert len(again.search(("mem", "u7"), limit=100)) == 23
    again.close()


def test_big_batches_give_what_sqlite_store_gives(tmp_path: Path) -> None:
    git_store, sqlite_store = GitStore(tmp_path / "s.git"), _sqlite_store()
    batches = [
        [PutOp(("mem", f"u{i % 30}"), f"k{i}", {"i": i, "kind": ["a", "b"][i % 2]}) for i in range(600)],
        [PutOp(("mem", f"u{i % 30}"), f"k{i}", None if i % 3 else {"i": -i}) for i in range(0, 600, 2)],
        [PutOp(("mem", f"u{i % 7}", "deep"), f"d{i}", {"i": i}) for i in range(200)]
        + [PutOp(("mem", "u1"), f"k{i}", None) for i in range(1, 600, 30)],
    ]
    for ops in batches:
        git_store.batch(ops)
        sqlite_store.batch(ops)
        assert _items(git_store) == _items(sqlite_store)
        assert git_store.list_namespaces(limit=1000) == sqlite_store.list_namespaces(limit=1000)
        for ns in (("mem", "u1"), ("mem", "u4", "deep")):
            assert _items(git_store, ns) == _items(sqlite_store, ns)
    filtered = {"kind": "a"}
    assert sorted(i.key for i in git_store.search(("mem",), filter=filtered, limit=1000)) == sorted(
        i.key for i in sqlite_store.search(("mem",), filter=filtered, limit=1000)
    )
    assert fsck_clean(tmp_path / "s.git")[0]
    git_store.close()


def test_a_sweep_reads_no_tree_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the swept directories are the ones the last batches wrote: the sweep's trees are built
    # from the copies the writer and the handle keep, with no directory listed and no object
    # read from the object database
    gitdir = tmp_path / "s.git"
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    store = GitStore(gitdir, clock=lambda: now[0])
    store.batch([PutOp(("keep", f"u{i % 5}"), f"k{i}", {"i": i}) for i in range(2 * PACK_MIN)])
    store.batch([PutOp(("ttl", f"t{i % 4}"), f"e{i}", {"i": i}, ttl=1.0) for i in range(2 * PACK_MIN)])
    store.batch([PutOp(("keep", "u1"), f"x{i}", {"i": i}, ttl=1.0) for i in range(3)])  # a small one
    now[0] += timedelta(minutes=2)
    listed: list[object] = []
    read: list[str] = []
    monkeypatch.setattr(store.repo, "list_dir", lambda *a, **k: listed.append(a) or [])
    real_read = store.repo.git._odb_read  # what misses the handle's memory of its own writes
    monkeypatch.setattr(store.repo.git, "_odb_read", lambda oid: read.append(oid) or real_read(oid))
    statements: list[str] = []
    store.index.db.set_trace_callback(statements.append)
    assert store.sweep_ttl() == 2 * PACK_MIN + 3
    store.index.db.set_trace_callback(None)
    assert listed == [] and read == []  # the code before listed each emptied namespace's directory
    # the expired rows are listed once: their rows go in one statement, not counted again
    assert sum("exp<=" in s for s in statements) == 2, statements
    assert not any("GROUP BY" in s for s in statements)
    monkeypatch.undo()
    kept = git(gitdir, "ls-tree", "-r", "--name-only", "refs/got/store").split()
    assert len(kept) == 2 * PACK_MIN
    assert {p.split("/")[3] for p in kept} == {"keep"}  # emptied directories are gone
    assert fsck_clean(gitdir)[0]
    assert store.list_namespaces() == [("keep", f"u{i}") for i in range(5)]
    store.reindex()
    assert store.list_namespaces() == [("keep", f"u{i}") for i in range(5)]
    store.close()


def test_a_sweep_deletes_only_item_files(tmp_path: Path) -> None:
    # a file that is not an item (committed into a namespace's directory by someone else) stays
    gitdir = tmp_path / "s.git"
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    store = GitStore(gitdir, clock=lambda: now[0])
    store.batch([PutOp(("ttl", "a"), f"e{i}", {"i": i}, ttl=1.0) for i in range(PACK_MIN)])
    folder = GitStore.namespace_path(("ttl", "a"))
    build = store._bulk.loose_builder({f"{folder}/NOTES.txt": b"kept by hand\n"}, "notes\n")
    store.repo.update_ref(store.ref, build)
    now[0] += timedelta(minutes=2)
    assert store.sweep_ttl() == PACK_MIN
    assert git(gitdir, "ls-tree", "-r", "--name-only", "refs/got/store").split() == [f"{folder}/NOTES.txt"]
    assert git(gitdir, "cat-file", "blob", f"refs/got/store:{folder}/NOTES.txt") == "kept by hand\n"
    assert store.list_namespaces() == [] and store.search((), limit=10) == []
    assert fsck_clean(gitdir)[0]
    store.close()


def test_a_sweep_gives_what_sqlite_store_gives(tmp_path: Path) -> None:
    # SqliteStore compares expiry with SQLite's CURRENT_TIMESTAMP, to the second: both stores
    # get the same writes, then a real wait past the TTL
    git_store, sqlite_store = GitStore(tmp_path / "s.git"), _sqlite_store()
    ops = [PutOp(("ttl", f"t{i % 5}"), f"e{i}", {"i": i}, ttl=0.005) for i in range(150)]
    ops += [PutOp(("ttl", f"t{i % 3}"), f"keep{i}", {"i": i}) for i in range(20)]
    ops += [PutOp(("other",), f"o{i}", {"i": i}, ttl=60.0) for i in range(10)]
    for store in (git_store, sqlite_store):
        store.batch(ops)
    time.sleep(0.005 * 60 + 1.5)
    assert git_store.sweep_ttl() == sqlite_store.sweep_ttl() == 150
    assert _items(git_store) == _items(sqlite_store)
    assert git_store.list_namespaces() == sqlite_store.list_namespaces()
    assert fsck_clean(tmp_path / "s.git")[0]
    git_store.close()
