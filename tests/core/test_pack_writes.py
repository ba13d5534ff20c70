"""Staged writes: the objects of one ref move land in ONE pack, with the ids libgit2's loose
writes give them, before any ref moves (got_core/storage/git/_staging.py, ARCHITECTURE §6)."""

from __future__ import annotations

import os
from pathlib import Path

import pygit2
import pytest
from gitcli import fsck_clean, git

from got_core import Node, ReasoningRepo
from got_core.errors import ConcurrentUpdateError, CorruptRepositoryError
from got_core.repo.notes import set_note
from got_core.storage.git import BlobId, GitRepo
from got_core.storage.refs import Keep, Publish, update_ref, update_refs
from got_core.types import Identity


def loose_count(gitdir: Path) -> int:
    objects = Path(gitdir) / "objects"
    return sum(len(os.listdir(d)) for d in objects.iterdir() if len(d.name) == 2 and d.is_dir())


def pack_count(gitdir: Path) -> int:
    return len(list((Path(gitdir) / "objects" / "pack").glob("pack-*.idx")))


class StepClock:
    """The same timestamps in two repositories, so their commits are byte for byte comparable."""

    def __init__(self) -> None:
        self.t = 1_700_000_000

    def now(self) -> tuple[int, int]:
        self.t += 1
        return self.t, 120


def test_a_node_write_is_one_pack_and_no_loose_object(tmp_path: Path) -> None:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for i in range(5):
        repo.commit_node(Node(f"thought {i}", scores={"s": i / 10}, outcome="success" if i == 3 else "pending"))
        # commit, tree, four blobs, the note's two trees and commit: one pack per write
        assert (loose_count(repo.gitdir), pack_count(repo.gitdir)) == (0, i + 1)
    assert fsck_clean(repo.gitdir)[0]
    log = git(repo.gitdir, "log", "--format=%s", "master")
    assert log.splitlines()[0].endswith("thought 4") and len(log.splitlines()) == 5
    assert "0.3" in git(repo.gitdir, "notes", "--ref=got", "show", repo.resolve("master~1"))
    assert len(git(repo.gitdir, "tag", "-l", "success_*").split()) == 1


def _same_writes(repo: ReasoningRepo, staged: bool) -> dict[str, str]:
    """The same blobs, trees (with a base, deletions, nesting), commits, a signed commit and a note."""
    g = repo.git
    ids: dict[str, str] = {}

    def writes() -> str:
        blob = g.write_blob(b"hello\n")
        t1 = g.build_tree(None, {"a.txt": b"a\n", "d/e/f.json": b"{}", "d/g": BlobId(blob), "x": b""})
        t2 = g.build_tree(t1, {"d/e/f.json": None, "d/h": b"h", "new/deep/file": b"n", "a.txt": BlobId(blob)})
        empty = g.build_tree(t1, {"a.txt": None, "d": None, "x": None})
        who = Identity("Ann Ü", "ann@example.org")
        c1 = g.write_commit(t1, [], "first\n\nbody ü\n", who, who, (1_700_000_000, -330))
        c2 = g.write_commit(t2, [c1], "second", who, Identity(" Bob ", "bob@example.org "), (1_700_000_001, 60))

        def sign(payload: str) -> str:
            assert payload.startswith(f"tree {t2}\nparent {c2}\n")
            return "-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\nAAAA\n-----END SSH SIGNATURE-----\n"

        c3 = g.write_commit(t2, [c2, c1], "signed\n", who, who, (1_700_000_002, 0), sign)
        ids.update(blob=blob, t1=t1, t2=t2, empty=empty, c1=c1, c2=c2, c3=c3)
        return c3

    if staged:
        update_ref(g, "refs/heads/main", lambda _tip: Publish(writes()))
    else:
        g.cas_ref("refs/heads/main", writes(), None)  # outside a ref move: loose, through libgit2
    ids["note"] = set_note(repo, ids["c2"], {"score": 0.5})
    return ids


def test_staged_ids_are_libgit2_s_loose_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    packed = ReasoningRepo.init(tmp_path / "packed.git", clock=StepClock())
    staged = _same_writes(packed, staged=True)
    monkeypatch.setenv("GOT_PACK_WRITES", "0")
    loose = ReasoningRepo.init(tmp_path / "loose.git", clock=StepClock())
    assert _same_writes(loose, staged=False) == staged
    assert loose_count(loose.gitdir) > 10 and pack_count(loose.gitdir) == 0
    assert loose_count(packed.gitdir) == 0 and pack_count(packed.gitdir) == 2  # the move, then the note
    for repo in (packed, loose):
        assert fsck_clean(repo.gitdir)[0]
        assert "gpgsig -----BEGIN SSH SIGNATURE-----" in git(repo.gitdir, "cat-file", "commit", staged["c3"])
        assert git(repo.gitdir, "cat-file", "-t", staged["empty"]).strip() == "tree"


def test_a_zero_padded_mode_is_rewritten_as_libgit2_rewrites_it(tmp_path: Path) -> None:
    raw = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    blob = raw.create_blob(b"x")
    sub = raw.odb.write(pygit2.GIT_OBJECT_TREE, b"100644 f\0" + blob.raw)
    # an old tool's spelling of a directory entry, "040000"
    base = str(raw.odb.write(pygit2.GIT_OBJECT_TREE, b"040000 d\0" + sub.raw + b"100644 z\0" + blob.raw))
    g = GitRepo(tmp_path / "r.git")
    expected = g.build_tree(base, {"new": b"n"})  # libgit2's tree builder, loose

    def build(_tip: str | None) -> Publish:
        commit = g.write_commit(g.build_tree(base, {"new": b"n"}), [], "t", Identity(), Identity(), (1, 0))
        return Publish(commit, commit)

    got = update_ref(g, "refs/heads/t", build)  # staged, built in Python
    assert g.commit_tree(got) == expected


def test_reads_inside_the_builder_see_staged_objects(tmp_path: Path) -> None:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    g = repo.git
    before = pack_count(repo.gitdir)
    seen: dict[str, object] = {}

    def build(tip: str | None) -> Publish:
        first = repo.prepare_commit([], {"a/b.txt": "one", "c": "see"}, "first")
        tree = g.commit_tree(first)
        assert g.is_tree(tree) and g.has_object(first) and repo.resolve(first) == first
        assert g.read_blob(g.tree_entry(tree, "a/b.txt") or "") == b"one"
        assert g.tree_entries(tree, ["c", "a", "a/b.txt", "zz"])["a"] is None
        second = repo.prepare_commit([first], {"a/b.txt": "two"}, "second")  # base tree built in this builder
        assert g.peel_to_commit(second) == second
        assert g.changed_tree_paths(tree, g.commit_tree(second)) == [
            ("a/b.txt", g.tree_entry(tree, "a/b.txt"), g.tree_entry(g.commit_tree(second), "a/b.txt"))
        ]
        assert (loose_count(repo.gitdir), pack_count(repo.gitdir)) == (0, before)  # all still in memory
        seen["data"] = g.read_commit(second)  # a read libgit2 answers itself: written first
        return Publish(second, second)

    oid = repo.update_ref("refs/heads/t", build)
    assert seen["data"].parents and repo.read_file(oid, "c") == b"see"
    assert fsck_clean(repo.gitdir)[0]
    assert git(repo.gitdir, "show", "t:a/b.txt") == "two"


def test_a_lost_race_writes_nothing_and_the_retry_reuses_the_objects(tmp_path: Path) -> None:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    repo.commit_files("refs/heads/t", {"f": "0"}, "base")
    other = GitRepo(repo.gitdir)  # another writer, in this process
    packs = pack_count(repo.gitdir)
    calls: list[str | None] = []
    cache: dict[str, str] = {}

    def theirs(tip: str | None) -> Publish:
        tree = other.build_tree(other.commit_tree(tip or ""), {"g": b"1"})
        return Publish(other.write_commit(tree, [tip or ""], "theirs", Identity(), Identity(), (1, 0)))

    def build(tip: str | None) -> Publish:
        calls.append(tip)
        if "b" not in cache:
            cache["b"] = repo.git.write_blob(b"built once")  # kept across attempts
        if len(calls) == 1:
            update_ref(other, "refs/heads/t", theirs)  # the other writer wins the race
            assert pack_count(repo.gitdir) == packs + 1
        else:
            assert pack_count(repo.gitdir) == packs + 1  # our lost attempt wrote nothing
        blob = cache["b"]
        oid = repo.write_commit(
            repo.git.build_tree(repo.git.commit_tree(tip or ""), {"b": BlobId(blob)}), [tip or ""], "mine"
        )
        return Publish(oid, oid)

    oid = repo.update_ref("refs/heads/t", build)
    assert len(calls) == 2 and pack_count(repo.gitdir) == packs + 2 and loose_count(repo.gitdir) == 0
    assert git(repo.gitdir, "show", f"{oid}:b") == "built once"
    assert fsck_clean(repo.gitdir)[0]


def test_a_builder_that_raises_writes_nothing_and_keep_keeps_its_objects(tmp_path: Path) -> None:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    repo.commit_files("refs/heads/t", {"f": "0"}, "base")
    packs = pack_count(repo.gitdir)

    def refuse(tip: str | None) -> Publish:
        repo.prepare_commit([tip or ""], {"f": "never"}, "never")
        raise ConcurrentUpdateError("not this one")

    with pytest.raises(ConcurrentUpdateError):
        repo.update_ref("refs/heads/t", refuse)
    assert (pack_count(repo.gitdir), loose_count(repo.gitdir)) == (packs, 0)

    kept = repo.update_ref("refs/heads/t", lambda tip: Keep(repo.prepare_commit([tip or ""], {"f": "k"}, "k")))
    repo.set_ref("refs/heads/later", kept)  # a commit handed on from a Keep is on disk
    assert git(repo.gitdir, "show", "later:f") == "k" and fsck_clean(repo.gitdir)[0]


def test_many_refs_in_one_transaction_share_one_pack(tmp_path: Path) -> None:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    names = [f"refs/heads/b{i}" for i in range(5)]

    def build(tips: dict[str, str | None]) -> dict[str, str | None]:
        return {n: repo.prepare_commit([], {"who": n}, n) for n in names}

    update_refs(repo.git, tuple(names), build)
    assert (pack_count(repo.gitdir), loose_count(repo.gitdir)) == (1, 0)
    assert [git(repo.gitdir, "show", f"b{i}:who") for i in range(5)] == names


def test_pack_count_stays_bounded_over_thousands_of_writes(tmp_path: Path) -> None:
    from got_core.storage.git._packing import MAX_PACKS
    from got_core.storage.midx import midx_packs

    repo = ReasoningRepo.init(tmp_path / "r.git")
    most = settled = 0
    for i in range(2000):
        repo.commit_files("refs/heads/t", {f"d{i % 7}/f{i % 50}": f"v{i}"}, f"write {i}")
        # the packs libgit2 searches one by one: those the multi-pack-index does not cover
        covered = set(midx_packs(repo.gitdir))
        settled = max(settled, len(covered))
        most = max(most, pack_count(repo.gitdir) - len(covered))
    assert most <= MAX_PACKS + 1 and settled <= 8 and loose_count(repo.gitdir) == 0
    assert git(repo.gitdir, "rev-list", "--count", "t").strip() == "2000"
    assert git(repo.gitdir, "show", "t:d4/f49") == "v1999" and git(repo.gitdir, "show", "t:d5/f49") == "v1699"
    assert fsck_clean(repo.gitdir)[0]
    assert not list((repo.gitdir / "objects" / "pack").glob("tmp_*"))


def test_a_declared_object_format_stays_loose(tmp_path: Path) -> None:
    # libgit2 here cannot open a SHA-256 repository at all; one that declares its format
    # (extensions.objectFormat) is not packed by our SHA-1 writer
    gitdir = tmp_path / "r.git"
    git(tmp_path, "init", "-q", "--bare", str(gitdir))
    git(gitdir, "config", "core.repositoryformatversion", "1")
    git(gitdir, "config", "extensions.objectFormat", "sha1")
    repo = ReasoningRepo.open(gitdir)
    repo.commit_node(Node("loose thought", scores={"s": 1}))
    assert pack_count(gitdir) == 0 and loose_count(gitdir) >= 9
    assert fsck_clean(gitdir)[0]


def test_a_missing_base_tree_is_a_typed_error_inside_a_move(tmp_path: Path) -> None:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    with pytest.raises(CorruptRepositoryError):
        repo.update_ref("refs/heads/t", lambda _tip: Publish(repo.git.build_tree("1" * 40, {"a": b"x"})))
    assert repo.tip("refs/heads/t") is None and pack_count(repo.gitdir) == 0


def test_a_git_subprocess_inside_a_builder_sees_the_staged_objects(tmp_path: Path) -> None:
    from got_core.storage.gitcli import run_git

    repo = ReasoningRepo.init(tmp_path / "r.git")

    def build(_tip: str | None) -> Publish:
        oid = repo.prepare_commit([], {"f": "seen by git"}, "staged")
        shown = run_git(["show", f"{oid}:f"], git_dir=repo.gitdir).stdout  # the git binary reads the disk
        return Publish(oid, shown)

    assert repo.update_ref("refs/heads/t", build) == b"seen by git"
    assert fsck_clean(repo.gitdir)[0]


_FSYNC_PROBE = """
import os, sys
synced = []
real = os.fsync
def counting(fd):
    synced.append(os.readlink(f"/proc/self/fd/{fd}"))
    return real(fd)
os.fsync = counting
from got_core import Node, ReasoningRepo
repo = ReasoningRepo(sys.argv[1], create=True, fsync=sys.argv[2] == "1")
synced.clear()
repo.commit_node(Node("durable?", scores={"s": 1}))
print(sum(p.endswith((".pack", ".idx")) or "/tmp_" in p for p in synced), sum(p.endswith("/pack") for p in synced))
"""


@pytest.mark.parametrize("durable", [True, False])
def test_a_move_s_pack_is_fsynced_exactly_when_asked(tmp_path: Path, durable: bool) -> None:
    import subprocess
    import sys

    # libgit2's fsync switch is process-wide: probe it in a process of its own
    out = subprocess.run(
        [sys.executable, "-c", _FSYNC_PROBE, str(tmp_path / "r.git"), "1" if durable else "0"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    ).stdout
    files, folder = map(int, out.split())
    assert (files, folder >= 1) == ((2, True) if durable else (0, False))  # the pack, its index, the directory
    assert fsck_clean(tmp_path / "r.git")[0] and pack_count(tmp_path / "r.git") == 1


def test_gc_finds_deltas_between_objects_written_as_packs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def written(name: str) -> int:
        repo = ReasoningRepo.init(tmp_path / name)
        for i in range(150):
            repo.commit_node(Node(f"thought {i} about the same long problem statement " * 4, scores={"s": i / 150}))
        repo.maintenance()
        return int(git(repo.gitdir, "count-objects", "-v").split("size-pack: ")[1].split()[0])

    packed = written("packed.git")
    monkeypatch.setenv("GOT_PACK_WRITES", "0")
    loose = written("loose.git")
    assert packed <= loose * 1.2  # whole objects in one pack are not left without deltas
