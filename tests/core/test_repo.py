"""The reasoning substrate on real repositories, read back with the real git binary."""

from __future__ import annotations

import json
import os

import pygit2
import pytest
from gitcli import fsck_clean, git, unpack_all

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
    lesson = repo.commit_files(
        "memory",
        {"lessons/units.md": "Check units before dividing.\n"},
        "lesson: units\n\nCheck units before dividing.\n",
    )
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
    n = repo.commit_node(Node("hostile ids", problem_id=evil, node_id=evil, outcome="success", scores={"s_comb": 0.5}))
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
    unpack_all(repo.gitdir)  # the write landed in a pack: damage a loose copy of it
    repo = ReasoningRepo.open(repo.gitdir)  # a handle that never had the pack open
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
    assert git(tmp_path / "wt" / ".git", "log", "--format=%H", "-1").strip() == n.oid


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

    code = (
        "import sys; from got_core import ReasoningRepo, Node;"
        "r = ReasoningRepo.init(sys.argv[1], fsync=True);"
        "n = r.commit_node(Node('durable', scores={'s_comb': 0.5})); print(n.oid)"
    )
    oid = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "f.git")], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert ReasoningRepo(tmp_path / "f.git").read_node(oid).thought == "durable"
    assert fsck_clean(tmp_path / "f.git")[0]
