"""What building a commit's trees costs, counted: path checks, tree parses, identity checks.

A write's paths are checked once (``RepoBase.file_payload`` hands ``build_tree`` the
components in a ``CheckedFiles``; a path checked before is a lookup), the small trees a
writer rewrites at every commit are neither read nor parsed again (``TreeCache.small``,
keyed by tree id), and an identity is checked by libgit2 once, not at every commit. Each
cache is keyed by content or by an exact string that passed, so none of them lets a bad
path, a damaged tree or a refused identity through: the second half of this file.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from gitcli import fsck_clean, git

from got_core import names
from got_core.errors import CorruptRepositoryError, InvalidNameError, StorageError
from got_core.names import check_path
from got_core.repo.base import RepoBase
from got_core.storage import packs
from got_core.storage.git import GitRepo
from got_core.storage.packs import TreeCache, build_tree_objects, object_id
from got_core.types import Identity

_FRESH = itertools.count()


def fresh(label: str) -> str:
    """A name no other test checked (the check of a path is kept per process)."""
    return f"{label}{next(_FRESH)}x{id(_FRESH):x}"


class _CountingPattern:
    """Stands in for ``names.PLAIN_NAME``: counts the components ``path_component_problem`` judges."""

    def __init__(self, real: re.Pattern[str]) -> None:
        self.real = real
        self.seen: list[str] = []

    def match(self, name: str) -> re.Match[str] | None:
        self.seen.append(name)
        return self.real.match(name)


def count_component_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    spy = _CountingPattern(names.PLAIN_NAME)
    monkeypatch.setattr(names, "PLAIN_NAME", spy)
    return spy.seen


def count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    parsed: list[str] = []
    real = packs._read_tree

    def counting(read_raw: Any, oid: str) -> dict[bytes, tuple[bytes, bytes]]:
        parsed.append(oid)
        return real(read_raw, oid)

    monkeypatch.setattr(packs, "_read_tree", counting)
    return parsed


# ---------------------------------------------------------------------------- the costs
#: Small directories that are parsed (not spliced: their entries differ in mode or name width).
MIXED = {f"a/b/c{i}.json": b"x" for i in range(12)} | {"a/n.md": b"n", "top.json": b"t"}


def test_a_commit_checks_each_new_path_once_and_a_known_one_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # on the code before, commit_files checked every path three times (file_payload, again in
    # prepare_commit's file_payload, again as build_tree grouped the paths): 3 checks of each
    # component, at every commit, whatever paths the process had checked before
    repo = RepoBase.init(tmp_path / "r.git")
    top, sub = fresh("dir"), fresh("sub")
    files = {f"{top}/{sub}/f{i}.json": b"%d" % i for i in range(4)} | {f"{top}/note.md": b"n"}
    seen = count_component_checks(monkeypatch)
    repo.commit_files("main", files, "first\n")
    # each new path judged once: the first in top/sub whole (3 components), the next three by
    # their names alone (their directory passed), top/note.md whole (2); 36 before
    assert seen == [top, sub, "f0.json", "f1.json", "f2.json", "f3.json", top, "note.md"]
    seen.clear()
    repo.commit_files("main", {p: v + b"!" for p, v in files.items()}, "second\n")
    assert seen == []  # the same paths again: nothing judged
    name = f"{fresh('g')}.json"
    new = f"{top}/{sub}/{name}"
    repo.commit_files("main", {new: b"g"}, "third\n")
    assert seen == [name]
    monkeypatch.undo()
    assert git(repo.gitdir, "show", f"main:{new}") == "g"
    assert fsck_clean(repo.gitdir)[0]
    repo.close()


def test_a_commit_on_small_directories_parses_none_of_them_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a checkpoint's root, channel and bucket directories are small (under 32 entries): on the
    # code before, every commit parsed each directory on its paths again (3 a commit here)
    repo = RepoBase.init(tmp_path / "r.git")
    repo.commit_files("main", MIXED, "first\n")
    parsed = count_parses(monkeypatch)
    for n in range(5):
        repo.commit_files("main", {f"a/b/c{n}.json": b"y%d" % n, "top.json": b"t%d" % n}, f"step {n}\n")
    assert parsed == []
    monkeypatch.undo()
    listed = git(repo.gitdir, "ls-tree", "-r", "--name-only", "main").split()
    assert sorted(listed) == sorted(MIXED)
    assert git(repo.gitdir, "show", "main:a/b/c3.json") == "y3"
    assert fsck_clean(repo.gitdir)[0]
    repo.close()


def test_a_new_handle_parses_each_small_directory_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = RepoBase.init(tmp_path / "r.git")
    repo.commit_files("main", MIXED, "first\n")
    repo.close()
    repo = RepoBase.open(tmp_path / "r.git")  # nothing kept from the write above
    parsed = count_parses(monkeypatch)
    for n in range(4):
        repo.commit_files("main", {f"a/b/c{n}.json": b"z%d" % n}, f"step {n}\n")
    assert len(parsed) == 3  # root, a, a/b once (read from the object database), then the trees built (12 before)
    monkeypatch.undo()
    assert git(repo.gitdir, "show", "main:a/b/c2.json") == "z2"
    repo.close()


def test_an_identity_is_checked_once_not_at_every_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import got_core.storage.git._commits as commits

    checked: list[Identity] = []
    real = commits._raw_person
    people = dict(commits._PEOPLE)
    monkeypatch.setattr(commits, "_PEOPLE", {})

    def counting(who: Identity, gitdir: object) -> tuple[bytes, bytes]:
        if (who.name, who.email) not in commits._PEOPLE:
            checked.append(who)
        return real(who, gitdir)

    monkeypatch.setattr(commits, "_raw_person", counting)
    me = Identity("Ada  ", " ada@example.org")
    repo = RepoBase.init(tmp_path / "r.git", identity=me)
    for n in range(5):
        repo.commit_files("main", {"f": b"%d" % n}, f"c{n}\n")
    assert checked == [me]  # libgit2's check of the name and email, once (twice a commit before)
    monkeypatch.setattr(commits, "_PEOPLE", people)
    # trimmed as libgit2 trims them, the same bytes git_commit_create writes
    assert git(repo.gitdir, "log", "-1", "--format=%an|%ae", "main").strip() == "Ada|ada@example.org"
    assert fsck_clean(repo.gitdir)[0]
    repo.close()


# ---------------------------------------------------------------------------- the caches refuse what they must
@pytest.mark.parametrize("bad", ["../x", "a/.git/config", "a//b", "/abs", "a/\x00b", ".GIT/x", "a\\b"])
def test_a_path_that_fails_its_check_fails_every_time(bad: str) -> None:
    errors = []
    for _ in range(3):
        with pytest.raises(InvalidNameError) as caught:
            check_path(bad)
        errors.append(str(caught.value))
    assert len(set(errors)) == 1
    assert bad not in names._CHECKED
    with pytest.raises(InvalidNameError):
        names.CheckedFiles({bad: b"x"})


@pytest.mark.parametrize("name", ["..", ".git", "", "x\\y", "Git~1", "a" * 256])
def test_a_bad_name_in_a_directory_that_passed_is_refused(name: str) -> None:
    folder = f"{fresh('ok')}/dir"
    check_path(f"{folder}/fine.json")  # the directory passed: it is kept
    assert folder in names._CHECKED
    for _ in range(2):
        with pytest.raises(InvalidNameError):
            check_path(f"{folder}/{name}")


def test_a_kept_check_is_a_tuple_and_only_for_exact_strings() -> None:
    good = f"{fresh('a')}/b"
    parts = check_path(good)
    assert parts == tuple(good.split("/")) and type(parts) is tuple
    assert check_path(good) is parts  # kept: the same immutable answer

    class Sneaky(str):
        """Compares and hashes as a path that passed, spells one that must not."""

        def __hash__(self) -> int:
            return hash(good)

        def __eq__(self, other: object) -> bool:
            return True

    with pytest.raises(InvalidNameError):
        check_path(Sneaky("../../etc/passwd"))
    assert not any(type(k) is not str for k in names._CHECKED)
    files = names.CheckedFiles({Sneaky("x/y"): b"1"})  # checked (it spells a safe path), components not kept
    assert files.parts(Sneaky("x/y")) is None


def test_checked_files_cannot_change_after_the_check() -> None:
    files = names.CheckedFiles({"a/b": b"1"})
    with pytest.raises(TypeError):
        files["../evil"] = b"x"  # type: ignore[index]
    with pytest.raises(AttributeError):
        files.update({"../evil": b"x"})  # type: ignore[attr-defined]
    assert dict(files) == {"a/b": b"1"} and files.parts("a/b") == ("a", "b")
    assert files.parts("../evil") is None


def test_build_tree_checks_every_path_of_a_plain_mapping(tmp_path: Path) -> None:
    repo = RepoBase.init(tmp_path / "r.git")
    check_path("ok/file")  # kept: a plain mapping's other paths are still checked
    for bad in ({"ok/file": b"1", "../x": b"2"}, {"ok/.git/hooks/x": b"1"}):
        with pytest.raises(InvalidNameError), repo.git.staged_writes():
            repo.git.build_tree(None, bad)
        with pytest.raises(InvalidNameError):
            repo.git.build_tree(None, bad)  # libgit2's builder (loose writes)
        with pytest.raises(InvalidNameError):
            build_tree_objects(repo.git.read_raw, None, dict.fromkeys(bad, "0" * 40), TreeCache(64))
    repo.close()


def _damaged_trees() -> dict[str, bytes]:
    blob = bytes.fromhex(object_id("blob", b"x"))
    return {
        "cut short": b"100644 a\x00" + blob[:10],
        "a mode that is not octal": b"100844 a\x00" + blob,
        "no name": b"100644 \x00" + blob,
        "trailing bytes": b"100644 a\x00" + blob + b"junk",
    }


@pytest.mark.parametrize("damage", sorted(_damaged_trees()))
def test_a_damaged_small_tree_is_refused_every_time_it_is_built_on(damage: str) -> None:
    data = _damaged_trees()[damage]
    oid = object_id("tree", data)
    objects = {oid: ("tree", data)}
    reads: list[str] = []

    def read_raw(wanted: str) -> tuple[str, bytes]:
        reads.append(wanted)
        return objects[wanted]

    cache = TreeCache(64)
    blob = object_id("blob", b"y")
    for changes in ({"b": blob}, {"b": blob}, {"d/e": blob}):
        with pytest.raises(CorruptRepositoryError):
            build_tree_objects(read_raw, oid, changes, cache)
    assert oid not in cache.small or cache.small[oid].entries is None  # no parse of it is kept


def test_a_blob_named_as_a_base_tree_is_refused_and_never_kept() -> None:
    data = b"not a tree"
    oid = object_id("blob", data)
    cache = TreeCache(64)
    for _ in range(2):
        with pytest.raises(CorruptRepositoryError):
            build_tree_objects(lambda _o: ("blob", data), oid, {"a": object_id("blob", b"1")}, cache)
    assert oid not in cache.small


def test_small_trees_kept_build_the_trees_libgit2_builds(tmp_path: Path) -> None:
    # the same commits, built with the small-tree cache (staged) and by libgit2's tree builder
    staged, loose = GitRepo(tmp_path / "a.git", create=True), GitRepo(tmp_path / "b.git", create=True)
    roots: dict[str, list[str]] = {"staged": [], "loose": []}
    base: dict[str, str | None] = {"staged": None, "loose": None}
    steps = [
        {"x/y/z.json": b"1", "x/w.json": b"2", "top": b"3"},
        {"x/y/z.json": b"4", "x/y/q.json": b"5"},
        {"x/w.json": None, "x/y/new/deep.json": b"6"},
        {"x/y/z.json": None, "x/y/q.json": None, "x/y/new/deep.json": None},
        {"top": None},
        {"again/a": b"7"},
    ]
    for step in steps:
        with staged.staged_writes():
            base["staged"] = staged.build_tree(base["staged"], step)
        base["loose"] = loose.build_tree(base["loose"], step)
        roots["staged"].append(str(base["staged"]))
        roots["loose"].append(str(base["loose"]))
    assert roots["staged"] == roots["loose"]
    assert fsck_clean(staged.gitdir)[0]


def test_a_refused_identity_is_refused_at_every_commit(tmp_path: Path) -> None:
    import got_core.storage.git._commits as commits

    repo = RepoBase.init(tmp_path / "r.git", identity=Identity("Eve <evil>", "eve@example.org"))
    for _ in range(2):
        with pytest.raises(StorageError):
            repo.commit_files("main", {"f": b"1"}, "m\n")
    assert ("Eve <evil>", "eve@example.org") not in commits._PEOPLE
    assert repo.tip("main") is None
    repo.close()


def test_each_identity_signs_its_own_commits(tmp_path: Path) -> None:
    ada = RepoBase.init(tmp_path / "r.git", identity=Identity("Ada", "ada@example.org"))
    bob = RepoBase.open(tmp_path / "r.git", identity=Identity("Bob", "bob@example.org"))
    for n in range(3):
        ada.commit_files("main", {"a": b"%d" % n}, f"ada {n}\n")
        bob.commit_files("main", {"b": b"%d" % n}, f"bob {n}\n")
    log = git(ada.gitdir, "log", "--format=%s|%an|%ae|%cn", "main").splitlines()
    assert log[:2] == ["bob 2|Bob|bob@example.org|Bob", "ada 2|Ada|ada@example.org|Ada"]
    assert len(log) == 6
    ada.close()
    bob.close()
