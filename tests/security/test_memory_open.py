"""Opening stores: reads never create, another user's repository is reported as such,
and nothing is ever created over what is already there."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pygit2
import pytest

from got_core import ReasoningRepo
from got_core.cli import main
from got_core.errors import RepositoryAccessError, RepositoryNotFoundError
from got_core.memory import get_backend
from got_core.testing import HashEmbedder

OTHER_UID = 12345
needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="simulating another user's files needs root (chown)"
)


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def chown_tree(root: Path, uid: int) -> None:
    os.chown(root, uid, uid)
    for p in root.rglob("*"):
        os.chown(p, uid, uid, follow_symlinks=False)


@pytest.mark.parametrize("backend", ["git", "markdown", "graph", "vector"])
@pytest.mark.parametrize("verb", [["list"], ["search", "units"], ["stats"]])
def test_reading_a_mistyped_path_creates_nothing_and_exits_2(tmp_path, capsys, backend, verb):
    typo = tmp_path / "memroy"
    code, out, err = run(capsys, "memory", *verb, "-b", backend, "-p", str(typo))
    assert code == 2, (out, err)
    assert not typo.exists()
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and str(typo) in err.replace("\n", "") and "no " in err


@pytest.mark.parametrize("backend", ["git", "markdown", "graph", "vector"])
def test_create_false_refuses_a_missing_store_and_opens_an_existing_one(tmp_path, backend):
    path = tmp_path / "mem"
    opts = {"embedder": HashEmbedder()} if backend == "vector" else {}
    with pytest.raises(RepositoryNotFoundError, match="no .* at"):
        get_backend(backend, path=path, create=False, **opts)
    assert not path.exists()
    with get_backend(backend, path=path, **opts) as mem:
        mem.add_insight("Check units before dividing distances.")
    with get_backend(backend, path=path, create=False, read_only=True, **opts) as mem:
        assert [l.text for l in mem.all_lessons()] == ["Check units before dividing distances."]


def test_an_empty_markdown_store_still_opens_for_reading(tmp_path, capsys):
    path = tmp_path / "mem"
    get_backend("markdown", path=path).close()  # created, nothing stored yet
    code, out, _ = run(capsys, "memory", "list", "--json", "-b", "markdown", "-p", str(path))
    assert code == 0 and json.loads(out) == []


def test_no_repository_is_created_over_a_directory_that_holds_files(tmp_path):
    work = tmp_path / "notes"
    work.mkdir()
    (work / "todo.txt").write_text("mine\n")
    before = snapshot(work)
    for opener in (
        lambda: ReasoningRepo.open(work),
        lambda: ReasoningRepo(work, create=False),
        lambda: get_backend("git", path=work),
    ):
        with pytest.raises(RepositoryNotFoundError, match="nothing was created"):
            opener()
    assert snapshot(work) == before
    empty = tmp_path / "empty"
    empty.mkdir()
    assert ReasoningRepo.open(empty).gitdir == empty  # an empty directory is fine to create in


@needs_root
def test_another_users_repository_is_reported_as_such_and_never_recreated(tmp_path, capsys, isolated_git_config):
    path = tmp_path / "theirs.git"
    repo = ReasoningRepo.init(path)
    repo.commit_files("memory", {"lessons/ab/units.md": "Check units.\n"}, "lesson\n")
    repo.close()
    chown_tree(path, OTHER_UID)
    before = snapshot(path)
    for opener in (
        lambda: ReasoningRepo.open(path),
        lambda: ReasoningRepo(path, create=False),
        lambda: get_backend("git", path=path, create=False),
    ):
        with pytest.raises(RepositoryAccessError) as info:
            opener()
        text = str(info.value)
        assert "not to the current user" in text and "safe.directory" in text and str(OTHER_UID) in text
        assert "no git repository" not in text
    for args in (["log", "-r", str(path)], ["memory", "list", "-b", "git", "-p", str(path)]):
        code, _, err = run(capsys, *args)
        assert code == 2 and "safe.directory" in err and "no git repository" not in err
    assert snapshot(path) == before  # nothing created over it, not even the search index
    # the hint works: trusting the directory the way the message says opens it
    (isolated_git_config / ".gitconfig").write_text(f"[safe]\n\tdirectory = {path.resolve()}\n")
    assert ReasoningRepo(path, create=False).read_file("memory", "lessons/ab/units.md") == b"Check units.\n"


def _as_other_user(fn) -> str:
    """Run ``fn`` in a forked child as another uid; returns what it printed (its result or error)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            out = fn()
        except BaseException as exc:
            out = f"{type(exc).__name__}: {exc}"
        os.write(write, str(out).encode("utf-8", "replace"))
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode()


@needs_root
def test_an_unreadable_repository_says_permission_denied(isolated_git_config):
    base = Path(tempfile.mkdtemp(prefix="got-perm-"))  # outside pytest's root-only tmp tree
    try:
        base.chmod(0o755)
        home = base / "home"
        home.mkdir(mode=0o755)
        saved = {lvl: pygit2.settings.search_path[lvl] for lvl in (pygit2.enums.ConfigLevel.GLOBAL,)}
        pygit2.settings.search_path[pygit2.enums.ConfigLevel.GLOBAL] = str(home)
        path = base / "mine.git"
        ReasoningRepo.init(path).commit_files("memory", {"a.md": "x\n"}, "m\n")
        chown_tree(path, OTHER_UID)  # the child's own repository...
        path.chmod(0o000)  # ...that it may not read

        def open_it():
            ReasoningRepo(path, create=False)
            return "opened"

        result = _as_other_user(open_it)
        assert result.startswith("RepositoryAccessError: permission denied"), result
        path.chmod(0o755)
        (path / "objects").chmod(0o000)
        result = _as_other_user(open_it)
        assert result.startswith("RepositoryAccessError: permission denied") and "objects" in result, result
        (path / "objects").chmod(0o755)
        assert _as_other_user(open_it) == "opened"
        for lvl, value in saved.items():
            pygit2.settings.search_path[lvl] = value
    finally:
        shutil.rmtree(base, ignore_errors=True)
