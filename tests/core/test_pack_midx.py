"""Settled packs behind a multi-pack-index: a cold lookup of an old object opens few pack
indexes however many packs the history made, and stock git accepts what we wrote."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from gitcli import fsck_clean, git

from got_core import ReasoningRepo
from got_core.storage import midx
from got_core.storage.git import _packing
from got_core.storage.git._packing import MAX_PACKS


def _holder(gitdir: Path, oid: str) -> str:
    """The pack (hex name) whose index lists ``oid``."""
    for idx in (gitdir / "objects" / "pack").glob("pack-*.idx"):
        ids, _ = midx.index_entries(idx)
        if bytes.fromhex(oid) in {ids[i : i + 20] for i in range(0, len(ids), 20)}:
            return idx.name[5:-4]
    raise AssertionError(f"{oid} is in no pack")


def _indexes_a_cold_lookup_opens(gitdir: Path, oid: str) -> int:
    """How many ``.idx`` files a new libgit2 handle opens to find ``oid``: the multi-pack-index
    answers for the packs it covers (then one index: that pack's); the others are searched
    newest first, each opening its index."""
    folder = gitdir / "objects" / "pack"
    covered = set(midx.midx_packs(gitdir))
    holder = _holder(gitdir, oid)
    if holder in covered:
        return 1
    when = os.stat(folder / f"pack-{holder}.pack").st_mtime
    others = [p for p in folder.glob("pack-*.pack") if p.name[5:-5] not in covered]
    return sum(1 for p in others if p.stat().st_mtime >= when)


def _write(repo: ReasoningRepo, n: int, start: int = 0) -> list[str]:
    return [repo.commit_files("notes", {f"d{i % 7}/n{i}": f"note {i} " * 8}, f"note {i}") for i in range(start, n)]


@pytest.fixture
def small_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    # settle packs from 48 objects (not 1024) so that a few hundred writes make several settled packs
    monkeypatch.setattr(_packing, "SETTLE_MIN_OBJECTS", 48)


def test_a_cold_lookup_of_the_first_write_opens_one_index_after_many_writes(tmp_path: Path, small_settle: None) -> None:
    gitdir = tmp_path / "r.git"
    repo = ReasoningRepo.init(gitdir)
    tips = _write(repo, 400)
    folder = gitdir / "objects" / "pack"
    assert len(list(folder.glob("pack-*.idx"))) > 3  # several packs: the old policy searches them all
    for oid in tips[:200]:  # the older half: behind the multi-pack-index
        assert _indexes_a_cold_lookup_opens(gitdir, oid) == 1
    assert (folder / midx.MIDX_NAME).is_file()
    uncovered = [p for p in folder.glob("pack-*.idx") if p.name[5:-4] not in midx.midx_packs(gitdir)]
    assert len(uncovered) <= MAX_PACKS
    git(gitdir, "multi-pack-index", "verify")  # every entry checked against the packs' own indexes
    assert fsck_clean(gitdir)[0]
    # a new handle (libgit2 reading our multi-pack-index) reads every write
    fresh = ReasoningRepo.open(gitdir)
    first = next(iter(fresh.git.walk([tips[0]])))
    assert fresh.git.read_blob(fresh.git.tree_files(first.tree)["d0/n0"]) == b"note 0 " * 8
    assert git(gitdir, "show", "notes:d0/n399") == "note 399 " * 8
    assert git(gitdir, "rev-list", "--count", "notes") == "400\n"


def test_settled_packs_are_kept_and_the_index_grows_geometrically(tmp_path: Path, small_settle: None) -> None:
    gitdir = tmp_path / "r.git"
    repo = ReasoningRepo.init(gitdir)
    seen: list[set[str]] = []
    for k in range(8):
        _write(repo, 100 * (k + 1), 100 * k)
        seen.append(set(midx.midx_packs(gitdir)))
    for before, after in itertools.pairwise(seen):
        assert before <= after  # a settled pack is never merged away
    folder = gitdir / "objects" / "pack"
    assert all((folder / f"pack-{n}.pack").is_file() for n in seen[-1])
    assert 2 <= len(seen[-1]) <= 8  # geometric: each settled pack holds half the ones before it
    git(gitdir, "multi-pack-index", "verify")
    assert fsck_clean(gitdir)[0]


def test_gc_and_a_stale_index_leave_a_readable_repository(tmp_path: Path, small_settle: None) -> None:
    gitdir = tmp_path / "r.git"
    repo = ReasoningRepo.init(gitdir)
    tips = _write(repo, 250)
    assert midx.midx_packs(gitdir)
    stale = (gitdir / "objects" / "pack" / midx.MIDX_NAME).read_bytes()
    repo.maintenance()  # git repack -a -d: one pack
    assert fsck_clean(gitdir)[0]
    assert git(gitdir, "rev-list", "--count", "notes") == "250\n"
    # a multi-pack-index naming packs that are gone (an older git's repack left it): rewritten
    target = gitdir / "objects" / "pack" / midx.MIDX_NAME
    if target.exists():
        target.chmod(0o644)
    target.write_bytes(stale)
    tips += _write(ReasoningRepo.open(gitdir), 500, 250)
    folder = gitdir / "objects" / "pack"
    assert all((folder / f"pack-{n}.pack").is_file() for n in midx.midx_packs(gitdir))
    git(gitdir, "multi-pack-index", "verify")
    assert fsck_clean(gitdir)[0]
    assert git(gitdir, "show", "notes:d3/n3") == "note 3 " * 8
    assert git(gitdir, "rev-list", "--count", "notes") == "500\n"


def test_a_damaged_multi_pack_index_is_replaced_and_nothing_is_lost(tmp_path: Path, small_settle: None) -> None:
    gitdir = tmp_path / "r.git"
    repo = ReasoningRepo.init(gitdir)
    _write(repo, 150)
    target = gitdir / "objects" / "pack" / midx.MIDX_NAME
    assert midx.midx_packs(gitdir)
    target.chmod(0o644)
    target.write_bytes(b"MIDX\x01\x01\x09\x00" + b"\xff" * 40)  # a hostile chunk count and table
    assert midx.midx_packs(gitdir) == []  # not trusted: nothing counts as covered
    _write(ReasoningRepo.open(gitdir), 400, 150)
    assert midx.midx_packs(gitdir)
    git(gitdir, "multi-pack-index", "verify")
    assert fsck_clean(gitdir)[0]
    assert git(gitdir, "rev-list", "--count", "notes") == "400\n"


def test_settled_packs_do_not_make_small_packs_merge_more_often(
    tmp_path: Path, small_settle: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # libgit2 finds a settled pack's objects with one lookup in the multi-pack-index, so settled
    # packs do not count against MAX_PACKS: counted, they left fewer and fewer slots for the small
    # packs, which were merged every few writes once the history was long (0.12 merges a write here
    # after 600 writes, rising with every settled pack; each merge writes a pack and its index)
    merges = []
    real_install = _packing.install_pack

    def counting_install(*args: object, **kwargs: object) -> str:
        merges.append(1)
        return real_install(*args, **kwargs)  # type: ignore[arg-type]

    gitdir = tmp_path / "r.git"
    repo = ReasoningRepo.init(gitdir)
    _write(repo, 600)
    assert len(midx.midx_packs(gitdir)) >= 5  # a long history: several settled packs
    monkeypatch.setattr(_packing, "install_pack", counting_install)  # the merged packs only
    _write(repo, 1200, 600)
    assert len(merges) / 600 <= 0.09
    folder = gitdir / "objects" / "pack"
    uncovered = [p for p in folder.glob("pack-*.idx") if p.name[5:-4] not in midx.midx_packs(gitdir)]
    assert len(uncovered) <= MAX_PACKS  # what libgit2 searches pack by pack stays bounded
    assert git(gitdir, "show", "notes:d0/n0") == "note 0 " * 8
    assert git(gitdir, "rev-list", "--count", "notes") == "1200\n"
    git(gitdir, "multi-pack-index", "verify")
    assert fsck_clean(gitdir)[0]


def test_packs_too_large_to_merge_are_settled_instead_of_piling_up(
    tmp_path: Path, small_settle: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a pack over MERGE_LIMIT_BYTES is never merged here; unsettled (it holds few objects next to
    # the settled ones) such packs piled up outside the multi-pack-index, past MAX_PACKS, and every
    # write then listed the directory and tried to merge again (a store of large blobs, or a flat
    # directory that grows: 26 such packs and 0.84 merge attempts a write after 20k note writes)
    monkeypatch.setattr(_packing, "MERGE_LIMIT_BYTES", 24 << 10)
    attempts = []
    real = _packing._Packing.consolidate_packs

    def counting(self: _packing._Packing, *args: Any, **kwargs: Any) -> int:
        attempts.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(_packing._Packing, "consolidate_packs", counting)
    gitdir = tmp_path / "r.git"
    repo = ReasoningRepo.init(gitdir)
    for i in range(400):  # each write's pack is ~1 KiB; merged ones pass the limit after ~24 writes
        repo.commit_files("big", {f"b{i % 5}/{i}": os.urandom(600).hex()}, f"blob {i}")
    folder = gitdir / "objects" / "pack"
    uncovered = [p for p in folder.glob("pack-*.idx") if p.name[5:-4] not in midx.midx_packs(gitdir)]
    assert len(uncovered) <= MAX_PACKS + 1
    assert len(attempts) / 400 <= 0.2
    git(gitdir, "multi-pack-index", "verify")
    assert fsck_clean(gitdir)[0]
    assert git(gitdir, "rev-list", "--count", "big") == "400\n"
