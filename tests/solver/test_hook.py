"""The commit-on-score hook: commits, notes, tags and the winning path, checked with the real git binary."""

from __future__ import annotations

import json

import pytest
from gitcli import fsck_clean, git

from got_core import ReasoningRepo
from got_core.errors import InvalidInputError
from got_core.solver.hook import NodeRecorder

STEP = {"step": 1, "type": "action", "action": "calculator", "action_input": "6*7", "observation": "42"}


def child(rec, root, label, s_local, s_cross, thought=None, outcome=None):
    s = {"s_local": s_local, "s_cross": s_cross, "s_comb": round(0.6 * s_local + 0.4 * s_cross, 6)}
    return rec.record(
        thought or f"argue {label}", s, [STEP], {"role": f"argue {label}"}, [root], 1, outcome, label=label
    )


def test_each_node_is_a_commit_with_four_files_a_note_and_tags(tmp_path):
    repo = ReasoningRepo.open(tmp_path / "p1.git")
    rec = NodeRecorder(repo, "p1")
    root = rec.record("problem: 6 * 7", {"s_comb": 0.0}, [], {"role": "root"}, [], 0)
    kids = [child(rec, root, "A", 0.2, 0.3), child(rec, root, "B", 0.9, 0.8), child(rec, root, "C", 0.4, 0.1)]
    gd = repo.path
    assert git(gd, "ls-tree", "--name-only", kids[1].oid).split() == [
        "metadata.json",
        "scores.json",
        "thought.md",
        "trace.jsonl",
    ]
    assert json.loads(git(gd, "show", f"{kids[1].oid}:trace.jsonl")) == STEP
    meta = json.loads(git(gd, "show", f"{kids[1].oid}:metadata.json"))
    assert meta["arm"] == "tot" and meta["label"] == "B" and meta["problem_id"] == "p1" and meta["depth"] == 1
    for node in [root, *kids]:  # every node carries its score as a note on refs/notes/got
        assert json.loads(git(gd, "notes", "--ref=got", "show", node.oid))["s_comb"] == node.scores["s_comb"]
    assert git(gd, "rev-parse", "explore/tot/B").strip() == kids[1].oid
    assert git(gd, "rev-parse", "master").strip() == root.oid  # children live on exploration branches

    rec.mark(kids[1], "success", {"ok": True, "checks": {"verifier": "agrees"}}, best=True)
    rec.mark(kids[0], "failed", {"ok": False, "failure": "verifier rejected: wrong units"})
    tags = set(git(gd, "tag").split())
    assert tags == {"best", f"success_{kids[1].node_id}", f"failed_{kids[0].node_id}"}
    assert git(gd, "rev-parse", "best").strip() == kids[1].oid
    note = json.loads(git(gd, "notes", "--ref=got", "show", "best"))
    assert note["outcome"] == "success" and note["validation"]["checks"]["verifier"] == "agrees"
    assert note["s_comb"] == kids[1].scores["s_comb"]  # re-scored in the note, commit untouched
    assert kids[1].tags == ["best", f"success_{kids[1].node_id}"]

    assert rec.finish(kids[1]) == kids[1].oid  # root -> best child fast-forwards master
    assert git(gd, "rev-list", "master").split() == [kids[1].oid, root.oid]
    assert fsck_clean(gd)[0]


def test_budget_outcomes_are_tagged_failed_and_identical_thoughts_get_distinct_ids(tmp_path):
    repo = ReasoningRepo.open(tmp_path / "p.git")
    rec = NodeRecorder(repo, "p")
    root = rec.record("problem", {"s_comb": 0.0}, [], {}, [], 0)
    a = child(rec, root, "A", 0.5, 0.5, thought="same text")
    b = child(rec, root, "B", 0.5, 0.5, thought="same text")
    late = child(rec, root, "C", 0.0, 0.0, outcome="timeout")
    assert a.node_id != b.node_id
    assert late.tags == [f"failed_timeout_{late.node_id}"]
    assert git(repo.path, "rev-parse", f"failed_timeout_{late.node_id}").strip() == late.oid
    assert json.loads(git(repo.path, "show", f"{late.oid}:metadata.json"))["outcome"] == "timeout"
    assert rec.children_of(root) == [a, b, late]
    assert rec.finish(None) == root.oid  # no winner: the session branch stays at the root


def test_a_shared_repository_keeps_one_session_branch_per_problem(tmp_path):
    repo = ReasoningRepo.open(tmp_path / "shared.git")
    recs = {pid: NodeRecorder(repo, pid, f"sessions/{pid}") for pid in ("alpha", "beta/2")}
    winners = {}
    for pid, rec in recs.items():
        root = rec.record(f"problem {pid}", {"s_comb": 0.0}, [], {}, [], 0)
        win = child(rec, root, "A", 0.9, 0.9)
        rec.mark(win, "success", best=True)
        rec.finish(win)
        winners[pid] = (root, win)
    gd = repo.path
    assert git(gd, "rev-parse", "sessions/alpha").strip() == winners["alpha"][1].oid
    assert git(gd, "rev-parse", "sessions/beta/2").strip() == winners["beta/2"][1].oid
    assert git(gd, "rev-parse", "explore/alpha/tot/A").strip() == winners["alpha"][1].oid
    tags = set(git(gd, "tag").split())
    assert {"best_alpha", "best_beta%2F2"} <= tags and "best" not in tags
    assert git(gd, "rev-parse", "--verify", "-q", "refs/heads/master", check=False).strip() == ""
    assert fsck_clean(gd)[0]


def test_a_second_session_continues_the_branch_and_merges_when_it_moved(tmp_path):
    repo = ReasoningRepo.open(tmp_path / "p.git")
    first = NodeRecorder(repo, "p")
    r1 = first.record("session 1", {"s_comb": 0.0}, [], {}, [], 0)
    w1 = child(first, r1, "A", 0.7, 0.7)
    first.finish(w1)
    second = NodeRecorder(repo, "p")
    r2 = second.record("session 2", {"s_comb": 0.0}, [], {}, [], 0)
    assert r2.parents == (w1.oid,)  # the new root follows the previous winning path
    w2 = child(second, r2, "B", 0.8, 0.8)
    repo.commit_files("master", {"notes.txt": "someone else moved master"}, "other work\n")
    tip = second.finish(w2)
    assert repo.commit_info(tip).parents[1] == w2.oid  # merged, not lost
    git(repo.path, "merge-base", "--is-ancestor", w2.oid, "master")  # raises unless an ancestor


def test_bad_marks_and_parents_are_refused(tmp_path):
    repo = ReasoningRepo.open(tmp_path / "p.git")
    rec = NodeRecorder(repo, "p")
    root = rec.record("problem", {"s_comb": 0.0}, [], {}, [], 0)
    with pytest.raises(InvalidInputError):
        rec.mark(root, "maybe")
    with pytest.raises(InvalidInputError):
        rec.record("x", {"s_comb": 0.1}, [], {}, [""], 1)
    with pytest.raises(InvalidInputError):
        NodeRecorder(repo, "  ")
    with pytest.raises(InvalidInputError):
        rec.record("x", {"s_comb": float("nan")}, [], {}, [root], 1)


def test_a_batch_writes_every_note_in_one_notes_commit(tmp_path):
    repo = ReasoningRepo.open(tmp_path / "p.git")
    rec = NodeRecorder(repo, "p")
    with rec.batch():
        root = rec.record("problem", {"s_comb": 0.0}, [], {}, [], 0)
        kids = [child(rec, root, label, 0.5, 0.5) for label in "ABCD"]
        rec.mark(kids[2], "success", {"ok": True}, best=True)
        assert repo.tip("refs/notes/got") is None  # deferred until the block ends
        assert git(repo.path, "rev-parse", "best").strip() == kids[2].oid  # tags are not deferred
    assert git(repo.path, "rev-list", "--count", "refs/notes/got").strip() == "1"
    for node in [root, *kids]:
        assert json.loads(git(repo.path, "notes", "--ref=got", "show", node.oid)) == node.note
    assert json.loads(git(repo.path, "notes", "--ref=got", "show", kids[2].oid))["outcome"] == "success"
    with pytest.raises(RuntimeError, match="boom"), rec.batch():  # notes are written on errors too
        late = child(rec, root, "E", 0.1, 0.1)
        raise RuntimeError("boom")
    assert json.loads(git(repo.path, "notes", "--ref=got", "show", late.oid))["s_comb"] == late.scores["s_comb"]
    assert fsck_clean(repo.path)[0]
