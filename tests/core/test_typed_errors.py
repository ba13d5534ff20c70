"""Typed errors where a wrong object kind or a closed handle used to escape as TypeError / AttributeError."""

from __future__ import annotations

import pytest

from got_core.errors import CorruptRepositoryError, InvalidInputError, StorageError
from got_core.storage.git import GitRepo
from got_core.storage.inbound import Quarantine
from got_core.types import Identity, Node


def _repo_with_commit(tmp_path):
    git = GitRepo(tmp_path / "r.git")
    tree = git.build_tree(None, {"a.txt": b"one\n"})
    who = Identity("t", "t@example.com")
    return git, tree, git.write_commit(tree, [], "first\n", who, who, (1_700_000_000, 0))


def test_build_tree_on_a_base_that_is_not_a_tree(tmp_path):
    git, _tree, _commit = _repo_with_commit(tmp_path)
    with pytest.raises(CorruptRepositoryError, match="expected a tree"):
        git.build_tree(git.write_blob(b"not a tree\n"), {"b.txt": b"two\n"})


def test_commit_signature_of_a_tree(tmp_path):
    git, tree, commit = _repo_with_commit(tmp_path)
    assert git.commit_signature(commit) == (None, None)
    with pytest.raises(CorruptRepositoryError, match="expected a commit"):
        git.commit_signature(tree)


def test_merge_trees_needs_commits(tmp_path):
    git, tree, commit = _repo_with_commit(tmp_path)
    with pytest.raises(CorruptRepositoryError, match="expected a commit"):
        git.merge_trees(None, commit, tree)


def test_a_closed_quarantine_says_so(tmp_path):
    q = Quarantine(None, "a test")
    q.close()
    with pytest.raises(StorageError, match="closed"):
        q.git.list_refs()


def test_committed_oid():
    with pytest.raises(InvalidInputError, match="not committed"):
        Node("a thought").committed_oid()
    assert Node("a thought", oid="ab" * 20).committed_oid() == "ab" * 20
