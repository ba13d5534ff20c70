"""GCC import reads a hostile `.GCC/` directory: links are never followed, only regular
files within size limits are read, and branch names pass git's path rules."""

from __future__ import annotations

import os
import subprocess

import pytest
from gitcli import fsck_clean

from got_core import ReasoningRepo
from got_core.cli import main
from got_core.errors import InvalidInputError, InvalidNameError, PayloadTooLargeError
from got_core.gcc import export_gcc, import_gcc
from got_core.gcc.workspace import GCCWorkspace

SECRET = "TOPSECRET-do-not-import"


@pytest.fixture
def project(tmp_path):
    """A real exported workspace (two branches) at tmp_path/proj, and a secret outside it."""
    ws = GCCWorkspace(ReasoningRepo.init(tmp_path / "src.git"), roadmap="Solve the LP")
    ws.log_ota("objective is linear", "try the simplex", "call pulp")
    ws.commit("Formulated the LP")
    ws.branch("alt", "try the dual")
    ws.log_ota("dual is smaller", "solve the dual", "call pulp")
    export_gcc(ws, tmp_path / "proj")
    outside = tmp_path / "outside"
    (outside / "branches" / "stolen").mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET + "\n")
    (outside / "main.md").write_text(SECRET + "\n")
    (outside / "branches" / "stolen" / "commit.md").write_text(SECRET + "\n")
    return tmp_path / "proj" / ".GCC", outside


def objects_text(gitdir) -> str:
    proc = subprocess.run(
        ["git", f"--git-dir={gitdir}", "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True
    )
    return proc.stdout.decode("utf-8", "replace")


def refused_and_untouched(tmp_path, gcc_root, fragment: str, exc=InvalidInputError, **options):
    repo = ReasoningRepo.init(tmp_path / "victim.git")
    with pytest.raises(exc) as info:
        import_gcc(gcc_root.parent, repo, **options)
    assert fragment in str(info.value)
    assert repo.refs() == {}  # nothing imported, not even part of it
    assert SECRET not in objects_text(repo.gitdir)
    assert fsck_clean(repo.gitdir)[0]
    return info.value


def test_a_roadmap_symlink_to_a_file_outside_is_refused(tmp_path, project):
    gcc, outside = project
    (gcc / "main.md").unlink()
    (gcc / "main.md").symlink_to(outside / "secret.txt")
    err = refused_and_untouched(tmp_path, gcc, "symbolic link")
    assert "main.md" in str(err)


def test_a_symlink_to_etc_passwd_is_refused(tmp_path, project):
    gcc, _ = project
    log = gcc / "branches" / "alt" / "log.md"
    log.unlink()
    log.symlink_to("/etc/passwd")
    repo = ReasoningRepo.init(tmp_path / "victim.git")
    with pytest.raises(InvalidInputError, match="symbolic link"):
        import_gcc(gcc.parent, repo)
    assert "root:" not in objects_text(repo.gitdir)


def test_directory_symlinks_are_never_followed(tmp_path, project):
    gcc, outside = project
    (gcc / "branches" / "stolen").symlink_to(outside / "branches" / "stolen", target_is_directory=True)
    refused_and_untouched(tmp_path, gcc, "symbolic link")
    # .GCC itself, and branches/, as links
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".GCC").symlink_to(outside, target_is_directory=True)
    repo = ReasoningRepo.init(tmp_path / "v2.git")
    with pytest.raises(InvalidInputError, match="symbolic link"):
        import_gcc(linked, repo)
    inner = tmp_path / "inner" / ".GCC"
    inner.mkdir(parents=True)
    (inner / "main.md").write_text("roadmap\n")
    (inner / "branches").symlink_to(outside / "branches", target_is_directory=True)
    with pytest.raises(InvalidInputError, match="symbolic link"):
        import_gcc(inner.parent, repo)
    assert repo.refs() == {} and SECRET not in objects_text(repo.gitdir)


def test_special_files_are_never_opened(tmp_path, project):
    gcc, _ = project
    commit = gcc / "branches" / "main" / "commit.md"
    commit.unlink()
    os.mkfifo(commit)  # opening it for reading would wait for a writer forever
    refused_and_untouched(tmp_path, gcc, "not a regular file")


def test_skip_unsafe_leaves_links_out_and_reports_them(tmp_path, project, capsys):
    gcc, outside = project
    (gcc / "main.md").unlink()
    (gcc / "main.md").symlink_to(outside / "main.md")
    (gcc / "branches" / "stolen").symlink_to(outside / "branches" / "stolen", target_is_directory=True)
    repo = ReasoningRepo.init(tmp_path / "victim.git")
    ws = import_gcc(gcc.parent, repo, skip_unsafe=True)
    assert sorted(ws.branches()) == ["alt", "main"]
    assert len(ws.skipped) == 2 and all("symbolic link" in s for s in ws.skipped)
    assert SECRET not in objects_text(repo.gitdir) and ws.roadmap() == ""
    # the command line: refused with one line and exit 2, or skipped and listed
    code = main(["gcc", "import", str(gcc.parent), "-n", "again", "-r", str(repo.gitdir)])
    err = capsys.readouterr().err
    assert code == 2 and "symbolic link" in err and len(err.strip().splitlines()) == 1
    code = main(["gcc", "import", str(gcc.parent), "-n", "again", "--skip-unsafe", "-r", str(repo.gitdir)])
    out = capsys.readouterr().out
    assert code == 0 and out.count("skipped") == 2 and "imported 2 branch(es)" in out
    assert SECRET not in objects_text(repo.gitdir)


def test_size_limits_are_enforced(tmp_path, project):
    gcc, _ = project
    (gcc / "main.md").write_text("x" * 5000)
    refused_and_untouched(tmp_path / "a", gcc, "5000 bytes", PayloadTooLargeError, max_file_bytes=4096)
    refused_and_untouched(tmp_path / "b", gcc, "over the limit", PayloadTooLargeError, max_total_bytes=5100)
    ws = import_gcc(gcc.parent, ReasoningRepo.init(tmp_path / "ok.git"), max_file_bytes=8192)
    assert ws.roadmap() == "x" * 5000


@pytest.mark.parametrize("name", ["git~1", ".git", "GIT~1", "a\nb", os.fsdecode(b"caf\xe9")])
def test_hostile_branch_directory_names_are_refused(tmp_path, project, name):
    gcc, _ = project
    (gcc / "branches" / name).mkdir()
    (gcc / "branches" / name / "commit.md").write_text("# Commit History\n")
    refused_and_untouched(tmp_path, gcc, "", InvalidNameError)
    ws = import_gcc(gcc.parent, ReasoningRepo.init(tmp_path / "skip.git"), skip_unsafe=True)
    assert sorted(ws.branches()) == ["alt", "main"] and len(ws.skipped) == 1
