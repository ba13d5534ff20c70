"""A long-lived handle does not keep the packs merged away under it (found looking into
issue 13's write at 10k nodes; that gap itself is the file system's, see the benchmark).

libgit2 never forgets a pack it has loaded: a pack merged away (small-pack consolidation,
``got gc``) stays in its list, its ``.idx`` mapped and its ``.pack`` open, and every object
lookup that misses (each write's new commit is looked up before its pack is known) searches
every one of them. A handle that wrote 3,000 nodes paid ~0.8 ms per miss against 24 us for
a fresh one. Counted here from what the process holds open or mapped (Linux ``/proc``),
and through a spy on the object database a write hands libgit2; never timed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pygit2
import pytest
from gitcli import fsck_clean

from got_core import Node, ReasoningRepo
from got_core.storage.git import _staging

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts through /proc (Linux)")


def node(i: int) -> Node:
    return Node(f"thought {i}", scores={"s_comb": 0.5}, problem_id="p", outcome="success")


def removed_packs_held(gitdir: Path) -> int:
    """Pack files of ``gitdir`` removed from disk that this process still maps or holds open."""
    pack_dir = os.fspath(gitdir.resolve() / "objects" / "pack")
    held: set[str] = set()
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            if pack_dir in line and line.rstrip().endswith("(deleted)"):
                held.add(line.split(pack_dir, 1)[1])
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, closed by now
        if target.startswith(pack_dir) and target.endswith("(deleted)"):
            held.add(target[len(pack_dir) :])
    return len(held)


def test_a_handle_writing_many_nodes_lets_go_of_the_packs_merged_away(tmp_path: Path) -> None:
    """Writes merge small packs every ~16 writes; after 300 writes the handle holds at most
    the packs of one renewal period that were merged away since (before: every one of them)."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for i in range(300):
        repo.commit_node(node(i))
    assert len(list((tmp_path / "r.git" / "objects" / "pack").glob("*.idx"))) <= 32  # merges ran
    assert removed_packs_held(tmp_path / "r.git") <= _staging.ODB_RENEW_PACKS
    ok, out = fsck_clean(tmp_path / "r.git")
    assert ok, out


def test_the_object_database_is_renewed_once_per_period_of_packs_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The handle gives libgit2 a fresh object database once every ``ODB_RENEW_PACKS``
    packs it writes (the fresh one lists the packs on disk now), and every node written
    before and after stays readable through it."""
    renewals: list[str] = []
    real = pygit2.Repository.set_odb

    def spy(self: pygit2.Repository, odb: pygit2.Odb) -> None:
        renewals.append(self.path)
        real(self, odb)

    monkeypatch.setattr(pygit2.Repository, "set_odb", spy)
    repo = ReasoningRepo.init(tmp_path / "r.git")
    oids = [repo.commit_node(node(i)).oid for i in range(2 * _staging.ODB_RENEW_PACKS + 5)]
    assert len(renewals) == 2
    assert [repo.read_node(oid).thought for oid in oids] == [f"thought {i}" for i in range(len(oids))]


def test_maintenance_lets_go_of_every_pack_it_folded(tmp_path: Path) -> None:
    """``maintenance()`` (``git repack -a -d``) removes every pack; the handle that ran it
    then holds none of them, and reads and writes go on."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    oids = [repo.commit_node(node(i)).oid for i in range(40)]
    repo.read_node(oids[0])
    repo.maintenance()
    assert removed_packs_held(tmp_path / "r.git") == 0
    oids.append(repo.commit_node(node(40)).oid)
    assert repo.read_node(oids[0]).thought == "thought 0"
    assert repo.read_node(oids[-1]).thought == "thought 40"
    ok, out = fsck_clean(tmp_path / "r.git")
    assert ok, out
