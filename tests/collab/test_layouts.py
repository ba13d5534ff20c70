"""Lesson layouts (keyed vs content-hashed) and what a merge sees of a contradiction."""

from __future__ import annotations

import pytest
from gitcli import fsck_clean, git

from got_core.collab import LessonMemory, Orchestrator, Worker, content_path, lesson_id, path_for
from got_core.errors import ConfigError
from got_core.memory.base import Lesson
from got_core.memory.git import lesson_path
from got_core.repo import ReasoningRepo

ALWAYS = "Always convert every quantity to SI units before computing."
NEVER = "Never convert quantities to SI units; keep the units the problem gives."


def contradict(tmp_path, layout):
    """Two workers write contradictory lessons on topic ``units``; return the merge report."""
    orch = Orchestrator(tmp_path / "central.git")
    for agent, text in (("a", ALWAYS), ("b", NEVER)):
        w = Worker(tmp_path / f"{agent}.git", orch.path, agent, layout=layout)
        w.sync()
        w.add_lesson(text, topic_key="units", score=0.7)
        w.push()
        w.close()
    return orch, orch.merge_workers()


def test_keyed_layout_surfaces_the_contradiction(tmp_path):
    orch, report = contradict(tmp_path, "keyed")
    assert [c.path for c in report.conflicts] == [lesson_path("units")]
    assert report.pending == ["b"]
    assert [l.text for l in orch.lessons()] == [ALWAYS]  # b's side is not kept silently


def test_content_layout_merges_the_contradiction_silently(tmp_path):
    orch, report = contradict(tmp_path, "content")
    assert report.conflicts == [] and report.pending == []
    texts = sorted(l.text for l in orch.lessons() if l.topic_key == "units")
    assert texts == sorted([ALWAYS, NEVER])  # both land, no signal
    files = git(orch.path, "ls-tree", "-r", "--name-only", "memory").split()
    assert sorted(f for f in files if f.startswith("lessons/")) == sorted([content_path(ALWAYS), content_path(NEVER)])
    assert fsck_clean(orch.path)[0]


def test_paths_of_each_layout():
    lesson = Lesson(ALWAYS, "physics/units")
    lid = lesson_id(ALWAYS)
    assert len(lid) == 16 and content_path(ALWAYS) == f"lessons/{lid[:2]}/{lid}.md"
    assert path_for(lesson, "content") == content_path(ALWAYS)
    assert path_for(lesson, "keyed") == lesson_path("physics/units")
    assert path_for(Lesson(NEVER, "physics/units"), "keyed") == path_for(lesson, "keyed")
    assert path_for(Lesson(NEVER, "physics/units"), "content") != path_for(lesson, "content")


def test_content_layout_stores_queries_and_deduplicates(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "m.git")
    mem = LessonMemory(repo=repo, layout="content", topic_prefix="physics")
    first = mem.add_insight(ALWAYS, topic_key="units", score=0.4)
    assert first is not None and first.topic_key == "physics/units"
    mem.add_insight(ALWAYS, topic_key="units", score=0.9)  # the same text again: one file, higher score
    mem.add_failure(NEVER, topic_key="units", score=0.2)
    stored = {l.text: l for l in mem.all_lessons()}
    assert sorted(stored) == sorted([ALWAYS, NEVER])
    assert stored[ALWAYS].score == pytest.approx(0.9) and stored[ALWAYS].topic_key == "physics/units"
    hits = mem.get_relevant("convert every quantity to SI units", k=2)
    assert hits and hits[0].text == ALWAYS and hits[0].relevance is not None
    assert len(git(repo.gitdir, "rev-list", "memory").split()) == 3  # one commit per add
    assert fsck_clean(repo.gitdir)[0]


def test_keyed_prefix_is_not_doubled(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "m.git")
    mem = LessonMemory(repo=repo, layout="keyed", topic_prefix="/physics/")
    a = mem.add_insight(ALWAYS, topic_key="units")
    b = mem.add_insight(NEVER, topic_key="physics/units")
    assert a is not None and b is not None and a.topic_key == b.topic_key == "physics/units"
    assert len(mem.all_lessons()) == 2  # one topic file, two lessons


def test_unknown_layout_is_a_config_error(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "m.git")
    with pytest.raises(ConfigError, match="keyed, content"):
        LessonMemory(repo=repo, layout="hashed")  # type: ignore[arg-type]


def test_content_layout_still_conflicts_on_one_lesson_learned_twice_differently(tmp_path):
    """The caveat is about *different* lessons: the same text with another score is one file, edited twice."""
    orch = Orchestrator(tmp_path / "central.git")
    for agent, score in (("a", 0.4), ("b", 0.9)):
        w = Worker(tmp_path / f"{agent}.git", orch.path, agent, layout="content")
        w.sync()
        w.add_lesson(ALWAYS, topic_key="units", score=score)
        w.push()
        w.close()
    report = orch.merge_workers()
    assert [c.path for c in report.conflicts] == [content_path(ALWAYS)] and report.pending == ["b"]
