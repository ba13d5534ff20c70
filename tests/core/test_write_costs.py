"""What one node write costs, counted (issue 13: the substrate write's fixed costs).

Counted through spies on our own functions, never timed: each test fails when the write
does again work this session took out of it.

* a write does not parse the notes root tree it built itself in the write before (the
  note's other spellings are looked up in the entries it built);
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gitcli import fsck_clean, git

from got_core import Node, ReasoningRepo
from got_core.storage.git import _objects

IDENTITY = ("-c", "user.name=Stock Git", "-c", "user.email=git@localhost")


def node(thought: str, outcome: str = "success") -> Node:
    return Node(thought, scores={"s_comb": 0.5}, problem_id="p", outcome=outcome)


def test_a_write_does_not_parse_the_notes_tree_it_built_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for i in range(40):  # a notes root of 40 fan-out entries at least: large enough to keep
        repo.commit_node(node(f"warm up thought {i}"))
    root = repo.git.commit_tree(repo.git.ref_target("refs/notes/got"))
    parsed: list[str] = []
    real = _objects.tree_entries_of

    def counting(kind: str, data: bytes, oid: str = "") -> dict[bytes, tuple[int, str]]:
        parsed.append(oid)
        return real(kind, data, oid)

    monkeypatch.setattr(_objects, "tree_entries_of", counting)
    written = repo.commit_node(node("the measured write"))
    assert root not in parsed, "the notes root this handle built was parsed again"
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
