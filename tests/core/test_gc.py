"""``repo.maintenance()`` / ``got gc``: before and after are measured the same way, and packing shrinks."""

from __future__ import annotations

import os

from gitcli import fsck_clean, git

from got_core import Node, ReasoningRepo
from got_core.cli import main
from got_core.cli.demo import record_demo_tree
from got_core.repo.sharing import footprint


def _du(gitdir):
    """Bytes allocated under objects/ and refs/ plus packed-refs, walked independently of footprint()."""
    total = 0
    for name in ("objects", "refs"):
        for folder, _dirs, files in os.walk(gitdir / name):
            for entry in [folder, *(os.path.join(folder, f) for f in files)]:
                total += os.lstat(entry).st_blocks * 512
    packed = gitdir / "packed-refs"
    return total + (os.lstat(packed).st_blocks * 512 if packed.exists() else 0)


def test_gc_reports_the_same_measure_before_and_after_and_packing_shrinks(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    record_demo_tree(repo)  # ~40 small objects in one small pack per write, a dozen loose refs: the demo's size
    before = footprint(repo.gitdir)
    assert before["bytes"] == _du(repo.gitdir) and before["loose_objects"] == 0 and before["packs"] > 3
    stats = repo.maintenance()
    after = footprint(repo.gitdir)
    assert stats["bytes_before"] == before["bytes"] and stats["bytes_after"] == after["bytes"] == _du(repo.gitdir)
    # tiny files (small packs, loose refs) each hold a whole block; one pack holds them all: no growth
    assert stats["bytes_after"] < stats["bytes_before"]
    assert (stats["loose_objects_after"], stats["packs_after"], stats["loose_refs_after"]) == (0, 1, 0)
    assert stats["loose_objects_before"] == before["loose_objects"] and stats["loose_refs_before"] > 0
    assert fsck_clean(repo.gitdir)[0]
    assert git(repo.gitdir, "rev-parse", "best").strip() == repo.resolve("best")

    again = repo.maintenance()  # nothing left to pack: the same size, not a new pack on top
    assert again["bytes_after"] <= again["bytes_before"] == stats["bytes_after"]
    assert again["packs_after"] == 1


def test_gc_of_a_repository_that_grew_after_packing(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    record_demo_tree(repo)
    repo.maintenance()
    for i in range(20):
        repo.commit_node(Node(f"more thought {i}", problem_id="p", depth=1), ref="more")
    stats = repo.maintenance()
    # each write left one small pack (small packs merged as they pile up): gc folds them into one
    assert stats["packs_before"] > 2 and stats["loose_objects_after"] == 0
    assert stats["bytes_after"] < stats["bytes_before"] and stats["packs_after"] == 1


def test_got_gc_prints_the_shrinking_size(tmp_path, capsys):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    record_demo_tree(repo)
    before = footprint(repo.gitdir)["bytes"]
    assert main(["gc", "-r", str(repo.gitdir)]) in (0, None)
    after = footprint(repo.gitdir)["bytes"]
    printed = capsys.readouterr().out
    assert f"{before:,}" in printed and f"{after:,}" in printed and after < before


def test_gc_removes_the_empty_ref_directories_packing_left_and_refs_still_resolve(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    base = repo.commit_files("memory", {"a.txt": "a\n"}, "base\n")
    names = [f"refs/got/threads/t{i}/ns/head" for i in range(30)]
    for name in names:
        repo.set_ref(name, base)
    repo.git.compress_refs()  # packed: the directories stay, empty
    threads = repo.gitdir / "refs" / "got" / "threads"
    assert not any(files for _d, _s, files in os.walk(threads)) and len(list(threads.iterdir())) == 30
    old = 1_000_000_000  # as if packed long ago
    for folder, _dirs, _files in os.walk(repo.gitdir / "refs"):
        os.utime(folder, (old, old))
    recent = threads / "t0" / "ns"
    os.utime(recent, None)  # a writer may be about to create a ref here: kept
    repo.maintenance()
    assert sorted(p.relative_to(repo.gitdir / "refs").as_posix() for p in (repo.gitdir / "refs").rglob("*")) == [
        "got",
        "got/threads",
        "got/threads/t0",
        "got/threads/t0/ns",
        "heads",
        "tags",
    ]
    listed = git(repo.gitdir, "for-each-ref", "--format=%(refname)", "refs/got/threads").split()
    assert sorted(listed) == sorted(names)
    repo.set_ref("refs/got/threads/t7/ns/head", repo.commit_files("memory", {"b.txt": "b\n"}, "more\n"))
    assert git(repo.gitdir, "rev-parse", "refs/got/threads/t7/ns/head").strip() == repo.tip("memory")
    assert fsck_clean(repo.gitdir)[0]
