"""The ``none`` backend: no cross-problem memory, the ablation control.

§4.2 of the paper (arXiv 2606.14470) compares every substrate against an agent
that remembers nothing between problems. :class:`NoMemory` accepts and
validates every write exactly like the other backends (so bad input fails the
same way and the cost meters count the same calls), then discards it.
"""

from __future__ import annotations

from pathlib import Path

from got_core.memory.base import BaseMemory, Lesson

__all__ = ["NoMemory"]


class NoMemory(BaseMemory):
    """Stores nothing, retrieves nothing, still meters calls.

    Args:
        path: ignored (accepted so every backend opens the same way); nothing
            is ever created on disk.
        read_only: writes return ``None`` instead of the discarded lesson.
        create: accepted like every backend's; there is nothing to open.
    """

    name = "none"

    def __init__(self, path: str | Path | None = None, *, read_only: bool = False, create: bool = True) -> None:
        super().__init__(None, read_only=read_only)
        #: where the caller asked us to live; kept for reports only.
        self.requested_path = Path(path) if path is not None else None

    def _store(self, lesson: Lesson) -> Lesson:
        # Accepted and validated, then dropped: the control arm must not learn.
        return lesson

    def _query(self, query: str, k: int) -> list[Lesson]:
        return []

    def _all(self) -> list[Lesson]:
        return []

    def storage_bytes(self) -> int:
        """Always 0: nothing is written."""
        return 0

    def get_summary(self) -> str:
        """Says the memory is off, with the counts of discarded writes and reads."""
        return (
            f"none memory: 0 lessons (ablation control; {self.meter.writes} writes "
            f"discarded, {self.meter.reads} reads answered empty)"
        )
