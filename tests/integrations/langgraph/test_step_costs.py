"""What a running graph's super-step reads: one ref, the compare-and-swap's own under its
lock. ``put`` takes the queued writes of the step before into its ref transaction with the
tips where this saver's last moves left the refs (``expected`` hints), so it reads no ref to
build on; a hint another writer made stale only costs one more attempt, and loses nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gitcli import fsck_clean
from langgraph.checkpoint.base import empty_checkpoint
from lgconf import running_config as cfg

from got_core.storage.git._refs import _Refs
from got_integrations.langgraph import GitCheckpointSaver, _pending

HEAD = "refs/got/threads/t/root/head"


@pytest.fixture(autouse=True)
def no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next checkpoint is put right after the writes: the 50 ms timer must not store them first."""
    monkeypatch.setattr(_pending, "HAND_OVER_S", 3600.0)


@pytest.fixture
def ref_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The refs read through the one ref-read primitive (a spy on the real method)."""
    seen: list[str] = []
    real = _Refs.ref_target

    def ref_target(git: Any, name: str) -> Any:
        seen.append(name)
        return real(git, name)

    monkeypatch.setattr(_Refs, "ref_target", ref_target)
    return seen


def put(saver: GitCheckpointSaver, n: int, parent: str | None) -> str:
    checkpoint = {
        **empty_checkpoint(),
        "id": f"1f0{n:05d}",
        "channel_values": {"n": n},
        "channel_versions": {"n": str(n)},
    }
    stored = saver.put(cfg(parent), checkpoint, {"source": "loop", "step": n}, {"n": str(n)})  # type: ignore[arg-type]
    return str(stored["configurable"]["checkpoint_id"])


def step(saver: GitCheckpointSaver, n: int, parent: str) -> str:
    """A super-step: the task's regular writes for ``parent`` (queued), then the next checkpoint."""
    saver.put_writes(cfg(parent), [("n", n), ("log", f"step {n}")], f"task-{n}")
    return put(saver, n, parent)


def test_a_super_step_reads_only_the_ref_its_transaction_checks(tmp_path: Path, ref_reads: list[str]) -> None:
    saver = GitCheckpointSaver.from_path(tmp_path / "r.git")
    parent = put(saver, 1, None)
    parent = step(saver, 2, parent)
    ref_reads.clear()
    for n in range(3, 13):
        parent = step(saver, n, parent)
    # one read a step: head's, under its lock (the old path also read it to build on: two)
    assert ref_reads == [HEAD] * 10
    tup = saver.get_tuple(cfg(running=False))
    assert tup is not None and tup.checkpoint["id"] == parent
    before = saver.get_tuple(cfg("1f000011", running=False))
    assert before is not None and sorted(before.pending_writes or []) == [
        ("task-12", "log", "step 12"),
        ("task-12", "n", 12),
    ]
    saver.close()


def test_a_hint_another_writer_made_stale_costs_an_attempt_and_loses_nothing(tmp_path: Path) -> None:
    mine = GitCheckpointSaver.from_path(tmp_path / "r.git")
    other = GitCheckpointSaver.from_path(tmp_path / "r.git")
    first = put(mine, 1, None)
    second = step(mine, 2, first)
    # another process moves head on from mine's last checkpoint: mine's hint is now stale
    theirs = put(other, 3, second)
    other.close()
    # mine goes on from its own checkpoint 2 with an id above theirs: head moves to it, and
    # their checkpoint is kept on a fork ref (nothing reachable is lost)
    mine.put_writes(cfg(second), [("n", 4)], "task-4")
    checkpoint = {**empty_checkpoint(), "id": "1f000004", "channel_values": {"n": 4}, "channel_versions": {"n": "4"}}
    mine.put(cfg(second), checkpoint, {"source": "loop", "step": 4}, {"n": "4"})  # type: ignore[arg-type]
    fresh = GitCheckpointSaver.from_path(tmp_path / "r.git")
    ids = {t.checkpoint["id"] for t in fresh.list(cfg(running=False))}
    assert {first, second, theirs, "1f000004"} <= ids
    latest = fresh.get_tuple(cfg(running=False))
    assert latest is not None and latest.checkpoint["id"] == "1f000004"
    assert latest.parent_config is not None and latest.parent_config["configurable"]["checkpoint_id"] == second

    def writes(checkpoint_id: str) -> list[Any]:
        tup = fresh.get_tuple(cfg(checkpoint_id, running=False))
        assert tup is not None
        return sorted(tup.pending_writes or [])

    # each step's writes are where a reader looks for them, whichever attempt stored them
    assert writes(first) == [("task-2", "log", "step 2"), ("task-2", "n", 2)]
    assert writes(second) == [("task-4", "n", 4)]
    assert fsck_clean(fresh.repo.gitdir)[0]
    mine.close()
    fresh.close()
