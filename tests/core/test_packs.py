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
