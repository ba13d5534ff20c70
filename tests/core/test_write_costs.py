"""What one node write costs, counted (issue 13: the substrate write's fixed costs).

Counted through spies on our own functions, never timed: each test fails when the write
does again work this session took out of it.

* a write does not parse the notes root tree it built itself in the write before, reads
  no tree twice, and parses no notes tree entry by entry (the notes root and its fan-out
  directories are spliced and bisected; equal to git's trees, an unsorted one is parsed);
* merging small packs reads none of this handle's own packs back; ``objects/pack`` is
  listed only when the packs may pass the limit;
* ``update_refs(expected=...)``: refs are read once, under the lock; a hint made stale by
  ``git update-ref`` / ``git notes`` loses one compare-and-swap and never moves a ref
  from an unchecked value;
* pack files are created read-only (no chmod); ``packed-refs`` is checked from a kept
  copy until its stamp changes.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
from gitcli import fsck_clean, git

from got_core import Node, ReasoningRepo
from got_core.storage import packs
from got_core.storage.git import GitRepo, RefRace
from got_core.storage.refs import update_refs

IDENTITY = ("-c", "user.name=Stock Git", "-c", "user.email=git@localhost")


def node(thought: str, outcome: str = "success") -> Node:
    return Node(thought, scores={"s_comb": 0.5}, problem_id="p", outcome=outcome)


def count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Ids of every object read from the object database from now on (the bytes a tree is
    parsed from, when it is not in memory)."""
    parsed: list[str] = []
    real = GitRepo._odb_read

    def counting(self: GitRepo, oid: str) -> tuple[int, bytes]:
        parsed.append(oid)
        return real(self, oid)

    monkeypatch.setattr(GitRepo, "_odb_read", counting)
    return parsed


def test_a_write_parses_no_tree_twice_and_not_the_notes_tree_it_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notes root this handle built in the write before is not parsed again, and the
    fan-out directory the note goes to is parsed once, for the lookups of the note's other
    spellings and for the build of the new notes tree together."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for i in range(300):  # fan-out directories of more than one note, a root of ~180 entries
        repo.commit_node(node(f"warm up thought {i}"))
    root = repo.git.commit_tree(repo.git.ref_target("refs/notes/got"))
    parsed = count_parses(monkeypatch)
    written = repo.commit_node(node("the measured write"))
    assert root not in parsed, "the notes root this handle built was parsed again"
    assert len(parsed) == len(set(parsed)), f"a tree was read twice in one write: {parsed}"
    assert repo.note_json(written.oid) == {"s_comb": 0.5}
    assert json.loads(git(repo.gitdir, "notes", "--ref=got", "show", written.oid)) == {"s_comb": 0.5}
    assert fsck_clean(repo.gitdir)[0]


def test_a_flat_note_stock_git_wrote_is_still_replaced_from_a_built_root(tmp_path: Path) -> None:
    """The built entries answer the flat-note lookup as the parsed tree did: a flat note
    stock git left for a commit, carried into a root this handle built, is removed when
    ours is written for the same commit."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for i in range(40):
        repo.commit_node(node(f"warm up thought {i}"))
    target = repo.commit_node(node("scored by stock git first"), note=False)
    other = repo.commit_node(node("scored by us"), note=False)
    gitdir = repo.gitdir
    notes = git(gitdir, "rev-parse", "refs/notes/got").strip()
    blob = git(gitdir, "hash-object", "-w", "--stdin", input=b'{"s_comb":0.1}').strip()
    listing = git(gitdir, "ls-tree", "refs/notes/got") + f"100644 blob {blob}\t{target.oid}\n"
    tree = git(gitdir, "mktree", input=listing.encode()).strip()
    flat = git(gitdir, *IDENTITY, "commit-tree", tree, "-p", notes, "-m", "flat note").strip()
    git(gitdir, "update-ref", "refs/notes/got", flat, notes)
    repo.set_note(other.oid, {"s_comb": 0.3})  # a root built by this handle, the flat entry in it
    repo.set_note(target.oid, {"s_comb": 0.9})  # looked up in the built root, and removed
    assert json.loads(git(gitdir, "notes", "--ref=got", "show", target.oid)) == {"s_comb": 0.9}
    paths = git(gitdir, "ls-tree", "-r", "--name-only", "refs/notes/got").splitlines()
    assert [p for p in paths if p.replace("/", "") == target.oid] == [f"{target.oid[:2]}/{target.oid[2:]}"]
    assert fsck_clean(gitdir)[0]


def pack_names(gitdir: Path) -> set[str]:
    return {p.name for p in (gitdir / "objects" / "pack").glob("pack-*.idx")}


def test_merging_small_packs_this_handle_wrote_reads_none_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The entries of the packs a handle wrote are kept for the next merge: a merge of
    its own small packs opens none of them; a pack another handle wrote is read from
    disk as before; every object stays readable by git."""
    from got_core.storage.git import _packing

    path = tmp_path / "r.git"
    other = ReasoningRepo.init(path)
    other.commit_files("refs/heads/other", {"o.txt": "from another writer\n"}, "another handle's pack")
    other.close()
    repo = ReasoningRepo(path)
    read_back: list[str] = []
    real = _packing.pack_records

    def counting(idx: Path) -> dict[bytes, bytes] | None:
        read_back.append(idx.name)
        return real(idx)

    monkeypatch.setattr(_packing, "pack_records", counting)
    theirs = pack_names(path)
    seen: set[str] = set()
    for i in range(_packing.MAX_PACKS + 4):
        repo.commit_files("refs/heads/t", {f"f{i}.txt": f"v{i}\n"}, f"write {i}")
        seen |= pack_names(path)
    assert len(seen) > _packing.MAX_PACKS >= len(pack_names(path)), "the small packs were merged"
    assert set(read_back) <= theirs, f"packs this handle wrote were read back: {set(read_back) - theirs}"
    assert git(path, "show", "t:f3.txt") == "v3\n" and git(path, "show", "other:o.txt") == "from another writer\n"
    assert git(path, "rev-list", "--count", "t").strip() == str(_packing.MAX_PACKS + 4)
    assert fsck_clean(path)[0]
    assert not list((path / "objects" / "pack").glob("tmp_*"))


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of every ref read through ``GitRepo.ref_target`` from now on."""
    reads: list[str] = []
    real = GitRepo.ref_target

    def counting(self: GitRepo, name: str) -> str | None:
        reads.append(name)
        return real(self, name)

    monkeypatch.setattr(GitRepo, "ref_target", counting)
    return reads


def count_transactions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """ "won" or "lost" for every ref transaction from now on."""
    outcomes: list[str] = []
    real = GitRepo.cas_refs

    def counting(self: GitRepo, updates):  # type: ignore[no-untyped-def]
        try:
            real(self, updates)
        except RefRace:
            outcomes.append("lost")
            raise
        outcomes.append("won")

    monkeypatch.setattr(GitRepo, "cas_refs", counting)
    return outcomes


def test_a_write_after_this_threads_own_reads_branch_and_notes_only_under_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    first = repo.commit_node(node("the first write"))
    reads = count_reads(monkeypatch)
    second = repo.commit_node(node("the second write"))
    assert second.parents == (first.oid,)
    # once, under the transaction's lock (the compare of the compare-and-swap), not before building too
    assert reads.count("refs/heads/master") == 1 and reads.count("refs/notes/got") == 1, reads
    assert json.loads(git(repo.gitdir, "notes", "--ref=got", "show", second.oid)) == {"s_comb": 0.5}


def test_refs_moved_by_stock_git_behind_the_hints_back_are_built_on_not_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint (where this handle's last write left the refs) is stale: ``git update-ref``
    and ``git notes`` moved the branch and the notes ref since. The first attempt loses its
    compare-and-swap, the second reads the refs and builds on what git wrote."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    gitdir = repo.gitdir
    ours = repo.commit_node(node("written by us"))
    tree = git(gitdir, "rev-parse", f"{ours.oid}^{{tree}}").strip()
    theirs = git(gitdir, *IDENTITY, "commit-tree", tree, "-p", ours.oid, "-m", "written by stock git").strip()
    git(gitdir, "update-ref", "refs/heads/master", theirs, ours.oid)
    git(gitdir, *IDENTITY, "notes", "--ref=got", "add", "-m", '{"s_comb": 0.25}', theirs)
    notes_by_git = git(gitdir, "rev-parse", "refs/notes/got").strip()
    outcomes = count_transactions(monkeypatch)
    after = repo.commit_node(node("written on top of git's"))
    assert outcomes == ["lost", "won"], outcomes
    assert after.parents == (theirs,)
    assert git(gitdir, "rev-list", "master").split() == [after.oid, theirs, ours.oid]
    assert git(gitdir, "rev-parse", "refs/notes/got^").strip() == notes_by_git
    assert json.loads(git(gitdir, "notes", "--ref=got", "show", theirs)) == {"s_comb": 0.25}
    assert json.loads(git(gitdir, "notes", "--ref=got", "show", after.oid)) == {"s_comb": 0.5}
    assert git(gitdir, "rev-parse", f"refs/tags/success_{after.node_id}").strip() == after.oid
    assert fsck_clean(gitdir)[0]


def test_a_wrong_hint_never_moves_a_ref_from_a_value_it_did_not_check(tmp_path: Path) -> None:
    """``update_refs(expected=...)`` at the primitive: a hint that a ref is absent (or at an
    old value) when it exists elsewhere fails the compare-and-swap; the builder is asked
    again with the real tips, for the named ref and for a ref it reads on the way."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    old = repo.commit_files("x", {"f.txt": "old\n"}, "old")
    now = repo.commit_files("x", {"f.txt": "now\n"}, "now")
    repo.tag("t", now)
    git(repo.gitdir, "update-ref", "refs/heads/y", old)
    seen: list[tuple[str | None, str | None]] = []

    def build(tips: dict[str, str | None]) -> dict[str, str | None]:
        seen.append((tips["refs/heads/x"], tips["refs/tags/t"]))
        return {"refs/heads/x": old, "refs/heads/y": now}

    wrong = {"refs/heads/x": None, "refs/tags/t": old, "refs/heads/y": None}
    update_refs(repo.git, ("refs/heads/x", "refs/heads/y"), build, expected=wrong)
    assert seen == [(None, old), (now, now)]
    assert git(repo.gitdir, "rev-parse", "x", "y").split() == [old, now]
    assert fsck_clean(repo.gitdir)[0]


def test_a_write_s_pack_files_are_created_read_only_without_a_chmod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import stat

    repo = ReasoningRepo.init(tmp_path / "r.git")
    repo.commit_node(node("the first write"))
    before = {p.name for p in (repo.gitdir / "objects" / "pack").iterdir()}
    chmods: list[str] = []
    real = os.chmod

    def counting(path, mode, *args, **kwargs):  # type: ignore[no-untyped-def]
        chmods.append(str(path))
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "chmod", counting)
    repo.commit_node(node("the measured write"))
    monkeypatch.undo()
    new = [p for p in (repo.gitdir / "objects" / "pack").iterdir() if p.name not in before]
    assert sorted(p.suffix for p in new) == [".idx", ".pack"], new
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o444 & ~current_umask() for p in new)
    assert chmods == []
    assert fsck_clean(repo.gitdir)[0]


def current_umask() -> int:
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_new_refs_check_packed_refs_from_a_kept_copy_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ref creation (each node write's tag) checks ``packed-refs`` for refs under the new
    name from a copy kept while the file's stamp stays the same; a rewrite by ``git
    pack-refs`` is seen at once. (The racy window after a change, 0.1 or 2 s, is set to
    zero here so the copy is kept at once; outside it the file is read per creation.)"""
    from got_core.errors import StorageError
    from got_core.storage.git import _refs

    monkeypatch.setattr(_refs, "_RACY_NS", 0, raising=False)
    monkeypatch.setattr(_refs, "_RACY_FINE_NS", 0, raising=False)
    repo = ReasoningRepo.init(tmp_path / "r.git")
    gitdir = repo.gitdir
    first = repo.commit_node(node("first"))
    git(gitdir, "update-ref", "refs/tags/held/inside", first.oid)
    git(gitdir, "pack-refs", "--all")
    reads: list[str] = []
    real = _refs.packed_has_prefix

    def counting(where: Path, prefix: str) -> bool:
        reads.append(prefix)
        return real(where, prefix)

    monkeypatch.setattr(_refs, "packed_has_prefix", counting)
    for i in range(3):
        repo.commit_node(node(f"write {i}"))
    with pytest.raises(StorageError, match="refs exist under refs/tags/held/"):
        repo.tag("held", first.oid)
    assert reads == [], "packed-refs was read again although it did not change"
    git(gitdir, "update-ref", "-d", "refs/tags/held/inside")
    git(gitdir, "pack-refs", "--all")  # a new packed-refs without it
    repo.tag("held", first.oid)
    assert git(gitdir, "rev-parse", "refs/tags/held").strip() == first.oid
    assert fsck_clean(gitdir)[0]


def mktree(gitdir: Path, entries: dict[str, str], *, literally: bool = False) -> str:
    """A tree of blobs (name -> id) written by stock git (``--literally``: unsorted, as given)."""
    if literally:
        raw = b"".join(b"100644 " + n.encode() + b"\0" + bytes.fromhex(i) for n, i in entries.items())
        proc = subprocess.run(
            ["git", f"--git-dir={gitdir}", "hash-object", "-t", "tree", "-w", "--literally", "--stdin"],
            input=raw,
            capture_output=True,
            check=True,
        )
        return proc.stdout.decode().strip()
    listing = "".join(f"100644 blob {i}\t{n}\n" for n, i in entries.items())
    return git(gitdir, "mktree", input=listing.encode()).strip()


@pytest.mark.parametrize("seed", range(4))
def test_a_fan_out_directory_spliced_is_the_tree_git_builds(tmp_path: Path, seed: int) -> None:
    """A directory of blobs with names of one width (a notes fan-out directory) takes its
    changes by splicing: the same tree (id) ``git mktree`` makes of the same entries, for
    inserts, replacements and deletions, and lookups agree with ``git rev-parse``."""
    rng = random.Random(seed)
    repo = ReasoningRepo.init(tmp_path / "r.git")
    gitdir = repo.gitdir
    blobs = [git(gitdir, "hash-object", "-w", "--stdin", input=f"note {k}".encode()).strip() for k in range(6)]
    names = sorted({f"{rng.getrandbits(152):038x}" for _ in range(rng.randint(1, 60))})
    entries = {n: rng.choice(blobs) for n in names}
    base = mktree(gitdir, entries)
    changes: dict[str, str | None] = {}
    for n in rng.sample(names, min(3, len(names))):
        changes[n] = None if rng.random() < 0.5 else rng.choice(blobs)
    for _ in range(rng.randint(0, 3)):
        changes[f"{rng.getrandbits(152):038x}"] = rng.choice(blobs)
    changes[f"{rng.getrandbits(152):038x}"] = None  # deleting what is not there changes nothing
    root, _trees = packs.build_tree_objects(repo.git._raw_read, base, changes)
    expected = {n: i for n, i in {**entries, **changes}.items() if i is not None}
    assert root == (mktree(gitdir, dict(sorted(expected.items()))) if expected else None)
    for name in [*names[:5], f"{1:038x}", "ab", names[0] + "/x"]:
        want = git(gitdir, "rev-parse", "--verify", "-q", f"{base}:{name}", check=False).strip() or None
        assert repo.git.tree_entry(base, name) == want, name  # libgit2's lookup
        assert repo.git._entry_in_memory(base, name) == want, name  # the bisection of raw entries


def test_an_unsorted_fan_out_directory_is_parsed_and_rebuilt_sorted(tmp_path: Path) -> None:
    """A hostile directory of same-width names out of order is not spliced (the splice relies
    on the order): it is parsed and rebuilt in git's order, as before."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    gitdir = repo.gitdir
    blob = git(gitdir, "hash-object", "-w", "--stdin", input=b"note").strip()
    names = ["c" * 38, "a" * 38, "b" * 38]
    base = mktree(gitdir, dict.fromkeys(names, blob), literally=True)
    assert packs.uniform_tree_names(repo.git._raw_read(base)[1]) is None
    root, _trees = packs.build_tree_objects(repo.git._raw_read, base, {"d" * 38: blob})
    assert root == mktree(gitdir, dict.fromkeys(sorted([*names, "d" * 38]), blob))


@pytest.mark.parametrize("seed", range(4))
def test_a_notes_root_spliced_is_the_tree_the_entry_by_entry_build_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """A directory of directories named with one width (a notes root) is spliced too: the
    same new trees as the entry-by-entry build (itself checked against libgit2 in
    test_packs) for notes added to existing and new fan-out directories, replaced, and
    removed down to an emptied directory, which disappears; lookups agree with git."""
    rng = random.Random(seed)
    repo = ReasoningRepo.init(tmp_path / "r.git")
    gitdir = repo.gitdir
    blobs = [git(gitdir, "hash-object", "-w", "--stdin", input=f"note {k}".encode()).strip() for k in range(4)]
    fan: dict[str, dict[str, str]] = {}
    for _ in range(rng.randint(32, 80)):
        oid = f"{rng.getrandbits(160):040x}"
        fan.setdefault(oid[:2], {})[oid[2:]] = rng.choice(blobs)
    subtrees = {d: mktree(gitdir, dict(sorted(notes.items()))) for d, notes in sorted(fan.items())}
    listing = "".join(f"040000 tree {t}\t{d}\n" for d, t in subtrees.items())
    base = git(gitdir, "mktree", input=listing.encode()).strip()
    single = next((d for d, notes in fan.items() if len(notes) == 1), None)
    changes: dict[str, str | None] = {}
    for d in rng.sample(sorted(fan), 3):
        rest = rng.choice(sorted(fan[d]))
        changes[f"{d}/{rest}"] = rng.choice([None, *blobs])
    if single is not None:
        changes[f"{single}/{next(iter(fan[single]))}"] = None  # its directory empties and goes
    for _ in range(3):
        oid = f"{rng.getrandbits(160):040x}"
        changes[f"{oid[:2]}/{oid[2:]}"] = rng.choice(blobs)
    spliced = packs.build_tree_objects(repo.git._raw_read, base, changes)
    monkeypatch.setattr(packs, "_build_uniform", lambda *args: None)
    parsed = packs.build_tree_objects(repo.git._raw_read, base, changes)
    assert spliced[0] == parsed[0] and sorted(spliced[1]) == sorted(parsed[1])
    monkeypatch.undo()
    for path in [*list(changes)[:4], "zz", f"{next(iter(fan))}/{'0' * 38}", next(iter(fan))]:
        want = git(gitdir, "rev-parse", "--verify", "-q", f"{base}:{path}", check=False).strip() or None
        is_blob = want is not None and git(gitdir, "cat-file", "-t", want).strip() == "blob"
        assert repo.git._entry_in_memory(base, path) == (want if is_blob else None), path


def test_the_pack_directory_is_listed_only_when_the_packs_may_pass_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write does not list ``objects/pack`` to count the packs: the handle counts its own
    since its last listing, and lists (and merges) only when that count may pass the limit;
    the count stays bounded, and packs another writer added are found at that listing."""
    import os
    import sys

    from got_core.storage.git import _packing

    path = tmp_path / "r.git"
    repo = ReasoningRepo.init(path)
    repo.commit_files("refs/heads/t", {"first.txt": "1\n"}, "first write")
    listings: list[str] = []
    real = os.scandir

    def counting(where):  # type: ignore[no-untyped-def]
        if sys._getframe(1).f_code.co_filename == _packing.__file__:  # our listings, not pathlib's
            listings.append(str(where))
        return real(where)

    monkeypatch.setattr(_packing.os, "scandir", counting)
    other = ReasoningRepo(path)
    writes = 4 * _packing.MAX_PACKS
    for i in range(writes):
        repo.commit_files("refs/heads/t", {f"f{i}.txt": f"v{i}\n"}, f"write {i}")
        if i % 8 == 0:
            other.commit_files("refs/heads/o", {f"o{i}.txt": f"o{i}\n"}, f"other {i}")
        assert len(pack_names(path)) <= 2 * _packing.MAX_PACKS
    assert 0 < len(listings) <= writes // 4, f"{len(listings)} listings in {writes} writes"
    assert git(path, "rev-list", "--count", "t").strip() == str(writes + 1)
    assert git(path, "show", "o:o8.txt") == "o8\n"
    assert fsck_clean(path)[0]


def test_a_node_write_parses_no_notes_tree_entry_by_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The notes root and the note's fan-out directory are spliced and bisected: a node
    write parses no tree entry by entry (it did the fan-out directory, n/256 entries)."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for i in range(300):
        repo.commit_node(node(f"warm up thought {i}"))
    repo.close()
    repo = ReasoningRepo(tmp_path / "r.git")  # a new handle: nothing kept from the writes above
    parsed: list[str] = []
    real = packs._read_tree

    def counting(read_raw, oid):  # type: ignore[no-untyped-def]
        parsed.append(oid)
        return real(read_raw, oid)

    monkeypatch.setattr(packs, "_read_tree", counting)
    written = [repo.commit_node(node(f"measured write {i}")) for i in range(3)]
    assert parsed == [], f"trees parsed entry by entry: {parsed}"
    for w in written:
        assert json.loads(git(repo.gitdir, "notes", "--ref=got", "show", w.oid)) == {"s_comb": 0.5}
    assert fsck_clean(repo.gitdir)[0]
