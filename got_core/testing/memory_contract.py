"""The memory-backend contract as pytest test classes, for any backend to reuse.

Every backend of :mod:`got_core.memory` passes this contract, and so can a
third-party one: subclass :class:`MemoryBackendContract` in a test module
(the class name must start with ``Test`` for pytest to collect it), say how
to open your backend, and pytest runs the whole contract against it::

    from got_core.testing import MemoryBackendContract

    class TestMyMemory(MemoryBackendContract):
        backend_name = "mine"          # what stats()["backend"] must report

        def make_backend(self, path, **options):
            return MyMemory(path, **options)

What the contract checks: the five verbs and the batch ingest, the safe
defaults of :class:`~got_core.memory.BaseMemory` (closing twice, the context
manager, empty batches), validation errors typed as
:class:`~got_core.errors.GotError`, read-only mode, ``create=False`` on a
missing store (:class:`~got_core.errors.RepositoryNotFoundError`), reopening
in a new process, the cost meters, retrieval ranking as far as the backend's
``supports_*`` flags promise it, and damaged data (a typed error naming the
store, nothing rewritten).

Requirements on the subclass:

* ``make_backend(path, **options)`` opens the backend at ``path`` and passes on
  ``read_only`` and ``create``; the contract closes what it opened.
* The subclass is defined at module level of an importable file, and
  ``make_backend`` needs no fixture: the reopen test loads that file in a fresh
  interpreter (with this process's ``sys.path``) and calls ``make_backend`` there.
* A backend that stores nothing by design (the ``none`` control) sets
  ``stores_lessons = False``; the contract then checks that it answers nothing.

This module imports pytest; ``import got_core.testing`` does not load it
(the name is resolved on first use).
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from got_core.errors import (
    GotError,
    InvalidInputError,
    PayloadTooLargeError,
    RepositoryNotFoundError,
)
from got_core.memory.base import BaseMemory, Lesson, MemoryBackend

__all__ = [
    "CONCEPT_QUERIES",
    "CORPUS",
    "KEYWORD_QUERIES",
    "PARAPHRASE_QUERIES",
    "STATS_KEYS",
    "TRICKY_TEXT",
    "MemoryBackendContract",
]

#: stats() keys every backend reports (the paper's Table 3 columns plus counts); ``load_ms`` is
#: one-time setup such as loading an embedding model, kept out of ``write_ms`` / ``read_ms``.
STATS_KEYS = {"backend", "lessons", "writes", "reads", "write_ms", "read_ms", "load_ms", "storage_bytes"}

CORPUS = [
    (
        "probability-dice",
        "When a probability question involves dice, enumerate the sample space before counting favourable outcomes.",
    ),
    ("quadratic-roots", "For quadratic equations, check the discriminant sign before solving for real roots."),
    (
        "carbocation-stability",
        "In organic chemistry, identify the most stable carbocation before predicting the substitution product.",
    ),
    ("units-kinematics", "Convert every quantity to SI units before substituting into a kinematics formula."),
    ("modular-exponents", "With modular arithmetic, reduce large exponents using Fermat's little theorem first."),
    (
        "circle-tangent",
        "In circle geometry, draw the radius to the tangent point: it is perpendicular to the tangent line.",
    ),
]

#: query -> index of the lesson that must rank first. Keyword queries are words
#: that occur verbatim (lowercase) in exactly one lesson.
KEYWORD_QUERIES = {"discriminant": 1, "carbocation": 2, "tangent": 5, "kinematics": 3, "dice": 0}
PARAPHRASE_QUERIES = {
    "Rolling two six-sided cubes, what are the chances of getting a total of seven?": 0,
    "How can I tell whether a second-degree polynomial has real solutions?": 1,
    "Which positively charged carbon intermediate is most stable in a reaction mechanism?": 2,
    "A car speeds up from rest: can I mix kilometres per hour with metres per second?": 3,
    "What is the remainder when a huge power is divided by a prime number?": 4,
    "A line touching a circle at one point meets the radius at what angle?": 5,
}
CONCEPT_QUERIES = {
    "the sign of a discriminant": 1,
    "stable carbocation intermediates": 2,
    "radius perpendicular at the point of contact": 5,
    "sample space of dice outcomes": 0,
    "little theorem for large exponents": 4,
}

TRICKY_TEXT = (
    "Line one: café ∑ naïve — quotes \"x\" and 'y'.\n\n## not a heading\n"
    "> not a quote\n<!-- got-lesson {} --> --> <b>\n  indented line\ttab"
)

#: What overwrites every file of a store in the damaged-data test.
GARBAGE = b"\xff\xfe garbage \x00 not a store\n"

# The child loads the contract subclass from its file (test modules are rarely importable
# by name), opens the store with the subclass's own make_backend, reads and writes.
CHILD = r"""
import importlib.util, json, sys
from pathlib import Path
file, qualname, path, query = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("got_memory_contract_child", file)
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
cls = module
for part in qualname.split("."):
    cls = getattr(cls, part)
mem = cls().make_backend(Path(path))
out = {"lessons": [l.to_dict() for l in mem.all_lessons()],
       "hits": [l.text for l in mem.get_relevant(query, 3)]}
mem.add_failure("A lesson the child process wrote about xylophone tuning.",
                topic_key="child-topic", source_problem="child-1", score=0.7)
mem.close()
print(json.dumps(out))
"""

_BAD_LESSON_TEXT = [
    ("", InvalidInputError),
    ("   \n\t ", InvalidInputError),
    ("x" * (1 << 20), PayloadTooLargeError),
    (b"caf\xe9 \xff\xfe not utf-8", InvalidInputError),
    ("nul\x00inside", InvalidInputError),
    (12345, InvalidInputError),
]


def _ingest(mem: BaseMemory, corpus: list[tuple[str, str]] = CORPUS) -> None:
    for i, (topic, text) in enumerate(corpus):
        add = (mem.add_insight, mem.add_success, mem.add_failure)[i % 3]
        add(text, topic_key=topic, source_problem=f"problem-{i}", score=0.5 + 0.05 * i, meta={"index": i})


def _texts(lessons: list[Lesson]) -> list[str]:
    return [lesson.text for lesson in lessons]


def _snapshot(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


class MemoryBackendContract:
    """The contract every memory backend passes; subclass it once per backend.

    Attributes:
        backend_name: the name ``stats()["backend"]`` must report; ``None`` accepts
            the backend's own ``name`` attribute.
        stores_lessons: ``False`` for a backend that keeps nothing by design (the
            ``none`` control): it must then answer every query with ``[]``.

    Override :meth:`make_backend`; see the module docstring for the requirements.
    """

    backend_name: str | None = None
    stores_lessons: bool = True

    def make_backend(self, path: Path, **options: Any) -> BaseMemory:
        """Open the backend under test at ``path``.

        Args:
            path: where the store lives (a path that may not exist yet).
            **options: ``read_only`` and/or ``create``, to pass to the backend.

        Returns:
            An open :class:`~got_core.memory.BaseMemory` (the contract closes it).
        """
        raise NotImplementedError(f"{type(self).__name__} must define make_backend(path, **options)")

    # -- helpers --------------------------------------------------------------------------
    def _stores(self, mem: BaseMemory) -> bool:
        return self.stores_lessons

    def _expected_name(self, mem: BaseMemory) -> str:
        return mem.name if self.backend_name is None else self.backend_name

    @pytest.fixture
    def open_memory(self, tmp_path: Path) -> Any:
        """Open the backend at a path (default ``tmp_path/mem``); closes all at teardown."""
        opened: list[BaseMemory] = []

        def _open(path: Path | None = None, **options: Any) -> BaseMemory:
            mem = self.make_backend(tmp_path / "mem" if path is None else path, **options)
            opened.append(mem)
            return mem

        yield _open
        for mem in opened:
            mem.close()

    # -- the five verbs -------------------------------------------------------------------
    def test_empty_memory_answers_nothing(self, open_memory: Callable[..., BaseMemory]) -> None:
        mem = open_memory()
        assert mem.get_relevant("discriminant of a quadratic", 5) == []
        assert len(mem) == 0
        assert mem.all_lessons() == []
        assert mem.name in mem.get_summary()

    def test_writes_survive_reopening_in_a_new_process(
        self, open_memory: Callable[..., BaseMemory], tmp_path: Path
    ) -> None:
        mem = open_memory()
        _ingest(mem, CORPUS[:3])
        mem.add_insight(TRICKY_TEXT, topic_key="tricky", meta={"nested": {"k": [1, 2]}})
        mem.close()

        cls = type(self)
        if "<locals>" in cls.__qualname__:
            raise TypeError(
                f"{cls.__qualname__}: define the contract subclass at module level, so a new process can load it"
            )
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD,
                inspect.getfile(cls),
                cls.__qualname__,
                str(tmp_path / "mem"),
                "discriminant",
            ],
            capture_output=True,
            text=True,
            timeout=240,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        child = json.loads(proc.stdout.strip().splitlines()[-1])

        if not self._stores(mem):
            assert child == {"lessons": [], "hits": []}
        else:
            by_text = {d["text"]: d for d in child["lessons"]}
            assert set(by_text) == {text for _, text in CORPUS[:3]} | {TRICKY_TEXT}
            for i, (topic, text) in enumerate(CORPUS[:3]):
                got = by_text[text]
                assert got["topic_key"] == topic
                assert got["source_problem"] == f"problem-{i}"
                assert got["outcome"] == ("insight", "success", "failure")[i]
                assert got["score"] == pytest.approx(0.5 + 0.05 * i)
                assert got["meta"]["index"] == i
            assert by_text[TRICKY_TEXT]["meta"]["nested"] == {"k": [1, 2]}
            assert child["hits"][0] == CORPUS[1][1]

        # ... and what the child wrote is visible here again.
        again = open_memory()
        texts = _texts(again.all_lessons())
        if self._stores(again):
            assert len(again) == 5
            child_lesson = next(l for l in again.all_lessons() if "xylophone" in l.text)
            assert (child_lesson.outcome, child_lesson.topic_key) == ("failure", "child-topic")
            assert child_lesson.score == pytest.approx(0.7)
        else:
            assert texts == []

    def test_relevant_lesson_ranks_first(self, open_memory: Callable[..., BaseMemory]) -> None:
        mem = open_memory()
        _ingest(mem)
        cases = dict(KEYWORD_QUERIES)
        if mem.supports_semantic_search:
            cases.update(PARAPHRASE_QUERIES)
        if mem.supports_associative_search:
            cases.update(CONCEPT_QUERIES)
        for query, want in cases.items():
            hits = mem.get_relevant(query, 3)
            if not self._stores(mem):
                assert hits == []
                continue
            assert hits, f"nothing found for {query!r}"
            assert hits[0].text == CORPUS[want][1], (query, _texts(hits))
            rel = [h.relevance for h in hits]
            assert rel == sorted(rel, reverse=True)
            assert hits[0].relevance > 0

    def test_k_zero_negative_and_larger_than_the_store(self, open_memory: Callable[..., BaseMemory]) -> None:
        mem = open_memory()
        _ingest(mem)
        assert mem.get_relevant("discriminant", 0) == []
        assert mem.get_relevant("discriminant", -3) == []
        with pytest.raises(InvalidInputError):
            mem.get_relevant("discriminant", True)
        with pytest.raises(InvalidInputError):
            mem.get_relevant("discriminant", 2.5)  # type: ignore[arg-type]
        hits = mem.get_relevant("discriminant", len(CORPUS) + 10)
        assert len(hits) <= len(mem)
        assert len(set(_texts(hits))) == len(hits)
        if self._stores(mem):
            assert hits[0].text == CORPUS[1][1]
        if mem.supports_semantic_search:  # nearest neighbour always fills up to the store size
            assert len(hits) == len(CORPUS)
        assert len(mem.get_relevant("discriminant", 1)) == (1 if self._stores(mem) else 0)

    def test_summary_mentions_counts(self, open_memory: Callable[..., BaseMemory]) -> None:
        mem = open_memory()
        _ingest(mem, CORPUS[:4])  # 2 insights, 1 success, 1 failure
        summary = mem.get_summary()
        assert isinstance(summary, str) and mem.name in summary
        assert f"{len(mem)} lessons" in summary
        if self._stores(mem):
            assert "2 insight" in summary and "1 failure" in summary

    def test_text_round_trips_verbatim(self, open_memory: Callable[..., BaseMemory]) -> None:
        mem = open_memory()
        mem.add_insight(TRICKY_TEXT, topic_key="tricky/topic: with spaces")
        mem.add_insight("  surrounding whitespace is trimmed  \n")
        mem.close()
        lessons = open_memory().all_lessons()
        if self._stores(mem):
            assert sorted(_texts(lessons)) == sorted([TRICKY_TEXT, "surrounding whitespace is trimmed"])
            tricky = next(l for l in lessons if l.text == TRICKY_TEXT)
            assert tricky.topic_key == "tricky/topic: with spaces"
        else:
            assert lessons == []

    def test_add_lessons_ingests_the_same_set_in_one_call(self, open_memory: Callable[..., BaseMemory]) -> None:
        mem = open_memory()
        batch = [
            Lesson(text, topic_key=topic, source_problem=f"p{i}", outcome="insight", score=0.6)
            for i, (topic, text) in enumerate(CORPUS)
        ]
        stored = mem.add_lessons(batch)
        assert mem.stats()["writes"] == len(CORPUS)
        if not self._stores(mem):
            assert mem.get_relevant("discriminant", 3) == []
            return
        assert len(stored) == len(CORPUS) and len(mem) == len(CORPUS)
        assert _texts(mem.get_relevant("discriminant", 1)) == [CORPUS[1][1]]
        with pytest.raises(InvalidInputError):  # one bad lesson: nothing of the batch is stored
            mem.add_lessons([Lesson("fine text about xylophones"), Lesson("   ")])
        assert len(mem) == len(CORPUS)

    # -- safe defaults ----------------------------------------------------------------------
    def test_is_a_memory_backend_with_safe_defaults(self, open_memory: Callable[..., BaseMemory]) -> None:
        mem = open_memory()
        assert isinstance(mem, MemoryBackend) and isinstance(mem, BaseMemory)
        assert isinstance(mem.name, str) and mem.name
        assert isinstance(mem.supports_semantic_search, bool)
        assert isinstance(mem.supports_associative_search, bool)
        assert mem.read_only is False
        assert mem.add_lessons([]) == []  # an empty batch writes nothing and counts nothing
        assert mem.stats()["writes"] == 0 and len(mem) == 0

    def test_close_twice_and_the_context_manager(self, open_memory: Callable[..., BaseMemory], tmp_path: Path) -> None:
        path = tmp_path / "ctx"
        with self.make_backend(path) as mem:
            assert mem.add_insight("Draw the figure before computing any angle.") is not None
        mem.close()  # closing again is harmless
        again = open_memory(path)
        assert _texts(again.all_lessons()) == (
            ["Draw the figure before computing any angle."] if self._stores(again) else []
        )

    # -- bad input ------------------------------------------------------------------------
    @pytest.mark.parametrize("bad, error", _BAD_LESSON_TEXT)
    def test_bad_lesson_text_is_refused_and_loses_nothing(
        self, open_memory: Callable[..., BaseMemory], bad: Any, error: type[GotError]
    ) -> None:
        mem = open_memory()
        _ingest(mem, CORPUS[:2])
        before = sorted(_texts(mem.all_lessons()))
        for add in (mem.add_insight, mem.add_failure, mem.add_success):
            with pytest.raises(error):
                add(bad)
        with pytest.raises(InvalidInputError):
            mem.add_insight("fine text", score=1.5)
        assert mem.stats()["writes"] == 2  # refused writes never reached the store
        mem.close()
        assert sorted(_texts(open_memory().all_lessons())) == before

    def test_bad_queries_are_refused(self, open_memory: Callable[..., BaseMemory]) -> None:
        mem = open_memory()
        _ingest(mem, CORPUS[:2])
        bad: Any
        for bad in ("", "  ", b"\xff\xfe", "x" * (1 << 20), None):
            with pytest.raises(InvalidInputError):
                mem.get_relevant(bad, 3)
        assert len(mem) == (2 if self._stores(mem) else 0)

    def test_unwritable_path_is_a_typed_error_and_loses_nothing(
        self, open_memory: Callable[..., BaseMemory], tmp_path: Path
    ) -> None:
        good = open_memory()
        _ingest(good, CORPUS[:2])
        before = sorted(_texts(good.all_lessons()))

        a_file = tmp_path / "a-file"
        a_file.write_bytes(b"precious bytes")
        bad_paths = [a_file, a_file / "below-a-file"]
        if os.geteuid() != 0:  # root ignores directory permissions
            locked_dir = tmp_path / "read-only"
            locked_dir.mkdir()
            locked_dir.chmod(0o500)
            bad_paths.append(locked_dir / "mem")
        for path in bad_paths:
            if not self._stores(good):
                open_memory(path).add_insight("discarded")  # the control touches no disk
            else:
                with pytest.raises(GotError):
                    mem = open_memory(path)
                    mem.add_insight("this must fail somewhere")
        assert a_file.read_bytes() == b"precious bytes"
        assert sorted(_texts(good.all_lessons())) == before
        good.close()
        assert sorted(_texts(open_memory().all_lessons())) == before

    # -- read-only and create=False -------------------------------------------------------
    def test_read_only_stores_nothing(self, open_memory: Callable[..., BaseMemory], tmp_path: Path) -> None:
        fresh = tmp_path / "fresh"
        ro = open_memory(fresh, read_only=True)
        assert ro.read_only
        assert ro.add_insight("discriminant advice that must not be kept") is None
        assert ro.add_failure("another one") is None
        assert len(ro) == 0 and ro.get_relevant("discriminant", 3) == []

        rw = open_memory()
        _ingest(rw, CORPUS[:3])
        rw.close()
        ro = open_memory(read_only=True)
        n = len(ro)
        assert n == (3 if self._stores(ro) else 0)
        assert ro.add_success("read-only memories refuse writes about discriminants") is None
        hits = ro.get_relevant("discriminant", 5)
        if self._stores(ro):
            assert hits[0].text == CORPUS[1][1]
        assert len(ro) == n
        assert len(open_memory()) == n

    def test_read_only_batches_store_nothing(self, open_memory: Callable[..., BaseMemory]) -> None:
        rw = open_memory()
        _ingest(rw, CORPUS[:2])
        rw.close()
        ro = open_memory(read_only=True)
        assert ro.add_lessons([Lesson("a batch a read-only memory must not keep")]) == []
        with pytest.raises(InvalidInputError):  # read-only still validates
            ro.add_lessons([Lesson("  ")])
        assert len(ro) == (2 if self._stores(ro) else 0)
        assert len(open_memory()) == len(ro)

    def test_opening_a_missing_store_read_only_creates_nothing(
        self, open_memory: Callable[..., BaseMemory], tmp_path: Path
    ) -> None:
        missing = tmp_path / "never-written"
        ro = open_memory(missing, read_only=True)
        assert ro.all_lessons() == [] and ro.get_relevant("discriminant", 3) == []
        assert ro.add_insight("kept nowhere") is None
        assert not missing.exists()

    def test_create_false_refuses_a_missing_store_and_opens_an_existing_one(
        self, open_memory: Callable[..., BaseMemory], tmp_path: Path
    ) -> None:
        path = tmp_path / "absent"
        if not self.stores_lessons:  # nothing to open: the control opens anywhere, creating nothing
            assert open_memory(path, create=False).all_lessons() == []
            assert not path.exists()
            return
        with pytest.raises(RepositoryNotFoundError):
            open_memory(path, create=False)
        assert not path.exists()
        mem = open_memory(path)
        mem.add_insight("Check units before dividing distances.")
        mem.close()
        again = open_memory(path, create=False, read_only=True)
        assert _texts(again.all_lessons()) == ["Check units before dividing distances."]

    # -- cost meters ----------------------------------------------------------------------
    def test_stats_report_counts_and_costs(self, open_memory: Callable[..., BaseMemory]) -> None:
        mem = open_memory()
        _ingest(mem, CORPUS[:4])
        mem.get_relevant("discriminant", 2)
        mem.get_relevant("tangent", 2)
        mem.get_relevant("tangent", 0)  # k = 0 does not reach the store
        stats = mem.stats()
        assert set(stats) == STATS_KEYS
        assert stats["backend"] == self._expected_name(mem)
        assert (stats["writes"], stats["reads"]) == (4, 2)
        assert stats["lessons"] == len(mem) == (4 if self._stores(mem) else 0)
        assert stats["write_ms"] >= 0 and stats["read_ms"] >= 0 and stats["load_ms"] >= 0
        if self._stores(mem):
            assert stats["storage_bytes"] > 0 and stats["write_ms"] > 0
        else:
            assert stats["storage_bytes"] == 0

    # -- damaged data ---------------------------------------------------------------------
    def test_a_store_of_garbage_is_a_typed_error_and_is_left_untouched(
        self, open_memory: Callable[..., BaseMemory], tmp_path: Path
    ) -> None:
        path = tmp_path / "damaged"
        mem = self.make_backend(path)  # closed here, before the damage (not again at teardown)
        _ingest(mem, CORPUS[:2])
        mem.close()
        files = [p for p in sorted(path.rglob("*")) if p.is_file()] if path.exists() else []
        if not self.stores_lessons:
            assert files == []
            assert open_memory(path, read_only=True).all_lessons() == []
            return
        assert files, f"nothing was written under {path}"
        for f in files:
            f.chmod(0o644)
            f.write_bytes(GARBAGE)
        before = _snapshot(path)
        for read_only in (True, False):
            damaged = None
            with pytest.raises(GotError) as info:
                damaged = self.make_backend(path, read_only=read_only)
                damaged.all_lessons()
                damaged.get_relevant("discriminant", 3)
                damaged.add_insight("A lesson that must not overwrite the damaged store.")
            assert str(path) in str(info.value), info.value  # the message says where
            if damaged is not None:  # opened lazily: closing may report the damage again, typed
                try:
                    damaged.close()
                except GotError:
                    pass
        assert _snapshot(path) == before  # nothing "repaired" over the damage
