"""GitStore's namespace fan-out: what a put writes stays small whatever the number of
namespaces, namespaces stay readable paths for ``git log``, and a store of the layout before
the fan-out is read as it is and moved in one commit (blobs unchanged) by its first write."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from gitcli import fsck_clean, git
from langgraph.store.base import PutOp

from got_core.errors import GotError
from got_integrations.langgraph import GitStore
from got_integrations.langgraph._store_doc import is_bucket, item_path, legacy_item_path


def _new_trees(gitdir: Path, commit: str) -> list[int]:
    """Sizes of the trees ``commit`` added on its parent (what one put wrote), by the git binary."""
    listed = git(gitdir, "rev-list", "--objects", commit, f"^{commit}~1").split("\n")
    oids = [line.split(" ", 1)[0] for line in listed if line.strip()]
    checked = git(gitdir, "cat-file", "--batch-check=%(objecttype) %(objectsize)", input="\n".join(oids).encode())
    return [int(size) for kind, size in (line.split() for line in checked.splitlines()) if kind == "tree"]


def _fill(store: GitStore, namespaces: int, batch: int = 5000) -> None:
    ops = [PutOp(("memories", f"user{i}"), "k0", {"text": f"item of user {i}", "n": i}) for i in range(namespaces)]
    for start in range(0, len(ops), batch):
        store.batch(ops[start : start + batch])


def _put_cost(store: GitStore) -> tuple[int, int, int]:
    """(trees, tree bytes, largest tree) one put of a new key into an existing namespace writes."""
    store.put(("memories", "user7"), "fresh", {"text": "one more"})
    trees = _new_trees(store.repo.gitdir, store.repo.tip(store.ref))
    return len(trees), sum(trees), max(trees)


@pytest.mark.slow
def test_a_put_rewrites_small_trees_at_any_number_of_namespaces(tmp_path: Path) -> None:
    costs = {}
    for n in (1_000, 100_000):
        store = GitStore(tmp_path / f"{n}.git")
        _fill(store, n, batch=n)  # one commit: the quickest way to a store of n namespaces
        costs[n] = _put_cost(store)
        assert store.list_namespaces(prefix=("memories",), limit=n + 10) == sorted(
            ("memories", f"user{i}") for i in range(n)
        )
        store.close()
    (trees_1k, bytes_1k, largest_1k), (trees_100k, bytes_100k, largest_100k) = costs[1_000], costs[100_000]
    assert trees_1k == trees_100k == 6, costs  # root, three bucket levels, memories/, user7/
    # 16 entries a bucket level, and ~n/4096 namespaces in a last-level bucket (~25 at 100k): the
    # legacy layout's memories/ tree alone held every namespace (~33 KB at 1k, ~3.4 MB at 100k)
    assert largest_1k <= 600 and largest_100k <= 1_200, costs
    assert bytes_1k < 2_000 and bytes_100k < 4_000, costs
    assert fsck_clean(tmp_path / "100000.git")[0]


def test_namespaces_are_readable_paths_for_git_log(tmp_path: Path) -> None:
    gitdir = tmp_path / "s.git"
    store = GitStore(gitdir)
    store.put(("memories", "user5"), "a", {"v": 1})
    store.put(("memories", "user6"), "a", {"v": 2})
    store.put(("memories", "user5"), "b", {"v": 3})
    where = store.namespace_path(("memories", "user5"))
    assert where.endswith("/memories/user5") and is_bucket(where.split("/")[0])
    listed = git(gitdir, "ls-tree", "-r", "--name-only", "refs/got/store").split()
    assert sorted(listed) == sorted([f"{where}/a.json", f"{where}/b.json", item_path(("memories", "user6"), "a")])
    for spec in (where, ":(glob)ns.*/*/*/memories/user5/**"):  # the one shown in the docstring
        log = git(gitdir, "log", "--format=%s", "refs/got/store", "--", spec).split("\n")
        assert [s for s in log if s] == ["store: put memories/user5:b", "store: put memories/user5:a"]
    # every root entry is one of 16 buckets, every bucket level 16-wide at most
    assert all(is_bucket(n) for n in git(gitdir, "ls-tree", "--name-only", "refs/got/store").split())


def _as_legacy(store: GitStore) -> dict[str, str]:
    """Rewrite the store's tree into the layout before the fan-out (what earlier versions wrote:
    the same files at ``<labels>/<key>.json``); returns legacy path -> blob id."""
    tip = store.repo.tip(store.ref)
    files = store.repo.list_files(tip)
    changes: dict[str, Any] = {}
    legacy = {}
    for path, blob in files.items():
        doc = json.loads(store.repo.read_blob(blob))
        old = legacy_item_path(tuple(doc["namespace"]), doc["key"])
        changes[path], changes[old] = None, store.repo.read_blob(blob)
        legacy[old] = blob
    store.repo.commit_files(store.ref, changes, "as an earlier version wrote it\n")
    return legacy


def _items(store: GitStore) -> list[tuple[tuple[str, ...], str, dict]]:
    return sorted((i.namespace, i.key, i.value) for i in store.search((), limit=10_000))


def test_a_legacy_store_is_read_then_moved_in_one_commit_by_its_first_write(tmp_path: Path) -> None:
    gitdir = tmp_path / "old.git"
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    writer = GitStore(gitdir, clock=lambda: now[0])
    writer.batch([PutOp(("users", f"u{i % 9}", "notes"), f"k{i}", {"i": i}) for i in range(200)])
    writer.put(("ttl",), "soon", {"v": 0}, ttl=1.0)
    legacy = _as_legacy(writer)
    writer.close()
    for f in (gitdir / "got").glob("store-*.sqlite3*"):
        f.unlink()  # a reader of today's version on an old repository, with no index yet

    store = GitStore(gitdir, clock=lambda: now[0])
    assert store.get(("users", "u3", "notes"), "k12").value == {"i": 12}
    assert len(store.search(("users",), filter={"i": {"$gte": 100}}, limit=500)) == 100
    assert store.list_namespaces(prefix=("users",)) == [("users", f"u{i}", "notes") for i in range(9)]
    before = _items(store)
    commits = int(git(gitdir, "rev-list", "--count", "refs/got/store"))

    store.put(("users", "u3", "notes"), "k12", {"i": "changed"})  # the first write moves everything first
    assert int(git(gitdir, "rev-list", "--count", "refs/got/store")) == commits + 2
    assert "namespace fan-out" in git(gitdir, "log", "-1", "--format=%s", "refs/got/store~1")
    moved = {}
    for entry in filter(None, git(gitdir, "ls-tree", "-r", "refs/got/store~1").split("\n")):
        meta, path = entry.split("\t", 1)
        moved[path] = meta.split()[2]
    assert all(is_bucket(p.split("/")[0]) for p in moved)
    assert sorted(moved.values()) == sorted(legacy.values())  # the same blobs: only trees were written
    assert fsck_clean(gitdir)[0]
    after = _items(store)
    assert [x for x in after if x[:2] != (("users", "u3", "notes"), "k12")] == [
        x for x in before if x[:2] != (("users", "u3", "notes"), "k12")
    ]
    assert store.get(("users", "u3", "notes"), "k12").value == {"i": "changed"}
    now[0] += timedelta(minutes=2)
    assert store.sweep_ttl() == 1  # the moved item's expiry came along
    assert store.migrate_layout() == 0  # nothing left to move: no commit
    assert store.index.count(None) == 200
    store.close()
    again = GitStore(gitdir, clock=lambda: now[0])
    again.reindex()  # the index the move handed over equals one built from git alone
    assert _items(again) == [x for x in after if x[0] != ("ttl",)]
    assert again.index.count(None) == 200
    again.close()


class _Crash(GotError):
    pass


def test_a_move_that_fails_before_the_ref_moves_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    gitdir = tmp_path / "old.git"
    writer = GitStore(gitdir)
    writer.batch([PutOp(("docs", f"d{i % 3}"), f"k{i}", {"i": i}) for i in range(20)])
    _as_legacy(writer)
    tip = writer.repo.tip(writer.ref)
    writer.close()

    class Crashing(GitStore):
        def _moves_builder(self, plan: Any, message: str) -> Any:
            build = super()._moves_builder(plan, message)

            def crash(current: str | None) -> Any:
                build(current)  # the trees and the commit are written ...
                raise _Crash("killed before the ref moved")  # ... and the ref never moves

            return crash

    store = Crashing(gitdir)
    with pytest.raises(_Crash):
        store.put(("docs", "d1"), "new", {"i": -1})
    assert store.repo.tip(store.ref) == tip  # nothing published, not even the put
    assert fsck_clean(gitdir)[0]
    assert store.get(("docs", "d1"), "k4").value == {"i": 4}  # still read in the old layout
    store.close()
    fine = GitStore(gitdir)
    fine.put(("docs", "d1"), "new", {"i": -1})
    assert all(is_bucket(p.split("/")[0]) for p in fine.repo.list_files(fine.repo.tip(fine.ref)))
    assert len(fine.search(("docs",), limit=100)) == 21
    fine.close()


def test_a_legacy_file_written_after_the_move_is_moved_by_its_next_put(tmp_path: Path) -> None:
    gitdir = tmp_path / "s.git"
    store = GitStore(gitdir)
    store.put(("docs",), "a", {"v": 1})
    other = GitStore(gitdir)  # an earlier version writing the old layout, after our move
    data = other.repo.read_file(other.repo.tip(other.ref), item_path(("docs",), "a"))
    doc = json.loads(data)
    doc["key"], doc["value"] = "x", {"v": "legacy"}
    other.repo.commit_files(other.ref, {legacy_item_path(("docs",), "x"): json.dumps(doc).encode()}, "old writer\n")
    other.close()
    assert store.get(("docs",), "x").value == {"v": "legacy"}
    store.put(("docs",), "x", {"v": "new"})  # the legacy file goes, the fan-out one comes
    listed = git(gitdir, "ls-tree", "-r", "--name-only", "refs/got/store").split()
    assert sorted(listed) == sorted([item_path(("docs",), "a"), item_path(("docs",), "x")])
    assert store.get(("docs",), "x").value == {"v": "new"}
    assert store.list_namespaces() == [("docs",)] and store.index.count(None) == 2
    store.delete(("docs",), "x")
    assert git(gitdir, "ls-tree", "-r", "--name-only", "refs/got/store").split() == [item_path(("docs",), "a")]
    store.reindex()
    assert store.index.count(None) == 1
    store.close()


def test_a_sweep_that_empties_namespaces_removes_them_and_nothing_else(tmp_path: Path) -> None:
    gitdir = tmp_path / "t.git"
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    store = GitStore(gitdir, clock=lambda: now[0])
    store.batch([PutOp(("gone",), f"k{i}", {"i": i}, ttl=1.0) for i in range(5)])  # all expire
    store.batch([PutOp(("half",), f"k{i}", {"i": i}, ttl=1.0 if i % 2 else None) for i in range(6)])
    store.batch([PutOp(("parent",), "k", {"i": 0}, ttl=1.0), PutOp(("parent", "child"), "k", {"i": 1})])
    store.batch([PutOp(("noted",), "k", {"i": 0}, ttl=1.0)])
    foreign = GitStore.namespace_path(("noted",)) + "/README.md"  # not an item: the sweep must keep it
    store.repo.commit_files(store.ref, {foreign: b"kept by hand\n"}, "a file of someone else's\n")
    tip = store.repo.tip(store.ref)
    now[0] += timedelta(minutes=2)
    assert store.sweep_ttl() == 5 + 3 + 1 + 1
    changed = git(gitdir, "diff-tree", "-r", "--name-only", "--no-commit-id", tip, "refs/got/store").split()
    assert len(changed) == 10 and all(p.endswith(".json") for p in changed)
    listed = git(gitdir, "ls-tree", "-r", "--name-only", "refs/got/store").split()
    assert sorted(listed) == sorted(
        [item_path(("half",), f"k{i}") for i in (0, 2, 4)] + [item_path(("parent", "child"), "k"), foreign]
    )
    assert not any(p.startswith(GitStore.namespace_path(("gone",))) for p in listed)
    assert fsck_clean(gitdir)[0]
    assert store.list_namespaces() == [("half",), ("parent", "child")]
    counted = store.index.count(None)
    store.reindex()
    assert store.index.count(None) == counted == 4 and store.list_namespaces() == [("half",), ("parent", "child")]
    store.close()


def test_an_encrypted_legacy_store_moves_without_decrypting_and_reads_back(tmp_path: Path) -> None:
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    gitdir = tmp_path / "sealed.git"
    key = b"0123456789abcdef0123456789abcdef"
    writer = GitStore(gitdir, serde=EncryptedSerializer.from_pycryptodome_aes(key=key))
    writer.batch([PutOp(("vault", f"v{i % 4}"), f"k{i}", {"secret": f"confidential {i}"}) for i in range(80)])
    legacy = _as_legacy(writer)
    writer.close()
    store = GitStore(gitdir, serde=EncryptedSerializer.from_pycryptodome_aes(key=key))
    assert store.get(("vault", "v1"), "k5").value == {"secret": "confidential 5"}
    assert store.migrate_layout() == 80
    files = store.repo.list_files(store.repo.tip(store.ref))
    assert sorted(files.values()) == sorted(legacy.values()) and all(is_bucket(p.split("/")[0]) for p in files)
    assert all(b"confidential" not in store.repo.read_blob(b) for b in files.values())  # still nothing readable
    assert store.search(("vault",), filter={"secret": "confidential 7"}, limit=5)[0].key == "k7"
    assert fsck_clean(gitdir)[0]
    store.close()


def test_an_index_left_before_the_move_catches_up_without_reading_the_moved_files(tmp_path: Path) -> None:
    gitdir = tmp_path / "old.git"
    writer = GitStore(gitdir)
    writer.batch([PutOp(("users", f"u{i % 5}"), f"k{i}", {"i": i}) for i in range(120)])
    _as_legacy(writer)
    writer.get(("users", "u1"), "k1")  # the index file follows the legacy tip
    writer.close()
    saved = {f.name: f.read_bytes() for f in (gitdir / "got").glob("store-*.sqlite3*")}
    mover = GitStore(gitdir)
    assert mover.migrate_layout() == 120
    mover.put(("users", "u1"), "extra", {"i": -1})
    mover.close()
    for f in (gitdir / "got").glob("store-*.sqlite3*"):
        f.unlink()
    for name, data in saved.items():  # as if the mover's index writes were lost (a killed process)
        (gitdir / "got" / name).write_bytes(data)

    class Counting(GitStore):
        reads = 0

        def _row_of(self, path: str, blob: str) -> Any:
            Counting.reads += 1
            return super()._row_of(path, blob)

    late = Counting(gitdir)
    assert late.get(("users", "u3"), "k8").value == {"i": 8}
    assert Counting.reads == 1  # only the put's new file; the 120 moved ones came from their rows
    assert late.index.count(None) == 121
    answers = _items(late)
    late.reindex()
    assert _items(late) == answers and late.list_namespaces() == [("users", f"u{i}") for i in range(5)]
    late.close()
