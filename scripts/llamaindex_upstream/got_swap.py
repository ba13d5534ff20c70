"""pytest plugin: run llama-index-core's own tests with our classes in place of theirs.

Loaded by ``scripts/llamaindex_upstream_tests.sh`` (``-p got_swap``). With ``GOT_SWAP=1``,
through their constructors (each construction without a store of its own gets a fresh
repository under the test's ``tmp_path``, as llama-index's default store is a fresh in-memory
SQLite database per construction):

* ``Memory(...)`` and ``Memory.from_defaults(...)`` build a
  :class:`~got_integrations.llamaindex.GitMemory` (a ``sql_store`` /
  ``chat_store`` argument goes to ``from_defaults(chat_store=...)``, which refuses foreign
  stores with its typed error, exactly what a user would get);
* ``SQLAlchemyChatStore(...)`` builds a :class:`~got_integrations.llamaindex.GitChatStore`
  (the SQL options are dropped: git has no table);
* the agents' default memory (``ChatMemoryBuffer.from_defaults`` inside
  ``FunctionAgent``/``ReActAgent``/``AgentWorkflow`` when no memory is passed), the chat
  engines' (``Memory.from_defaults``, or ``memory_cls=Memory``) and a test's own
  ``ChatMemoryBuffer.from_defaults(...)`` build a ``GitMemory``.

The names are swapped where the tests, the agents and the chat engines look them up (module
globals, and default argument values bound at definition), so llama-index's own code is not
edited. With ``GOT_SWAP=0`` nothing is swapped: the
reference run the comparison needs.
"""

from __future__ import annotations

import importlib
import os
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SWAP = os.environ.get("GOT_SWAP", "1") == "1"
# ChatMemoryBuffer.from_defaults arguments with a GitMemory meaning; the rest (llm,
# chat_store, chat_store_key, tokenizer_fn) are dropped: a buffer's own store is not used.
_BUFFER_KEEP = ("chat_history", "token_limit")


#: What the swapped names built in this run (printed at the end, so a run that swapped
#: nothing is visible).
BUILT = {"GitMemory": 0, "GitChatStore": 0}


class _Swap:
    """What the swapped names build; one per test, its repositories under the test's tmp_path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.built = 0

    def fresh_repo(self) -> Path:
        """A new repository path: what a store-less ``Memory(...)`` or ``SQLAlchemyChatStore(...)``
        gets in llama-index is its own in-memory database, never one shared with another."""
        self.built += 1
        return self.root / f"got-swap-{self.built}.git"

    def memory(self, **kwargs: Any) -> Any:
        from got_integrations.llamaindex import GitMemory

        store = kwargs.pop("sql_store", None)
        if store is not None:
            kwargs["chat_store"] = store
        if kwargs.get("chat_store") is None:
            kwargs["path"] = self.fresh_repo()
        kwargs.setdefault("session_id", uuid.uuid4().hex)  # as Memory: a fresh key
        memory = GitMemory.from_defaults(**kwargs)
        BUILT["GitMemory"] += 1
        return memory

    def chat_store(self, *args: Any, **kwargs: Any) -> Any:
        from got_integrations.llamaindex import GitChatStore

        store = GitChatStore(self.fresh_repo())
        BUILT["GitChatStore"] += 1
        return store

    def buffer(self, **kwargs: Any) -> Any:
        return self.memory(**{k: v for k, v in kwargs.items() if k in _BUFFER_KEEP and v is not None})


def _memory_class(swap: _Swap) -> type:
    from llama_index.core.memory import Memory

    class SwappedMemory(Memory):
        """``Memory`` whose constructor and ``from_defaults`` build a GitMemory."""

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            return swap.memory(**kwargs)

        @classmethod
        def from_defaults(cls, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return swap.memory(**dict(zip(("session_id", "chat_history"), args)), **kwargs)

    return SwappedMemory


def _buffer_class(swap: _Swap) -> type:
    from llama_index.core.memory import ChatMemoryBuffer

    class SwappedBuffer(ChatMemoryBuffer):
        """``ChatMemoryBuffer`` whose ``from_defaults`` builds a GitMemory."""

        @classmethod
        def from_defaults(cls, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return swap.buffer(**kwargs)

    return SwappedBuffer


def _store_class(swap: _Swap) -> type:
    from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

    class SwappedStore(SQLAlchemyChatStore):
        """``SQLAlchemyChatStore`` whose constructor builds a GitChatStore."""

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            return swap.chat_store(*args, **kwargs)

    return SwappedStore


#: Where llama-index builds a default memory besides the test module: the workflow agents and
#: the chat engines (a module a release lacks is skipped).
USERS = (
    "llama_index.core.agent.workflow.base_agent",
    "llama_index.core.agent.workflow.multi_agent_workflow",
    "llama_index.core.chat_engine.simple",
    "llama_index.core.chat_engine.context",
    "llama_index.core.chat_engine.condense_plus_context",
    "llama_index.core.chat_engine.condense_question",
    "llama_index.core.chat_engine.multi_modal_context",
    "llama_index.core.chat_engine.multi_modal_condense_plus_context",
)


def _users() -> list[ModuleType]:
    found = []
    for name in USERS:
        try:
            found.append(importlib.import_module(name))
        except ModuleNotFoundError:
            continue
    return found


def _swap_defaults(monkeypatch: pytest.MonkeyPatch, module: ModuleType, replacements: dict[type, type]) -> None:
    """Default argument values bound at definition (``memory_cls: Type[BaseMemory] = Memory``)."""
    for owner in [
        value for value in vars(module).values() if isinstance(value, type) and value.__module__ == module.__name__
    ]:
        for attribute in vars(owner).values():
            function = getattr(attribute, "__func__", attribute)
            defaults = getattr(function, "__defaults__", None)
            if defaults and any(isinstance(d, type) and d in replacements for d in defaults):
                swapped = tuple(replacements.get(d, d) if isinstance(d, type) else d for d in defaults)
                monkeypatch.setattr(function, "__defaults__", swapped)


@pytest.fixture(autouse=True)
def _got_swap(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not SWAP:
        return
    from llama_index.core.memory import ChatMemoryBuffer, Memory
    from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

    swap = _Swap(tmp_path)
    replacements = {
        Memory: _memory_class(swap),
        ChatMemoryBuffer: _buffer_class(swap),
        SQLAlchemyChatStore: _store_class(swap),
    }
    for module in (request.module, *_users()):
        for name, value in list(vars(module).items()):
            if isinstance(value, type) and value in replacements:
                monkeypatch.setattr(module, name, replacements[value])
        _swap_defaults(monkeypatch, module, replacements)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say what was swapped in (``got_swap: built ...``)."""
    if SWAP:
        terminalreporter.write_line("got_swap: built " + ", ".join(f"{n} {k}" for k, n in BUILT.items()))
