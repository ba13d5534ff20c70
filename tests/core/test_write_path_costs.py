"""What a node write's shared path costs, counted (deflates, lookups), never timed: each test
fails on the code before the change it names."""

from __future__ import annotations

import mmap
import random
import zlib
from pathlib import Path

import pytest
from gitcli import fsck_clean, git

from got_core.errors import StorageError
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


def test_a_new_tag_s_path_check_searches_a_sparse_index_of_packed_refs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each new ref (a node write's tag) asks whether refs live under its name: a Python binary
    # search of the whole kept packed-refs copy every time (~140k instructions at 10k refs); now
    # a binary search of one record name per 4 KB (C) and one find between two of them
    from got_core.storage import refscan
    from got_core.storage.git import _refs

    monkeypatch.setattr(_refs, "_RACY_NS", 0)
    monkeypatch.setattr(_refs, "_RACY_FINE_NS", 0)
    rng = random.Random(8)
    repo = ReasoningRepo.init(tmp_path / "r.git")
    gitdir = repo.gitdir
    oid = repo.commit_files("master", {"f.txt": "x\n"}, "one")
    names = sorted(
        {f"refs/tags/t{i:05d}" for i in range(0, 3000, 2)}
        | {"refs/tags/held/inside", "refs/tags/t00100x/y", "refs/tags/t02999/z", "refs/tags/t00000/a"}
    )
    lines = ["# pack-refs with: peeled fully-peeled sorted "]
    for name in names:
        lines.append(f"{oid} {name}")
        if rng.random() < 0.1:
            lines.append("^" + oid)  # peeled lines among the records
    (gitdir / "packed-refs").write_text("\n".join(lines) + "\n")
    seeks: list[bytes] = []
    real = refscan._packed_seek

    def counting(m: object, lo: int, want: bytes) -> int | None:
        seeks.append(want)
        return real(m, lo, want)  # type: ignore[arg-type]

    monkeypatch.setattr(refscan, "_packed_seek", counting)
    git_repo = repo.git
    queries = [f"refs/tags/t{i:05d}/" for i in range(3001)]
    queries += ["refs/tags/held/", "refs/tags/t00100x/", "refs/tags/", "refs/", "refs/tags/a/", "refs/tags/zzz/", "z/"]
    for query in queries:
        assert git_repo._packed_has(query) == any(name.startswith(query) for name in names), query
    assert seeks == []  # one binary search of the copy per question (3,008) on the code before
    for k in range(20):
        repo.tag(f"new{k}", oid)
    with pytest.raises(StorageError, match="refs exist under refs/tags/held/"):
        repo.tag("held", oid)
    assert seeks == []
    assert fsck_clean(gitdir)[0]
    repo.close()


def test_a_packed_refs_not_laid_out_as_git_writes_it_is_searched_as_before(tmp_path: Path) -> None:
    # an unsorted file, or a record that is not "<40 hex> <name>", gets no sparse index: the
    # copy's own search (and its plain scan) answers, as before
    from got_core.storage.git import _refs

    for text in (
        "# pack-refs with: peeled\n" + "1" * 40 + " refs/tags/b/c\n" + "1" * 40 + " refs/tags/a\n",
        "# pack-refs with: peeled sorted \n" + "1" * 39 + "  refs/tags/a/b\n",
        "1" * 40 + " refs/tags/a/b\n",
    ):
        path = tmp_path / "packed-refs"
        path.write_text(text)
        with open(path, "rb") as f:
            copy = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        assert _refs._sample_records(copy) is None
        copy.close()


def test_the_stored_rule_is_the_old_one_but_for_notes_fanout_directories() -> None:
    # a uniform tree (the notes root, a fan-out directory) is judged by its layout, without
    # counting its NULs; every other decision is the one made before
    rng = random.Random(9)

    def before(kind: str, data: bytes) -> bool:
        size = len(data)
        if size < packs.STORED_BYTES:
            return True
        if kind == "commit":
            return False
        return size < packs.STORED_BLOB_BYTES or (kind == "tree" and size < 34 * data.count(b"\0"))

    def entry(mode: bytes, name: bytes) -> bytes:
        return mode + b" " + name + b"\0" + rng.randbytes(20)

    for trial in range(400):
        count = rng.choice([1, 5, 20, 40, 100, 256, 300])
        width = rng.choice([2, 8, 12, 31, 32, 38, 40])
        mode = rng.choice([b"100644", b"40000"])
        names = sorted({rng.randbytes(width).hex()[:width].encode() for _ in range(count)})
        entries = [entry(mode, name) for name in names]
        if trial % 4 == 0:  # not uniform: one entry of another width or mode
            entries[len(entries) // 2] = entry(b"100755" if mode == b"40000" else b"40000", b"x" * (width + 1))
        data = b"".join(entries)
        id_dir = trial % 4 != 0 and mode == b"100644" and width >= 32 and len(data) <= packs.STORED_ID_TREE_BYTES
        assert packs._stored("tree", data) == (before("tree", data) or id_dir), (trial, count, width, mode)
        assert packs._stored("blob", data) == before("blob", data)
        assert packs._stored("commit", data) == before("commit", data)


@pytest.mark.parametrize("step", [1, 64, 300, 4096])
def test_the_sparse_index_answers_as_a_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    from got_core.storage.git import _refs

    monkeypatch.setattr(_refs, "PACKED_SAMPLE_BYTES", step)
    rng = random.Random(step)
    parts = ["a", "b", "ab", "a-b", "tags", "x_1", "z", "t0", "t00"]
    path = tmp_path / "packed-refs"
    for trial in range(150):
        names = sorted(
            {"refs/" + "/".join(rng.choice(parts) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(0, 80))}
        )
        lines = ["# pack-refs with: peeled fully-peeled sorted "]
        for name in names:
            lines.append(rng.randbytes(20).hex() + " " + name)
            if rng.random() < 0.3:
                lines.append("^" + rng.randbytes(20).hex())
        path.write_text("\n".join(lines) + ("\n" if trial % 3 else ""))
        with open(path, "rb") as f:
            copy = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        sampled = _refs._sample_records(copy)
        if sampled is None:  # a header alone, without its newline: the copy's own search answers
            assert not names and trial % 3 == 0
            copy.close()
            continue
        queries = {"refs/", "refs/zz/", "refs/a-", "a/", ""} | {n[: rng.randint(5, len(n))] for n in names}
        queries |= {n + "/" for n in names} | {n[:-1] for n in names}
        for query in sorted(queries):
            want = query.encode()
            assert _refs._sampled_prefix(copy, *sampled, want) == any(n.startswith(query) for n in names), (
                trial,
                query,
            )
        copy.close()
