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
    big = {"text": "a long memory " * 100}
    store.batch(
        [PutOp(("mem", f"u{i % 8}"), f"k{i}", _value(i)) for i in range(3 * PACK_MIN)]
        + [PutOp(("mem", "u0"), "big", big)]
    )
    items = [d for d in deflated if d.startswith(b"{")]
    assert len(items) == 1 and b"a long memory" in items[0]  # 3 * PACK_MIN + 1 on the code before
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
