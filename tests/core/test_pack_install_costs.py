"""What installing a move's pack costs, counted (storage/packs.py, storage/git/_staging.py,
ARCHITECTURE §6): the calls into the operating system per installed file, and the hashes per
staged object. Counted through spies on the real functions, never timed."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from gitcli import fsck_clean, git

from got_core import Node, ReasoningRepo
from got_core.errors import StorageError
from got_core.storage import packs
from got_core.storage.git import GitRepo, _staging
from got_core.storage.packs import write_pack
from got_core.storage.refs import Publish, update_ref
from got_core.types import Identity

#: Functions of ``os`` that only compute (no system call): not counted.
_PURE = {"fspath", "fsencode", "fsdecode", "path.join", "path.split", "path.basename", "path.dirname"}


def count_os_calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every call into the operating system ``storage/packs.py`` makes through ``os`` and ``os.path``
    (the real functions, counted)."""
    calls: Counter[str] = Counter()

    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def spy(*args: Any, **kwargs: Any) -> Any:
            if name not in _PURE:
                calls[name] += 1
            return real(*args, **kwargs)

        return spy

    def proxy(module: Any, prefix: str) -> SimpleNamespace:
        names = {n: getattr(module, n) for n in dir(module) if not n.startswith("__")}
        return SimpleNamespace(
            **{n: counted(prefix + n, v) if callable(v) and not isinstance(v, type) else v for n, v in names.items()}
        )

    spied = proxy(os, "")
    spied.path = proxy(os.path, "path.")
    monkeypatch.setattr(packs, "os", spied)
    return calls


def tmp_files(gitdir: Path) -> list[Path]:
    objects = Path(gitdir) / "objects"
    return [*objects.glob("tmp_*"), *(objects / "pack").glob("tmp_*")]


def test_a_write_installs_each_pack_file_with_open_write_close_rename_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    repo.commit_node(Node("first"))  # the pack directory exists from here on
    calls = count_os_calls(monkeypatch)
    writes = 5
    for i in range(writes):
        repo.commit_node(Node(f"thought {i}", scores={"s": i / 10}))
    # two files a write (the pack, its index), each created read-only under a temporary name and
    # renamed into place: no stat of the directory or the final name, no Python file object
    # (its fstat, lseek and ioctl), no getpid or getrandom per file
    assert dict(calls) == {"open": 2 * writes, "write": 2 * writes, "close": 2 * writes, "replace": 2 * writes}
    assert not tmp_files(repo.gitdir) and fsck_clean(repo.gitdir)[0]


def test_the_same_pack_written_twice_replaces_its_copy_and_stays_whole(tmp_path: Path) -> None:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    objects = [("blob", b"same %d" % i) for i in range(4)]
    first = write_pack(repo.gitdir, objects)
    assert write_pack(repo.gitdir, objects) == first  # the same bytes, the same name: replaced, not doubled
    folder = repo.gitdir / "objects" / "pack"
    assert len(list(folder.glob("pack-*.pack"))) == len(list(folder.glob("pack-*.idx"))) == 1
    for suffix in ("pack", "idx"):  # read-only, as git leaves its packs
        assert all(not p.stat().st_mode & 0o222 for p in folder.glob(f"pack-*.{suffix}"))
    assert not tmp_files(repo.gitdir) and fsck_clean(repo.gitdir)[0]
    assert git(repo.gitdir, "cat-file", "-p", first[2]) == "same 2"


def test_a_missing_pack_directory_is_created_by_the_first_write(tmp_path: Path) -> None:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    folder = repo.gitdir / "objects" / "pack"
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()
    ids = write_pack(repo.gitdir, [("blob", b"x")])
    assert folder.is_dir() and git(repo.gitdir, "cat-file", "-p", ids[0]) == "x"
    assert not tmp_files(repo.gitdir)


def test_a_pack_directory_that_is_a_file_is_a_typed_error_and_leaves_nothing(tmp_path: Path) -> None:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    folder = repo.gitdir / "objects" / "pack"
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()
    folder.write_bytes(b"not a directory")
    with pytest.raises(StorageError):
        write_pack(repo.gitdir, [("blob", b"x")])
    assert folder.read_bytes() == b"not a directory" and not list((repo.gitdir / "objects").glob("tmp_*"))


def test_a_pack_that_cannot_be_renamed_into_place_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = ReasoningRepo.init(tmp_path / "r.git")

    def refuse(src: str, dst: str) -> None:
        raise PermissionError(13, "refused", dst)

    monkeypatch.setattr(packs.os, "replace", refuse)
    with pytest.raises(StorageError):
        write_pack(repo.gitdir, [("blob", b"never")])
    monkeypatch.undo()
    assert not tmp_files(repo.gitdir) and not list((repo.gitdir / "objects" / "pack").glob("pack-*"))


def test_a_forked_child_names_its_temporary_files_apart_from_its_parent() -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its prefix, as the fork hook left it
        os.write(write, packs._TMP_PREFIX.encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 100).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert child and child != packs._TMP_PREFIX and child.startswith(f"{pid}_")


def test_staged_trees_are_hashed_once_by_their_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    g = GitRepo(tmp_path / "r.git")
    hashed: list[str] = []
    real = _staging.object_id

    def counting(kind: str, data: bytes) -> str:
        hashed.append(kind)
        return real(kind, data)

    monkeypatch.setattr(_staging, "object_id", counting)

    def build(_tip: str | None) -> Publish:
        tree = g.build_tree(None, {"a/b/c.txt": b"1", "a/d.txt": b"2", "e/f.txt": b"3", "g.txt": b"4"})
        commit = g.write_commit(tree, [], "four files in four trees", Identity(), Identity(), (1, 0))
        return Publish(commit, commit)

    oid = update_ref(g, "refs/heads/main", build)
    # the four blobs and the commit; the four trees (root, a, a/b, e) were hashed by the build itself
    assert sorted(hashed) == ["blob"] * 4 + ["commit"]
    assert git(g.gitdir, "show", f"{oid}:a/b/c.txt") == "1" and fsck_clean(g.gitdir)[0]


def _move(g: GitRepo, ref: str, n: int) -> None:
    def build(tip: str | None) -> Publish:
        tree = g.build_tree(None, {"f": b"%d" % n})
        commit = g.write_commit(tree, [tip] if tip else [], f"move {n}", Identity(), Identity(), (n, 0))
        return Publish(commit, commit)

    update_ref(g, ref, build)


def test_the_reflog_identity_is_looked_up_once_per_handle_not_per_move(tmp_path: Path) -> None:
    import pygit2

    work = tmp_path / "work"
    pygit2.init_repository(str(work), bare=False)  # a work tree's repository keeps reflogs of its branches
    gitdir = work / ".git"
    git(gitdir, "config", "user.name", "Ann Author")
    git(gitdir, "config", "user.email", "ann@example.org")
    g = GitRepo(work)
    _move(g, "refs/heads/main", 1)
    git(gitdir, "config", "user.name", "Bob Builder")  # changed after this handle's first move
    _move(g, "refs/heads/main", 2)
    _move(GitRepo(work), "refs/heads/main", 3)  # a new handle looks it up again
    who = git(gitdir, "log", "-g", "--format=%gn <%ge>", "refs/heads/main").splitlines()
    # newest first: libgit2's own lookup's answer, taken once per handle instead of at every move
    assert who == ["Bob Builder <ann@example.org>", "Ann Author <ann@example.org>", "Ann Author <ann@example.org>"]
    assert fsck_clean(gitdir)[0]


_NO_IDENTITY = """
import sys, pygit2
for level in (pygit2.enums.ConfigLevel.GLOBAL, pygit2.enums.ConfigLevel.SYSTEM, pygit2.enums.ConfigLevel.XDG):
    pygit2.settings.search_path[level] = sys.argv[2]  # no user.name anywhere
from got_core.storage.git import GitRepo
from got_core.storage.refs import Publish, update_ref
from got_core.types import Identity
pygit2.init_repository(sys.argv[1], bare=False)
g = GitRepo(sys.argv[1])
def build(tip):
    commit = g.write_commit(g.build_tree(None, {"f": b"1"}), [], "m", Identity(), Identity(), (1, 0))
    return Publish(commit, commit)
update_ref(g, "refs/heads/main", build)
"""


def test_without_a_configured_identity_the_reflog_says_unknown_as_libgit2_does(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "empty").mkdir()
    work = tmp_path / "work"
    # libgit2's config search path is process-wide: set in a process of its own
    subprocess.run(
        [sys.executable, "-c", _NO_IDENTITY, str(work), str(tmp_path / "empty")],
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )
    assert git(work / ".git", "log", "-g", "--format=%gn <%ge>", "refs/heads/main").strip() == "unknown <unknown>"


def test_merging_small_packs_takes_its_try_lock_without_filelock_where_there_is_fcntl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import filelock

    from got_core.storage.git import _packing

    made: list[str] = []
    merges: list[int] = []
    real_lock, real_merge = filelock.FileLock, _packing._Packing._consolidate

    def lock(path: str) -> Any:
        made.append(path)
        return real_lock(path)

    def merge(self: Any, folder: Path, max_packs: int) -> int:
        merges.append(real_merge(self, folder, max_packs))
        return merges[-1]

    monkeypatch.setattr(filelock, "FileLock", lock)
    monkeypatch.setattr(_packing._Packing, "_consolidate", merge)
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for i in range(3 * _packing.MAX_PACKS):
        repo.commit_node(Node(f"thought {i}"))
    # POSIX: a plain flock on the lock file (filelock resolves and registers its path when made, a
    # dozen getpid and a stat per level, and keeps per-thread state at every acquire); elsewhere
    # filelock's lock, made once per handle
    assert len(merges) >= 2 and sum(merges) > 0 and len(made) == (0 if _packing.fcntl is not None else 1)
    assert (repo.gitdir / "got" / "packs.lock").exists()
    assert fsck_clean(repo.gitdir)[0]
