"""``GitMemory.from_defaults`` takes what llama-index's ``Memory.from_defaults`` takes."""

from __future__ import annotations

import inspect

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory, StaticMemoryBlock
from llama_index.core.memory.memory import InsertMethod
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from got_core import ReasoningRepo
from got_core.errors import ConfigError, GotUserError
from got_integrations.llamaindex import GitChatStore, GitMemory, UnsupportedOptionError


def test_every_stock_argument_is_accepted_in_the_same_order():
    stock = list(inspect.signature(Memory.from_defaults).parameters)
    ours = list(inspect.signature(GitMemory.from_defaults).parameters)
    assert ours[: len(stock)] == stock  # positional calls mean the same thing
    for name in stock:
        assert inspect.signature(GitMemory.from_defaults).parameters[name].default == (
            inspect.signature(Memory.from_defaults).parameters[name].default
        ), name


def test_a_stock_call_runs_unchanged_with_a_path(repo_path, commits):
    kwargs = {
        "session_id": "stock",
        "chat_history": [ChatMessage(role="user", content="hello")],
        "token_limit": 4000,
        "memory_blocks": [StaticMemoryBlock(name="core", static_content="The user is Ada.")],
        "tokenizer_fn": lambda text: text.split(),
        "chat_history_token_ratio": 0.5,
        "token_flush_size": 500,
        "insert_method": InsertMethod.USER,
        "image_token_size_estimate": 100,
        "audio_token_size_estimate": 101,
        "video_token_size_estimate": 102,
        "table_name": "llama_index_memory",  # the defaults of the SQL options are fine
        "async_database_uri": None,
        "async_engine": None,
        "db_schema": None,
    }
    stock = Memory.from_defaults(**kwargs)
    memory = GitMemory.from_defaults(**kwargs, path=repo_path)
    for name in ("session_id", "token_limit", "chat_history_token_ratio", "token_flush_size", "insert_method"):
        assert getattr(memory, name) == getattr(stock, name), name
    assert memory.image_token_size_estimate == 100 and memory.video_token_size_estimate == 102
    assert [m.content for m in memory.get_all()] == ["hello"]
    assert commits(repo_path, "stock") == 1
    assert "The user is Ada." in str(memory.get()[0].content)  # the block is inserted as Memory does


def test_a_git_chat_store_is_honoured(repo_path, commits):
    store = GitChatStore(repo_path)
    memory = GitMemory.from_defaults(session_id="s", chat_store=store)
    memory.put(ChatMessage(role="user", content="hi"))
    assert memory.sql_store is store and commits(repo_path, "s") == 1
    same = GitMemory.from_defaults(session_id="s", chat_store=store, path=repo_path)
    assert [m.content for m in same.get_all()] == ["hi"]
    repo = ReasoningRepo(repo_path)
    via_repo = GitMemory.from_defaults(session_id="s", chat_store=GitChatStore(repo=repo), repo=repo)
    assert [m.content for m in via_repo.get_all()] == ["hi"]


def test_a_chat_store_and_a_different_repository_are_refused(tmp_path, repo_path):
    store = GitChatStore(repo_path)
    with pytest.raises(UnsupportedOptionError, match="pass only one"):
        GitMemory.from_defaults(session_id="s", chat_store=store, path=tmp_path / "other.git")
    with pytest.raises(UnsupportedOptionError, match="pass only one"):
        GitMemory.from_defaults(session_id="s", chat_store=store, repo=ReasoningRepo(tmp_path / "third.git"))


@pytest.mark.parametrize(
    ("option", "value", "instead"),
    [
        ("async_database_uri", "sqlite+aiosqlite:///secret-password@memory.db", "path='agent.git'"),
        ("table_name", "my_table", "refs/got/sessions/<session_id>"),
        ("db_schema", "public", "one session_id per namespace"),
        ("async_engine", object(), "repo=ReasoningRepo"),
    ],
)
def test_sql_options_get_a_typed_error_naming_the_git_equivalent(tmp_path, option, value, instead):
    target = tmp_path / "never.git"
    with pytest.raises(UnsupportedOptionError) as info:
        GitMemory.from_defaults(session_id="s", path=target, **{option: value})
    message = str(info.value)
    assert option in message and instead in message
    assert "secret-password" not in message  # a URI may carry credentials: never echoed
    assert isinstance(info.value, (ConfigError, GotUserError, ValueError))
    assert not target.exists()  # refused before anything was created


def test_a_foreign_chat_store_is_refused_and_names_git_chat_store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GOT_REPO", raising=False)
    foreign = SQLAlchemyChatStore(table_name="t", async_database_uri="sqlite+aiosqlite:///:memory:")
    with pytest.raises(UnsupportedOptionError, match=r"chat_store=GitChatStore\('agent.git'\)") as info:
        GitMemory.from_defaults(session_id="s", chat_store=foreign)
    assert "SQLAlchemyChatStore" in str(info.value)
    assert not (tmp_path / "got.git").exists()


def test_positional_arguments_mean_what_they_mean_for_memory(repo_path):
    memory = GitMemory.from_defaults("alice", [ChatMessage(role="user", content="hi")], 5000, path=repo_path)
    assert (memory.session_id, memory.token_limit) == ("alice", 5000)
    assert [m.content for m in memory.get_all()] == ["hi"]
