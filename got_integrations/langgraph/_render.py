"""What the saver's commits say and hold beyond the documents: commit messages and list segments.

Pure functions of their arguments (no repository): a checkpoint's message (step, source, a
summary and the ``Thread:`` / ``Checkpoint:`` trailers `got threads` and git's own log read), a
writes commit's message, and which segment blobs of a growing list a checkpoint rewrites
(docs/ARCHITECTURE.md §4, checkpointer row).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from got_integrations.langgraph._layout import (
    ThreadRef,
    elem_path,
    one_line,
    pack_segment,
    segment_path,
    segment_ranges,
)

__all__ = ["checkpoint_message", "update_segments", "writes_message"]


class _Request(Protocol):
    task_id: str
    task_path: str
    checkpoint_id: str


def checkpoint_message(
    readable: bool,
    ref: ThreadRef,
    checkpoint_id: str,
    parent_id: str | None,
    metadata: Mapping[str, Any],
    summary: str,
) -> str:
    """A checkpoint's commit message: step, source, a summary and trailers; ids only when
    the saver is not ``readable`` (the core's search index holds every commit message)."""
    if readable:
        head = f"step {metadata.get('step', '?')} ({metadata.get('source', '?')})" + (f" {summary}" if summary else "")
    else:
        head = f"checkpoint {one_line(checkpoint_id, 60)}"
    lines = [head, "", f"Thread: {one_line(ref.thread_id, 200)}"]
    if ref.checkpoint_ns:
        lines.append(f"Namespace: {one_line(ref.checkpoint_ns, 200)}")
    lines.append(f"Checkpoint: {one_line(checkpoint_id, 200)}")
    if parent_id:
        lines.append(f"Parent-Checkpoint: {one_line(parent_id, 200)}")
    if readable and metadata.get("run_id"):
        lines.append(f"Run: {one_line(metadata['run_id'], 200)}")
    return "\n".join(lines) + "\n"


def writes_message(requests: Iterable[_Request], channels: list[str]) -> str:
    """``writes <nodes> -> <channels>`` and a ``Checkpoint:`` / ``Task:`` trailer per request."""
    requests = list(requests)
    nodes = dict.fromkeys(r.task_path.rsplit(",", 1)[-1].strip() if r.task_path else r.task_id[:8] for r in requests)
    lines = [f"writes {one_line(', '.join(nodes), 40)} -> {one_line(', '.join(channels), 60)}", ""]
    lines += [f"Checkpoint: {one_line(c, 200)}" for c in dict.fromkeys(r.checkpoint_id for r in requests)]
    for r in requests:
        lines.append(f"Task: {one_line(r.task_id, 200)}")
        if r.task_path:
            lines.append(f"Task-Path: {one_line(r.task_path, 200)}")
    return "\n".join(lines) + "\n"


def update_segments(
    base: str,
    typed: list[Any],
    first_changed: int,
    old_length: int,
    files: Mapping[str, str | None],
    put: Callable[[str, bytes], None],
    remove: Callable[[str], None],
) -> None:
    """Bring a list's segments up to date: segments the new length does not have go (a
    bucket that filled up replaces its small segments), segments over a changed element
    or new ones are written; the rest are the parent's blobs. The elements a segment it
    writes covers lose their own ``.bin`` (the reader trusts the segment): a bucket
    directory holds about one file per element, so the tree each step rewrites stays small."""
    wanted = segment_ranges(len(typed))
    if old_length:  # ranges, not paths, are compared: a path is spelled only for a segment that goes
        keep = set(wanted)
        for s, n in segment_ranges(old_length):
            if (s, n) not in keep:
                remove(segment_path(base, s, n))
    for s, n in wanted:
        path = segment_path(base, s, n)
        if s + n <= first_changed and files.get(path) is not None:
            continue
        put(path, pack_segment(typed[s : s + n]))
        for i in range(s, s + n):
            remove(elem_path(base, i) + ".bin")
