"""A node write is one ref transaction; ref creation checks paths without walking packed-refs.

Issue 13 (substrate write). What is checked here, on real repositories and the real ``git``:

* ``commit_node`` moves the branch, the notes ref and the outcome tag in ONE libgit2 ref
  transaction (every ref moved from the tip the builder read), and keeps the old answers:
  a tag that already points elsewhere is refused after the node and its note are stored;
  with explicit parents a branch that moved meanwhile is the caller's to decide, while a
  notes ref another scorer moved is simply retried;
* ``update_refs`` builders may read a ref they only learn about from another ref's tip
  and answer for it; answering for a ref never read is refused;
* creating a ref whose path collides with a packed or loose ref (``refs/tags/a`` beside
  ``refs/tags/a/b``) is a clear :class:`StorageError`, and the repository is unchanged;
  the ``packed-refs`` prefix search agrees with a plain scan on any sorted or unsorted file;
* writers in other processes racing a packer lose no acknowledged node, tag or note, and
  ``git for-each-ref`` / ``git fsck`` agree with what they acknowledged.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap

import pytest
from gitcli import fsck_clean, git

from got_core import Node, ReasoningRepo
from got_core.errors import ConcurrentUpdateError, InvalidInputError, StorageError
from got_core.repo import nodes as nodes_module
from got_core.storage.git import GitRepo
from got_core.storage.refscan import packed_has_prefix

TIMEOUT = float(os.environ.get("GOT_TEST_TIMEOUT", "600"))


def node(thought: str, outcome: str = "success", node_id: str = "") -> Node:
    return Node(thought, scores={"s_comb": 0.5}, problem_id="p", outcome=outcome, node_id=node_id)


def spy_transactions(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, tuple[str | None, str | None]]]:
    """Record every ref transaction (``{ref: (expected, new)}``) the repository commits."""
    seen: list[dict[str, tuple[str | None, str | None]]] = []
    real = GitRepo.cas_refs

    def recording(self: GitRepo, updates):  # type: ignore[no-untyped-def]
        seen.append(dict(updates))
        return real(self, updates)

    monkeypatch.setattr(GitRepo, "cas_refs", recording)
    return seen


def test_a_node_write_moves_branch_note_and_tag_in_one_ref_transaction(tmp_path, monkeypatch):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    first = repo.commit_node(node("alpha first"))
    notes_before = repo.git.ref_target("refs/notes/got")
    seen = spy_transactions(monkeypatch)
    second = repo.commit_node(node("alpha second"))
    assert len(seen) == 1, seen
    (updates,) = seen
    tag = f"refs/tags/success_{second.node_id}"
    assert updates == {
        "refs/heads/master": (first.oid, second.oid),
        "refs/notes/got": (notes_before, repo.git.ref_target("refs/notes/got")),
        tag: (None, second.oid),
    }
    assert git(repo.gitdir, "rev-parse", tag).strip() == second.oid
    assert json.loads(git(repo.gitdir, "notes", "--ref=got", "show", second.oid)) == {"s_comb": 0.5}
    assert [c.oid for c in repo.grep("second")] == [second.oid]
    assert fsck_clean(repo.gitdir)[0]


def test_a_tag_that_points_elsewhere_is_refused_after_the_node_and_note_are_stored(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    kept = repo.commit_node(node("alpha one", node_id="same"))
    with pytest.raises(InvalidInputError, match="tags do not move"):
        repo.commit_node(node("alpha two", node_id="same"))
    tip = repo.tip("master")
    assert tip != kept.oid and repo.git.read_commit(tip).parents == (kept.oid,)
    assert repo.get_note(tip) is not None
    assert git(repo.gitdir, "rev-parse", "refs/tags/success_same").strip() == kept.oid


def test_explicit_parents_retry_a_moved_notes_ref_but_refuse_a_moved_branch(tmp_path, monkeypatch):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    base = repo.commit_node(node("alpha base"))
    other = ReasoningRepo(repo.gitdir)  # another writer on the same repository
    real = nodes_module.notes_commit
    calls: list[int] = []

    def scorer_wins_once(r, tip, payload):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 1:  # another scorer's note lands while this write is being built
            other.set_note(base.oid, {"s_comb": 0.9})
        return real(r, tip, payload)

    monkeypatch.setattr(nodes_module, "notes_commit", scorer_wins_once)
    child = repo.commit_node(node("alpha child"), parents=[base.oid])
    assert len(calls) == 2  # built again on the new notes tip, not refused
    assert repo.note_json(base.oid) == {"s_comb": 0.9} and repo.note_json(child.oid) == {"s_comb": 0.5}

    calls.clear()
    after_other: list[str | None] = []

    def branch_moves_once(r, tip, payload):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 1:  # another writer's node lands on the branch meanwhile
            other.commit_node(node("alpha elsewhere"))
            after_other.append(repo.git.ref_target("refs/notes/got"))
        return real(r, tip, payload)

    monkeypatch.setattr(nodes_module, "notes_commit", branch_moves_once)
    with pytest.raises(ConcurrentUpdateError, match="re-read its tip"):
        repo.commit_node(node("alpha late"), parents=[child.oid])
    assert "alpha late" not in git(repo.gitdir, "log", "--format=%B", "master")
    assert repo.git.ref_target("refs/notes/got") == after_other[0]  # nothing of the refused write moved
    other.close()
    assert fsck_clean(repo.gitdir)[0]


def test_update_refs_builders_may_answer_for_a_ref_they_read_on_the_way(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    a = repo.commit_files("master", {"a.txt": "a"}, "a")

    def build(tips):  # type: ignore[no-untyped-def]
        label = "refs/tags/at-" + (tips["refs/heads/master"] or "none")[:8]
        assert tips[label] is None
        return {"refs/heads/side": a, label: a}

    repo.update_refs(["refs/heads/master", "refs/heads/side"], build)
    assert git(repo.gitdir, "rev-parse", f"refs/tags/at-{a[:8]}", "side").split() == [a, a]
    with pytest.raises(InvalidInputError, match="refs it read"):
        repo.update_refs(["refs/heads/master"], lambda tips: {"refs/tags/unread": a})
    assert repo.git.ref_target("refs/tags/unread") is None


@pytest.mark.parametrize("packed", [True, False])
def test_creating_a_ref_inside_or_above_another_refs_path_is_refused(tmp_path, packed):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    a = repo.commit_files("master", {"a.txt": "a"}, "a")
    repo.tag("deep/er", a)
    repo.tag("flat", a)
    if packed:
        git(repo.gitdir, "pack-refs", "--all")
    before = git(repo.gitdir, "for-each-ref")
    with pytest.raises(StorageError, match="refs/tags/deep"):
        repo.tag("deep", a)  # would sit where refs/tags/deep/ holds refs
    with pytest.raises(StorageError, match="refs/tags/flat"):
        repo.tag("flat/inner", a)  # would need refs/tags/flat to be a directory
    assert git(repo.gitdir, "for-each-ref") == before
    repo.tag("deeper", a)  # a name that only shares a prefix is fine
    assert fsck_clean(repo.gitdir)[0]


FLIPPER = textwrap.dedent(
    """
    import os, sys, time
    lock, stop = sys.argv[1], sys.argv[2]
    while not os.path.exists(stop):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:  # the writer holds it
            time.sleep(0.0001)
            continue
        end = time.perf_counter() + 0.00002  # held for moments, as pack-refs holds each ref it prunes
        while time.perf_counter() < end:
            pass
        os.close(fd)
        os.unlink(lock)  # only a lock this process created
        # then away for a while, asleep: a flipper that spins between its locks holds them most
        # of the time on a loaded machine (descheduled while holding), which no lock timeout
        # should be expected to outlast (git's own waits 100 ms)
        time.sleep(0.0003)
    """
)


def write_while_a_process_flips_the_notes_lock(tmp_path):
    """300 node writes while another process takes and drops the notes ref's lock for moments."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    repo.commit_node(node("alpha root"))
    lock, stop = repo.gitdir / "refs" / "notes" / "got.lock", tmp_path / "stop"
    assert (repo.gitdir / "refs" / "notes" / "got").is_file()
    flipper = subprocess.Popen([sys.executable, "-c", FLIPPER, str(lock), str(stop)])
    try:
        written = [repo.commit_node(node(f"alpha step {i}")) for i in range(300)]
    finally:
        stop.touch()
        flipper.wait(timeout=TIMEOUT)
    return repo, lock, written


def test_a_ref_lock_held_for_moments_by_another_process_is_waited_for(tmp_path):
    """`git pack-refs` locks each loose ref it prunes for a moment, and a writer that lost
    its race drops its lock: a lock that is gone when we look is tried again, never a StorageError."""
    repo, lock, written = write_while_a_process_flips_the_notes_lock(tmp_path)
    assert not lock.exists()
    noted = {line.split()[1] for line in git(repo.gitdir, "notes", "--ref=got", "list").splitlines()}
    assert {n.oid for n in written} <= noted
    assert fsck_clean(repo.gitdir)[0]


def test_a_writer_stalled_past_the_lock_deadline_still_tries_the_lock_again(tmp_path, monkeypatch):
    """A busy machine can deschedule the writer for longer than the lock's retry deadline between
    two tries (the CI failure of the test above under load): the deadline only counts after a
    number of tries. A clock that jumps 10 s at every look stands in for the stalled thread."""
    import time
    import types

    from got_core.storage.git import _refs

    ticks = iter(range(0, 10**9, 10))
    clock = types.SimpleNamespace(
        monotonic=lambda: float(next(ticks)), sleep=time.sleep, time=time.time, time_ns=time.time_ns
    )
    monkeypatch.setattr(_refs, "time", clock)  # this module's clock only, not the CAS loop's
    repo, _lock, written = write_while_a_process_flips_the_notes_lock(tmp_path)
    noted = {line.split()[1] for line in git(repo.gitdir, "notes", "--ref=got", "list").splitlines()}
    assert {n.oid for n in written} <= noted
    assert fsck_clean(repo.gitdir)[0]


def test_packed_refs_prefix_search_agrees_with_a_scan(tmp_path):
    rng = random.Random(13)
    parts = ["a", "b", "ab", "a-b", "tags", "x_1", "z"]
    for trial in range(200):
        names = sorted(
            {"refs/" + "/".join(rng.choice(parts) for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(0, 40))}
        )
        lines = ["# pack-refs with: peeled fully-peeled sorted "] if trial % 5 else []
        for name in names if trial % 5 else rng.sample(names, len(names)):
            lines.append("1" * 40 + " " + name)
            if rng.random() < 0.3:
                lines.append("^" + "2" * 40)
        where = tmp_path / f"t{trial}"
        where.mkdir()
        (where / "packed-refs").write_text("\n".join(lines) + ("\n" if trial % 3 else ""))
        for query in ("refs/", "refs/a/", "refs/ab/", "refs/a/b/", "refs/z/", "refs/zz/", "refs/tags/", "refs/a-"):
            assert packed_has_prefix(where, query) == any(n.startswith(query) for n in names), (trial, query)
    assert not packed_has_prefix(tmp_path / "nowhere", "refs/")


WRITER = textwrap.dedent(
    """
    import json, sys
    from got_core import Node, ReasoningRepo
    repo = ReasoningRepo(sys.argv[1])
    done = []
    for i in range(int(sys.argv[3])):
        n = repo.commit_node(Node(f"{sys.argv[2]} step {i}", scores={"s_comb": 0.5}, problem_id="p",
                                  outcome="success"))
        done.append([n.oid, n.tags[0]])
    print(json.dumps(done))
    """
)
PACKER = textwrap.dedent(
    """
    import os, sys, time
    from got_core.storage.git import GitRepo
    git = GitRepo(sys.argv[1], create=False)
    stop = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < stop and not os.path.exists(sys.argv[3]):
        git.compress_refs()
    """
)


def test_writers_racing_a_packer_lose_nothing_they_acknowledged(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    repo.commit_node(node("alpha root"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done_flag = tmp_path / "writers-done"
    packer = subprocess.Popen([sys.executable, "-c", PACKER, str(repo.gitdir), str(TIMEOUT), str(done_flag)], env=env)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(repo.gitdir), f"writer{w}", "60"], env=env, stdout=subprocess.PIPE
        )
        for w in range(2)
    ]
    acknowledged = []
    try:
        for proc in writers:
            out, _ = proc.communicate(timeout=TIMEOUT)
            assert proc.returncode == 0
            acknowledged += [tuple(pair) for pair in json.loads(out)]
    finally:
        done_flag.touch()
        packer.wait(timeout=TIMEOUT)
    assert len(acknowledged) == 120
    on_master = set(git(repo.gitdir, "rev-list", "master").split())
    refs = dict(
        line.split(" ", 1)[::-1]
        for line in git(repo.gitdir, "for-each-ref", "--format=%(objectname) %(refname)").splitlines()
    )
    noted = {line.split()[1] for line in git(repo.gitdir, "notes", "--ref=got", "list").splitlines()}
    for oid, tag in acknowledged:
        assert oid in on_master and oid in noted
        assert refs[f"refs/tags/{tag}"] == oid
    assert len([r for r in refs if r.startswith("refs/tags/")]) == 121
    assert len(repo.tagged("success_")) == 121
    assert fsck_clean(repo.gitdir)[0]
