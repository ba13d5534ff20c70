"""One contract every memory backend must pass (paper §4.2: only the substrate changes).

Parametrised over :data:`BACKEND_NAMES`. Which retrieval queries a backend
must answer follows its declared flags: every backend that stores anything
answers keyword queries; ``supports_semantic_search`` backends also answer
paraphrases, ``supports_associative_search`` ones shared-concept queries. The
``none`` backend stores nothing and answers ``[]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from got_core.errors import (
    GotError,
    InvalidInputError,
    PayloadTooLargeError,
    UnknownBackendError,
)
from got_core.memory import get_backend

BACKEND_NAMES = ["none", "markdown", "vector", "graph", "git"]

#: stats() keys every backend reports (the paper's Table 3 columns plus counts).
STATS_KEYS = {"backend", "lessons", "writes", "reads", "write_ms", "read_ms", "storage_bytes"}

CORPUS = [
    ("probability-dice", "When a probability question involves dice, enumerate the sample "
                         "space before counting favourable outcomes."),
    ("quadratic-roots", "For quadratic equations, check the discriminant sign before solving "
                        "for real roots."),
    ("carbocation-stability", "In organic chemistry, identify the most stable carbocation "
                              "before predicting the substitution product."),
    ("units-kinematics", "Convert every quantity to SI units before substituting into a "
                         "kinematics formula."),
    ("modular-exponents", "With modular arithmetic, reduce large exponents using Fermat's "
                          "little theorem first."),
    ("circle-tangent", "In circle geometry, draw the radius to the tangent point: it is "
                       "perpendicular to the tangent line."),
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

TRICKY_TEXT = ("Line one: café ∑ naïve — quotes \"x\" and 'y'.\n\n## not a heading\n"
               "> not a quote\n<!-- got-lesson {} --> --> <b>\n  indented line\ttab")

CHILD = r"""
import json, sys
from got_core.memory import get_backend
name, path, query = sys.argv[1:4]
mem = get_backend(name, path)
out = {"lessons": [l.to_dict() for l in mem.all_lessons()],
       "hits": [l.text for l in mem.get_relevant(query, 3)]}
mem.add_failure("A lesson the child process wrote about xylophone tuning.",
                topic_key="child-topic", source_problem="child-1", score=0.7)
mem.close()
print(json.dumps(out))
"""


@pytest.fixture(params=BACKEND_NAMES)
def backend_name(request: pytest.FixtureRequest) -> str:
    """Each registered backend name in turn."""
    return request.param


@pytest.fixture
def open_memory(backend_name, tmp_path):
    """Open ``backend_name`` at a path (default ``tmp_path/mem``); closes all at teardown."""
    opened = []

    def _open(path: Path | None = None, **options):
        mem = get_backend(backend_name, tmp_path / "mem" if path is None else path, **options)
        opened.append(mem)
        return mem

    yield _open
    for mem in opened:
        mem.close()


def _ingest(mem, corpus=CORPUS) -> None:
    for i, (topic, text) in enumerate(corpus):
        add = (mem.add_insight, mem.add_success, mem.add_failure)[i % 3]
        add(text, topic_key=topic, source_problem=f"problem-{i}", score=0.5 + 0.05 * i,
            meta={"index": i})


def _stores(mem) -> bool:
    return mem.name != "none"


def _texts(lessons) -> list[str]:
    return [lesson.text for lesson in lessons]


def test_empty_memory_answers_nothing(open_memory):
    mem = open_memory()
    assert mem.get_relevant("discriminant of a quadratic", 5) == []
    assert len(mem) == 0
    assert mem.all_lessons() == []
    assert mem.name in mem.get_summary()


def test_writes_survive_reopening_in_a_new_process(open_memory, backend_name, tmp_path):
    mem = open_memory()
    _ingest(mem, CORPUS[:3])
    mem.add_insight(TRICKY_TEXT, topic_key="tricky", meta={"nested": {"k": [1, 2]}})
    mem.close()

    proc = subprocess.run(
        [sys.executable, "-c", CHILD, backend_name, str(tmp_path / "mem"), "discriminant"],
        capture_output=True, text=True, timeout=240, env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    child = json.loads(proc.stdout.strip().splitlines()[-1])

    if not _stores(mem):
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
    if _stores(again):
        assert len(again) == 5
        child_lesson = next(l for l in again.all_lessons() if "xylophone" in l.text)
        assert (child_lesson.outcome, child_lesson.topic_key) == ("failure", "child-topic")
        assert child_lesson.score == pytest.approx(0.7)
    else:
        assert texts == []


def test_relevant_lesson_ranks_first(open_memory):
    mem = open_memory()
    _ingest(mem)
    cases = dict(KEYWORD_QUERIES)
    if mem.supports_semantic_search:
        cases.update(PARAPHRASE_QUERIES)
    if mem.supports_associative_search:
        cases.update(CONCEPT_QUERIES)
    for query, want in cases.items():
        hits = mem.get_relevant(query, 3)
        if not _stores(mem):
            assert hits == []
            continue
        assert hits, f"nothing found for {query!r}"
        assert hits[0].text == CORPUS[want][1], (query, _texts(hits))
        rel = [h.relevance for h in hits]
        assert rel == sorted(rel, reverse=True)
        assert hits[0].relevance > 0


def test_k_zero_negative_and_larger_than_the_store(open_memory):
    mem = open_memory()
    _ingest(mem)
    assert mem.get_relevant("discriminant", 0) == []
    assert mem.get_relevant("discriminant", -3) == []
    with pytest.raises(InvalidInputError):
        mem.get_relevant("discriminant", True)
    with pytest.raises(InvalidInputError):
        mem.get_relevant("discriminant", 2.5)
    hits = mem.get_relevant("discriminant", len(CORPUS) + 10)
    assert len(hits) <= len(mem)
    assert len(set(_texts(hits))) == len(hits)
    if _stores(mem):
        assert hits[0].text == CORPUS[1][1]
    if mem.supports_semantic_search:  # nearest neighbour always fills up to the store size
        assert len(hits) == len(CORPUS)
    assert len(mem.get_relevant("discriminant", 1)) == (1 if _stores(mem) else 0)


@pytest.mark.parametrize("bad, error", [
    ("", InvalidInputError),
    ("   \n\t ", InvalidInputError),
    ("x" * (1 << 20), PayloadTooLargeError),
    (b"caf\xe9 \xff\xfe not utf-8", InvalidInputError),
    ("nul\x00inside", InvalidInputError),
    (12345, InvalidInputError),
])
def test_bad_lesson_text_is_refused_and_loses_nothing(open_memory, bad, error):
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


def test_bad_queries_are_refused(open_memory):
    mem = open_memory()
    _ingest(mem, CORPUS[:2])
    for bad in ("", "  ", b"\xff\xfe", "x" * (1 << 20), None):
        with pytest.raises(InvalidInputError):
            mem.get_relevant(bad, 3)
    assert len(mem) == (2 if _stores(mem) else 0)


def test_unknown_backend_name_is_a_typed_error(tmp_path):
    for bad in ("vectr", "", "GIT-ish", None, 3):
        with pytest.raises(UnknownBackendError) as info:
            get_backend(bad, tmp_path / "m")
        assert "markdown" in str(info.value)  # the message lists the valid names
    assert not (tmp_path / "m").exists()


def test_unwritable_path_is_a_typed_error_and_loses_nothing(open_memory, tmp_path):
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
        if not _stores(good):
            open_memory(path).add_insight("discarded")  # the control touches no disk
        else:
            with pytest.raises(GotError):
                mem = open_memory(path)
                mem.add_insight("this must fail somewhere")
    assert a_file.read_bytes() == b"precious bytes"
    assert sorted(_texts(good.all_lessons())) == before
    good.close()
    assert sorted(_texts(open_memory().all_lessons())) == before


def test_read_only_stores_nothing(open_memory, tmp_path):
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
    assert n == (3 if _stores(ro) else 0)
    assert ro.add_success("read-only memories refuse writes about discriminants") is None
    hits = ro.get_relevant("discriminant", 5)
    if _stores(ro):
        assert hits[0].text == CORPUS[1][1]
    assert len(ro) == n
    assert len(open_memory()) == n


def test_summary_mentions_counts(open_memory):
    mem = open_memory()
    _ingest(mem, CORPUS[:4])  # 2 insights, 1 success, 1 failure
    summary = mem.get_summary()
    assert isinstance(summary, str) and mem.name in summary
    assert f"{len(mem)} lessons" in summary
    if _stores(mem):
        assert "2 insight" in summary and "1 failure" in summary


def test_stats_report_counts_and_costs(open_memory, backend_name):
    mem = open_memory()
    _ingest(mem, CORPUS[:4])
    mem.get_relevant("discriminant", 2)
    mem.get_relevant("tangent", 2)
    mem.get_relevant("tangent", 0)  # k = 0 does not reach the store
    stats = mem.stats()
    assert set(stats) == STATS_KEYS
    assert stats["backend"] == backend_name
    assert (stats["writes"], stats["reads"]) == (4, 2)
    assert stats["lessons"] == len(mem) == (4 if _stores(mem) else 0)
    assert stats["write_ms"] >= 0 and stats["read_ms"] >= 0
    if _stores(mem):
        assert stats["storage_bytes"] > 0 and stats["write_ms"] > 0
    else:
        assert stats["storage_bytes"] == 0


def test_stats_keys_identical_across_backends(tmp_path):
    keys = []
    for name in BACKEND_NAMES:
        mem = get_backend(name, tmp_path / name)
        keys.append((name, set(mem.stats())))
        mem.close()
    assert all(k == STATS_KEYS for _, k in keys), keys


def test_text_round_trips_verbatim(open_memory):
    mem = open_memory()
    mem.add_insight(TRICKY_TEXT, topic_key="tricky/topic: with spaces")
    mem.add_insight("  surrounding whitespace is trimmed  \n")
    mem.close()
    lessons = open_memory().all_lessons()
    if _stores(mem):
        assert sorted(_texts(lessons)) == sorted([TRICKY_TEXT, "surrounding whitespace is trimmed"])
        tricky = next(l for l in lessons if l.text == TRICKY_TEXT)
        assert tricky.topic_key == "tricky/topic: with spaces"
    else:
        assert lessons == []


def test_add_lessons_ingests_the_same_set_in_one_call(open_memory):
    from got_core.memory import Lesson

    mem = open_memory()
    batch = [Lesson(text, topic_key=topic, source_problem=f"p{i}", outcome="insight", score=0.6)
             for i, (topic, text) in enumerate(CORPUS)]
    stored = mem.add_lessons(batch)
    assert mem.stats()["writes"] == len(CORPUS)
    if not _stores(mem):
        assert mem.get_relevant("discriminant", 3) == []
        return
    assert len(stored) == len(CORPUS) and len(mem) == len(CORPUS)
    assert _texts(mem.get_relevant("discriminant", 1)) == [CORPUS[1][1]]
    with pytest.raises(InvalidInputError):  # one bad lesson: nothing of the batch is stored
        mem.add_lessons([Lesson("fine text about xylophones"), Lesson("   ")])
    assert len(mem) == len(CORPUS)
