"""A GitMemory handle resumes as of the commit it was saved at (forking when the session moved on)."""

from __future__ import annotations

import json

import pytest
from gitcli import fsck_clean, git
from llama_index.core.base.llms.types import ChatMessage

from got_core.errors import InvalidInputError, RepositoryNotFoundError, UnknownRefError
from got_integrations.llamaindex import GitMemory
from got_integrations.llamaindex._resume import fork_name
from got_integrations.llamaindex._session import session_ref


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def texts(memory: GitMemory) -> list[str]:
    return [str(m.content) for m in memory.get_all()]


def test_an_unchanged_session_resumes_on_itself(repo_path, commits):
    memory = GitMemory.from_defaults(session_id="s", path=repo_path)
    memory.put(user("one"))
    handle = json.loads(json.dumps(memory.to_dict()))
    assert handle["at"] == memory.head
    again = GitMemory.from_dict(handle)
    assert again.session_id == "s" and again.forked_from is None
    again.put(user("two"))
    assert texts(memory) == ["one", "two"] and commits(repo_path, "s") == 2


def test_a_stale_handle_forks_at_its_commit_and_leaves_later_turns_alone(repo_path, commits):
    memory = GitMemory.from_defaults(session_id="s", path=repo_path)
    memory.put(user("one"))
    saved = memory.head
    handle = json.loads(json.dumps(memory.to_dict()))
    memory.put(user("later turn"))  # the session moves on after the handle was saved
    later = memory.head

    resumed = GitMemory.from_dict(handle)
    assert resumed.session_id == fork_name("s", saved) == f"s.fork-{saved[:12]}"
    assert resumed.forked_from == ("s", saved)
    assert texts(resumed) == ["one"]  # as of the saved commit: no later turn
    resumed.put(user("resumed"))
    assert texts(resumed) == ["one", "resumed"]
    assert texts(GitMemory.from_defaults(session_id="s", path=repo_path)) == ["one", "later turn"]
    # the real git binary sees the fork as a line starting at the saved commit
    fork_ref = session_ref(resumed.session_id)
    assert git(repo_path, "rev-parse", f"{fork_ref}~1").strip() == saved
    assert git(repo_path, "rev-parse", session_ref("s")).strip() == later
    assert git(repo_path, "merge-base", fork_ref, session_ref("s")).strip() == saved
    assert fsck_clean(repo_path)[0]


def test_resuming_the_same_stale_handle_again_takes_a_new_fork_once_the_first_was_written(repo_path):
    memory = GitMemory.from_defaults(session_id="s", path=repo_path)
    memory.put(user("one"))
    saved, handle = memory.head, memory.to_dict()
    memory.put(user("later"))
    first = GitMemory.from_dict(handle)
    unwritten = GitMemory.from_dict(handle)
    assert unwritten.session_id == first.session_id  # nothing written to the fork yet: reused
    first.put(user("fork one"))
    second = GitMemory.from_dict(handle)
    assert second.session_id == fork_name("s", saved, 2) == f"s.fork-{saved[:12]}-2"
    assert texts(second) == ["one"]


def test_live_keeps_resuming_on_the_newest_commit(repo_path):
    memory = GitMemory.from_defaults(session_id="s", path=repo_path, live=True)
    memory.put(user("one"))
    handle = memory.to_dict()
    memory.put(user("later"))
    resumed = GitMemory.from_dict(handle)
    assert resumed.session_id == "s" and resumed.live and texts(resumed) == ["one", "later"]
    # and per call, for a handle saved without it
    plain = GitMemory.from_defaults(session_id="p", path=repo_path)
    plain.put(user("a"))
    stale = plain.to_dict()
    plain.put(user("b"))
    assert GitMemory.from_dict(stale, live=True).session_id == "p"
    assert GitMemory.from_dict(stale).session_id == fork_name("p", stale["at"])


def test_a_handle_saved_before_the_first_write_forks_empty(repo_path):
    memory = GitMemory.from_defaults(session_id="s", path=repo_path)
    handle = memory.to_dict()
    assert handle["at"] is None
    assert GitMemory.from_dict(handle).session_id == "s"  # still nothing written: no fork
    memory.put(user("written since"))
    resumed = GitMemory.from_dict(handle)
    assert resumed.session_id == "s.fork-empty" and texts(resumed) == []


def test_a_handle_without_a_commit_predates_resume_and_reconnects_live(repo_path):
    memory = GitMemory.from_defaults(session_id="s", path=repo_path)
    memory.put(user("one"))
    handle = memory.to_dict()
    del handle["at"]
    memory.put(user("later"))
    assert GitMemory.from_dict(handle).session_id == "s"


def test_a_handle_naming_a_foreign_or_bogus_commit_is_refused(repo_path, commits):
    alice = GitMemory.from_defaults(session_id="alice", path=repo_path)
    alice.put(user("alice's secret"))
    bob = GitMemory.from_defaults(session_id="bob", path=repo_path)
    bob.put(user("bob"))
    handle = bob.to_dict()
    handle["at"] = alice.head  # another session's commit: would leak alice's messages
    with pytest.raises(UnknownRefError, match="live=True"):
        GitMemory.from_dict(handle)
    for bogus in ("HEAD", "../../x", "0" * 39, 7):
        handle["at"] = bogus
        with pytest.raises(InvalidInputError):
            GitMemory.from_dict(handle)
    handle["at"] = "0" * 40
    with pytest.raises(UnknownRefError):
        GitMemory.from_dict(handle)
    refs = git(repo_path, "for-each-ref", "--format=%(refname)", "refs/got/sessions/").split()
    assert refs == [session_ref("alice"), session_ref("bob")]  # no fork was made


def test_a_handle_with_a_commit_never_creates_a_repository(tmp_path, repo_path):
    memory = GitMemory.from_defaults(session_id="s", path=repo_path)
    memory.put(user("one"))
    handle = memory.to_dict()
    handle["path"] = str(tmp_path / "elsewhere.git")
    with pytest.raises(RepositoryNotFoundError):
        GitMemory.from_dict(handle)
    assert not (tmp_path / "elsewhere.git").exists()
