"""Markdown-backend specifics: deduplication and confidence, the file itself,
concurrent writer processes, damaged files."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from timeouts import TEST_TIMEOUT, deadline

from got_core.errors import ConfigError, CorruptRepositoryError
from got_core.memory.markdown import MEMORY_FILE, MarkdownMemory, normalize_text, tokenize

LESSON = "Check the discriminant sign before solving a quadratic for real roots."

WRITER = r"""
import os, sys, time
from got_core.memory.markdown import MarkdownMemory
mem = MarkdownMemory(sys.argv[1])
open(os.path.join(sys.argv[4], "ready-" + sys.argv[2]), "w").close()
while not os.path.exists(os.path.join(sys.argv[4], "go")):  # start both writers together
    time.sleep(0.005)
for i in range(int(sys.argv[3])):
    mem.add_insight(f"writer {sys.argv[2]} wrote distinct lesson number {i} zq{sys.argv[2]}x{i}",
                    topic_key=f"w{sys.argv[2]}")
"""


def test_exact_duplicate_merges_and_raises_confidence(tmp_path):
    mem = MarkdownMemory(tmp_path)
    first = mem.add_insight(LESSON, topic_key="algebra", score=0.5)
    again = mem.add_failure(
        "  check the DISCRIMINANT sign, before solving a quadratic for real roots!  ", topic_key="elsewhere", score=0.5
    )
    assert len(mem) == 1
    assert again.text == first.text and again.topic_key == "algebra"
    assert again.score == pytest.approx(1 - 0.5 * (1 - 0.5 * 0.5))  # damped noisy-OR
    assert again.score > first.score and again.meta["seen"] == 2
    third = mem.add_insight(LESSON, topic_key="algebra", score=0.5)
    assert third.score > again.score and third.meta["seen"] == 3
    reopened = MarkdownMemory(tmp_path).all_lessons()
    assert [(l.score, l.meta["seen"]) for l in reopened] == [(third.score, 3)]


def test_near_duplicate_merges_only_within_its_topic(tmp_path):
    mem = MarkdownMemory(tmp_path)
    base = "Always check the discriminant sign before solving quadratic equations for real roots."
    near_elsewhere = (
        "Always check the discriminant sign before solving quadratic equations for the real roots, carefully."
    )
    near_here = "Always check the discriminant sign before solving quadratic equations for real roots carefully"
    assert len({normalize_text(t) for t in (base, near_elsewhere, near_here)}) == 3
    mem.add_insight(base, topic_key="algebra")
    mem.add_insight(near_elsewhere, topic_key="other-topic")
    assert len(mem) == 2  # near, but in another topic: kept apart
    mem.add_insight(near_here, topic_key="algebra")
    assert len(mem) == 2  # near and in the same topic: merged into the first
    merged = next(l for l in mem.all_lessons() if l.topic_key == "algebra")
    assert merged.text == base and merged.meta["seen"] == 2 and merged.score > 0.5
    other = next(l for l in mem.all_lessons() if l.topic_key == "other-topic")
    assert other.meta["seen"] == 1
    mem.add_insight("Never guess the discriminant: compute it.", topic_key="algebra")
    assert len(mem) == 3  # a different lesson on the topic is not a duplicate


@pytest.mark.parametrize("scores", [(0.9, 0.1), (0.1, 0.9)])
def test_confidence_weights_equally_matching_lessons(tmp_path, scores):
    mem = MarkdownMemory(tmp_path)
    mem.add_insight("Check units twice in kinematics.", topic_key="a", score=scores[0])
    mem.add_insight("Check units once in kinematics.", topic_key="b", score=scores[1])
    hits = mem.get_relevant("kinematics units", 2)
    best = "twice" if scores[0] > scores[1] else "once"
    assert best in hits[0].text and hits[0].relevance > hits[1].relevance


def test_file_is_human_readable_markdown(tmp_path):
    mem = MarkdownMemory(tmp_path)
    mem.add_failure(LESSON + "\nSecond line.", topic_key="quadratic-roots", score=0.75)
    text = (tmp_path / MEMORY_FILE).read_text(encoding="utf-8")
    assert "## quadratic-roots" in text
    assert f"> {LESSON}\n> Second line." in text
    assert "**failure** · confidence 0.75 · seen 1×" in text


def test_a_second_handle_sees_writes_without_reopening(tmp_path):
    reader, writer = MarkdownMemory(tmp_path), MarkdownMemory(tmp_path)
    assert reader.get_relevant("discriminant", 3) == []
    writer.add_insight(LESSON)
    assert [l.text for l in reader.get_relevant("discriminant", 3)] == [LESSON]
    reader.add_insight("A lesson from the reader handle about xylophones.")
    assert len(writer) == 2 and len(MarkdownMemory(tmp_path)) == 2


def test_concurrent_writer_processes_lose_nothing(tmp_path):
    path = tmp_path / "md"
    MarkdownMemory(path)
    n = 25
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(w), str(n), str(tmp_path)],
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for w in (1, 2)
    ]
    until = deadline()
    while not all((tmp_path / f"ready-{w}").exists() for w in (1, 2)):
        assert all(p.poll() is None for p in procs) and time.monotonic() < until
        time.sleep(0.01)
    (tmp_path / "go").touch()
    for proc in procs:
        _, err = proc.communicate(timeout=TEST_TIMEOUT)
        assert proc.returncode == 0, err[-3000:]
    texts = {l.text for l in MarkdownMemory(path).all_lessons()}
    assert texts == {f"writer {w} wrote distinct lesson number {i} zq{w}x{i}" for w in (1, 2) for i in range(n)}
    leftovers = [p.name for p in path.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


@pytest.mark.parametrize(
    "damage",
    [
        b"# my own notes\nnothing GitOfThoughts wrote\n",
        b"\xff\xfe\x00 binary",
        None,  # a damaged record inside a real memory file
    ],
)
def test_damaged_file_is_a_typed_error_and_never_overwritten(tmp_path, damage):
    mem = MarkdownMemory(tmp_path)
    mem.add_insight(LESSON, topic_key="algebra")
    path = tmp_path / MEMORY_FILE
    if damage is None:
        damage = path.read_bytes().replace(b'"lines": 1', b'"lines": 1, oops')
    path.write_bytes(damage)
    with pytest.raises(CorruptRepositoryError, match="memory.md"):
        MarkdownMemory(tmp_path)
    with pytest.raises(CorruptRepositoryError):
        mem.add_insight("a write through an older handle must not clobber the file")
    assert path.read_bytes() == damage


def test_empty_file_is_an_empty_memory(tmp_path):
    (tmp_path / MEMORY_FILE).write_bytes(b"")
    mem = MarkdownMemory(tmp_path)
    assert len(mem) == 0
    mem.add_insight(LESSON)
    assert len(MarkdownMemory(tmp_path)) == 1


def test_tokenizer_drops_stop_words_and_stems_lightly():
    assert tokenize("The roots of Quadratic equations, solving!") == ["root", "quadratic", "equation", "solv"]
    assert tokenize("solve solved solves") == ["solv", "solv", "solv"]
    assert tokenize("do not divide") == ["not", "divid"]  # negations are content
    assert normalize_text("  Hello,   WORLD! ") == "hello world"


def test_needs_a_path():
    with pytest.raises(ConfigError):
        MarkdownMemory(None)


def test_threads_sharing_one_handle_lose_nothing(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    mem = MarkdownMemory(tmp_path)

    def work(t):
        for i in range(15):
            mem.add_insight(f"thread {t} wrote lesson {i} zq{t}x{i}", topic_key=f"t{t}")
            mem.get_relevant(f"zq{t}x{i}", 3)
        return t

    with ThreadPoolExecutor(4) as pool:
        assert sorted(pool.map(work, range(4))) == [0, 1, 2, 3]
    assert len(mem) == 60 and len(MarkdownMemory(tmp_path)) == 60
