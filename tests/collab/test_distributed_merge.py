"""Mergeable memory across agents (§6.3): worker processes, a central repository, review.

The headline check runs real worker processes against a central bare repository:
disjoint domains merge with 0 conflicts; 5 contradictory lessons on shared topic
keys surface as exactly 5 conflicts, while the concatenation control keeps all 10
lessons with no signal.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading

import pytest
from gitcli import fsck_clean, git
from timeouts import TEST_TIMEOUT

from got_core import ReasoningRepo, RemoteError
from got_core.cli import main
from got_core.collab.agents import (
    LessonConflict,
    Orchestrator,
    Worker,
    adjudicator,
    agent_notes_ref,
    lessons_at,
    merge_status,
    pending_ref,
)
from got_core.errors import InvalidInputError, UnknownRefError
from got_core.memory.git import lesson_path
from got_core.solver.scripted import ScriptedChatModel
from got_core.types import Node

ALGEBRA = {
    "algebra/isolate": "Isolate the variable before substituting numbers.",
    "algebra/quadratic": "Check the discriminant before solving for real roots.",
    "algebra/factor": "Try factoring out the greatest common factor first.",
    "algebra/inequality": "Flip the inequality when multiplying by a negative number.",
}
BIOLOGY = {
    "biology/mitosis": "Mitosis yields two identical diploid cells.",
    "biology/enzymes": "Enzyme activity peaks at an optimum temperature and pH.",
    "biology/dna": "DNA replication is semi-conservative.",
    "biology/osmosis": "Water moves toward the higher solute concentration.",
}
SHARED = ["units", "rounding", "estimation", "sign-check", "significant-figures"]
ALWAYS = {k: f"Always apply the {k} step before answering." for k in SHARED}
NEVER = {k: f"Never apply the {k} step; it wastes the budget." for k in SHARED}

WORKER_SCRIPT = r"""
import json, sys
from got_core.collab.agents import Worker
from got_core.types import Node
spec = json.loads(sys.argv[1])
w = Worker(spec["path"], spec["central"], spec["agent"])
w.sync()
commits = {}
for key, text in spec["lessons"].items():
    lesson, commit = w.add_lesson(text, topic_key=key, outcome=spec.get("outcome", "insight"), score=0.7)
    commits[key] = commit
private = w.repo.commit_node(Node("raw trace of " + spec["agent"], scores={"s_comb": 0.9},
                                  trace=[{"tool": "calc", "secret": spec["agent"]}], outcome="success"))
pushed = w.push()
print(json.dumps({"commits": commits, "private": private.oid, "pushed": pushed}))
"""


def run_workers(tmp_path, central, jobs):
    """Run one worker process per job at the same time; return their JSON reports."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER_SCRIPT)
    procs = []
    for agent, lessons, outcome in jobs:
        spec = {
            "path": str(tmp_path / f"{agent}.git"),
            "central": str(central),
            "agent": agent,
            "lessons": lessons,
            "outcome": outcome,
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, str(script), json.dumps(spec)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    reports = {}
    for (agent, _, _), proc in zip(jobs, procs):
        out, err = proc.communicate(timeout=TEST_TIMEOUT)
        assert proc.returncode == 0, err
        reports[agent] = json.loads(out.strip().splitlines()[-1])
    return reports


def topic_lessons(lessons, keys):
    return sorted((l.topic_key, l.text) for l in lessons if l.topic_key in keys)


def test_worker_processes_disjoint_then_contradictory(tmp_path, capsys):
    orch = Orchestrator(tmp_path / "central.git")
    # Round 1: two processes, disjoint domains.
    reports = run_workers(tmp_path, orch.path, [("alg", ALGEBRA, "insight"), ("bio", BIOLOGY, "success")])
    assert sorted(orch.workers()) == ["alg", "bio"]
    report = orch.merge_workers()
    assert report.conflicts == [] and report.pending == []
    assert {r.status for r in report.results.values()} <= {"fast-forward", "merged"}
    merged = orch.lessons()
    assert topic_lessons(merged, ALGEBRA) == sorted(ALGEBRA.items())
    assert topic_lessons(merged, BIOLOGY) == sorted(BIOLOGY.items())
    assert merge_status(orch.repo) == []
    # Round 2: both sync the merged memory, then contradict each other on 5 shared keys.
    before = orch.repo.tip("memory")
    run_workers(tmp_path, orch.path, [("alg", ALWAYS, "insight"), ("bio", NEVER, "insight")])
    concat = orch.concatenate_lessons(tmp_path / "concat.md")
    kept = [(agent, l.topic_key, l.text) for agent, l in concat.lessons if l.topic_key in SHARED]
    assert len(kept) == 10 and concat.conflicts == 0  # all kept, no signal
    log = concat.path.read_text()
    assert all(ALWAYS[k] in log and NEVER[k] in log for k in SHARED)
    report = orch.merge_workers()
    assert len(report.conflicts) == 5 and report.pending == ["bio"]
    assert sorted(c.path for c in report.conflicts) == sorted(lesson_path(k) for k in SHARED)
    assert report.results["alg"].status == "fast-forward"  # alg went first, cleanly
    memory = orch.lessons()
    assert topic_lessons(memory, SHARED) == sorted(ALWAYS.items())  # nothing of bio's kept silently
    assert orch.repo.tip("memory") != before
    (pending,) = orch.merge_status()
    assert pending.name == "bio" and pending.into == "memory" and len(pending.conflicts) == 5
    by_key = {lc.topic_key: lc for lc in pending.lesson_conflicts}
    assert sorted(by_key) == sorted(SHARED)
    assert all(by_key[k].ours[-1].text == ALWAYS[k] and by_key[k].theirs[-1].text == NEVER[k] for k in SHARED)
    # The same list from the command line.
    code = main(["merge", "--status", "--json", "-r", str(orch.path)])
    listed = json.loads(capsys.readouterr().out)
    assert code == 0 and listed[0]["name"] == "bio" and sorted(listed[0]["topics"]) == sorted(SHARED)
    assert fsck_clean(orch.path)[0]
    # Raw traces stayed private: the success node's commit never reached central.
    for agent in ("alg", "bio"):
        private = reports[agent]["private"]
        assert (
            subprocess.run(["git", f"--git-dir={orch.path}", "cat-file", "-e", private], capture_output=True).returncode
            != 0
        )


def make_conflict(tmp_path, strategy_keys=SHARED[:2]):
    orch = Orchestrator(tmp_path / "central.git")
    a = Worker(tmp_path / "a.git", orch.path, "a")
    b = Worker(tmp_path / "b.git", orch.path, "b")
    for w, texts in ((a, ALWAYS), (b, NEVER)):
        w.sync()
        for k in strategy_keys:
            w.add_lesson(texts[k], topic_key=k, score=0.6 if w is a else 0.8)
        w.push()
    report = orch.merge_workers()
    assert report.pending == ["b"] and len(report.conflicts) == len(strategy_keys)
    return orch, a, b


@pytest.mark.parametrize("strategy,expected", [("ours", ALWAYS), ("theirs", NEVER)])
def test_ours_theirs_resolve_with_a_two_parent_merge(tmp_path, strategy, expected):
    orch, _a, b = make_conflict(tmp_path)
    tip = orch.repo.tip("memory")
    result = orch.resolve("b", strategy)
    assert result.status == "resolved" and len(result.conflicts) == 2
    assert git(orch.path, "log", "-1", "--format=%P", "memory").split() == [tip, b.repo.tip(b.branch)]
    assert topic_lessons(orch.lessons(), SHARED) == sorted((k, expected[k]) for k in SHARED[:2])
    assert orch.merge_status() == [] and orch.repo.tip(pending_ref("memory", "b")) is None


def test_cli_resolve_and_status(tmp_path, capsys):
    orch, _a, _b = make_conflict(tmp_path)
    code = main(["merge", "--status", "-r", str(orch.path)])
    out = capsys.readouterr().out
    assert code == 0 and out.count("CONFLICT") == 2 and "b -> memory" in out
    code = main(["merge", "--resolve", "theirs", "b", "-r", str(orch.path)])
    assert code == 0 and "resolved" in capsys.readouterr().out
    assert topic_lessons(orch.lessons(), SHARED) == sorted((k, NEVER[k]) for k in SHARED[:2])
    code = main(["merge", "--status", "-r", str(orch.path)])
    assert code == 0 and "No merges left for review." in capsys.readouterr().out
    code = main(["merge", "--resolve", "theirs", "b", "-r", str(orch.path)])
    assert code == 2 and "no merge from 'b'" in capsys.readouterr().err


def test_cli_merges_workers_and_exits_3_on_review(tmp_path, capsys):
    orch = Orchestrator(tmp_path / "central.git")
    for agent, texts in (("a", ALWAYS), ("b", NEVER)):
        w = Worker(tmp_path / f"{agent}.git", orch.path, agent)
        w.sync()
        w.add_lesson(texts["units"], topic_key="units")
        w.push()
    code = main(["merge", "--workers", "-r", str(orch.path)])
    out = capsys.readouterr().out
    assert code == 3 and "b: conflicted" in out and "CONFLICT" in out
    assert [p.name for p in orch.merge_status()] == ["b"]


def test_llm_adjudicator_decides_or_abstains(tmp_path):
    orch, _a, b = make_conflict(tmp_path)
    tip = orch.repo.tip("memory")
    abstaining = ScriptedChatModel(["Apply units when the formula mixes systems.", "ABSTAIN"])
    result = orch.resolve("b", adjudicator(abstaining))
    assert result.status == "conflicted" and orch.repo.tip("memory") == tip  # left for review
    assert [p.name for p in orch.merge_status()] == ["b"]
    model = ScriptedChatModel(rules=[(r"Topic: (\S+)", lambda msgs: "Decide per problem; both can apply.")])
    result = orch.resolve("b", adjudicator(model))
    assert result.status == "resolved" and model.n_calls == 2
    prompts = [msgs[-1]["content"] for msgs in model.received]
    for k in SHARED[:2]:  # each topic was shown with both sides
        assert any(f"Topic: {k}\n" in p and ALWAYS[k] in p and NEVER[k] in p for p in prompts)
    parents = git(orch.path, "log", "-1", "--format=%P", "memory").split()
    assert parents == [tip, b.repo.tip(b.branch)]
    assert "Conflicts resolved (adjudicator)" in git(orch.path, "log", "-1", "--format=%B", "memory")
    decided = [l for l in orch.lessons() if l.topic_key in SHARED]
    assert len(decided) == 2 and all(l.text == "Decide per problem; both can apply." for l in decided)
    assert all(l.meta["adjudicated"] and len(l.meta["replaces"]) == 2 for l in decided)
    assert orch.merge_status() == []


def test_explicit_decisions_and_bad_strategies(tmp_path):
    orch, _a, _b = make_conflict(tmp_path, SHARED[:1])
    with pytest.raises(InvalidInputError):
        orch.resolve("b", "review")
    with pytest.raises(UnknownRefError):
        orch.resolve("nobody", "ours")
    path = lesson_path(SHARED[0])
    result = orch.resolve("b", decisions={path: '<!-- got-lesson {"topic_key": "units"} -->\nBoth, by case.\n'})
    assert result.status == "resolved"
    assert [l.text for l in orch.lessons() if l.topic_key == "units"] == ["Both, by case."]


def test_stale_pending_entries_drop_out(tmp_path):
    orch, _a, b = make_conflict(tmp_path, SHARED[:1])
    # Someone merges b by other means: the review entry is no longer open.
    orch.repo.merge(f"refs/heads/{b.branch}", into="memory", strategy="theirs")
    assert orch.merge_status() == []
    assert orch.repo.tip(pending_ref("memory", "b")) is None


def test_selective_push_and_per_agent_notes(tmp_path):
    orch = Orchestrator(tmp_path / "central.git")
    a = Worker(tmp_path / "a.git", orch.path, "a")
    b = Worker(tmp_path / "b.git", orch.path, "b")
    a.sync(), b.sync()
    win = a.repo.commit_node(Node("private success", scores={"s_comb": 0.9}, trace=[{"secret": 1}], outcome="success"))
    lose = a.repo.commit_node(Node("private failure", scores={"s_comb": 0.1}, outcome="failed"))
    _, shared = a.add_lesson("Check units first.", topic_key="units", outcome="success", score=0.8)
    _, insight = a.add_lesson("Estimate before computing.", topic_key="estimation", score=0.4)
    _, theirs = b.add_lesson("Draw the figure.", topic_key="geometry", score=0.6)
    a.push(), b.push()
    refs = set(git(orch.path, "for-each-ref", "--format=%(refname)").split())
    assert refs == {
        "refs/heads/memory",
        "refs/heads/agents/a/memory",
        "refs/heads/agents/b/memory",
        f"refs/tags/success_a-{shared[:12]}",
        agent_notes_ref("a"),
        agent_notes_ref("b"),
    }
    assert f"refs/tags/success_{win.node_id}" not in refs and f"refs/tags/failed_{lose.node_id}" not in refs
    for private in (win.oid, lose.oid):
        assert (
            subprocess.run(["git", f"--git-dir={orch.path}", "cat-file", "-e", private], capture_output=True).returncode
            != 0
        )
    # Each agent's scores travel on its own notes ref; real git reads them.
    assert json.loads(git(orch.path, "notes", "--ref=got-a", "show", insight)) == {"agent": "a", "s_comb": 0.4}
    assert json.loads(git(orch.path, "notes", "--ref=got-b", "show", theirs))["s_comb"] == 0.6
    orch.merge_workers()
    b.sync()
    assert b.repo.note_json(shared, ref="refs/notes/remotes/central/got-a")["s_comb"] == 0.8
    # b scores a's lesson on its own notes ref: both scores coexist on central.
    b.repo.set_note(shared, {"s_comb": 0.2, "agent": "b"})
    b.push()
    assert json.loads(git(orch.path, "notes", "--ref=got-a", "show", shared))["s_comb"] == 0.8
    assert json.loads(git(orch.path, "notes", "--ref=got-b", "show", shared))["s_comb"] == 0.2
    assert b.repo.resolve(f"success_a-{shared[:12]}") == shared  # the success tag travelled too
    assert sorted(l.topic_key for l in lessons_at(b.repo, b.branch)) == ["estimation", "geometry", "units"]


def test_concurrent_scorers_never_collide(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "shared.git")
    target = repo.commit_files("memory", {"lessons/x.md": "x\n"}, "x\n")
    errors = []

    def score(agent):
        try:
            for i in range(20):
                repo.set_note(target, {"s_comb": i / 20, "agent": agent}, ref=agent_notes_ref(agent))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=score, args=(f"agent{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for i in range(4):
        ref = agent_notes_ref(f"agent{i}")
        assert repo.note_json(target, ref=ref) == {"s_comb": 0.95, "agent": f"agent{i}"}
        assert git(repo.gitdir, "rev-list", "--count", ref).strip() == "20"


class _AsksForCredentials(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self):
        type(self).hits += 1
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="central"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args):
        pass


def test_remote_that_asks_for_credentials_fails_fast(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AsksForCredentials)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/central.git"
        w = Worker(tmp_path / "w.git", url, "w")
        with pytest.raises(RemoteError, match="asks for credentials"):
            w.sync()
        w.add_lesson("Check units first.", topic_key="units")
        with pytest.raises(RemoteError, match="never prompts"):
            w.push()
        assert _AsksForCredentials.hits >= 2  # it really asked; we refused without prompting
    finally:
        server.shutdown()
        server.server_close()


def test_lesson_conflict_reads_both_sides(tmp_path):
    orch, _a, _b = make_conflict(tmp_path, SHARED[:1])
    (pending,) = orch.merge_status()
    (lc,) = pending.lesson_conflicts
    assert isinstance(lc, LessonConflict) and lc.topic_key == SHARED[0] and lc.base == ()
    assert [l.score for l in lc.ours] == [0.6] and [l.score for l in lc.theirs] == [0.8]
