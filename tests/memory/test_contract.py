"""One contract every memory backend must pass (paper §4.2: only the substrate changes).

The contract itself ships in :mod:`got_core.testing.memory_contract`; here each
registered backend subclasses it once, and so does a minimal third-party backend
written below (a JSON file), to show a backend we did not write gets the whole
contract by subclassing. A deliberately broken backend is run through the
contract too, and must fail it.

Which retrieval queries a backend must answer follows its declared flags: every
backend that stores anything answers keyword queries; ``supports_semantic_search``
backends also answer paraphrases, ``supports_associative_search`` ones
shared-concept queries. The ``none`` backend stores nothing and answers ``[]``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

import pytest

from got_core.errors import (
    CorruptRepositoryError,
    RepositoryNotFoundError,
    StorageError,
    UnknownBackendError,
)
from got_core.memory import BaseMemory, get_backend
from got_core.memory.base import stored_lesson
from got_core.testing import MemoryBackendContract
from got_core.testing.memory_contract import STATS_KEYS

BACKEND_NAMES = ["none", "markdown", "vector", "graph", "git"]


class RegisteredBackend(MemoryBackendContract):
    """Opens ``backend_name`` through the registry, as users do."""

    def make_backend(self, path, **options):
        return get_backend(self.backend_name, path, **options)


class TestNoMemory(RegisteredBackend):
    backend_name = "none"
    stores_lessons = False


class TestMarkdownMemory(RegisteredBackend):
    backend_name = "markdown"


class TestVectorMemory(RegisteredBackend):
    backend_name = "vector"


class TestGraphMemory(RegisteredBackend):
    backend_name = "graph"


class TestGitMemory(RegisteredBackend):
    backend_name = "git"


def test_unknown_backend_name_is_a_typed_error(tmp_path):
    for bad in ("vectr", "", "GIT-ish", None, 3):
        with pytest.raises(UnknownBackendError) as info:
            get_backend(bad, tmp_path / "m")
        assert "markdown" in str(info.value)  # the message lists the valid names
    assert not (tmp_path / "m").exists()


def test_stats_keys_identical_across_backends(tmp_path):
    keys = []
    for name in BACKEND_NAMES:
        mem = get_backend(name, tmp_path / name)
        keys.append((name, set(mem.stats())))
        mem.close()
    assert all(k == STATS_KEYS for _, k in keys), keys


# ---------------------------------------------------------------- a backend we did not write
_WORD = re.compile(r"\w+")


class JsonMemory(BaseMemory):
    """A third-party backend in a few lines: lessons in ``lessons.json``, ranked by shared words.

    Args:
        path: the store directory (created on the first write).
        read_only: refuse writes silently, create nothing.
        create: when false the store must exist already.

    Raises:
        RepositoryNotFoundError: ``create=False`` and no store at ``path``.
        StorageError: ``path`` is a file, or the store cannot be written.
        CorruptRepositoryError: ``lessons.json`` is not a list of lessons.
    """

    name = "json"

    def __init__(self, path, *, read_only=False, create=True):
        super().__init__(path, read_only=read_only)
        self.file = self.path / "lessons.json"
        if self.path.is_file():
            raise StorageError(f"json memory path {self.path} is a file, not a directory")
        if not create and not self.file.exists():
            raise RepositoryNotFoundError(f"no json memory at {self.path}; check the path")
        self._all()  # damage shows at open, not at the first read

    def _all(self):
        if not self.file.exists():
            return []
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
            if not isinstance(data, list):
                raise ValueError("not a JSON list")
            return [stored_lesson(item) for item in data]
        except (OSError, ValueError) as exc:
            raise CorruptRepositoryError(f"{self.file} is damaged ({str(exc)[:80]}); restore it") from None

    def _store_many(self, lessons):
        records = [lesson.to_dict() for lesson in self._all() + lessons]
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            scratch = self.file.with_name(".lessons.json.tmp")
            scratch.write_text(json.dumps(records), encoding="utf-8")
            os.replace(scratch, self.file)
        except OSError as exc:
            raise StorageError(f"cannot write {self.file}: {exc}") from None
        return lessons

    def _store(self, lesson):
        return self._store_many([lesson])[0]

    def _query(self, query, k):
        words = set(_WORD.findall(query.lower()))
        scored = []
        for lesson in self._all():
            shared = len(words & set(_WORD.findall(lesson.text.lower())))
            if shared:
                scored.append((shared / len(words), lesson))
        scored.sort(key=lambda pair: -pair[0])
        return [dataclasses.replace(lesson, relevance=score) for score, lesson in scored[:k]]


class TestJsonMemory(MemoryBackendContract):
    backend_name = "json"

    def make_backend(self, path, **options):
        return JsonMemory(path, **options)


BROKEN_BACKEND = '''
from got_core.memory import BaseMemory
from got_core.testing import MemoryBackendContract

_SHELF = {}


class ForgetfulMemory(BaseMemory):
    """Deliberately broken: keeps lessons in this process only, drops read_only and create."""

    name = "forgetful"

    def __init__(self, path, *, read_only=False, create=True):
        super().__init__(path)
        self._lessons = _SHELF.setdefault(str(path), [])

    def _store(self, lesson):
        self._lessons.append(lesson)
        return lesson

    def _all(self):
        return list(self._lessons)

    def _query(self, query, k):
        words = set(query.lower().split())
        return [l for l in self._lessons if words & set(l.text.lower().split())][:k]


class TestForgetfulMemory(MemoryBackendContract):
    backend_name = "forgetful"

    def make_backend(self, path, **options):
        return ForgetfulMemory(path, **options)
'''


class _Outcomes:
    """A pytest plugin that records each test's outcome (failed in any phase wins)."""

    def __init__(self):
        self.outcomes = {}

    def pytest_runtest_logreport(self, report):
        name = report.nodeid.split("::")[-1]
        if report.failed:
            self.outcomes[name] = "failed"
        elif report.when == "call":
            self.outcomes.setdefault(name, report.outcome)


def test_a_broken_backend_fails_the_contract(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    module = tmp_path / "test_forgetful_backend.py"
    module.write_text(BROKEN_BACKEND)
    recorder = _Outcomes()
    code = pytest.main(
        [
            str(module),
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:asyncio",
            "--import-mode=importlib",
            "--rootdir",
            str(tmp_path),
            "-c",
            str(tmp_path / "pytest.ini"),
            f"--basetemp={tmp_path / 'inner'}",
        ],
        plugins=[recorder],
    )
    outcomes = recorder.outcomes
    assert code == pytest.ExitCode.TESTS_FAILED, outcomes
    failed = {name for name, outcome in outcomes.items() if outcome == "failed"}
    # what the broken backend gets wrong, the contract reports
    assert {
        "test_writes_survive_reopening_in_a_new_process",  # nothing on disk
        "test_read_only_stores_nothing",  # read_only dropped
        "test_create_false_refuses_a_missing_store_and_opens_an_existing_one",
        "test_a_store_of_garbage_is_a_typed_error_and_is_left_untouched",
        "test_stats_report_counts_and_costs",  # storage_bytes is 0
        "test_relevant_lesson_ranks_first",  # no relevance scores
        "test_unwritable_path_is_a_typed_error_and_loses_nothing",
    } <= failed
    # ... and what BaseMemory does for it still passes
    assert outcomes["test_bad_queries_are_refused"] == "passed"
    assert outcomes["test_empty_memory_answers_nothing"] == "passed"
    assert outcomes["test_bad_lesson_text_is_refused_and_loses_nothing[12345-InvalidInputError]"] == "passed"
