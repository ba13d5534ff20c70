"""What a node write's shared path costs, counted (deflates, lookups), never timed: each test
fails on the code before the change it names."""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import pytest
from gitcli import fsck_clean, git

from got_core.repo import ReasoningRepo
from got_core.storage import packs
from got_core.storage.packs import build_tree_objects, write_pack


def _fanout_changes(rng: random.Random, blob: str, prefix: str = "ab/", count: int = 40) -> dict[str, str]:
    """A notes fan-out directory's worth of notes: ``ab/<38 hex digits>`` -> a blob."""
    return {f"{prefix}{rng.randbytes(19).hex()}": blob for _ in range(count)}


def test_a_notes_fanout_directory_is_stored_not_deflated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the directory a note goes to (40 notes at 10k: 2.6 KB) was deflated at every node write,
    # ~440k instructions for a fifth of its size; it is stored now, and git and libgit2 read it
    rng = random.Random(5)
    repo = ReasoningRepo.open(tmp_path / "r.git")
    blob = repo.git.write_blob(b'{"s_comb": 0.5}\n')
    changes = _fanout_changes(rng, blob)
    root, trees = build_tree_objects(repo.git.read_raw, None, changes)
    leaf = next(data for _kind, data in trees if data.startswith(b"100644 "))
    assert len(leaf) > packs.STORED_BLOB_BYTES
    deflated: list[bytes] = []
    real = packs._deflate
    monkeypatch.setattr(packs, "_deflate", lambda data: deflated.append(data) or real(data))
    entry = packs.pack_entry("tree", leaf)
    assert deflated == []  # one deflate of the fan-out directory on the code before
    assert zlib.decompress(entry[len(packs._header("tree", len(leaf))) :]) == leaf
    write_pack(repo.gitdir, trees)
    assert root is not None
    repo.set_ref("refs/notes/got", repo.write_commit(root, [], "Notes added by 'got'\n"))
    assert repo.git.read_raw(packs.object_id("tree", leaf)) == ("tree", leaf)
    assert fsck_clean(repo.gitdir)[0]
    for idx in (repo.gitdir / "objects" / "pack").glob("*.idx"):
        git(repo.gitdir, "verify-pack", str(idx))
    listed = git(repo.gitdir, "notes", "--ref=got", "list").split()
    assert sorted(listed[1::2]) == sorted(path.replace("/", "") for path in changes)
    repo.close()


def test_other_trees_over_a_kibibyte_are_still_deflated(tmp_path: Path) -> None:
    # only trees laid out as a notes fan-out directory are stored: a directory of files with
    # names of several widths, directories among id-named files, a fan-out directory over 17 KiB
    rng = random.Random(6)
    repo = ReasoningRepo.open(tmp_path / "r.git")
    blob = repo.git.write_blob(b"x")
    files = {f"file-{i:04d}-{rng.randbytes(4).hex()}-{'x' * (i % 7)}.md": blob for i in range(60)}
    mixed = {**_fanout_changes(rng, blob, ""), "zz/sub": blob}
    big = _fanout_changes(rng, blob, "", 300)
    for changes in (files, mixed, big):
        _root, trees = build_tree_objects(repo.git.read_raw, None, changes)
        top = trees[-1][1]
        assert len(top) > packs.STORED_BLOB_BYTES and not packs._stored("tree", top)
    repo.close()
