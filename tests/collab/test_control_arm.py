"""The README's collaboration example, checked: the concatenation control arm keeps every
lesson when it runs on the workers' pushes before they are merged (after a merge, merged
lessons are no longer new, so it would keep only what still waits)."""

from __future__ import annotations

from got_core.collab import Orchestrator, Worker

LESSONS = {
    "alice": [("algebra/inequality", "Flip the inequality when multiplying by a negative."), ("units", "Check units.")],
    "bob": [("algebra/inequality", "Keep the inequality as it is when multiplying by a negative.")],
    "carol": [("units", "Units can wait until the final answer.")],
}


def _push_all(tmp_path):
    orch = Orchestrator(tmp_path / "central.git")
    for agent, items in LESSONS.items():
        w = Worker(tmp_path / f"{agent}.git", orch.path, agent)
        w.sync()
        for topic, text in items:
            w.add_lesson(text, topic_key=topic)
        w.push()
    return orch


def test_the_control_arm_before_merging_keeps_every_lesson_and_signals_nothing(tmp_path):
    orch = _push_all(tmp_path)
    control = orch.concatenate_lessons(tmp_path / "control.md")
    every = sorted(text for items in LESSONS.values() for _, text in items)
    assert sorted(lesson.text for _, lesson in control.lessons) == every and control.conflicts == 0
    written = (tmp_path / "control.md").read_text()
    assert all(text in written for text in every)
    orch.merge_workers()
    assert sorted(p.name for p in orch.merge_status()) == ["bob", "carol"]
    orch.resolve("bob", "theirs")
    assert sorted(l.text for l in orch.lessons()) == sorted([LESSONS["bob"][0][1], LESSONS["alice"][1][1]])
    assert [p.name for p in orch.merge_status()] == ["carol"]


def test_after_a_merge_the_control_arm_keeps_only_what_is_not_merged(tmp_path):
    orch = _push_all(tmp_path)
    orch.merge_workers()
    orch.resolve("bob", "theirs")
    late = orch.concatenate_lessons(tmp_path / "late.md")
    # merged lessons are on the memory branch: not new any more (the README says to run it first)
    assert sorted(lesson.text for _, lesson in late.lessons) == sorted([LESSONS["alice"][0][1], LESSONS["carol"][0][1]])
