"""What GitStore's bulk puts, TTL sweeps and cold opens cost, counted (compressions, SQLite
statements), never timed: each test fails on the code before the change it names."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from gitcli import fsck_clean, git
from langgraph.store.base import PutOp

from got_core.storage import packs
from got_integrations.langgraph import GitStore
from got_integrations.langgraph._store_bulk import PACK_MIN


def _value(i: int) -> dict[str, object]:
    return {"text": f"memory {i}: " + "likes tea, " * (1 + i % 5), "kind": ["fact", "pref"][i % 2], "n": i}


def test_a_bulk_put_deflates_no_small_item_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # an item file (~200-400 bytes of JSON) is stored in the pack as it is: deflating it cost ~8x
    # copying it, and `git repack -f` deflates it later anyway; a big one is still deflated
    gitdir = tmp_path / "s.git"
    store = GitStore(gitdir)
    deflated: list[bytes] = []
    real = packs._deflate
    monkeypatch.setattr(packs, "_deflate", lambda data: deflated.append(data) or real(data))
    level0: list[bytes] = []  # stored entries (bucket trees, item files) are built without zlib
    real_compress = zlib.compress
    monkeypatch.setattr(zlib, "compress", lambda data, *a, **k: level0.append(data) or real_compress(data, *a, **k))
    big = {"text": "a long memory " * 100}
    store.batch(
        [PutOp(("mem", f"u{i % 8}"), f"k{i}", _value(i)) for i in range(3 * PACK_MIN)]
        + [PutOp(("mem", "u0"), "big", big)]
    )
    items = [d for d in deflated if d.startswith(b"{")]
    assert len(items) == 1 and b"a long memory" in items[0]  # 3 * PACK_MIN + 1 on the code before
    assert level0 == []  # one zlib.compress(data, 0) per bucket tree on the code before
    monkeypatch.undo()
    assert fsck_clean(gitdir)[0]
    for idx in (gitdir / "objects" / "pack").glob("*.idx"):
        git(gitdir, "verify-pack", str(idx))  # raises on a damaged pack
    path = GitStore.namespace_path(("mem", "u3"))
    assert '"memory 3: likes tea' in git(gitdir, "cat-file", "blob", f"refs/got/store:{path}/k3.json")
    store.close()
    for f in (gitdir / "got").glob("store-*.sqlite3*"):
        f.unlink()  # rebuilt from git alone
    again = GitStore(gitdir)
    assert again.get(("mem", "u3"), "k3").value == _value(3)
    assert again.get(("mem", "u0"), "big").value == big
    again.close()


def test_small_blobs_are_stored_blocks_zlib_reads() -> None:
    small, large = b"x" * (packs.STORED_BLOB_BYTES - 1), b"y" * packs.STORED_BLOB_BYTES
    for data in (small, large, b"tiny"):
        assert zlib.decompress(_body(packs.pack_entry("blob", data))) == data
    assert len(_body(packs.pack_entry("blob", small))) > len(small)  # stored blocks (deflated before)
    assert len(_body(packs.pack_entry("blob", large))) < len(large) // 10  # deflated


def _body(entry: bytes) -> bytes:
    """A pack entry's zlib stream (after its type-and-size varint)."""
    at = 0
    while entry[at] & 0x80:
        at += 1
    return entry[at + 1 :]


def test_a_put_encodes_each_item_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the fields a write builds (namespace, key, timestamps, ttl, index) are plain JSON: only the
    # value goes through the standard library's encoder (its check), orjson writes the file
    import json

    store = GitStore(tmp_path / "s.git")
    calls: list[object] = []
    real = json.dumps
    monkeypatch.setattr(json, "dumps", lambda obj, *a, **k: calls.append(obj) or real(obj, *a, **k))
    n = 2 * PACK_MIN
    store.batch([PutOp(("mem", f"u{i % 4}"), f"k{i}", _value(i), ttl=5.0 if i % 2 else None) for i in range(n)])
    assert len(calls) == n, len(calls)  # 2n on the code before: the value, then the other fields
    monkeypatch.undo()
    assert store.get(("mem", "u1"), "k1").value == _value(1)
    for bad in ({"x": float("nan")}, {"x": object()}):  # still refused, nothing written
        with pytest.raises(Exception, match="JSON-serialisable"):
            store.put(("mem", "u1"), "bad", bad)
    assert store.get(("mem", "u1"), "bad") is None
    store.close()


def _path_indexes(store: GitStore) -> list[str]:
    db = store.index.db
    names = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='items'")]
    return [n for n in names if any(col[2] == "path" for col in db.execute(f'PRAGMA index_info("{n}")'))]


def test_no_index_holds_the_path_text(tmp_path: Path) -> None:
    # each row is an entry in every index of the items table: the path (~40 bytes) is found
    # through a 63-bit hash instead (directory and name), an 8-byte entry cheaper to insert and delete
    store = GitStore(tmp_path / "s.git")
    store.batch([PutOp(("mem", f"u{i % 8}"), f"k{i}", _value(i)) for i in range(2 * PACK_MIN)])
    assert _path_indexes(store) == []  # ["items_path"] on the code before
    assert store.index.rows_at([GitStore._path(("mem", "u3"), "k3")]).keys() == {GitStore._path(("mem", "u3"), "k3")}
    store.close()


def test_paths_sharing_a_hash_are_told_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # every path given the same hash: lookups, deletes and overwrites by path still touch only their own row
    import got_integrations.langgraph._store_index as index_module
    import got_integrations.langgraph._store_query as query_module

    for module in (index_module, query_module):
        monkeypatch.setattr(module, "path_hash", lambda path: 7)
    gitdir = tmp_path / "s.git"
    store = GitStore(gitdir)
    n = 2 * PACK_MIN
    store.batch([PutOp(("mem", f"u{i % 8}"), f"k{i}", _value(i)) for i in range(n)])
    store.batch([PutOp(("mem", f"u{i % 8}"), f"k{i}", None if i % 2 else {"new": i}) for i in range(n)])
    other = GitStore(gitdir)  # another writer: this store catches up from the tree diff (deletes by path)
    other.batch([PutOp(("mem", f"u{i % 8}"), f"k{i}", None) for i in range(0, n, 4)])
    other.close()
    want = sorted(f"k{i}" for i in range(0, n, 2) if i % 4)
    assert sorted(i.key for i in store.search(("mem",), limit=10 * n)) == want
    assert store.get(("mem", "u2"), "k2").value == {"new": 2}
    assert store.get(("mem", "u4"), "k4") is None and store.get(("mem", "u1"), "k1") is None
    paths = [GitStore._path(("mem", f"u{i % 8}"), f"k{i}") for i in range(n)]
    assert sorted(store.index.rows_at(paths)) == sorted(p for p, i in zip(paths, range(n)) if i % 2 == 0 and i % 4)
    assert store.index.count(None) == len(want)
    store.reindex()
    assert sorted(i.key for i in store.search(("mem",), limit=10 * n)) == want
    store.close()


def test_stored_blocks_are_zlib_s_and_git_reads_big_ones(tmp_path: Path) -> None:
    # stored (uncompressed) entries are built directly, not by zlib at level 0, which sets up
    # its tables on every call: the same bytes below 16 KB, and streams git reads above 64 KB
    import random
    import string

    from got_core.repo import ReasoningRepo
    from got_core.storage.packs import build_tree_objects, write_pack

    rng = random.Random(13)
    for size in (0, 1, 63, 64, 1023, 15_999):
        data = rng.randbytes(size)
        assert packs._store(data) == zlib.compress(data, 0)
    for size in (65_535, 65_536, 131_071, 200_000):
        data = rng.randbytes(size)
        assert zlib.decompress(packs._store(data)) == data
    repo = ReasoningRepo.open(tmp_path / "r.git")
    blob = repo.git.write_blob(b"x")
    names = [a + b for a in string.ascii_letters for b in string.ascii_letters]  # 2,704 two-letter files
    root, trees = build_tree_objects(repo.git.read_raw, None, dict.fromkeys(names, blob))
    assert len(trees) == 1 and len(trees[0][1]) > 65_535 and packs._stored("tree", trees[0][1])  # several blocks
    write_pack(repo.gitdir, trees)
    repo.set_ref("refs/heads/t", repo.write_commit(root, [], "t\n"))
    assert fsck_clean(repo.gitdir)[0]
    for idx in (repo.gitdir / "objects" / "pack").glob("*.idx"):
        git(repo.gitdir, "verify-pack", str(idx))
    assert len(git(repo.gitdir, "ls-tree", "refs/heads/t").splitlines()) == len(names)
    repo.close()
