"""git's notes fan-out levels (issue 13: the substrate write flat to 100k notes).

Stock git (``notes.c``, ``determine_fanout``) moves a notes directory one level down
(``ab/cdef…`` -> ``ab/cd/ef…``) once, for each of the 16 values of the next hex digit, it
holds two notes; our writer follows the same rule, so after every write our notes tree
is the very tree (same id) ``git notes add`` makes from the same tree and note. Notes
written by git at any depth, mixed or not, are read by us as git reads them; entries git
does not take for notes are left alone. Real repositories, the real ``git`` binary.

Notes annotate ids that need not be objects here (``git notes add`` takes any full id),
so the counts that cross git's thresholds are set up exactly, with no search for ids.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from gitcli import fsck_clean, git

from got_core import Node, ReasoningRepo
from got_core.errors import CorruptRepositoryError
from got_core.repo.notes import publish_notes
from got_core.storage.git import GitRepo

IDENTITY = ("-c", "user.name=Stock Git", "-c", "user.email=git@localhost")
REF = "refs/notes/got"


def key(rng: random.Random, prefix: str) -> str:
    return prefix + "".join(rng.choice("0123456789abcdef") for _ in range(40 - len(prefix)))


def notes_tree(gitdir: Path) -> str:
    return git(gitdir, "rev-parse", f"{REF}^{{tree}}").strip()


def paths(gitdir: Path) -> list[str]:
    return git(gitdir, "ls-tree", "-r", "--name-only", REF).splitlines()


def git_add(gitdir: Path, target: str, text: str, force: bool = False) -> None:
    git(gitdir, *IDENTITY, "notes", "--ref=got", "add", *(["-f"] if force else []), "-m", text, target)


def threshold_keys(rng: random.Random, prefix: str) -> list[str]:
    """Keys under ``prefix``: two for each next digit but ``f``, then one, then the one that
    completes the 16 pairs (git's directory under ``prefix`` splits at the last)."""
    keys = [key(rng, prefix + d) for d in "0123456789abcde" for _ in range(2)]
    rng.shuffle(keys)
    return [*keys, key(rng, prefix + "f"), key(rng, prefix + "f")]


@pytest.mark.parametrize("seed", range(2))
def test_every_write_makes_the_tree_git_notes_add_makes(tmp_path: Path, seed: int) -> None:
    """Note by note, ours and stock git's notes trees are the same tree: one level while a
    directory is small, two once each next digit has two notes (``ab/cd/ef…``), three for
    a directory of those (``ab/cd/ef/…``); a replaced note stays where it is."""
    rng = random.Random(seed)
    ours = ReasoningRepo.init(tmp_path / "ours.git")
    base = {key(rng, d + "0"): f"base {d}\n".encode() for d in "0123456789abcdef"}  # git's root: split
    publish_notes(ours, REF, base)
    theirs = tmp_path / "theirs.git"
    shutil.copytree(ours.gitdir, theirs)
    second = threshold_keys(rng, "ab")  # ab/ splits at its 32nd note
    third = threshold_keys(rng, "abcd")  # ab/cd/ splits at its 32nd note
    steps = [(k, f"note {i}") for i, k in enumerate([*second, *third])]
    steps.append((second[3], "replaced"))
    for i, (target, text) in enumerate(steps):
        publish_notes(ours, REF, {target: text.encode() + b"\n"})
        git_add(theirs, target, text, force=text == "replaced")
        assert notes_tree(ours.gitdir) == notes_tree(theirs), f"step {i}: {target}"
        listed = paths(ours.gitdir)
        if i == len(second) - 2:
            assert all(p.count("/") == 1 for p in listed), "ab/ split before every digit had two notes"
        if i == len(second) - 1:
            assert all(p.count("/") == (2 if p.startswith("ab/") else 1) for p in listed), listed
    listed = paths(ours.gitdir)
    assert sum(p.startswith("ab/cd/") and p.count("/") == 3 for p in listed) == 32 + (
        sum(k.startswith("abcd") for k in second)
    )
    expected = {t: f"{text}\n" for t, text in steps} | {k: v.decode() for k, v in base.items()}
    for gitdir in (ours.gitdir, theirs):
        listing = git(gitdir, "notes", "--ref=got", "list").splitlines()
        assert {line.split()[1] for line in listing} == set(expected)
        for target in rng.sample(sorted(expected), 8):
            assert git(gitdir, "notes", "--ref=got", "show", target) == expected[target]
        assert fsck_clean(gitdir)[0]
    mine = ReasoningRepo(theirs)  # the tree git wrote, read by us
    assert {k: v.decode() for k, v in mine.notes().items()} == expected


def test_notes_git_wrote_two_levels_down_are_read_and_kept_there(tmp_path: Path) -> None:
    """Real commits whose notes stock git put two levels down: read by ``note_json``,
    ``notes()`` and the index (``log`` scores); our next note in that directory goes where
    git's would (same tree as ``git notes add -f`` on a copy), and ``git log --notes``
    shows it."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    nodes = [repo.commit_node(Node(f"thought {i}", problem_id="p"), note=False) for i in range(3)]
    rng = random.Random(7)
    base = {key(rng, d + "0"): b"base\n" for d in "0123456789abcdef"}
    publish_notes(repo, REF, base)
    gitdir = repo.gitdir
    for n in nodes:
        for filler in threshold_keys(rng, n.oid[:2]):
            git_add(gitdir, filler, "filler", force=True)
        git_add(gitdir, n.oid, json.dumps({"s_comb": 0.25}), force=True)
    for n in nodes:
        nested = f"{n.oid[:2]}/{n.oid[2:4]}/{n.oid[4:]}"
        assert nested in paths(gitdir), "stock git did not split the directory"
    fresh = ReasoningRepo(gitdir)
    for n in nodes:
        assert fresh.note_json(n.oid) == {"s_comb": 0.25}
        assert fresh.notes()[n.oid] == b'{"s_comb": 0.25}\n'
    scores = {c.oid: c.score for c in fresh.log(limit=10)}
    assert all(scores[n.oid] == 0.25 for n in nodes), scores
    copy = tmp_path / "copy.git"
    shutil.copytree(gitdir, copy)
    fresh.set_note(nodes[1].oid, "rescored\n")
    git_add(copy, nodes[1].oid, "rescored", force=True)
    assert notes_tree(gitdir) == notes_tree(copy)
    assert "rescored" in git(gitdir, "log", "--notes=got", "-1", nodes[1].oid)
    assert fresh.get_note(nodes[1].oid) == b"rescored\n"
    assert {c.oid: c.score for c in fresh.log(limit=10)}[nodes[1].oid] is None  # the index followed
    assert fsck_clean(gitdir)[0]


def test_a_one_level_directory_of_an_old_repository_moves_down_at_its_next_write(tmp_path: Path) -> None:
    """An old layout (every note at ``ab/cdef…``, however many) is read as it is, and the
    directory a write goes to is laid out again as git would (lazily: one directory per
    write, the others untouched, as stock git does)."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    gitdir = repo.gitdir
    rng = random.Random(3)
    blob = git(gitdir, "hash-object", "-w", "--stdin", input=b"old\n").strip()
    old = sorted(
        {key(rng, d) for d in ("ab", "cd") for _ in range(300)} | {key(rng, d + "0") for d in "0123456789abcdef"}
    )
    dirs = {}
    for d in sorted({k[:2] for k in old}):
        listing = "".join(f"100644 blob {blob}\t{k[2:]}\n" for k in old if k.startswith(d))
        dirs[d] = git(gitdir, "mktree", input=listing.encode()).strip()
    root = git(gitdir, "mktree", input="".join(f"040000 tree {t}\t{d}\n" for d, t in dirs.items()).encode()).strip()
    commit = git(gitdir, *IDENTITY, "commit-tree", root, "-m", "old notes").strip()
    git(gitdir, "update-ref", REF, commit)
    copy = tmp_path / "copy.git"
    shutil.copytree(gitdir, copy)
    assert repo.notes() == dict.fromkeys(old, b"old\n")
    new = key(rng, "ab")
    publish_notes(repo, REF, {new: b"new\n"})
    git_add(copy, new, "new")
    assert notes_tree(gitdir) == notes_tree(copy)
    listed = paths(gitdir)
    assert all(p.count("/") == 2 for p in listed if p.startswith("ab/"))
    assert all(p.count("/") == 1 for p in listed if p.startswith("cd/"))  # not written: as it was
    assert git(gitdir, "rev-parse", f"{REF}:cd").strip() == dirs["cd"]
    assert repo.notes() == {**dict.fromkeys(old, b"old\n"), new: b"new\n"}


def test_mixed_and_misnamed_entries_are_read_and_written_as_git_does(tmp_path: Path) -> None:
    """A hostile notes tree: a directory holding notes flat and in subdirectories, a flat
    note at the root, a note under a three-digit directory and one whose name is too long
    (neither is a note for git). We list the notes git lists, and our write into the mixed
    directory makes git's tree; what git leaves alone stays."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    gitdir = repo.gitdir
    rng = random.Random(5)
    blob = git(gitdir, "hash-object", "-w", "--stdin", input=b"n\n").strip()

    def mktree(entries: dict[str, str]) -> str:
        lines = "".join(
            f"{'040000 tree' if git(gitdir, 'cat-file', '-t', i).strip() == 'tree' else '100644 blob'} {i}\t{n}\n"
            for n, i in sorted(entries.items())
        )
        return git(gitdir, "mktree", input=lines.encode()).strip()

    flat_in_ab = {key(rng, "ab")[2:]: blob for _ in range(20)}
    sub = {key(rng, "abc1")[4:]: blob, key(rng, "abc1")[4:]: blob}
    ab = mktree({**flat_in_ab, "c1": mktree(sub)})
    odd = mktree({key(rng, "abc")[3:]: blob})  # "12c/…": three digits, not a fan-out directory
    top = {d + "0": mktree({key(rng, d + "0")[2:]: blob}) for d in "0123456789abcdef" if d != "a"}
    flat_root = key(rng, "99")
    cd = mktree({"e" * 39: blob})
    root = mktree({**top, "ab": ab, "12c": odd, flat_root: blob, "cd": cd})
    commit = git(gitdir, *IDENTITY, "commit-tree", root, "-m", "hostile").strip()
    git(gitdir, "update-ref", REF, commit)
    listed = {line.split()[1] for line in git(gitdir, "notes", "--ref=got", "list").splitlines()}
    assert set(repo.notes()) == listed
    assert flat_root in listed and not any(t.startswith(("12c", "cdeee")) for t in listed)
    copy = tmp_path / "copy.git"
    shutil.copytree(gitdir, copy)
    target = key(rng, "abc1")
    publish_notes(repo, REF, {target: b"x\n"})
    git_add(copy, target, "x")
    assert notes_tree(gitdir) == notes_tree(copy)
    assert git(gitdir, "rev-parse", f"{REF}:12c").strip() == odd  # not a note: left alone
    assert git(gitdir, "rev-parse", f"{REF}:cd").strip() == cd
    assert fsck_clean(gitdir)[0]


def test_a_missing_fan_out_directory_raises_and_moves_nothing(tmp_path: Path) -> None:
    """A notes root naming a directory that is not in the repository: a write into it raises
    our typed error and the notes ref stays where it was."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    gitdir = repo.gitdir
    missing = "1" * 40
    root = git(gitdir, "mktree", "--missing", input=f"040000 tree {missing}\tab\n".encode()).strip()
    commit = git(gitdir, *IDENTITY, "commit-tree", root, "-m", "damaged").strip()
    git(gitdir, "update-ref", REF, commit)
    with pytest.raises(CorruptRepositoryError):
        publish_notes(repo, REF, {"ab" + "2" * 38: b"x\n"})
    assert git(gitdir, "rev-parse", REF).strip() == commit


def tree_bytes_per_write(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Bytes of the trees staged by each write from now on (what is hashed and deflated)."""
    sizes: list[int] = []
    real = GitRepo._stage_known  # every staged object passes here (trees with the id their build hashed)

    def counting(self: GitRepo, oid: str, kind: str, data: bytes) -> str:
        if kind == "tree":
            sizes.append(len(data))
        return real(self, oid, kind, data)

    monkeypatch.setattr(GitRepo, "_stage_known", counting)
    return sizes


def test_a_note_into_a_big_directory_hashes_a_bounded_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ~600 notes in the note's directory (~150k notes in all), a write stages its
    directory's trees at two levels: ``ab/`` of at most 256 subdirectories and ``ab/cd/``
    of a few notes, whatever the count; at one level it was all 600 entries (~40 KB)."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    gitdir = repo.gitdir
    rng = random.Random(11)
    base = {key(rng, d + "0"): b"base\n" for d in "0123456789abcdef"}
    base |= {key(rng, "ab"): b"many\n" for _ in range(600)}
    publish_notes(repo, REF, base)
    sizes = tree_bytes_per_write(monkeypatch)
    per_write = []
    for _ in range(5):
        sizes.clear()
        publish_notes(repo, REF, {key(rng, "ab"): b"one more\n"})
        per_write.append(sizes[:])
    root = int(git(gitdir, "cat-file", "-s", f"{REF}^{{tree}}"))  # 17 directories
    for staged in per_write:
        assert len(staged) == 3, staged  # the root, ab/ and ab/cd/
        assert sum(staged) <= root + 256 * 29 + 4 * 64, staged
    assert all(p.count("/") == 2 for p in paths(gitdir) if p.startswith("ab/"))


def test_the_notes_root_a_write_spliced_is_not_scanned_again_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write looks at the notes root (where the note goes) and builds a new one by splicing;
    the next write starts from that root: its entries are known, not scanned again (each
    scan is a pass over every entry, ~7 KB at 100k notes)."""
    from got_core.storage import packs

    repo = ReasoningRepo.init(tmp_path / "r.git")
    rng = random.Random(13)
    publish_notes(repo, REF, {key(rng, ""): b"base\n" for _ in range(300)})  # a root of ~180 directories
    publish_notes(repo, REF, {key(rng, ""): b"first\n"})
    scans: list[int] = []
    scan = packs._uniform_tree_names  # the pass over every entry (a tree under 1 KiB is always scanned)

    def counting(data: bytes) -> tuple[bytes, int, list[bytes]] | None:
        scans.append(len(data))
        return scan(data)

    monkeypatch.setattr(packs, "_uniform_tree_names", counting)
    root_size = int(git(repo.gitdir, "cat-file", "-s", f"{REF}^{{tree}}"))
    for i in range(4):
        publish_notes(repo, REF, {key(rng, ""): f"measured {i}\n".encode()})
    assert root_size > 1024 and not [n for n in scans if n >= root_size - 64], scans
    assert len(git(repo.gitdir, "notes", "--ref=got", "list").splitlines()) == 305
