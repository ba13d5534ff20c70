"""Two memories the experiments need besides the five substrates (§4, Table 6 of arXiv 2606.14470).

* :class:`StaticMemory` — the same fixed lessons for every question, in a fixed order
  (Table 6's static few-shot arm: three exemplars, no retrieval).
* :class:`DeferredWrites` — a read-only view of a memory that *holds back* the solver's
  writes instead of storing them. The online arms (a memory that accumulates over the test
  stream) run question ``i`` against the memory exactly as question ``i - 1`` left it; what
  the solver wanted to write is returned in the result record, and the driver appends it
  once the answer is verified (:mod:`got_core.bench.protocols.online`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from got_core.memory.base import BaseMemory, Lesson

__all__ = ["DeferredWrites", "StaticMemory"]


class StaticMemory(BaseMemory):
    """A read-only memory that answers every query with the same lessons, in their order.

    Args:
        lessons: the fixed lessons (``get_relevant(q, k)`` returns the first ``k``).
    """

    name = "static"

    def __init__(self, lessons: Sequence[Lesson]) -> None:
        super().__init__(None, read_only=True)
        self._lessons = [
            self._prepare(l.text, l.outcome, l.topic_key, l.source_problem, l.score, l.meta) for l in lessons
        ]

    def _query(self, query: str, k: int) -> list[Lesson]:
        return list(self._lessons[:k])

    def _all(self) -> list[Lesson]:
        return list(self._lessons)

    def storage_bytes(self) -> int:
        """0: nothing on disk."""
        return 0


class DeferredWrites(BaseMemory):
    """Reads from ``inner`` (opened read-only); writes are validated and kept in :attr:`captured`.

    Args:
        inner: the memory to read from.

    Attributes:
        captured: the lessons the solver asked to store, as JSON-able dicts (no wall-clock
            ``created`` field, so a seeded re-run records the same).
    """

    name = "deferred"

    def __init__(self, inner: Any) -> None:
        super().__init__(getattr(inner, "path", None), read_only=False)
        self.inner = inner
        self.captured: list[dict[str, Any]] = []

    @property
    def ref(self) -> str | None:
        """The inner memory's branch (git backend), for its fingerprint."""
        return getattr(self.inner, "ref", None)

    @property
    def repo(self) -> Any:
        """The inner memory's repository (git backend), for its fingerprint."""
        return getattr(self.inner, "repo", None)

    def _store(self, lesson: Lesson) -> Lesson:
        data = lesson.to_dict()
        data.pop("created", None)
        data.pop("relevance", None)
        self.captured.append(data)
        return lesson

    def _query(self, query: str, k: int) -> list[Lesson]:
        return list(self.inner.get_relevant(query, k))

    def _all(self) -> list[Lesson]:
        return list(self.inner.all_lessons())

    def close(self) -> None:
        """Close the inner memory."""
        self.inner.close()
