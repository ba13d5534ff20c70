"""The reasoning substrate on real repositories, read back with the real git binary."""

from __future__ import annotations

import json
import os

import pygit2
import pytest

from got_core import (
    ConcurrentUpdateError,
    CorruptRepositoryError,
    DeterministicClock,
    Identity,
    InvalidInputError,
    InvalidNameError,
    Node,
    PayloadTooLargeError,
    ReasoningRepo,
    RepositoryNotFoundError,
    UnknownRefError,
)
from gitcli import fsck_clean, git


@pytest.fixture
def repo(tmp_path):
    return ReasoningRepo.init(tmp_path / "r.git", identity=Identity("Test Agent", "agent@example.org"))


def node(thought, score=0.5, problem="p1", outcome="", depth=1, **kw):
    return Node(thought, scores={"s_comb": score, "s_local": score}, problem_id=problem,
                outcome=outcome, depth=depth, trace=[{"step": 1, "thought": thought}], **kw)


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


def test_replay_any_sha_tag_branch_or_node_id(repo, tmp_path):
    a = repo.commit_node(node("first", 0.2))
    b = repo.commit_node(node("second", 0.9, outcome="success"))
    for rev in (b.oid, b.oid[:10], "master", f"success_{b.node_id}", b.node_id):
        back = repo.read_node(rev)
        assert back.oid == b.oid and back.thought == "second"
        assert back.parents == (a.oid,)
        assert back.scores["s_comb"] == 0.9 and back.trace == [{"step": 1, "thought": "second"}]
        assert back.tags == [f"success_{b.node_id}"]
    out = repo.materialize(a.oid, tmp_path / "replay")
    assert (out / "thought.md").read_text() == "first"
    assert json.loads((out / "metadata.json").read_text())["node_id"] == a.node_id


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
    git(repo.gitdir, "-c", "user.name=x", "-c", "user.email=x@y", "notes", "--ref=got", "add", "-m",
        '{"s_comb": 0.3}', extra.oid)
    assert repo.note_json(extra.oid) == {"s_comb": 0.3}
    repo.set_note(extra.oid, {"s_comb": 0.4})
    assert json.loads(git(repo.gitdir, "notes", "--ref=got", "show", extra.oid)) == {"s_comb": 0.4}
    assert sum(1 for line in git(repo.gitdir, "notes", "--ref=got", "list").splitlines()
               if line.endswith(extra.oid)) == 1


def test_outcome_tags_best_and_branches(repo):
    root = repo.commit_node(node("root", 0.5, depth=0))
    kids = [repo.commit_node(node(f"child {i}", i / 4), ref=f"p1/c{i}", parents=[root.oid]) for i in range(4)]
    assert all(k.parents == (root.oid,) for k in kids)
    repo.tag_outcome(kids[3].oid, "success", kids[3].node_id)
    repo.tag_outcome(kids[0].oid, "failed", kids[0].node_id)
    repo.mark_best(kids[3].oid)
    tags = git(repo.gitdir, "tag", "--list").split()
    assert f"success_{kids[3].node_id}" in tags and f"failed_{kids[0].node_id}" in tags and "best" in tags
    assert repo.tags("success_") == {f"success_{kids[3].node_id}": kids[3].oid}
    assert {"master", "p1/c0", "p1/c1", "p1/c2", "p1/c3"} <= set(repo.branches())
    with pytest.raises(InvalidInputError):
        repo.tag(f"success_{kids[3].node_id}", kids[1].oid)  # tags do not move
    repo.mark_best(kids[2].oid)  # best does
    assert repo.resolve("best") == kids[2].oid
    with pytest.raises(InvalidInputError):
        repo.tag_outcome(kids[1].oid, "maybe")


def test_memory_branch_and_frontier(repo):
    base = repo.commit_node(node("session work", 0.5))
    repo.set_ref("memory", base.oid)
    lesson = repo.commit_files("memory", {"lessons/units.md": "Check units before dividing.\n"},
                               "lesson: units\n\nCheck units before dividing.\n")
    front = repo.frontier("master", "memory")
    assert [c.oid for c in front] == [lesson]
    assert git(repo.gitdir, "log", "--format=%H", "master..memory").split() == [lesson]


def test_commit_files_keyed_layout_and_blob_reuse(repo):
    c1 = repo.commit_files("memory", {"lessons/a.md": "A\n", "lessons/b.md": "B\n"}, "two lessons\n")
    c2 = repo.commit_files("memory", {"lessons/c.md": "C\n", "lessons/a.md": None}, "add c, drop a\n")
    assert sorted(repo.files(c2, "lessons")) == ["lessons/b.md", "lessons/c.md"]
    assert repo.list_files(c1)["lessons/b.md"] == repo.list_files(c2)["lessons/b.md"]
    assert repo.read_file("memory", "lessons/c.md") == b"C\n"
    with pytest.raises(UnknownRefError):
        repo.read_file("memory", "lessons/a.md")


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

    env = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "PATH": os.environ["PATH"],
           "GIT_AUTHOR_NAME": "o", "GIT_AUTHOR_EMAIL": "o@x", "GIT_COMMITTER_NAME": "o", "GIT_COMMITTER_EMAIL": "o@x"}
    subprocess.run(["git", *wd, "commit", "-qam", "outsider commit"], check=True, env=env)
    subprocess.run(["git", *wd, "push", "-q", "origin", "master"], check=True, env=env)
    assert len(repo.grep("outsider")) == 1
    # rewind the branch with git: the commit is no longer in master's history
    git(repo.gitdir, "update-ref", "refs/heads/master", a.oid)
    assert repo.grep("outsider", refs=["master"]) == []
    repo.reindex()
    assert [c.oid for c in repo.grep("indexed before")] == [a.oid]


def test_search_ranks_by_rho(repo):
    low = repo.commit_node(node("convert units before dividing distances", 0.2))
    high = repo.commit_node(node("convert units then divide distance by time", 0.9))
    repo.tag_outcome(high.oid, "success", high.node_id)
    repo.commit_node(node("unrelated musing about poetry", 1.0))
    hits = repo.search("convert units", k=5)
    assert [h.oid for h in hits] == [high.oid, low.oid]
    assert hits[0].tag == f"success_{high.node_id}"
    assert hits[0].rho == pytest.approx(0.7 * 0.9 + 0.2 * 1.0 + 0.1 * hits[0].recency)
    # weights are configurable: recency-only ranking puts the newest first
    flipped = repo.search("convert units", k=5, weights={"score": 0.0, "tag": 0.0, "recency": 1.0, "match": 0.0})
    assert flipped[0].recency >= flipped[-1].recency
    assert repo.search("convert", k=0) == []


def test_deterministic_clock_gives_bit_identical_repositories(tmp_path):
    shas = []
    for name in ("one.git", "two.git"):
        r = ReasoningRepo.init(tmp_path / name, clock=DeterministicClock(1_700_000_000))
        n1 = r.commit_node(node("a", 0.3))
        n2 = r.commit_node(node("b", 0.7, outcome="success"))
        shas.append((n1.oid, n2.oid, r.git.ref_target("refs/notes/got")))
    assert shas[0] == shas[1]


# ---------------------------------------------------------------- bad input
def test_unknown_refs_and_missing_repos(repo, tmp_path):
    for rev in ["nope", "0" * 40, "master~99", "", "a" * 2000, "x\x00y"]:
        with pytest.raises(UnknownRefError) as info:
            repo.resolve(rev)
        assert isinstance(info.value, KeyError)
    with pytest.raises(RepositoryNotFoundError):
        ReasoningRepo(tmp_path / "absent.git", create=False)


@pytest.mark.parametrize("ref", ["a..b", "-x", "x.lock", "has space", "a\x00b", "a\x7fb", "@", "x" * 5000])
def test_hostile_refs_are_rejected_and_nothing_is_lost(repo, ref):
    kept = repo.commit_node(node("keep me"))
    with pytest.raises(InvalidNameError):
        repo.commit_node(node("evil"), ref=ref)
    with pytest.raises(InvalidNameError):
        repo.commit_files(ref, {"f": "x"}, "m")
    assert repo.read_node("master").oid == kept.oid


@pytest.mark.parametrize("path", ["../escape", "a/../../b", "/abs", "a//b", ".git/config", "nul\x00"])
def test_hostile_paths_are_rejected(repo, path):
    with pytest.raises(InvalidNameError):
        repo.commit_files("memory", {path: "x"}, "m")
    assert repo.tip("memory") is None


def test_hostile_ids_are_encoded(repo):
    evil = "../../../etc/passwd\x00-rf"
    n = repo.commit_node(Node("hostile ids", problem_id=evil, node_id=evil, outcome="success",
                              scores={"s_comb": 0.5}))
    assert n.node_id == evil  # the id as given; git only ever sees it encoded
    (tag,) = n.tags
    assert "/" not in tag and "\x00" not in tag and repo.resolve(tag) == n.oid
    trailer = git(repo.gitdir, "log", "-1", "--format=%(trailers:key=Got-Node,valueonly)", n.oid).strip()
    assert "/" not in trailer and "\x00" not in trailer
    back = repo.read_node(n.oid)
    assert back.problem_id == evil and back.node_id == evil
    assert fsck_clean(repo.gitdir)[0]


def test_bad_payloads(repo):
    kept = repo.commit_node(node("safe"))
    small = ReasoningRepo(repo.gitdir, max_file_bytes=1024)
    with pytest.raises(PayloadTooLargeError):
        small.commit_node(node("x" * 5000))
    with pytest.raises(InvalidInputError):
        repo.commit_node(Node(b"\xff\xfe not utf8"))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        repo.commit_node(Node("ok", scores={"s": object()}))  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError):
        repo.commit_node(Node("lone \udcff surrogate"))
    assert repo.read_node("master").oid == kept.oid


def test_strict_compare_and_swap(repo):
    first = repo.commit_files("memory", {"a": "1"}, "one\n")
    repo.commit_files("memory", {"a": "2"}, "two\n")
    with pytest.raises(ConcurrentUpdateError):
        repo.commit_files("memory", {"a": "3"}, "three\n", expected=first)
    with pytest.raises(InvalidInputError):  # would orphan the tip
        repo.commit_files("memory", {"a": "4"}, "four\n", parents=[first])
    assert repo.read_file("memory", "a") == b"2"


def test_corrupt_object_gives_typed_error(repo):
    n = repo.commit_node(node("to be damaged"))
    blob = repo.list_files(n.oid)["thought.md"]
    path = repo.gitdir / "objects" / blob[:2] / blob[2:]
    os.chmod(path, 0o644)
    path.write_bytes(b"garbage, not zlib")
    with pytest.raises(CorruptRepositoryError):
        repo.read_node(n.oid)
    path.unlink()
    with pytest.raises(CorruptRepositoryError):
        repo.read_node(n.oid)


def test_unwritable_repository_gives_storage_error(tmp_path):
    from got_core import StorageError

    target = tmp_path / "file"
    target.write_text("not a dir")
    with pytest.raises(StorageError):
        ReasoningRepo.init(target)


def test_works_on_a_non_bare_repository(tmp_path):
    pygit2.init_repository(str(tmp_path / "wt"), bare=False)
    r = ReasoningRepo(tmp_path / "wt", create=False)
    n = r.commit_node(node("in a work tree repo"))
    assert git(tmp_path / "wt" / ".git", "log", "--format=%H", "-1") .strip() == n.oid


def test_set_notes_writes_many_notes_in_one_commit(repo):
    a = repo.commit_node(node("a"), note=False)
    b = repo.commit_node(node("b"), note=False)
    before = repo.git.ref_target("refs/notes/got")
    commit = repo.set_notes({a.oid: {"s_comb": 0.1}, b.oid: {"s_comb": 0.2}})
    assert git(repo.gitdir, "rev-list", "--count", "refs/notes/got").strip() == ("1" if before is None else "2")
    assert repo.git.ref_target("refs/notes/got") == commit
    assert json.loads(git(repo.gitdir, "notes", "--ref=got", "show", b.oid)) == {"s_comb": 0.2}
    with pytest.raises(InvalidInputError):
        repo.set_notes({})


def test_delete_ref_with_compare_and_swap(repo):
    first = repo.commit_files("scratch", {"a": "1"}, "one\n")
    second = repo.commit_files("scratch", {"a": "2"}, "two\n")
    with pytest.raises(ConcurrentUpdateError):
        repo.delete_ref("scratch", expected=first)
    assert repo.tip("scratch") == second
    assert repo.delete_ref("scratch", expected=second) is True
    assert repo.tip("scratch") is None and repo.delete_ref("scratch") is False


def test_fsync_mode_writes_readable_nodes(tmp_path):
    # libgit2's fsync switch is process-wide: exercise it in a child process
    import subprocess
    import sys

    code = ("import sys; from got_core import ReasoningRepo, Node;"
            "r = ReasoningRepo.init(sys.argv[1], fsync=True);"
            "n = r.commit_node(Node('durable', scores={'s_comb': 0.5})); print(n.oid)")
    oid = subprocess.run([sys.executable, "-c", code, str(tmp_path / "f.git")], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert ReasoningRepo(tmp_path / "f.git").read_node(oid).thought == "durable"
    assert fsck_clean(tmp_path / "f.git")[0]
