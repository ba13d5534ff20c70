"""The config LangGraph's loop hands a saver inside a running graph, for the saver's cost tests."""

from __future__ import annotations

from typing import Any

RUNNING = "__pregel_runtime"  # the key LangGraph's loop puts in every config it hands a saver


def running_config(checkpoint_id: str | None = None, running: bool = True) -> Any:
    """Thread ``t``'s config (at ``checkpoint_id`` when given), marked as a running graph's."""
    conf: dict[str, Any] = {"thread_id": "t", "checkpoint_ns": ""}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    if running:
        conf[RUNNING] = 1
    return {"configurable": conf}
