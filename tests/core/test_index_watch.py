"""The index's inotify watches on ref directories (got_core.storage.refwatch), against real git.

A sync after our own write lists no ref directory (the kernel's events name what changed);
changes by stock git in the directories our writes touch are still found, also when a ref
is rewritten twice between two looks; broken watches, forked children, remote file systems
and ``GOT_REF_WATCH=0`` fall back to listing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from got_core import ReasoningRepo
from got_core.storage import refscan
from got_core.storage.refwatch import open_watch
from tests.core.test_index_sync import agrees_with_fresh_index, node, stock


def _watched(path: Path) -> ReasoningRepo:
    repo = ReasoningRepo.init(path)
    for i in range(6):
        repo.commit_node(node(f"alpha history {i}", i / 10))
    repo.grep("alpha")  # opens the index
    assert repo._index is not None and repo._index._watch is None, "a process that only read opens no watch"
    repo.commit_node(node("alpha opening", 0.1))
    repo.grep("alpha")  # the first sync after a write of ours opens the watches
    assert repo._index._watch is not None, "inotify is available on Linux's local file systems"
    repo.grep("alpha")  # the look after that one: its directories are watched since before it
    return repo


def _listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    listed: list[str] = []
    real = os.scandir

    def spy(path):  # counts, then lists for real
        listed.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(refscan.os, "scandir", spy)
    return listed


def test_a_sync_after_our_own_write_lists_no_ref_directory(tmp_path, monkeypatch):
    repo = _watched(tmp_path / "r.git")
    for i in range(3):
        oid = repo.commit_node(node(f"alpha fresh {i}", 0.9)).oid
        listed = _listings(monkeypatch)
        assert oid in {c.oid for c in repo.grep(f"fresh {i}")}
        assert [p for p in listed if "/refs" in p] == [], "the watches say which entries changed"
        monkeypatch.undo()
    agrees_with_fresh_index(repo, tmp_path, "watched")


def test_stock_git_changes_beside_our_writes_are_found(tmp_path):
    repo = _watched(tmp_path / "r.git")
    master = repo.git.ref_target("refs/heads/master")
    assert master is not None
    first = repo.commit_node(node("alpha one", 0.2)).oid
    repo.grep("alpha")
    # stock git, between two of our looks: a tag moved by force and a branch rewritten twice
    # (ext4 may hand the second rewrite the inode the first one freed), in the directories
    # our next write touches too
    stock(repo.gitdir, "tag", "-f", "mark-a", first)
    stock(repo.gitdir, "update-ref", "refs/heads/side", first)
    stock(repo.gitdir, "update-ref", "refs/heads/side", master)
    stock(repo.gitdir, "update-ref", "refs/heads/side", first)
    stock(repo.gitdir, "update-ref", "refs/heads/side", master)
    repo.commit_node(node("alpha two", 0.4))  # master and a new tag: both directories change again
    assert {c.oid for c in repo.tagged("mark-")} == {first}
    agrees_with_fresh_index(repo, tmp_path, "stock-beside")
    stock(repo.gitdir, "tag", "-d", "mark-a")
    stock(repo.gitdir, "update-ref", "-d", "refs/heads/side")
    repo.commit_node(node("alpha three", 0.6))
    assert repo.tagged("mark-") == []
    agrees_with_fresh_index(repo, tmp_path, "stock-removed")


def test_a_removed_watched_directory_drops_the_watches_and_lists_again(tmp_path, monkeypatch):
    repo = _watched(tmp_path / "r.git")
    tip = repo.git.ref_target("refs/heads/master")
    assert tip is not None
    stock(repo.gitdir, "update-ref", "refs/heads/topic/a", tip)
    repo.grep("alpha")
    repo.grep("alpha")  # refs/heads/topic is watched now
    index = repo._index
    assert index is not None and index._watch is not None and index._watch.watching("refs/heads/topic")
    stock(repo.gitdir, "update-ref", "-d", "refs/heads/topic/a")  # git removes the emptied directory
    stock(repo.gitdir, "update-ref", "refs/heads/topic2", tip)
    listed = _listings(monkeypatch)
    repo.commit_node(node("alpha after", 0.3))
    assert "topic/a" not in repo.branches() and "topic2" in repo.branches()
    repo.grep("alpha")
    assert any(p.endswith("refs/heads") for p in listed), "a broken watch set lists what changed"
    monkeypatch.undo()
    agrees_with_fresh_index(repo, tmp_path, "dir-removed")


def test_a_forked_child_never_reads_its_parents_watch(tmp_path):
    repo = _watched(tmp_path / "r.git")
    index = repo._index
    assert index is not None and index._watch is not None
    pid = os.fork()
    if pid == 0:  # the child: the descriptor is the parent's, so the watch must say it is not usable
        os._exit(0 if not index._watch.usable() and index._watch.changes() is None else 1)
    _pid, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert index._watch.usable()


def test_no_watch_where_events_cannot_be_trusted(tmp_path, monkeypatch):
    assert open_watch(Path("/proc/self")) is None, "not a local disk file system: no watches"
    monkeypatch.setenv("GOT_REF_WATCH", "0")
    assert open_watch(tmp_path) is None
    repo = ReasoningRepo.init(tmp_path / "r.git")
    oid = repo.commit_node(node("alpha unwatched", 0.5)).oid
    assert [c.oid for c in repo.grep("unwatched")] == [oid]
    assert repo._index is not None and repo._index._watch is None
