"""Mergeable memory across agents with central served by a real git server (issue 18 §4).

Workers are separate processes that reach central only by its URL (``git daemon``'s
``git://`` or ``git http-backend``'s ``http://`` on 127.0.0.1, started by the fixture);
the orchestrator works in its own repository and pushes the merged memory back over the
same URL. The tests taking ``git_server`` run once per server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gitcli import fsck_clean, git
from gitserver import ALL_SERVERS, HttpGit, make_bare, serve
from timeouts import TEST_TIMEOUT

from got_core.cli import main
from got_core.collab.agents import Orchestrator, Worker, lessons_at
from got_core.errors import CredentialsRequiredError, InvalidInputError
from got_core.memory.git import lesson_path

DOMAIN_A = {"algebra/isolate": "Isolate the variable first.", "algebra/factor": "Factor out the GCF first."}
DOMAIN_B = {"biology/dna": "DNA replication is semi-conservative.", "biology/mitosis": "Mitosis yields two cells."}
SHARED = ["units", "rounding", "estimation"]
ALWAYS = {k: f"Always apply the {k} step." for k in SHARED}
NEVER = {k: f"Never apply the {k} step." for k in SHARED}

WORKER = r"""
import json, sys
from got_core.collab.agents import Worker
from got_core.types import Node
spec = json.loads(sys.argv[1])
w = Worker(spec["path"], spec["central"], spec["agent"], lock_timeout=spec["timeout"])
w.sync()
commits = []
for key, text in spec["lessons"].items():
    lesson, commit = w.add_lesson(text, topic_key=key, outcome=spec["outcome"], score=0.7)
    commits.append(commit)
    if spec.get("push_each"):
        w.push()
private = w.repo.commit_node(Node("raw trace of " + spec["agent"], scores={"s_comb": 0.9}, outcome="success"))
w.push()
print(json.dumps({"commits": commits, "private": private.oid}))
"""


@pytest.fixture(params=ALL_SERVERS)
def git_server(request, tmp_path, monkeypatch):
    """Each git server kind: git://, http://, ssh:// and https:// (a private CA, trusted here)."""
    with serve(request.param, tmp_path / "served") as server:
        # a deployment's trust (SSH key and known_hosts, the CA file), for this test and its children
        server.trust(monkeypatch, Path(os.environ["HOME"]))
        yield server


def run_workers(tmp_path, url, jobs):
    """One worker process per job, all at once, each given only central's URL."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    procs = []
    for path, agent, lessons, outcome, push_each in jobs:
        spec = {
            "path": str(tmp_path / path),
            "central": url,
            "agent": agent,
            "lessons": lessons,
            "outcome": outcome,
            "push_each": push_each,
            "timeout": TEST_TIMEOUT,
        }
        procs.append(
            subprocess.Popen([sys.executable, str(script), json.dumps(spec)], stdout=subprocess.PIPE, text=True)
        )
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=TEST_TIMEOUT)
        assert proc.returncode == 0
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def topics(lessons, keys):
    return sorted((l.topic_key, l.text) for l in lessons if l.topic_key in keys)


@pytest.mark.slow
def test_workers_and_orchestrator_share_memory_only_through_a_git_url(tmp_path, git_server):
    served = make_bare(git_server.base)
    url = git_server.url("central.git")
    orch = Orchestrator(url, path=tmp_path / "orchestrator.git")
    assert orch.central == url
    root = git(served, "rev-parse", "memory").strip()  # the shared root went up to central
    # Round 1: disjoint domains, two processes at once.
    reports = run_workers(
        tmp_path,
        url,
        [("a.git", "alg", DOMAIN_A, "insight", False), ("b.git", "bio", DOMAIN_B, "success", False)],
    )
    assert sorted(orch.workers()) == ["alg", "bio"]
    report = orch.merge_workers()
    assert report.conflicts == [] and report.pending == []
    tip = git(served, "rev-parse", "memory").strip()
    assert tip == orch.repo.tip("memory") and tip != root  # merged memory pushed back
    merged = lessons_at(orch.repo, "memory")
    assert topics(merged, DOMAIN_A) == sorted(DOMAIN_A.items()) and topics(merged, DOMAIN_B) == sorted(DOMAIN_B.items())
    assert git(served, "for-each-ref", "--format=%(refname)", "refs/tags/").split()  # bio's success tags
    assert "refs/notes/got-alg" in git(served, "for-each-ref", "--format=%(refname)", "refs/notes/")
    # Round 2: both sync the merged memory over the URL, then contradict each other.
    run_workers(tmp_path, url, [("a.git", "alg", ALWAYS, "insight", False), ("b.git", "bio", NEVER, "insight", False)])
    report = orch.merge_workers()
    assert report.pending == ["bio"] and sorted(c.path for c in report.conflicts) == sorted(map(lesson_path, SHARED))
    served_memory = lessons_at(orch.repo, git(served, "rev-parse", "memory").strip())
    assert topics(served_memory, SHARED) == sorted(ALWAYS.items())  # nothing of bio's kept silently
    (pending,) = orch.merge_status()
    assert pending.name == "bio" and len(pending.conflicts) == len(SHARED)
    orch.resolve("bio", "theirs")
    served_memory = lessons_at(orch.repo, git(served, "rev-parse", "memory").strip())
    assert topics(served_memory, SHARED) == sorted(NEVER.items())
    assert orch.merge_status() == []
    assert fsck_clean(served)[0]
    for r in reports:  # raw traces never left the workers
        assert subprocess.run(["git", f"--git-dir={served}", "cat-file", "-e", r["private"]]).returncode != 0


@pytest.mark.slow
def test_one_agent_pushing_from_two_places_loses_nothing(tmp_path, git_server):
    served = make_bare(git_server.base)
    url = git_server.url("central.git")
    Orchestrator(url, path=tmp_path / "orchestrator.git")
    left = {f"left/{i}": f"Left lesson {i}." for i in range(3)}
    right = {f"right/{i}": f"Right lesson {i}." for i in range(3)}
    reports = run_workers(
        tmp_path, url, [("one.git", "same", left, "insight", True), ("two.git", "same", right, "insight", True)]
    )
    tip = git(served, "rev-parse", "refs/heads/agents/same/memory").strip()
    for r in reports:
        for commit in r["commits"]:  # both processes' pushes landed: merged, never forced over
            git(served, "merge-base", "--is-ancestor", commit, tip)
    files = git(served, "ls-tree", "-r", "--name-only", tip).split()
    assert sorted(f for f in files if f.startswith("lessons/")) == sorted(lesson_path(k) for k in {**left, **right})
    assert fsck_clean(served)[0]


def test_a_central_that_asks_for_credentials_fails_fast(tmp_path):
    with HttpGit(tmp_path / "served", password="s3cret") as server:
        make_bare(server.base)
        url = server.url("central.git")
        w = Worker(tmp_path / "w.git", url, "w")
        w.repo.lock_timeout = TEST_TIMEOUT
        with pytest.raises(CredentialsRequiredError, match="never prompts"):
            w.sync()
        w.add_lesson("Check units first.", topic_key="units")
        with pytest.raises(CredentialsRequiredError, match="never prompts"):
            w.push()
        with pytest.raises(CredentialsRequiredError):
            Orchestrator(url, path=tmp_path / "orch.git")
        assert server.refused >= 3
        assert git(server.base / "central.git", "for-each-ref").strip() == ""


def test_an_orchestrator_of_a_url_needs_its_own_repository(tmp_path, git_daemon):
    make_bare(git_daemon.base)
    with pytest.raises(InvalidInputError, match="path="):
        Orchestrator(git_daemon.url("central.git"))
    with pytest.raises(InvalidInputError, match="path="):
        Orchestrator(tmp_path / "central.git", path=tmp_path / "own.git")


def test_cli_merges_workers_of_a_central_url(tmp_path, git_server, capsys):
    served = make_bare(git_server.base)
    url = git_server.url("central.git")
    own = tmp_path / "orchestrator.git"
    assert main(["merge", "--workers", "--central", url, "-r", str(own)]) == 0  # creates the shared root
    for agent, texts in (("a", ALWAYS), ("b", NEVER)):
        w = Worker(tmp_path / f"{agent}.git", url, agent)
        w.sync()
        w.add_lesson(texts["units"], topic_key="units")
        w.push()
    assert main(["merge", "--workers", "--central", url, "-r", str(own)]) == 3  # b waits for review
    assert "CONFLICT" in capsys.readouterr().out
    assert git(served, "show", f"memory:{lesson_path('units')}").count(ALWAYS["units"]) == 1
    assert main(["merge", "--status", "--json", "-r", str(own)]) == 0
    assert json.loads(capsys.readouterr().out)[0]["name"] == "b"
    assert main(["merge", "--central", url, "-r", str(own)]) == 2  # --central goes with --workers
