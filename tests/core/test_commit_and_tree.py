"""``GitRepo.commit_and_tree``: what ``peel_to_commit`` then ``commit_tree`` answer, from one lookup."""

from __future__ import annotations

import pygit2

from got_core.repo import ReasoningRepo


def test_commit_and_tree_answers_as_peel_to_commit_then_commit_tree(tmp_path):
    repo = ReasoningRepo.open(tmp_path / "r.git")
    commit = repo.commit_files("refs/heads/main", {"a/b.txt": b"x"}, "one\n")
    repo.close()
    git = ReasoningRepo.open(tmp_path / "r.git").git  # a new handle: nothing it wrote is remembered
    tree = git.commit_tree(commit)
    assert git.commit_and_tree(commit) == (commit, tree)
    sig = pygit2.Signature("t", "t@example.com")
    tag = str(git._r.create_tag("v1", commit, pygit2.enums.ObjectType.COMMIT, sig, "tag\n"))
    assert git.peel_to_commit(tag) == commit
    assert git.commit_and_tree(tag) == (commit, tree)  # an annotated tag is peeled to its commit
    blob = git.tree_entry(tree, "a/b.txt")
    assert blob is not None
    for oid in (tree, blob, "0" * 40, "not an id"):  # not a commit, missing, not an id: None, as peel_to_commit
        assert git.peel_to_commit(oid) is None
        assert git.commit_and_tree(oid) is None
