"""Real git agrees with what we wrote: objects, trailers, notes, diffs, search, ref names.

Each test writes with our code and reads back with the stock ``git`` binary (or the other
way round), so a change in our object layout that git would read differently fails here.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from gitcli import fsck_clean, git

from got_core import Identity, Node, ReasoningRepo
from got_core.names import decode_component, encode_component


@pytest.fixture
def repo(tmp_path):
    return ReasoningRepo.init(tmp_path / "r.git", identity=Identity("Test Agent", "agent@example.org"))


def node(thought, score=0.5, problem="p1", outcome="", depth=1, **kw):
    return Node(
        thought,
        scores={"s_comb": score, "s_local": score},
        problem_id=problem,
        outcome=outcome,
        depth=depth,
        trace=[{"step": 1, "thought": thought}],
        **kw,
    )


# ---------------------------------------------------------------- commits, notes, diffs, search


def test_node_is_one_commit_with_four_files_and_structured_message(repo):
    n = repo.commit_node(node("Use the quadratic formula.", 0.75, outcome="success"))
    files = repo.list_files(n.oid)
    assert sorted(files) == ["metadata.json", "scores.json", "thought.md", "trace.jsonl"]
    out = git(repo.gitdir, "cat-file", "-p", n.oid)
    assert "author Test Agent <agent@example.org>" in out
    assert "committer Test Agent <agent@example.org>" in out
    trailers = git(repo.gitdir, "log", "-1", "--format=%(trailers:only,unfold)", n.oid)
    assert f"Got-Node: {n.node_id}" in trailers
    assert "Got-Problem: p1" in trailers and "Got-Depth: 1" in trailers
    assert "Got-Outcome: success" in trailers and "Got-Score: 0.750000" in trailers
    assert fsck_clean(repo.gitdir)[0]


def test_scores_are_notes_that_git_notes_show_reads(repo):
    n = repo.commit_node(node("noted", 0.61))
    shown = git(repo.gitdir, "notes", "--ref=got", "show", n.oid)
    assert json.loads(shown)["s_comb"] == 0.61
    repo.set_note(n.oid, {"s_comb": 0.99, "rescored": True})  # re-scoring rewrites no history
    assert json.loads(git(repo.gitdir, "notes", "--ref=got", "show", n.oid))["s_comb"] == 0.99
    assert repo.read_node(n.oid).score == 0.99
    # fan-out layout: the note lives at ab/cdef…
    tree = git(repo.gitdir, "ls-tree", "-r", "--name-only", "refs/notes/got")
    assert f"{n.oid[:2]}/{n.oid[2:]}" in tree.split()


def test_notes_fan_out_at_scale_and_foreign_flat_notes(repo):
    oids = [repo.commit_node(node(f"n{i}", i / 300), note=False).oid for i in range(300)]
    for i, oid in enumerate(oids):
        repo.set_note(oid, {"s_comb": i / 300})
    listing = git(repo.gitdir, "notes", "--ref=got", "list")
    assert len(listing.split("\n")) - 1 == 300
    assert len(repo.notes()) == 300
    # a note written by stock git (flat path) is read, and replacing it leaves one note
    extra = repo.commit_node(node("flat", 0.1), note=False)
    git(
        repo.gitdir,
        "-c",
        "user.name=x",
        "-c",
        "user.email=x@y",
        "notes",
        "--ref=got",
        "add",
        "-m",
        '{"s_comb": 0.3}',
        extra.oid,
    )
    assert repo.note_json(extra.oid) == {"s_comb": 0.3}
    repo.set_note(extra.oid, {"s_comb": 0.4})
    assert json.loads(git(repo.gitdir, "notes", "--ref=got", "show", extra.oid)) == {"s_comb": 0.4}
    assert (
        sum(1 for line in git(repo.gitdir, "notes", "--ref=got", "list").splitlines() if line.endswith(extra.oid)) == 1
    )


def test_diff_between_success_and_failed_and_siblings(repo):
    root = repo.commit_node(node("root", depth=0))
    good = repo.commit_node(node("Line one\nDivide 120 by 1.5 to get 80.\n", 0.9), ref="a", parents=[root.oid])
    bad = repo.commit_node(node("Line one\nMultiply 120 by 1.5 to get 180.\n", 0.2), ref="b", parents=[root.oid])
    repo.tag_outcome(good.oid, "success", good.node_id)
    repo.tag_outcome(bad.oid, "failed", bad.node_id)
    d = repo.diff(f"success_{good.node_id}", f"failed_{bad.node_id}", "thought.md")
    assert "-Divide 120 by 1.5 to get 80." in d and "+Multiply 120 by 1.5 to get 180." in d
    assert " Line one" in d
    real = git(repo.gitdir, "diff", f"success_{good.node_id}", f"failed_{bad.node_id}", "--", "thought.md")
    assert [l for l in d.splitlines() if l[:1] in "+-"] == [l for l in real.splitlines() if l[:1] in "+-"]


def test_grep_and_pickaxe_agree_with_real_git(repo):
    texts = ["alpha beta", "gamma: the answer is 42", "beta again", "delta 42 42", "epsilon", "answer removed"]
    for t in texts:
        repo.commit_node(node(t))
    # a commit that removes "42" from a file still counts for -S
    repo.commit_files("master", {"thought.md": "no number here"}, "edit thought\n")
    for pattern in ["beta", "answer is", "42", "eps.lon", "^node"]:
        ours = {c.oid for c in repo.grep(pattern)}
        theirs = set(git(repo.gitdir, "log", "-P", f"--grep={pattern}", "--format=%H", "master").split())
        assert ours == theirs, pattern
    for needle in ["42", "beta", "answer", "no number"]:
        ours = {c.oid for c in repo.pickaxe(needle)}
        theirs = set(git(repo.gitdir, "log", f"-S{needle}", "--format=%H", "master").split())
        assert ours == theirs, needle
    assert {c.oid for c in repo.grep("ALPHA", ignore_case=True)} == {c.oid for c in repo.grep("alpha")}


def test_index_follows_writes_made_by_stock_git_and_rewinds(repo, tmp_path):
    a = repo.commit_node(node("indexed before"))
    assert len(repo.grep("outsider")) == 0
    # another tool (the git CLI) adds a commit: the index must notice
    work = tmp_path / "work"
    git(tmp_path / "nothing", "clone", "-q", str(repo.gitdir), str(work), check=True)
    (work / "thought.md").write_text("an outsider thought")
    wd = ["-C", str(work)]
    import subprocess

    env = {
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "PATH": os.environ["PATH"],
        "GIT_AUTHOR_NAME": "o",
        "GIT_AUTHOR_EMAIL": "o@x",
        "GIT_COMMITTER_NAME": "o",
        "GIT_COMMITTER_EMAIL": "o@x",
    }
    subprocess.run(["git", *wd, "commit", "-qam", "outsider commit"], check=True, env=env)
    subprocess.run(["git", *wd, "push", "-q", "origin", "master"], check=True, env=env)
    assert len(repo.grep("outsider")) == 1
    # rewind the branch with git: the commit is no longer in master's history
    git(repo.gitdir, "update-ref", "refs/heads/master", a.oid)
    assert repo.grep("outsider", refs=["master"]) == []
    repo.reindex()
    assert [c.oid for c in repo.grep("indexed before")] == [a.oid]


# ---------------------------------------------------------------- ref names
HOSTILE = [
    "..",
    "../../etc/passwd",
    "a/b",
    "-rf",
    ".hidden",
    "x.lock",
    "nul\x00byte",
    "ctl\x01\x1f",
    "space here",
    "tilde~1",
    "caret^",
    "colon:",
    "q?",
    "star*",
    "[br",
    "back\\slash",
    "@{u}",
    "@",
    "trailing.",
    "ünïcødé",
    "emoji🙂",
    "a" * 60,
]


@pytest.mark.parametrize("name", HOSTILE)
def test_encoded_component_is_a_valid_single_ref_component(name):
    enc = encode_component(name)
    assert "/" not in enc and "\x00" not in enc and not enc.startswith((".", "-"))
    assert decode_component(enc) == name
    # the real git accepts it as a ref component
    assert subprocess.run(["git", "check-ref-format", f"refs/heads/x/{enc}"]).returncode == 0, enc
