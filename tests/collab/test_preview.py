"""Previewing a merge and listing pending merges can change nothing (a read-only server relies on it)."""

from __future__ import annotations

from got_core.collab import merge_recorded, merge_status, pending_ref, preview_merge
from got_core.repo import ReasoningRepo
from tests.gitcli import git


def objects_and_refs(path) -> tuple[str, str]:
    listing = git(path, "cat-file", "--batch-all-objects", "--batch-check")
    return listing, git(path, "for-each-ref", "--format=%(refname) %(objectname)")


def test_a_preview_of_a_clean_merge_writes_no_object_and_moves_no_ref(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    base = repo.commit_files("memory", {"a.txt": "a\n"}, "base\n")
    theirs = repo.commit_files("refs/heads/peer", {"b.txt": "b\n"}, "theirs\n", parents=[base])
    repo.commit_files("memory", {"c.txt": "c\n"}, "ours\n")
    before = objects_and_refs(repo.gitdir)
    result = preview_merge(repo, theirs, "memory")
    assert result.status == "merged" and result.commit is None and not result.conflicts
    assert objects_and_refs(repo.gitdir) == before
    # the real merge still writes the merged tree and commit
    assert repo.merge(theirs, into="memory").status == "merged"
    assert repo.files("memory").keys() >= {"a.txt", "b.txt", "c.txt"}


def test_merge_status_without_prune_keeps_an_entry_merged_since(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    base = repo.commit_files("memory", {"a.txt": "a\n"}, "base\n")
    theirs = repo.commit_files("refs/heads/peer", {"a.txt": "theirs\n"}, "theirs\n", parents=[base])
    repo.commit_files("memory", {"a.txt": "ours\n"}, "ours\n")
    assert merge_recorded(repo, theirs, name="peer").status == "conflicted"
    [pending] = merge_status(repo, prune=False)
    assert [c.path for c in pending.conflicts] == ["a.txt"]
    repo.merge(theirs, into="memory", strategy="theirs")  # decided by hand, behind the review's back
    before = objects_and_refs(repo.gitdir)
    assert merge_status(repo, "memory", prune=False) == []
    assert objects_and_refs(repo.gitdir) == before  # still parked
    assert merge_status(repo, "memory") == []
    assert repo.tip(pending_ref("memory", "peer")) is None  # pruned by default


def test_the_ui_merge_list_moves_no_ref_even_for_an_entry_merged_since(tmp_path):
    from got_core.ui.review import merges_view

    repo = ReasoningRepo.init(tmp_path / "r.git")
    base = repo.commit_files("memory", {"a.txt": "a\n"}, "base\n")
    theirs = repo.commit_files("refs/heads/peer", {"a.txt": "theirs\n"}, "theirs\n", parents=[base])
    repo.commit_files("memory", {"a.txt": "ours\n"}, "ours\n")
    assert merge_recorded(repo, theirs, name="peer").status == "conflicted"
    repo.merge(theirs, into="memory", strategy="theirs")
    before = objects_and_refs(repo.gitdir)
    assert merges_view(repo) == {"merges": []}
    assert objects_and_refs(repo.gitdir) == before  # the UI's one write is a resolution
