"""The one memory seam: :class:`MemoryBackend` and the shared :class:`Lesson` type.

§3.4 / §4.2 of the paper (arXiv 2606.14470): the agent is held fixed and only
the memory substrate is swapped. Every backend implements the same five verbs
and reports its cost the same way, so a one-line change picks another one::

    memory = get_backend("vector", path="runs/mem")

:class:`BaseMemory` gives safe no-op defaults and the shared bookkeeping
(validation, cost meters); a backend overrides ``_store`` / ``_query`` /
``_all`` and ``storage_bytes``.
"""

from __future__ import annotations

import hashlib
import re
import time
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from got_core.errors import InvalidInputError, PayloadTooLargeError

__all__ = [
    "MAX_LESSON_BYTES",
    "BaseMemory",
    "CostMeter",
    "Lesson",
    "MemoryBackend",
    "Outcome",
    "stored_lesson",
    "topic_key_for",
    "validate_text",
]

Outcome = Literal["insight", "success", "failure"]

#: A lesson is a short, answer-free piece of advice; 64 KiB is far above any real one.
MAX_LESSON_BYTES = 64 * 1024


def validate_text(text: Any, what: str = "lesson text", limit: int = MAX_LESSON_BYTES) -> str:
    """Return ``text`` as clean ``str`` or raise a typed error.

    Args:
        text: a ``str`` (or UTF-8 ``bytes``).
        what: how to name the value in the error message.
        limit: maximum size in UTF-8 bytes.

    Raises:
        InvalidInputError: empty, whitespace-only, not valid UTF-8, or containing NUL.
        PayloadTooLargeError: over ``limit`` bytes.
    """
    if isinstance(text, (bytes, bytearray, memoryview)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInputError(f"{what} is not valid UTF-8 ({exc}); decode it first") from None
    if not isinstance(text, str):
        raise InvalidInputError(f"{what} must be str, not {type(text).__name__}")
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(
            f"{what} contains characters that are not valid Unicode (lone surrogates); "
            "decode the source bytes with errors='replace'"
        ) from None
    if "\x00" in text:
        raise InvalidInputError(f"{what} contains a NUL character")
    if not text.strip():
        raise InvalidInputError(f"{what} is empty")
    if len(raw) > limit:
        raise PayloadTooLargeError(what, len(raw), limit)
    return text


_SLUG = re.compile(r"[^a-z0-9]+")


def topic_key_for(text: str, max_words: int = 6) -> str:
    """Derive a stable topic key (a slug of the first words) for a lesson without one."""
    norm = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    words = [w for w in _SLUG.split(norm) if w][:max_words]
    slug = "-".join(words)[:80].strip("-")
    if not slug:
        slug = "t-" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]
    return slug


@dataclass(frozen=True)
class Lesson:
    """One piece of cross-problem memory, the same for every backend.

    Attributes:
        text: the advice itself (answer-free by protocol).
        topic_key: what the lesson is about; the git backend stores one file per key,
            so two contradictory lessons on one key conflict on merge.
        source_problem: the problem the lesson was distilled from.
        outcome: ``"insight"``, ``"success"`` or ``"failure"``.
        score: confidence in [0, 1].
        created: seconds since the epoch.
        meta: free-form JSON-able extras.
        relevance: retrieval score set by ``get_relevant`` (0 when stored).
    """

    text: str
    topic_key: str = ""
    source_problem: str = ""
    outcome: Outcome = "insight"
    score: float = 0.5
    created: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    relevance: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of every field."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Lesson:
        """Build a lesson from :meth:`to_dict` output, ignoring unknown keys."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "text": (str,),
    "topic_key": (str,),
    "source_problem": (str,),
    "outcome": (str,),
    "score": (int, float),
    "created": (int, float),
    "meta": (dict,),
    "relevance": (int, float),
}


def stored_lesson(data: Any) -> Lesson:
    """Rebuild a lesson read back from storage, checking every field (never trusting the file).

    Args:
        data: a mapping as :meth:`Lesson.to_dict` wrote it (unknown keys are ignored).

    Raises:
        ValueError: not a mapping, a field of the wrong type, an unknown outcome or empty
            text; the caller turns it into :class:`~got_core.errors.CorruptRepositoryError`
            naming the file.
    """
    if not isinstance(data, dict):
        raise ValueError(f"a lesson record must be an object, not {type(data).__name__}")
    fields: dict[str, Any] = {}  # each value checked against _FIELD_TYPES below
    for name, kinds in _FIELD_TYPES.items():
        if name not in data:
            if name == "text":
                raise ValueError("the lesson record has no text")
            continue
        value = data[name]
        if not isinstance(value, kinds) or isinstance(value, bool):
            raise ValueError(
                f"lesson field {name!r} is a {type(value).__name__}, not a {' or '.join(k.__name__ for k in kinds)}"
            )
        fields[name] = float(value) if kinds == (int, float) and isinstance(value, (int, float)) else value
    if fields.get("outcome", "insight") not in ("insight", "success", "failure"):
        raise ValueError(f"unknown lesson outcome {str(fields['outcome'])[:40]!r}")
    if not fields["text"].strip():
        raise ValueError("the lesson text is empty")
    return Lesson(**fields)


@dataclass
class CostMeter:
    """Cost counters every backend reports the same way (the paper's Table 3).

    ``load_ms_total`` is one-time setup a backend pays on first use (the vector backend
    loading its embedding model); it is kept out of ``write_ms_total`` and
    ``read_ms_total``, so the first write is not reported as costing seconds.
    """

    writes: int = 0
    reads: int = 0
    write_ms_total: float = 0.0
    read_ms_total: float = 0.0
    load_ms_total: float = 0.0

    @property
    def write_ms(self) -> float:
        """Mean milliseconds per write."""
        return self.write_ms_total / self.writes if self.writes else 0.0

    @property
    def read_ms(self) -> float:
        """Mean milliseconds per read."""
        return self.read_ms_total / self.reads if self.reads else 0.0


@runtime_checkable
class MemoryBackend(Protocol):
    """What the solver needs from a memory substrate.

    Attributes:
        name: registry name (``none``, ``markdown``, ``vector``, ``graph``, ``git``).
        supports_semantic_search: paraphrases are found, not just shared words.
        supports_associative_search: lessons linked through shared concepts are found.
        read_only: writes are refused silently (the protocol's frozen-memory arms).
    """

    name: str
    supports_semantic_search: bool
    supports_associative_search: bool
    read_only: bool

    def add_insight(
        self,
        text: str,
        *,
        topic_key: str = "",
        source_problem: str = "",
        score: float = 0.5,
        meta: dict[str, Any] | None = None,
    ) -> Lesson | None:
        """Store an answer-free insight; returns the stored lesson (None when read-only)."""
        ...

    def add_failure(
        self,
        text: str,
        *,
        topic_key: str = "",
        source_problem: str = "",
        score: float = 0.5,
        meta: dict[str, Any] | None = None,
    ) -> Lesson | None:
        """Store a lesson learned from a failed attempt."""
        ...

    def add_success(
        self,
        text: str,
        *,
        topic_key: str = "",
        source_problem: str = "",
        score: float = 0.5,
        meta: dict[str, Any] | None = None,
    ) -> Lesson | None:
        """Store a lesson learned from a validated attempt."""
        ...

    def get_relevant(self, query: str, k: int = 3) -> list[Lesson]:
        """The ``k`` lessons most relevant to ``query``, best first."""
        ...

    def get_summary(self) -> str:
        """A short human-readable digest of what the memory holds."""
        ...


class BaseMemory:
    """Shared bookkeeping for backends: validation, read-only mode, cost meters.

    Subclasses implement :meth:`_store`, :meth:`_query` and :meth:`_all`, and
    override :meth:`storage_bytes`. The public verbs are final.
    """

    name = "base"
    supports_semantic_search = False
    supports_associative_search = False

    def __init__(self, path: str | Path | None = None, *, read_only: bool = False) -> None:
        self.path = Path(path) if path is not None else None
        self.read_only = read_only
        self.meter = CostMeter()

    # -- the five verbs ------------------------------------------------------------------
    def add_insight(
        self,
        text: str,
        *,
        topic_key: str = "",
        source_problem: str = "",
        score: float = 0.5,
        meta: dict[str, Any] | None = None,
    ) -> Lesson | None:
        """Store an answer-free insight; see :class:`MemoryBackend`."""
        return self._add(text, "insight", topic_key, source_problem, score, meta)

    def add_failure(
        self,
        text: str,
        *,
        topic_key: str = "",
        source_problem: str = "",
        score: float = 0.5,
        meta: dict[str, Any] | None = None,
    ) -> Lesson | None:
        """Store a lesson from a failed attempt; see :class:`MemoryBackend`."""
        return self._add(text, "failure", topic_key, source_problem, score, meta)

    def add_success(
        self,
        text: str,
        *,
        topic_key: str = "",
        source_problem: str = "",
        score: float = 0.5,
        meta: dict[str, Any] | None = None,
    ) -> Lesson | None:
        """Store a lesson from a validated attempt; see :class:`MemoryBackend`."""
        return self._add(text, "success", topic_key, source_problem, score, meta)

    def add_lessons(self, lessons: Iterable[Lesson]) -> list[Lesson]:
        """Store many lessons at once (every backend ingests the same set, §4.2).

        All are validated before any is stored; backends may batch the write
        (the vector backend embeds and upserts them in one call).
        """
        prepared = [self._prepare(l.text, l.outcome, l.topic_key, l.source_problem, l.score, l.meta) for l in lessons]
        if self.read_only or not prepared:
            return []
        t0, loaded = time.perf_counter(), self.meter.load_ms_total
        try:
            return self._store_many(prepared)
        finally:
            self.meter.writes += len(prepared)
            self.meter.write_ms_total += self._spent_ms(t0, loaded)

    def get_relevant(self, query: str, k: int = 3) -> list[Lesson]:
        """The ``k`` most relevant lessons, best first; ``k <= 0`` gives ``[]``.

        Raises:
            InvalidInputError: ``query`` is not valid text.
        """
        if not isinstance(k, int) or isinstance(k, bool):
            raise InvalidInputError(f"k must be an int, not {type(k).__name__}")
        query = validate_text(query, "query")
        if k <= 0:
            return []
        t0, loaded = time.perf_counter(), self.meter.load_ms_total
        try:
            return self._query(query, k)
        finally:
            self.meter.reads += 1
            self.meter.read_ms_total += self._spent_ms(t0, loaded)

    def get_summary(self) -> str:
        """A short digest: count per outcome and the most confident lessons."""
        lessons = self._all()
        if not lessons:
            return f"{self.name} memory: empty"
        counts: dict[str, int] = {}
        for lesson in lessons:
            counts[lesson.outcome] = counts.get(lesson.outcome, 0) + 1
        parts = ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))
        top = sorted(lessons, key=lambda l: (-l.score, -l.created))[:3]
        lines = [f"{self.name} memory: {len(lessons)} lessons ({parts})"]
        lines += [f"- [{l.topic_key}] {l.text[:120]}" for l in top]
        return "\n".join(lines)

    # -- introspection -------------------------------------------------------------------
    def all_lessons(self) -> list[Lesson]:
        """Every stored lesson (order is backend-defined)."""
        return self._all()

    def __len__(self) -> int:
        return len(self._all())

    def storage_bytes(self) -> int:
        """Bytes this backend occupies on disk (0 for memory-less backends)."""
        if self.path is None or not self.path.exists():
            return 0
        if self.path.is_file():
            return self.path.stat().st_size
        return sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file())

    def stats(self) -> dict[str, Any]:
        """Counts and cost meters in one dict (the same keys for every backend).

        ``write_ms`` / ``read_ms`` are means per write / read *without* one-time setup;
        ``load_ms`` is that setup (loading an embedding model; 0 for backends without one).
        """
        return {
            "backend": self.name,
            "lessons": len(self),
            "writes": self.meter.writes,
            "reads": self.meter.reads,
            "write_ms": round(self.meter.write_ms, 4),
            "read_ms": round(self.meter.read_ms, 4),
            "load_ms": round(self.meter.load_ms_total, 4),
            "storage_bytes": self.storage_bytes(),
        }

    def close(self) -> None:
        """Release handles; the default has none."""

    def __enter__(self) -> BaseMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- for subclasses ------------------------------------------------------------------
    def _timed_load(self, load: Callable[[], Any]) -> Any:
        """Run one-time setup (e.g. loading a model) and meter it as ``load_ms``, not as a write or read."""
        t0 = time.perf_counter()
        try:
            return load()
        finally:
            self.meter.load_ms_total += (time.perf_counter() - t0) * 1000

    def _spent_ms(self, t0: float, loaded_before: float) -> float:
        # the time since t0 less any setup metered meanwhile by _timed_load
        return max(0.0, (time.perf_counter() - t0) * 1000 - (self.meter.load_ms_total - loaded_before))

    def _store(self, lesson: Lesson) -> Lesson:
        """Persist one validated lesson and return it as stored."""
        return lesson

    def _store_many(self, lessons: list[Lesson]) -> list[Lesson]:
        """Persist several validated lessons; override to batch."""
        return [self._store(lesson) for lesson in lessons]

    def _query(self, query: str, k: int) -> list[Lesson]:
        """Rank stored lessons for ``query`` (``k >= 1``)."""
        return []

    def _all(self) -> list[Lesson]:
        """Every stored lesson."""
        return []

    def _prepare(
        self,
        text: str,
        outcome: Outcome,
        topic_key: str,
        source_problem: str,
        score: float,
        meta: dict[str, Any] | None,
    ) -> Lesson:
        """Validate the fields of a new lesson and build it (raises typed errors)."""
        text = validate_text(text)
        if outcome not in ("insight", "success", "failure"):
            raise InvalidInputError(f"outcome must be insight, success or failure, not {outcome!r}")
        if not isinstance(score, (int, float)) or not 0.0 <= float(score) <= 1.0:
            raise InvalidInputError(f"score must be a number in [0, 1], got {score!r}")
        if topic_key:
            topic_key = validate_text(topic_key, "topic key", limit=200)
        lesson = Lesson(
            text=text.strip(),
            topic_key=topic_key or topic_key_for(text),
            source_problem=str(source_problem or ""),
            outcome=outcome,
            score=float(score),
            created=time.time(),
            meta=dict(meta or {}),
        )
        return lesson

    def _add(
        self,
        text: str,
        outcome: Outcome,
        topic_key: str,
        source_problem: str,
        score: float,
        meta: dict[str, Any] | None,
    ) -> Lesson | None:
        lesson = self._prepare(text, outcome, topic_key, source_problem, score, meta)
        if self.read_only:
            return None
        t0, loaded = time.perf_counter(), self.meter.load_ms_total
        try:
            return self._store(lesson)
        finally:
            self.meter.writes += 1
            self.meter.write_ms_total += self._spent_ms(t0, loaded)
