"""GitMemory on its own: one commit per write, files git can read, ids, sessions, handles, bad input."""

from __future__ import annotations

import asyncio
import copy
import json
import pickle
from typing import Any

import pytest
from gitcli import fsck_clean, git, unpack_all
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory, StaticMemoryBlock
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.storage.chat_store.base_db import MessageStatus

from got_core import DeterministicClock, ReasoningRepo
from got_core.errors import (
    ConfigError,
    CorruptRepositoryError,
    InvalidInputError,
    InvalidNameError,
    RepositoryNotFoundError,
    UnknownRefError,
)
from got_integrations.llamaindex import GitChatStore, GitMemory, LessonMemoryBlock
from got_integrations.llamaindex._session import SESSIONS_PREFIX, message_path, session_ref


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def bot(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


def texts(messages: list[ChatMessage]) -> list[str]:
    return [m.content for m in messages]


class RecordingBlock(BaseMemoryBlock[str]):
    """A memory block that remembers what was flushed into it (test double of the block API)."""

    received: list[str] = []

    async def _aget(self, messages: list[ChatMessage] | None = None, **kwargs: Any) -> str:
        return f"{len(self.received)} flushed"

    async def _aput(self, messages: list[ChatMessage]) -> None:
        self.received.extend(m.content for m in messages)


# ---------------------------------------------------------------------------- writes
def test_each_write_is_one_commit_and_empty_batches_write_nothing(repo_path, commits):
    memory = GitMemory.from_defaults(path=repo_path, session_id="alice")
    memory.put_messages([])
    asyncio.run(memory.aput_messages([]))
    assert commits(repo_path, "alice") == 0  # not even the session ref exists
    memory.put(user("hi"))
    assert commits(repo_path, "alice") == 1
    memory.put_messages([bot("hello"), user("how are you?"), bot("fine")])
    assert commits(repo_path, "alice") == 2
    asyncio.run(memory.aput(user("bye")))
    assert commits(repo_path, "alice") == 3
    asyncio.run(memory.aput_messages([]))
    assert commits(repo_path, "alice") == 3
    assert texts(memory.get_all()) == ["hi", "hello", "how are you?", "fine", "bye"]
    names = git(repo_path, "show", "--name-only", "--format=", session_ref("alice")).split()
    assert names == [message_path(5)]  # the last write added exactly one file
    assert fsck_clean(repo_path)[0]


def test_set_and_reset_are_one_commit_each_and_idempotent(repo_path, commits):
    memory = GitMemory.from_defaults(path=repo_path, session_id="s")
    memory.reset()
    memory.set([])
    assert commits(repo_path, "s") == 0
    memory.set([user("a"), bot("b")])
    assert commits(repo_path, "s") == 1
    memory.set([user("a"), bot("b")])  # same history: nothing to write
    assert commits(repo_path, "s") == 1
    asyncio.run(memory.aset([user("c")]))
    assert commits(repo_path, "s") == 2 and texts(memory.get_all()) == ["c"]
    memory.put(bot("d"))
    memory.reset()
    assert commits(repo_path, "s") == 4 and memory.get_all() == [] and len(memory) == 0
    memory.put(user("e"))  # numbers are never reused after a reset, so ids stay unique
    assert memory.sql_store.read("s")[0].seq == 5  # a, b, c, d took 1-4
    history = memory.history()
    assert [w.op for w in history] == ["set", "set", "put", "reset", "put"]
    # the earlier conversation is still in git history
    first = json.loads(git(repo_path, "show", f"{history[0].commit}:{message_path(1)}"))
    assert first["role"] == "user" and first["blocks"][0]["text"] == "a"


def test_sync_and_async_methods_write_the_same_history(repo_path):
    a = GitMemory.from_defaults(path=repo_path, session_id="sync")
    b = GitMemory.from_defaults(path=repo_path, session_id="async")
    a.put(user("1")), a.put_messages([bot("2"), user("3")]), a.set([user("x"), bot("y")]), a.put(user("4"))
    a.reset(status=MessageStatus.ARCHIVED)

    async def drive():
        await b.aput(user("1"))
        await b.aput_messages([bot("2"), user("3")])
        await b.aset([user("x"), bot("y")])
        await b.aput(user("4"))
        await b.areset(status=MessageStatus.ARCHIVED)
        return await b.aget(), await b.aget_all()

    got, got_all = asyncio.run(drive())
    assert texts(a.get()) == texts(got) == ["x", "y", "4"]
    assert texts(a.get_all()) == texts(got_all)
    assert [w.op for w in a.history()] == [w.op for w in b.history()]
    # byte-identical message files (same paths, same blobs)
    assert (
        git(repo_path, "ls-tree", "-r", session_ref("sync"), "messages")
        == git(repo_path, "ls-tree", "-r", session_ref("async"), "messages")
        != ""
    )


def test_messages_are_readable_json_and_turn_diffs_show_only_new_messages(repo_path):
    memory = GitMemory.from_defaults(path=repo_path, session_id="alice")
    memory.put(user("What is 2 + 3?"))
    first = memory.head
    memory.put_messages([bot("5")])
    diff = git(repo_path, "diff", "--name-status", first, memory.head)
    assert diff.split() == ["A", message_path(2)]
    patch = git(repo_path, "diff", first, memory.head)
    assert '+      "text": "5"' in patch
    stored = json.loads(git(repo_path, "show", f"{memory.head}:{message_path(1)}"))
    assert ChatMessage.model_validate(stored).content == "What is 2 + 3?"
    meta = json.loads(git(repo_path, "show", f"{memory.head}:session.json"))
    assert meta["session_id"] == "alice" and meta["window_start"] == 1


def test_message_ids_are_the_commits_that_wrote_them_and_stay_stable(repo_path):
    memory = GitMemory.from_defaults(path=repo_path, session_id="ids")
    memory.put(user("a"))
    c1 = memory.head
    memory.put_messages([bot("b"), user("c")])
    c2 = memory.head
    ids = memory.message_ids()
    assert ids == [f"{c1}:{message_path(1)}", f"{c2}:{message_path(2)}", f"{c2}:{message_path(3)}"]
    memory.put(bot("d"))
    assert memory.message_ids()[:3] == ids  # later writes do not change earlier ids
    for mid, message in memory.get_all_with_ids():
        shown = json.loads(git(repo_path, "show", mid))  # the id is git's own <commit>:<path>
        assert ChatMessage.model_validate(shown).content == message.content
    # ids are not sent to the LLM: additional_kwargs stay as the caller wrote them
    assert all(m.additional_kwargs == {} for m in memory.get())


# ---------------------------------------------------------------------------- window and blocks
def test_window_is_cut_in_the_same_commit_and_flushed_messages_reach_the_blocks(repo_path, commits):
    block = RecordingBlock(name="recorder", received=[])
    memory = GitMemory.from_defaults(
        path=repo_path,
        session_id="w",
        token_limit=60,
        token_flush_size=10,
        chat_history_token_ratio=1.0,
        memory_blocks=[block],
    )
    words = "lorem ipsum dolor sit amet"
    for i in range(8):
        memory.put(user(f"q{i} {words}"))
        memory.put(bot(f"a{i} {words}"))
    assert commits(repo_path, "w") == 16  # window moves ride in the puts' own commits
    archived = texts(memory.get_all(MessageStatus.ARCHIVED))
    active = memory.sql_store.read_messages("w")
    assert archived and archived == block.received
    assert texts(memory.get_all()) == archived + texts(active)
    assert active[0].role.value == "user"
    assert memory._estimate_token_count(active) <= 60
    window = memory.get()  # the block's text is inserted into a system message
    assert window[0].role.value == "system" and f"{len(archived)} flushed" in window[0].content
    assert (
        json.loads(git(repo_path, "show", f"{memory.head}:session.json"))["window_start"]
        == memory.sql_store.read("w")[0].seq
    )


def test_get_with_blocks_works_inside_and_outside_an_event_loop(repo_path):
    memory = GitMemory.from_defaults(
        path=repo_path, session_id="b", memory_blocks=[StaticMemoryBlock(name="core", static_content="Be brief.")]
    )
    memory.put(user("hi"))
    assert "Be brief." in memory.get()[0].content

    async def inside():
        return memory.get()  # a chat engine calling the sync API from async code

    assert "Be brief." in asyncio.run(inside())[0].content


# ---------------------------------------------------------------------------- persistence, sessions
def test_a_new_object_on_the_same_path_sees_the_conversation(repo_path):
    GitMemory.from_defaults(path=repo_path, session_id="p").put_messages([user("remember 42"), bot("ok")])
    again = GitMemory.from_defaults(path=repo_path, session_id="p")
    assert texts(again.get()) == ["remember 42", "ok"]
    assert len(again) == 2


@pytest.mark.parametrize("other", ["bob", "../alice", "alice/x", "Ålice ü", " alice", "-alice", "alice.lock"])
def test_sessions_are_isolated(repo_path, other):
    alice = GitMemory.from_defaults(path=repo_path, session_id="alice")
    them = GitMemory.from_defaults(path=repo_path, session_id=other)
    alice.put(user("alice secret"))
    them.put(user("their secret"))
    assert texts(alice.get_all()) == ["alice secret"]
    assert texts(them.get_all()) == ["their secret"]
    refs = git(repo_path, "for-each-ref", "--format=%(refname)", SESSIONS_PREFIX).split()
    assert sorted(refs) == sorted([session_ref("alice"), session_ref(other)])
    assert sorted(asyncio.run(alice.sql_store.get_keys())) == sorted(["alice", other])
    assert fsck_clean(repo_path)[0]


def test_empty_memory_is_truthy_so_agents_keep_it(repo_path):
    memory = GitMemory.from_defaults(path=repo_path, session_id="new")
    assert len(memory) == 0 and bool(memory)
    assert (memory or "replacement") is memory


def test_chat_history_argument_is_one_commit(repo_path, commits):
    memory = GitMemory.from_defaults(path=repo_path, session_id="h", chat_history=[user("a"), bot("b")])
    assert commits(repo_path, "h") == 1 and texts(memory.get()) == ["a", "b"]


# ---------------------------------------------------------------------------- serialization as a handle
def test_to_dict_is_a_json_handle_that_reconnects(repo_path):
    memory = GitMemory.from_defaults(
        path=repo_path,
        session_id="h",
        token_limit=1234,
        chat_history_token_ratio=0.5,
        memory_blocks=[
            StaticMemoryBlock(name="core", static_content="Be brief."),
            LessonMemoryBlock(backend="none", k=2),
        ],
    )
    memory.put(user("persisted"))
    data = json.loads(json.dumps(memory.to_dict()))
    assert data["session_id"] == "h" and data["token_limit"] == 1234 and "messages" not in json.dumps(data)
    back = GitMemory.from_dict(data)
    assert back is not memory and texts(back.get_all()) == ["persisted"]
    assert (back.token_limit, back.chat_history_token_ratio) == (1234, 0.5)
    assert [type(b).__name__ for b in back.memory_blocks] == ["StaticMemoryBlock", "LessonMemoryBlock"]
    assert back.memory_blocks[1].k == 2
    back.put(bot("from the copy"))
    assert texts(memory.get_all()) == ["persisted", "from the copy"]
    unpickled = pickle.loads(pickle.dumps(memory))
    assert unpickled.session_id == "h" and texts(unpickled.get_all()) == texts(memory.get_all())
    twin = copy.deepcopy(memory)  # workflows deep-copy state values: the copy is the same session
    assert twin is not memory and twin.memory_blocks is not memory.memory_blocks
    twin.put(user("via the copy"))
    assert memory.get_all()[-1].content == "via the copy"
    assert memory.model_copy(update={"token_limit": 99}).token_limit == 99 and memory.token_limit == 1234
    with pytest.raises(InvalidInputError):
        GitMemory.from_dict({"session_id": "h"})


class UnserializableBlock(BaseMemoryBlock[str]):
    """A block holding a live object JSON cannot represent (like an LLM or vector store)."""

    handle: Any = None

    async def _aget(self, messages=None, **kwargs: Any) -> str:
        return "live"

    async def _aput(self, messages) -> None:
        return None


def test_blocks_that_cannot_be_rebuilt_come_back_only_from_a_live_memory(repo_path):
    block = UnserializableBlock(name="live", handle=object())
    memory = GitMemory.from_defaults(path=repo_path, session_id="l", memory_blocks=[block])
    data = memory.to_dict()
    assert GitMemory.from_dict(data).memory_blocks[0] is block  # same process, memory alive
    data["instance"] = "gone"
    with pytest.warns(UserWarning, match="cannot be rebuilt"):
        assert GitMemory.from_dict(data).memory_blocks == []


# ---------------------------------------------------------------------------- bad input
def test_unknown_sessions_and_repositories(tmp_path, repo_path):
    with pytest.raises(RepositoryNotFoundError):
        GitMemory.from_defaults(path=tmp_path / "missing.git", session_id="x", create=False)
    GitMemory.from_defaults(path=repo_path, session_id="known").put(user("hi"))
    with pytest.raises(UnknownRefError, match="known"):
        GitMemory.from_defaults(path=repo_path, session_id="nobody", create=False)
    fresh = GitMemory.from_defaults(path=repo_path, session_id="nobody")  # documented: starts empty
    assert fresh.get() == [] and fresh.get_all() == [] and fresh.message_ids() == []
    with pytest.raises(UnknownRefError):
        fresh.history()


def test_bad_messages_and_options_are_refused_without_writing(repo_path, commits):
    memory = GitMemory.from_defaults(path=repo_path, session_id="bad")
    with pytest.raises(InvalidInputError):
        memory.put("just a string")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        memory.put_messages(user("not a list"))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        memory.put_messages([user("ok"), 42])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError):
        memory.put(ChatMessage(role="user", content="x", additional_kwargs={"obj": object()}))
    assert commits(repo_path, "bad") == 0
    with pytest.raises(InvalidNameError):
        GitMemory.from_defaults(path=repo_path, session_id="")
    with pytest.raises(ConfigError):
        GitMemory.from_defaults(path=repo_path, session_id="s", token_limit=0)
    with pytest.raises(ConfigError):
        GitMemory.from_defaults(path=repo_path, session_id="s", chat_history_token_ratio=1.5)


def test_corrupt_sessions_raise_typed_errors_and_lose_nothing(repo_path):
    memory = GitMemory.from_defaults(path=repo_path, session_id="c")
    memory.put_messages([user("keep me"), bot("and me")])
    good = memory.head
    repo = ReasoningRepo(repo_path)
    # a hand edit that broke a message file
    repo.commit_files(memory.ref, {message_path(2): "{not json"}, "bad edit")
    with pytest.raises(CorruptRepositoryError, match="not a stored chat message"):
        memory.get()
    bad = memory.head
    with pytest.raises(CorruptRepositoryError):
        memory.put(user("new"))
    assert memory.head == bad  # nothing written on top of damage
    repo.set_ref(memory.ref, good)  # the fix the message points to
    assert texts(memory.get()) == ["keep me", "and me"]
    # damaged session.json, and a stray file
    repo.commit_files(memory.ref, {"session.json": "[]"}, "bad meta")
    with pytest.raises(CorruptRepositoryError, match="session.json"):
        memory.get_all()
    repo.set_ref(memory.ref, good)
    repo.commit_files(memory.ref, {"messages/notes.txt": "x"}, "stray")
    with pytest.raises(CorruptRepositoryError, match="unexpected entry"):
        memory.get()
    repo.set_ref(memory.ref, good)
    # a ref moved onto a commit that is not a session at all
    other = repo.commit_files("refs/got/other", {"x.txt": "y"}, "unrelated")
    repo.set_ref(memory.ref, other, expected=good)
    with pytest.raises(CorruptRepositoryError, match="no session.json"):
        memory.get()
    repo.set_ref(memory.ref, good)


def test_a_missing_object_is_a_corrupt_repository_error(repo_path):
    memory = GitMemory.from_defaults(path=repo_path, session_id="m")
    memory.put(user("soon gone"))
    blob = git(repo_path, "rev-parse", f"{memory.head}:{message_path(1)}").strip()
    unpack_all(repo_path)  # writes land in packs: make each object a file of its own first
    (repo_path / "objects" / blob[:2] / blob[2:]).unlink()
    fresh = GitMemory.from_defaults(path=repo_path, session_id="m")  # no cached payloads
    with pytest.raises(CorruptRepositoryError):
        fresh.get()


# ---------------------------------------------------------------------------- the chat store alone
def test_git_chat_store_serves_llama_index_memory_and_its_api(repo_path):
    store = GitChatStore(repo_path)
    memory = Memory.from_defaults(
        session_id="plain", chat_store=store, token_limit=40, token_flush_size=5, chat_history_token_ratio=1.0
    )
    for i in range(6):
        memory.put(user(f"question number {i} with words"))
        memory.put(bot(f"answer number {i} with words"))
    assert len(store.read_messages("plain", None)) == 12
    active = store.read_messages("plain")
    assert active and active[0].role.value == "user" and len(active) < 12

    async def api():
        await store.set_messages("k", [user("a"), bot("b"), user("c")])
        assert await store.count_messages("k") == 3
        assert texts(await store.get_messages("k", limit=1, offset=1)) == ["b"]
        assert texts(await store.archive_oldest_messages("k", 1)) == ["a"]
        assert texts(await store.get_messages("k", status=MessageStatus.ARCHIVED)) == ["a"]
        assert texts(await store.delete_oldest_messages("k", 1)) == ["b"]
        await store.add_message("k", bot("old"), status=MessageStatus.ARCHIVED)
        assert texts(await store.get_messages("k")) == ["c"]
        seq = store.read("k")[0].seq
        assert (await store.delete_message("k", seq)).content == "c"
        assert await store.delete_message("k", 999) is None
        await store.delete_messages("k")
        assert await store.get_messages("k", status=None) == []
        return sorted(await store.get_keys())

    assert asyncio.run(api()) == ["k", "plain"]
    assert fsck_clean(repo_path)[0]


def test_a_seeded_rerun_writes_bit_identical_commits(tmp_path):
    heads = []
    for run in ("one", "two"):
        repo = ReasoningRepo(tmp_path / f"{run}.git", clock=DeterministicClock())
        memory = GitMemory.from_defaults(repo=repo, session_id="audit")
        memory.put(user("q"))
        memory.put_messages([bot("a"), user("q2")])
        heads.append(memory.head)
        assert memory.path == str(repo.gitdir)
    assert heads[0] == heads[1]  # content-addressed: same conversation, same clock, same ids


def test_long_sessions_are_sharded_by_hundreds_and_read_whole(repo_path, commits):
    memory = GitMemory.from_defaults(
        path=repo_path, session_id="long", token_limit=40, token_flush_size=1, chat_history_token_ratio=1.0
    )
    batch = [user(f"m{i}") for i in range(1, 231)]
    for i in range(0, 230, 10):
        memory.put_messages(batch[i : i + 10])
    assert commits(repo_path, "long") == 23
    shards = git(repo_path, "ls-tree", "--name-only", f"{session_ref('long')}:messages").split()
    assert shards == ["00000000", "00000100", "00000200"]
    again = GitMemory.from_defaults(path=repo_path, session_id="long", token_limit=40)
    assert texts(again.get_all()) == [f"m{i}" for i in range(1, 231)]
    window = texts(again.get())
    assert window == [f"m{i}" for i in range(231 - len(window), 231)] and 0 < len(window) < 40
    assert len(again) == 230 and len(again.message_ids()) == 230
    assert again.message_ids()[150].endswith(message_path(151))


def test_a_smaller_budget_moves_the_window_in_one_commit(repo_path, commits):
    GitMemory.from_defaults(path=repo_path, session_id="q").put_messages(
        [user(f"question {i} " * 3) if i % 2 == 0 else bot(f"answer {i} " * 3) for i in range(10)]
    )
    tighter = GitMemory.from_defaults(
        path=repo_path, session_id="q", token_limit=20, token_flush_size=1, chat_history_token_ratio=1.0
    )
    assert len(tighter.get()) == 10  # reading never writes
    asyncio.run(tighter._manage_queue())  # what Memory runs after a put, here on its own
    assert commits(repo_path, "q") == 2 and tighter.history()[-1].op == "window"
    assert 0 < len(tighter.get()) < 10 and tighter.get()[0].role.value == "user"
    asyncio.run(tighter._manage_queue())
    assert commits(repo_path, "q") == 2  # already within budget: nothing to write
