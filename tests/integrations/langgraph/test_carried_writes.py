"""A running graph's writes for a checkpoint ride in the next checkpoint's tree
(``parent~writes/``) instead of a ``pending/<id>`` ref of their own; every read, and every
history operation, sees them as it saw the pending refs."""

from __future__ import annotations

from typing import Any

import pytest
from gitcli import fsck_clean, git
from langgraph.checkpoint.base import empty_checkpoint

from got_integrations.langgraph import GitCheckpointSaver, _pending

RUNNING = "__pregel_runtime"  # the key LangGraph's loop puts in every config it hands a saver
HEAD = "refs/got/threads/t/root/head"


@pytest.fixture(autouse=True)
def no_timer(monkeypatch):
    """These tests put the next checkpoint right after the writes: the 50 ms timer that stores
    writes no checkpoint took must not fire in between on a busy machine (it has tests of its own)."""
    monkeypatch.setattr(_pending, "HAND_OVER_S", 3600.0)


def cfg(checkpoint_id: str | None = None, thread: str = "t", running: bool = True) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    if running:
        conf[RUNNING] = 1
    return {"configurable": conf}


def put(saver: GitCheckpointSaver, n: int, parent: str | None, run: str = "r1", thread: str = "t") -> str:
    checkpoint = {
        **empty_checkpoint(),
        "id": f"1f0{n:05d}",
        "channel_values": {"n": n},
        "channel_versions": {"n": str(n)},
    }
    stored = saver.put(cfg(parent, thread), checkpoint, {"source": "loop", "step": n, "run_id": run}, {"n": str(n)})
    return stored["configurable"]["checkpoint_id"]


def writes(saver: GitCheckpointSaver, checkpoint_id: str, thread: str = "t") -> list[tuple[str, str, Any]]:
    tup = saver.get_tuple(cfg(checkpoint_id, thread, running=False))
    assert tup is not None
    return sorted(tup.pending_writes)


def line(saver: GitCheckpointSaver, steps: int, run: str = "r1") -> list[str]:
    """``steps`` checkpoints, each step's task writing for its parent before the child is put."""
    ids, parent = [], None
    for n in range(1, steps + 1):
        parent = put(saver, n, parent, run)
        ids.append(parent)
        if n < steps:
            saver.put_writes(cfg(parent), [("n", n + 1), ("log", f"from {n}")], f"task-{n}")
    return ids


def test_the_next_checkpoint_carries_the_writes_and_stock_git_sees_them(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "c.git")
    ids = line(saver, 4)
    gitdir = tmp_path / "c.git"
    assert not git(gitdir, "for-each-ref", "refs/got/threads/t/root/pending/")  # no ref per checkpoint
    shown = git(gitdir, "show", f"{HEAD}~1:parent~writes/task-2.json")  # step 2's writes, in checkpoint 3
    assert ids[1] in shown and "from 2" in shown
    assert git(gitdir, "ls-tree", "--name-only", HEAD).split() == ["checkpoint.json", "parent~writes"]
    fresh = GitCheckpointSaver.from_path(gitdir)  # reads git only
    for n, cid in enumerate(ids[:-1], start=1):
        assert writes(fresh, cid) == [(f"task-{n}", "log", f"from {n}"), (f"task-{n}", "n", n + 1)]
    assert writes(fresh, ids[-1]) == []
    ok, out = fsck_clean(gitdir)
    assert ok, out


def test_a_reader_sees_writes_carried_by_a_checkpoint_another_saver_put_later(tmp_path):
    writer = GitCheckpointSaver.from_path(tmp_path / "o.git")
    first = put(writer, 1, None)
    reader = GitCheckpointSaver.from_path(tmp_path / "o.git")
    assert writes(reader, first) == []  # the reader knows the line as it was
    writer.put_writes(cfg(first), [("n", 2)], "task-1")
    put(writer, 2, first)  # carries task-1's writes
    assert writes(reader, first) == [("task-1", "n", 2)]


def test_writes_stored_in_a_pending_ref_and_carried_are_merged(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "m.git")
    first = put(saver, 1, None)
    saver.put_writes(cfg(first), [("n", 2)], "task-a")
    saver.get_tuple(cfg(first))  # a read stores the queue: task-a gets the pending/ ref
    saver.put_writes(cfg(first), [("log", "b")], "task-b")
    saver.put_writes(cfg(first), [("log", "a again"), ("x", 1)], "task-a")  # idx 0 is stored: only x is new
    put(saver, 2, first)  # carries task-b's and task-a's second writes
    gitdir = tmp_path / "m.git"
    assert git(gitdir, "for-each-ref", "--format=%(refname)", "refs/got/threads/t/root/pending/").split() == [
        f"refs/got/threads/t/root/pending/{first}"
    ]
    assert writes(GitCheckpointSaver.from_path(gitdir), first) == [
        ("task-a", "n", 2),
        ("task-a", "x", 1),
        ("task-b", "log", "b"),
    ]


def test_a_fork_from_the_middle_keeps_that_checkpoints_carried_writes(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "f.git")
    ids = line(saver, 5)
    expected = writes(saver, ids[2])
    assert expected
    saver.fork_thread("t", ids[2], "copy")
    fresh = GitCheckpointSaver.from_path(tmp_path / "f.git")
    assert writes(fresh, ids[2], "copy") == expected  # the child that carried them is not on the copy's line
    assert writes(fresh, ids[1], "copy") == writes(fresh, ids[1])
    saver.copy_thread("t", "whole")
    assert [writes(fresh, cid, "whole") for cid in ids] == [writes(fresh, cid) for cid in ids]
    ok, out = fsck_clean(tmp_path / "f.git")
    assert ok, out


def test_deleting_a_run_keeps_the_writes_its_checkpoints_carried_for_survivors(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "d.git")
    first = put(saver, 1, None, run="keep")
    saver.put_writes(cfg(first), [("n", 2)], "task-1")
    second = put(saver, 2, first, run="drop")  # carries task-1's writes for the surviving checkpoint
    saver.put_writes(cfg(second), [("n", 3)], "task-2")
    third = put(saver, 3, second, run="keep")  # carries task-2's, for the checkpoint deleted below
    saver.delete_for_runs(["drop"])
    fresh = GitCheckpointSaver.from_path(tmp_path / "d.git")
    assert writes(fresh, first) == [("task-1", "n", 2)]
    assert writes(fresh, third) == []  # the deleted checkpoint's writes went with it
    tree = git(tmp_path / "d.git", "ls-tree", "-r", "--name-only", HEAD)
    assert "parent~writes" not in tree  # re-parented: what it carried for its old parent is gone
    saver.prune(["t"])
    assert writes(GitCheckpointSaver.from_path(tmp_path / "d.git"), third) == []
    ok, out = fsck_clean(tmp_path / "d.git")
    assert ok, out
