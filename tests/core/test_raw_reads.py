"""One "memory first, then the object database" read for raw objects (issue 13, part 2).

``read_raw`` / ``object_header`` (the inbound checks), tree entries (the index's tree
diffs) and ``blob_size`` all answer from the objects a handle staged or wrote lately,
else from the object database, with the same type names: the four object types by
their names (an annotated tag is ``tag``), checked against the real ``git cat-file``.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from got_core import ReasoningRepo
from got_core.errors import CorruptRepositoryError
from got_core.storage.git import GitRepo
from tests.gitcli import git


def _cat_file(path, kind: str, oid: str) -> bytes:
    """The object's raw content as the real git prints it (bytes, not decoded)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    return subprocess.run(
        ["git", f"--git-dir={path}", "cat-file", kind, oid], capture_output=True, env=env, check=True
    ).stdout


def _objects(tmp_path):
    path = tmp_path / "r.git"
    repo = ReasoningRepo.init(path)
    commit = repo.commit_files("master", {"a/f.txt": "hello\n"}, "first")
    repo.close()
    git(path, "-c", "user.name=t", "-c", "user.email=t@x", "tag", "-a", "-m", "annotated", "v1", commit)
    tag = git(path, "rev-parse", "v1").strip()
    tree = git(path, "rev-parse", f"{commit}^{{tree}}").strip()
    blob = git(path, "rev-parse", f"{commit}:a/f.txt").strip()
    return path, {"commit": commit, "tree": tree, "blob": blob, "tag": tag}


def test_every_kind_reads_as_git_names_it_from_disk_and_from_memory(tmp_path):
    path, oids = _objects(tmp_path)
    disk = GitRepo(path, create=False)
    for kind, oid in oids.items():
        raw = _cat_file(path, kind, oid)
        assert git(path, "cat-file", "-t", oid).strip() == kind
        assert disk.read_raw(oid) == (kind, raw)
        assert disk.object_header(oid) == (kind, len(raw))
    assert disk.blob_size(oids["blob"]) == len(b"hello\n")
    fresh = GitRepo(path, create=False)
    with fresh.staged_writes():  # staged objects answer from memory, with the same names
        blob = fresh.write_blob(b"staged content\n")
        tree = fresh.build_tree(None, {"x.txt": b"staged content\n"})
        assert fresh.read_raw(blob) == ("blob", b"staged content\n")
        assert fresh.object_header(blob) == ("blob", 15)
        assert fresh.blob_size(blob) == 15
        assert fresh.object_header(tree) == ("tree", len(fresh.read_raw(tree)[1]))
        assert fresh.changed_tree_paths(None, tree) == [("x.txt", None, blob)]
    assert git(path, "cat-file", "blob", blob) == "staged content\n"


def test_the_wrong_kind_or_a_missing_object_is_a_typed_error(tmp_path):
    path, oids = _objects(tmp_path)
    repo = GitRepo(path, create=False)
    missing = "0" * 39 + "1"
    assert repo.object_header(missing) is None
    for read in (repo.read_raw, repo.blob_size):
        with pytest.raises(CorruptRepositoryError, match="cannot be read"):
            read(missing)
    for kind in ("tag", "tree", "commit"):
        with pytest.raises(CorruptRepositoryError, match="is not a blob"):
            repo.blob_size(oids[kind])
    for kind in ("tag", "blob", "commit"):
        with pytest.raises(CorruptRepositoryError, match="is not a tree"):
            repo.changed_tree_paths(None, oids[kind])
