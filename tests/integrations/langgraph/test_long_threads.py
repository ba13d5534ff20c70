"""What a super-step of a long thread costs beyond a short one's (issue 13: per step, 1,000-step
threads), counted, never timed:

* a put copies its parent's file listing (a path per message) without re-inserting its entries:
  removed paths stay as tombstones (``None``), so the dict the next put copies never had a key
  popped and CPython copies it as one block; the tombstones are dropped once they are a third of
  it, and every listing still says exactly what git holds;
* an async call's hop hands the worker's answer straight to an asyncio future: no concurrent
  future chained to it (``run_in_executor``'s ``wrap_future``: a Condition, callbacks, a copy).
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from lgconf import running_config as cfg

from got_integrations.langgraph import GitCheckpointSaver, _layout, _pending


@pytest.fixture(autouse=True)
def no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next checkpoint is put right after the writes: the 50 ms timer must not store them first."""
    monkeypatch.setattr(_pending, "HAND_OVER_S", 3600.0)


def _checkpoint(n: int, messages: list[Any]) -> Any:
    return {
        **empty_checkpoint(),
        "id": f"1f0{n:05d}",
        "channel_values": {"messages": messages, "n": n},
        "channel_versions": {"messages": str(n), "n": str(n)},
    }


def _message(n: int) -> Any:
    return (HumanMessage if n % 2 else AIMessage)(content=f"message {n}: " + "words " * (n % 7), id=f"m{n}")


def test_a_long_thread_s_listings_drop_paths_as_tombstones_and_agree_with_git(tmp_path: Path) -> None:
    saver = GitCheckpointSaver.from_path(tmp_path / "r.git")
    messages: list[Any] = []
    parent: str | None = None
    dead_seen: list[int] = []
    for n in range(1, 251):
        if parent is not None:  # the step's regular writes, handed to the next put (a carried file each)
            saver.put_writes(cfg(parent), [("n", n)], f"task-{n}")
        messages = [*messages, _message(n)]  # LangGraph's reducer: a new list, the old messages kept
        stored = saver.put(cfg(parent), _checkpoint(n, messages), {"source": "loop", "step": n}, {"messages": str(n)})
        parent = str(stored["configurable"]["checkpoint_id"])
        oid = saver._ns("t", "").head
        assert oid is not None
        listing = saver._files.get(oid)
        assert isinstance(listing, _layout.Listing)
        # removed paths (covered .bin files, the parent's carried writes) are None, never popped
        assert listing.live() == saver.repo.list_files(oid)
        assert listing.dead == sum(1 for sha in listing.values() if sha is None)
        assert listing.dead <= max(32, len(listing) // 3) + 16  # a step adds a few; a copy drops them
        dead_seen.append(listing.dead)
    assert max(dead_seen) > 32  # tombstones did accumulate ...
    assert any(b < a for a, b in itertools.pairwise(dead_seen))  # ... and were dropped
    tup = saver.get_tuple(cfg(running=False))
    assert tup is not None and [m.content for m in tup.checkpoint["channel_values"]["messages"]] == [
        m.content for m in messages
    ]
    saver.close()


def test_a_listing_copy_is_a_block_copy_of_a_dict_that_never_lost_a_key() -> None:
    listing = _layout.Listing({f"messages/000/{i:06d}.json": f"{i:040x}" for i in range(100)})
    assert listing.drop("messages/000/000005.json") and not listing.drop("messages/000/000005.json")
    assert listing.set("messages/000/000005.json", "f" * 40) and listing.dead == 0
    assert not listing.set("messages/000/000005.json", "f" * 40)
    listing.drop("messages/000/000007.json")
    child = listing.copy_for_child()
    assert child == listing and child.dead == 1 and child.get("messages/000/000007.json") is None
    for i in range(40, 80):
        child.drop(f"messages/000/{i:06d}.json")
    compacted = child.copy_for_child()  # 41 of 100 dead: a third, so they go
    assert compacted.dead == 0 and len(compacted) == 59 and compacted == child.live()


def _loop_thread_calls(coro: Any) -> list[str]:
    """The Python functions the event loop's thread calls while running ``coro``."""
    calls: list[str] = []

    def prof(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and threading.current_thread() is threading.main_thread():
            calls.append(frame.f_code.co_name)

    async def run() -> None:
        sys.setprofile(prof)
        try:
            await coro
        finally:
            sys.setprofile(None)

    asyncio.run(run())
    return calls


def test_an_async_put_hands_its_answer_back_without_a_chained_concurrent_future(tmp_path: Path) -> None:
    saver = GitCheckpointSaver.from_path(tmp_path / "r.git")
    first = saver.put(cfg(), _checkpoint(1, [_message(1)]), {"source": "loop", "step": 1}, {})
    parent = str(first["configurable"]["checkpoint_id"])
    calls = _loop_thread_calls(
        saver.aput(cfg(parent), _checkpoint(2, [_message(1), _message(2)]), {"source": "loop", "step": 2}, {})
    )
    assert "_in_worker" in calls and "put" not in calls  # the put ran in a worker
    assert "wrap_future" not in calls and "_chain_future" not in calls and "_copy_future_state" not in calls
    tup = saver.get_tuple(cfg(running=False))
    assert tup is not None and len(tup.checkpoint["channel_values"]["messages"]) == 2
    saver.close()
