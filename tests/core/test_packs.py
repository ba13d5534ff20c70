"""got_core.storage.packs: objects written as one pack are what git and libgit2 read, and
trees built in Python are byte for byte the trees libgit2 builds."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from gitcli import fsck_clean, git

from got_core.errors import CorruptRepositoryError, InvalidNameError
from got_core.repo import ReasoningRepo
from got_core.storage.objects import object_id
from got_core.storage.packs import build_tree_objects, pack_bytes, sha1_repository, write_pack


def _random_changes(rng: random.Random, n: int, delete: float = 0.0) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for i in range(n):
        depth = rng.randint(1, 4)
        parts = [rng.choice(["a", "b", "a-b", "a.b", "ä", "b0", "z"]) for _ in range(depth - 1)]
        path = "/".join([*parts, f"f{rng.randint(0, 40)}{rng.choice(['', '.json', '-x'])}"])
        out[path] = None if rng.random() < delete else f"content {i} {rng.random()}".encode()
    return out


def _ids(changes: dict[str, bytes | None]) -> dict[str, str | None]:
    return {p: (object_id("blob", d) if d is not None else None) for p, d in changes.items()}


def _consistent(changes: dict[str, bytes | None]) -> dict[str, bytes | None]:
    """Drop paths that are both a file and a directory of another path (libgit2 keeps one)."""
    dirs = {"/".join(p.split("/")[:i]) for p in changes for i in range(1, p.count("/") + 1)}
    return {p: v for p, v in changes.items() if p not in dirs}


@pytest.mark.parametrize("seed", range(6))
def test_python_trees_are_libgit2_trees(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    repo = ReasoningRepo.open(tmp_path / "r.git")
    g = repo.git
    base_files = _consistent({p: v for p, v in _random_changes(rng, 120).items() if v is not None})
    base = g.build_tree(None, base_files) if seed % 3 else None
    changes = _consistent(_random_changes(rng, 80, delete=0.3) | dict.fromkeys(list(base_files)[:: 5 + seed]))
    expected = g.build_tree(base, changes)
    root, trees = build_tree_objects(g.read_raw, base, _ids(changes))
    write_pack(repo.gitdir, [("blob", d) for d in changes.values() if d is not None] + trees)
    assert (root or "4b825dc642cb6eb9a060e54bf8d69288fbee4904") == expected
    commit = repo.write_commit(expected, [], "packed\n")
    repo.set_ref("refs/heads/t", commit)
    assert fsck_clean(repo.gitdir)[0]
    for path, data in changes.items():
        if data is not None and not any(p.startswith(path + "/") for p in changes):
            assert git(repo.gitdir, "cat-file", "blob", f"refs/heads/t:{path}").encode() == data


def test_pack_is_read_by_git_and_an_open_handle(tmp_path: Path) -> None:
    repo = ReasoningRepo.open(tmp_path / "r.git")
    repo.read_blob(repo.git.write_blob(b"opened before the pack"))  # libgit2 has scanned the odb
    blobs = [b"x" * i + b"\n" for i in range(300)] + [b"same", b"same"]
    ids = write_pack(repo.gitdir, [("blob", b) for b in blobs])
    assert ids == [object_id("blob", b) for b in blobs]
    assert repo.read_blob(ids[123]) == blobs[123]  # the handle opened earlier finds the new pack
    packs = list((repo.gitdir / "objects" / "pack").glob("pack-*.idx"))
    assert len(packs) == 1
    verified = git(repo.gitdir, "verify-pack", "-v", str(packs[0]))
    assert "non delta: 301 objects" in verified  # the duplicate is packed once
    assert git(repo.gitdir, "cat-file", "-p", ids[200]).encode() == blobs[200]
    assert not list((repo.gitdir / "objects" / "pack").glob("tmp_*"))
    assert write_pack(repo.gitdir, [("blob", b) for b in blobs]) == ids  # the same pack again
    assert write_pack(repo.gitdir, []) == []


def test_pack_header_varint_for_large_objects() -> None:
    data = bytes(range(256)) * 300  # 76,800 bytes: a three-byte size header
    pack, index, ids = pack_bytes([("blob", data), ("tree", b"")])
    assert pack[:4] == b"PACK" and index[:4] == b"\xfftOc"
    assert ids == [object_id("blob", data), object_id("tree", b"")]


def test_hostile_input_is_refused(tmp_path: Path) -> None:
    repo = ReasoningRepo.open(tmp_path / "r.git")
    with pytest.raises(InvalidNameError):
        build_tree_objects(repo.git.read_raw, None, {"a/../b": object_id("blob", b"x")})
    with pytest.raises(InvalidNameError):
        build_tree_objects(repo.git.read_raw, None, {".git/config": object_id("blob", b"x")})
    blob = repo.git.write_blob(b"not a tree")
    with pytest.raises(CorruptRepositoryError):
        build_tree_objects(repo.git.read_raw, blob, {"a": blob})
    with pytest.raises(CorruptRepositoryError):
        build_tree_objects(repo.git.read_raw, "0" * 40, {"a": blob})


def test_sha256_repositories_are_not_packed_here(tmp_path: Path) -> None:
    repo = ReasoningRepo.open(tmp_path / "r.git")
    assert sha1_repository(repo.gitdir)
    git(repo.gitdir, "config", "extensions.objectFormat", "sha256")
    assert not sha1_repository(repo.gitdir)


_FSYNC_PROBE = """
import os, sys
from got_core.repo import ReasoningRepo
from got_core.storage.packs import write_pack
synced = []
real = os.fsync
def counting(fd):
    synced.append(os.readlink(f"/proc/self/fd/{fd}") if os.path.exists(f"/proc/self/fd/{fd}") else str(fd))
    return real(fd)
os.fsync = counting
ReasoningRepo(sys.argv[1], create=True, fsync=sys.argv[2] == "1").close()
write_pack(sys.argv[1], [("blob", b"x%d" % i) for i in range(3)])
print(sum(p.endswith((".pack", ".idx")) or "tmp_" in p or p.endswith("/pack") for p in synced))
"""


@pytest.mark.parametrize("durable", [True, False])
def test_a_pack_is_fsynced_exactly_when_the_repository_asked_for_fsync(tmp_path, durable):
    import subprocess
    import sys

    # libgit2's fsync switch is process-wide: probe it in a process of its own
    out = subprocess.run(
        [sys.executable, "-c", _FSYNC_PROBE, str(tmp_path / "r.git"), "1" if durable else "0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (int(out) >= 3) if durable else (int(out) == 0)  # the pack, its index and their directory
    assert fsck_clean(tmp_path / "r.git")[0]


def test_a_directory_is_checked_once_and_every_name_in_it_still_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import got_core.storage.packs as packs

    repo = ReasoningRepo.open(tmp_path / "r.git")
    blob = repo.git.write_blob(b"x")
    calls: list[str] = []
    real = packs.check_path

    def spy(path: str, what: str = "path") -> tuple[str, ...]:
        calls.append(path)
        return real(path, what)

    monkeypatch.setattr(packs, "check_path", spy)
    changes = {f"ns.{d}/0/1/users/u{d}/k{i}.json": blob for d in range(3) for i in range(100)}
    root, trees = build_tree_objects(repo.git.read_raw, None, changes)
    assert len(calls) == 3  # once per directory, not once per file
    write_pack(repo.gitdir, trees)
    repo.set_ref("refs/heads/t", repo.write_commit(root, [], "t\n"))
    assert fsck_clean(repo.gitdir)[0]
    assert len(git(repo.gitdir, "ls-tree", "-r", "--name-only", "refs/heads/t").split()) == 300
    # a bad name in a directory already checked is still refused, and so is an over-long path
    for bad in ("..", ".git", "", "a\\b", ".GIT", "x" * 300):
        with pytest.raises(InvalidNameError):
            build_tree_objects(repo.git.read_raw, None, {"a/b/ok": blob, f"a/b/{bad}": blob})
    deep = "/".join(["d" * 200] * 20)
    with pytest.raises(InvalidNameError):
        build_tree_objects(repo.git.read_raw, None, {f"{deep}/ok": blob, f"{deep}/{'y' * 200}": blob})
    with pytest.raises(InvalidNameError):
        build_tree_objects(repo.git.read_raw, None, {"a/ok": blob, "/a": blob})


def test_trees_of_ids_are_stored_not_deflated_and_git_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zlib

    import got_core.storage.packs as packs

    repo = ReasoningRepo.open(tmp_path / "r.git")
    blobs = [repo.git.write_blob(f"item {i}\n".encode() * 20) for i in range(16)]
    # a hash-bucket level (16 one-letter directories) above directories of files with longer names
    # (over 1 KiB each: a smaller tree is stored whatever its names, STORED_BLOB_BYTES)
    root, trees = build_tree_objects(
        repo.git.read_raw,
        None,
        {f"{i:x}/memory-item-{j:04d}.json": blobs[(i + j) % 16] for i in range(16) for j in range(32)},
    )
    assert all(len(data) >= packs.STORED_BLOB_BYTES for _, data in trees if not data.startswith(b"40000 0\x00"))
    bucket = next(data for _, data in trees if data.startswith(b"40000 0\x00"))
    deflated: list[bytes] = []
    real = packs._deflate
    monkeypatch.setattr(packs, "_deflate", lambda data: deflated.append(data) or real(data))
    entry = packs.pack_entry("tree", bucket)
    assert zlib.decompress(entry[2:]) == bucket and len(entry) > len(bucket)  # stored blocks
    assert deflated == []
    write_pack(repo.gitdir, trees)
    assert bucket not in deflated and len(deflated) == len(trees) - 1  # only the bucket level is stored
    repo.set_ref("refs/heads/t", repo.write_commit(root, [], "t\n"))
    assert fsck_clean(repo.gitdir)[0]
    assert git(repo.gitdir, "cat-file", "blob", "refs/heads/t:a/memory-item-0003.json").encode() == repo.read_blob(
        blobs[13]
    )
    for idx in (repo.gitdir / "objects" / "pack").glob("*.idx"):
        git(repo.gitdir, "verify-pack", str(idx))  # raises on a damaged pack


def test_a_tree_cache_keeps_as_many_directories_as_it_is_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import got_core.storage.packs as packs
    from got_core.storage.packs import TreeCache

    repo = ReasoningRepo.open(tmp_path / "r.git")
    blob = repo.git.write_blob(b"x")
    first = {f"d{d:03d}/k{i}.json": blob for d in range(100) for i in range(20)}
    parsed: list[str] = []
    real = packs._read_tree
    monkeypatch.setattr(packs, "_read_tree", lambda read_raw, oid: parsed.append(oid) or real(read_raw, oid))
    for cache, reparsed in ((TreeCache(1000, min_entries=16), 0), ({}, 100)):
        raw: dict[str, bytes] = {}

        def read_raw(oid: str) -> tuple[str, bytes]:
            return ("tree", raw[oid]) if oid in raw else repo.git.read_raw(oid)

        root, trees = build_tree_objects(read_raw, None, first, cache)  # type: ignore[arg-type]
        raw.update({packs.object_id(k, d): d for k, d in trees})
        parsed.clear()
        again, more = build_tree_objects(read_raw, root, {f"d{d:03d}/new.json": blob for d in range(100)}, cache)  # type: ignore[arg-type]
        assert len(parsed) == reparsed  # a dict keeps 64 trees of 32 entries or more: every directory is parsed again
        write_pack(repo.gitdir, trees + more)
        repo.set_ref("refs/heads/t", repo.write_commit(again, [], "t\n"))
        assert len(git(repo.gitdir, "ls-tree", "-r", "--name-only", "refs/heads/t").split()) == 2100
    assert fsck_clean(repo.gitdir)[0]


def test_small_trees_are_stored_and_commits_deflated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import zlib

    import got_core.storage.packs as packs

    # a node's or a checkpoint's tree (a few files with long names) costs zlib ~100k instructions
    # to deflate, mostly its Huffman trees: stored; a commit stays deflated (`git repack -f` keeps
    # an object it does not deltify as it is, and git rarely deltifies a commit)
    repo = ReasoningRepo.open(tmp_path / "r.git")
    blob = repo.git.write_blob(b"x")
    root, trees = build_tree_objects(repo.git.read_raw, None, {f"a-long-file-name-{i}.json": blob for i in range(8)})
    (tree,) = (data for _, data in trees)
    assert 64 < len(tree) < packs.STORED_BLOB_BYTES
    commit = (
        f"tree {root}\nauthor A U Thor <a@example.org> 1700000000 +0000\n"
        "committer A U Thor <a@example.org> 1700000000 +0000\n\n" + "a message of a node write\n" * 8
    ).encode()
    deflated: list[bytes] = []
    real = packs._deflate
    monkeypatch.setattr(packs, "_deflate", lambda data: deflated.append(data) or real(data))
    for kind, data in (("tree", tree), ("commit", commit), ("blob", b"a small blob " * 20)):
        assert zlib.decompress(packs.pack_entry(kind, data)[2:]) == data
    assert deflated == [commit]
    write_pack(repo.gitdir, [("tree", tree), ("commit", commit)])
    assert fsck_clean(repo.gitdir)[0]
