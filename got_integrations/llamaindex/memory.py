"""``GitMemory``: llama-index's ``Memory`` with every write a git commit.

A drop-in for ``llama_index.core.memory.Memory`` (it *is* one: the same token
-limited short-term window, the same memory blocks and prompt template), used by
``FunctionAgent``, ``ReActAgent``, ``AgentWorkflow`` and the chat engines::

    memory = GitMemory.from_defaults(path="agent.git", session_id="alice")
    await agent.run("What is 2 + 3?", memory=memory)

What differs, and why (ARCHITECTURE §1: memory buffers cannot be diffed or audited):

* **one commit per write** on ``refs/got/sessions/<encoded session id>`` — a
  batch of messages plus any window move is a single commit, made with a
  compare-and-swap so concurrent writers lose nothing; an empty batch writes nothing;
* **one file per message** (``messages/0000000007.json``), so ``git diff``
  between two turns shows exactly the new messages and the window move;
* **stable message ids**: ``<commit>:<path>`` of the commit that wrote it
  (:meth:`GitMemory.message_ids`; not put in ``additional_kwargs``, which some
  LLM adapters forward to the provider's API);
* **safe window cuts**: the window never opens with a tool result, so a tool
  call and its results are never separated, even after a reload;
* **a handle, not a copy**: ``to_dict()`` (and so ``Context.to_dict()``) holds
  the repository path, session id, settings and the session's commit; ``from_dict``
  reconnects **as of that commit**, on a fork ``<session>.fork-<12 hex>`` when the
  session moved on since (``live=True`` reconnects to the newest commit instead).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
import uuid
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from got_core.errors import MissingExtraError

try:
    from llama_index.core.async_utils import asyncio_run
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.memory.memory import (
        DEFAULT_FLUSH_SIZE,
        DEFAULT_MEMORY_BLOCKS_TEMPLATE,
        DEFAULT_TOKEN_LIMIT,
        BaseMemoryBlock,
        InsertMethod,
        Memory,
    )
    from llama_index.core.prompts import RichPromptTemplate
    from llama_index.core.storage.chat_store.base_db import MessageStatus
    from llama_index.core.utils import get_tokenizer
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("LlamaIndex adapter", "llamaindex", _exc) from None

from got_core.errors import ConfigError, InvalidInputError
from got_core.repo import ReasoningRepo
from got_integrations.llamaindex._options import SQL_DEFAULTS, UnsupportedOptionError, refuse_sql_options
from got_integrations.llamaindex._resume import resume_session
from got_integrations.llamaindex._session import Plan, SessionLog, SessionState, StoredMessage, Write
from got_integrations.llamaindex._window import choose_window_start
from got_integrations.llamaindex.chat_store import GitChatStore, _as_list, to_message, to_payload

__all__ = ["HANDLE_FORMAT", "GitMemory", "UnsupportedOptionError"]

HANDLE_FORMAT = "got.llamaindex.memory/1"
_SETTINGS = (
    "token_limit",
    "token_flush_size",
    "chat_history_token_ratio",
    "image_token_size_estimate",
    "audio_token_size_estimate",
    "video_token_size_estimate",
    "document_token_size_estimate",
)
# Live memories by instance token: a Context round trip inside one process gets back
# memory blocks that cannot be rebuilt from JSON (an LLM-backed fact extractor, say).
_LIVE: weakref.WeakValueDictionary[str, GitMemory] = weakref.WeakValueDictionary()
_IMPORTABLE = ("llama_index.core.memory.", "got_integrations.llamaindex.")


def _default_path() -> str:
    return os.environ.get("GOT_REPO", "got.git")


class GitMemory(Memory):
    """llama-index ``Memory`` persisted in git: one commit per write, one file per message.

    Build it with :meth:`from_defaults`. Every ``Memory`` option works the same;
    the chat store is a :class:`GitChatStore` on the repository.

    Attributes:
        path: the repository's git directory.
        session_id: the session (one ref per session; sessions never see each other).
    """

    path: str = Field(description="The git repository holding the session.")
    live: bool = Field(
        default=False,
        description="Whether a serialized handle resumes on the newest commit (else as of its own commit).",
    )
    _log: SessionLog = PrivateAttr()
    _tokens: dict[str, int] = PrivateAttr(default_factory=dict)
    _token: str = PrivateAttr(default_factory=lambda: uuid.uuid4().hex)
    _forked_from: tuple[str, str | None] | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        store = self.sql_store
        if not isinstance(store, GitChatStore):
            raise ConfigError("GitMemory needs a GitChatStore; build it with GitMemory.from_defaults(path=...)")
        self._log = store.session(self.session_id)
        _LIVE[self._token] = self

    @property
    def _store(self) -> GitChatStore:
        """The chat store (``Memory`` types it as any ``AsyncDBChatStore``).

        Raises:
            ConfigError: ``sql_store`` was replaced by another kind of store.
        """
        store = self.sql_store
        if not isinstance(store, GitChatStore):
            raise ConfigError("GitMemory needs a GitChatStore; build it with GitMemory.from_defaults(path=...)")
        return store

    @classmethod
    def class_name(cls) -> str:
        """The llama-index component name."""
        return "GitMemory"

    @classmethod
    def from_defaults(  # type: ignore[override]  # Memory.from_defaults' arguments, then ours
        cls,
        session_id: str | None = None,
        chat_history: list[ChatMessage] | None = None,
        token_limit: int = DEFAULT_TOKEN_LIMIT,
        memory_blocks: list[BaseMemoryBlock[Any]] | None = None,
        tokenizer_fn: Callable[[str], list] | None = None,
        chat_history_token_ratio: float = 0.7,
        token_flush_size: int = DEFAULT_FLUSH_SIZE,
        memory_blocks_template: RichPromptTemplate = DEFAULT_MEMORY_BLOCKS_TEMPLATE,
        insert_method: InsertMethod = InsertMethod.SYSTEM,
        image_token_size_estimate: int = 256,
        audio_token_size_estimate: int = 256,
        video_token_size_estimate: int = 256,
        chat_store: Any = None,
        table_name: str = SQL_DEFAULTS["table_name"],
        async_database_uri: str | None = None,
        async_engine: Any = None,
        db_schema: str | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        repo: ReasoningRepo | None = None,
        create: bool = True,
        document_token_size_estimate: int = 2048,
        live: bool = False,
    ) -> GitMemory:
        """Open (or start) session ``session_id`` in the repository at ``path``.

        Takes every argument of llama-index's ``Memory.from_defaults``, in the same order,
        so ``Memory.from_defaults(...)`` becomes ``GitMemory.from_defaults(..., path=...)``.
        The SQL store's options have a git equivalent instead (see Raises).

        Args:
            session_id: the session (default ``"default"``: a fixed id, so a restart finds it;
                llama-index picks a random one).
            chat_history: replace the session's messages with these (one commit).
            token_limit, chat_history_token_ratio, token_flush_size, memory_blocks,
            memory_blocks_template, insert_method, tokenizer_fn, *_token_size_estimate:
                as for llama-index's ``Memory.from_defaults``.
            chat_store: a :class:`GitChatStore` to use (its repository), instead of ``path``.
            table_name, async_database_uri, async_engine, db_schema: accepted at their
                defaults only (git has no SQL table; see Raises).
            path: the repository (default ``$GOT_REPO`` or ``./got.git``); created when missing.
            repo: an open repository to use instead of ``path`` (to share identity, signer, clock).
            create: when false, a missing repository or session raises instead of starting empty.
            live: what a serialized handle (``to_dict``, so ``Context.to_dict()``) resumes:
                false (default) resumes as of the commit it was saved at, forking when the
                session moved on since; true resumes on the session's newest commit.

        Raises:
            UnsupportedOptionError: a SQL option (``async_database_uri``, ``async_engine``,
                ``db_schema``, a non-default ``table_name``), a ``chat_store`` that is not a
                :class:`GitChatStore`, or a ``chat_store`` and a ``path``/``repo`` naming
                different repositories.
            ConfigError: a non-positive token limit, or a ratio outside (0, 1].
            InvalidNameError: an empty or over-long session id.
            RepositoryNotFoundError: ``create=False`` and no repository at ``path``.
            UnknownRefError: ``create=False`` and the session was never written.
        """
        refuse_sql_options(
            table_name=table_name, async_database_uri=async_database_uri, async_engine=async_engine, db_schema=db_schema
        )
        if not isinstance(token_limit, int) or isinstance(token_limit, bool) or token_limit < 1:
            raise ConfigError(f"token_limit must be a positive int, got {token_limit!r}")
        if not isinstance(chat_history_token_ratio, (int, float)) or not 0 < chat_history_token_ratio <= 1:
            raise ConfigError(f"chat_history_token_ratio must be in (0, 1], got {chat_history_token_ratio!r}")
        if token_flush_size > token_limit:
            token_flush_size = int(token_limit * 0.7)  # what Memory.from_defaults does
        store = _chat_store(chat_store, path, repo, create)
        session_id = "default" if session_id is None else session_id
        memory = cls(
            path=store.path,
            live=live,
            token_limit=token_limit,
            tokenizer_fn=tokenizer_fn or get_tokenizer(),
            sql_store=store,
            session_id=session_id,
            memory_blocks=memory_blocks or [],
            chat_history_token_ratio=chat_history_token_ratio,
            token_flush_size=token_flush_size,
            memory_blocks_template=memory_blocks_template,
            insert_method=insert_method,
            image_token_size_estimate=image_token_size_estimate,
            audio_token_size_estimate=audio_token_size_estimate,
            video_token_size_estimate=video_token_size_estimate,
            document_token_size_estimate=document_token_size_estimate,
        )
        if not create:
            memory._log.require()
        if chat_history is not None:
            memory.set(chat_history)
        return memory

    # ------------------------------------------------------------------ identity
    @property
    def repo(self) -> ReasoningRepo:
        """The repository."""
        return self._store.repo

    @property
    def ref(self) -> str:
        """The session's ref (``refs/got/sessions/<encoded id>``)."""
        return self._log.ref

    @property
    def head(self) -> str | None:
        """The session's newest commit (None before the first write)."""
        return self._log.tip()

    def __bool__(self) -> bool:
        # The agents pick their own buffer when `memory` is falsy (`ev.get("memory") or
        # ChatMemoryBuffer...` in base_agent/multi_agent_workflow); with __len__ below an
        # empty session would be replaced silently. A memory object is always "there".
        return True

    def __len__(self) -> int:
        """Number of stored messages (archived ones included)."""
        return len(self._log.state(full=True).blobs)

    # ------------------------------------------------------------------ writing
    def _count(self, stored: StoredMessage) -> int:
        count = self._tokens.get(stored.blob)
        if count is None:
            count = self._tokens[stored.blob] = self._estimate_token_count(to_message(stored.data))
        return count

    def _commit(
        self, op: str, new: list[Any], *, replace: bool = False, only_window: bool = False
    ) -> list[ChatMessage]:
        """One commit: ``new`` appended (or replacing everything), the window moved if over budget.

        Returns the messages flushed out of the window, for the memory blocks.
        """
        payloads = [to_payload(m, f"message {i}") for i, m in enumerate(new)]
        if not payloads and not replace and not only_window:
            return []  # an empty batch writes nothing
        new_tokens = [self._estimate_token_count(to_message(p)) for p in payloads]
        budget = self.token_limit * self.chat_history_token_ratio
        store = self._store

        def plan(state: SessionState) -> Plan | None:
            if replace:
                current = self._log.messages(state)
                if [m.data for m in current] == payloads:
                    return None  # the same history again: nothing to write
                window: list[StoredMessage] = []
                first = state.next_seq
            else:
                window = store.active(self._log, state)
                first = state.next_seq
            roles = [m.role for m in window] + [str(p["role"]) for p in payloads]
            tokens = [self._count(m) for m in window] + new_tokens
            seqs = [m.seq for m in window] + list(range(first, first + len(payloads)))
            cut = choose_window_start(roles, tokens, budget, self.token_flush_size)
            flushed = ([m.data for m in window] + payloads)[:cut]
            start = seqs[cut] if seqs else (state.next_seq if replace else None)
            if only_window and not cut and (start is None or start == state.window_start):
                return None
            extra = None if start is None else {s for s in state.archived_extra if s >= start}
            if replace:
                return Plan(
                    op,
                    add=payloads,
                    delete=state.seqs,
                    window_start=start,
                    seq_floor=first,
                    archived_extra=extra or (),
                    result=flushed,
                )
            return Plan(op, add=payloads, window_start=start, archived_extra=extra, result=flushed)

        _, flushed = self._log.write(plan, full=replace)
        return [to_message(p) for p in flushed or []]

    async def _waterfall(self, flushed: list[ChatMessage]) -> None:
        # As Memory._manage_queue: every block sees what left the short-term window.
        if flushed and self.memory_blocks:
            await asyncio.gather(
                *[
                    block.aput(flushed, from_short_term_memory=True, session_id=self.session_id)
                    for block in self.memory_blocks
                ]
            )

    def _waterfall_sync(self, flushed: list[ChatMessage]) -> None:
        if flushed and self.memory_blocks:
            asyncio_run(self._waterfall(flushed))

    async def aput(self, message: ChatMessage) -> None:
        """Append one message (one commit), flushing older messages to the blocks if over budget."""
        await self._waterfall(self._commit("put", [message]))

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        """Append messages in one commit; an empty list writes nothing."""
        await self._waterfall(self._commit("put", _as_list(messages)))

    async def aset(self, messages: list[ChatMessage]) -> None:
        """Replace the session's messages (one commit; none when they are unchanged)."""
        await self._waterfall(self._commit("set", _as_list(messages), replace=True))

    async def areset(self, status: MessageStatus | None = None) -> None:
        """Delete the session's messages (all, or those with ``status``) in one commit.

        History keeps them: earlier commits still hold every message.
        """
        self._store.remove(self.session_id, "status", status=status)

    async def _manage_queue(self) -> None:
        """Move the window if the stored history is over budget (one commit, or none)."""
        await self._waterfall(self._commit("window", [], only_window=True))

    def put(self, message: ChatMessage) -> None:
        """Synchronous :meth:`aput` (for chat engines)."""
        self._waterfall_sync(self._commit("put", [message]))

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Synchronous :meth:`aput_messages`."""
        self._waterfall_sync(self._commit("put", _as_list(messages)))

    def set(self, messages: list[ChatMessage]) -> None:
        """Synchronous :meth:`aset`."""
        self._waterfall_sync(self._commit("set", _as_list(messages), replace=True))

    def reset(self, status: MessageStatus | None = None) -> None:
        """Synchronous :meth:`areset`."""
        self._store.remove(self.session_id, "status", status=status)

    # ------------------------------------------------------------------ reading
    def get(self, input: str | ChatMessage | None = None, **block_kwargs: Any) -> list[ChatMessage]:
        """The short-term window with the memory blocks inserted (as :meth:`aget`)."""
        if not self.memory_blocks:
            return self._store.read_messages(self.session_id)
        return asyncio_run(self.aget(input=input, **block_kwargs))

    def get_all(self, status: MessageStatus | None = None) -> list[ChatMessage]:
        """Every stored message (or those with ``status``), oldest first."""
        return self._store.read_messages(self.session_id, status)

    def history(self) -> list[Write]:
        """The session's writes (commits), oldest first.

        Raises:
            UnknownRefError: nothing was written to this session yet.
        """
        return self._log.history()

    def message_ids(self, status: MessageStatus | None = None) -> list[str]:
        """Stable ids (``<commit>:<path>``) of :meth:`get_all`'s messages, in the same order."""
        return [mid for mid, _ in self.get_all_with_ids(status)]

    def get_all_with_ids(self, status: MessageStatus | None = None) -> list[tuple]:
        """``(id, ChatMessage)`` pairs for the stored messages (or those with ``status``)."""
        stored = self._store.read(self.session_id, status)
        if not stored:
            return []
        ids = self._log.message_ids()
        return [(ids.get(m.seq, f"{self.head}:{m.path}"), to_message(m.data)) for m in stored]

    # ------------------------------------------------------------------ serialization as a handle
    def to_dict(self, **kwargs: Any) -> dict[str, Any]:
        """A JSON-able handle: repository path, session id, its newest commit (``at``), settings, blocks.

        :meth:`from_dict` resumes it as of ``at`` (unless the memory is ``live``).
        """
        data: dict[str, Any] = {
            "class_name": self.class_name(),
            "format": HANDLE_FORMAT,
            "path": self.path,
            "session_id": self.session_id,
            "insert_method": self.insert_method.value,
            "instance": self._token,
            "at": self.head,
            "live": self.live,
        }
        data.update({name: getattr(self, name) for name in _SETTINGS})
        if self.memory_blocks_template.template_str != DEFAULT_MEMORY_BLOCKS_TEMPLATE.template_str:
            data["memory_blocks_template"] = self.memory_blocks_template.template_str
        data["memory_blocks"] = [_block_spec(block) for block in self.memory_blocks]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], live: bool | None = None, **kwargs: Any) -> GitMemory:
        """Reconnect to the session a :meth:`to_dict` handle names, as of the commit it was saved at.

        When the session has moved on since the handle was saved, the memory continues on a
        fork (``<session>.fork-<12 hex>``, see :mod:`._resume`) that starts at the saved
        commit: a resumed ``Context`` sees the conversation as it was, and its writes never
        mix with the later turns. :attr:`forked_from` says whether that happened.

        Args:
            data: the handle.
            live: resume on the session's newest commit instead (today's behaviour of a
                plain reconnect); None takes the ``live`` setting stored in the handle.

        Raises:
            InvalidInputError: not a GitMemory handle.
            RepositoryNotFoundError: the handle names a commit and there is no repository at its path.
            UnknownRefError: the handle's commit is not in the session's history (resume
                with ``live=True`` to continue from the newest commit).
        """
        if not isinstance(data, dict) or data.get("format") != HANDLE_FORMAT or "session_id" not in data:
            raise InvalidInputError("not a GitMemory handle (expected the output of GitMemory.to_dict())")
        live = bool(data.get("live", False)) if live is None else live
        live_memory = _LIVE.get(str(data.get("instance", "")))
        blocks = [b for spec in data.get("memory_blocks", []) if (b := _rebuild_block(spec, live_memory)) is not None]
        options = {name: data[name] for name in _SETTINGS if name in data}
        if "memory_blocks_template" in data:
            options["memory_blocks_template"] = RichPromptTemplate(data["memory_blocks_template"])
        session_id, forked = data["session_id"], False
        # A handle naming a commit was saved from an existing repository: never create one
        # where a (possibly edited) handle points.
        store = GitChatStore(data["path"], create=data.get("at") is None)
        if not live and "at" in data:  # a handle without "at" predates as-of resumes: live
            session_id, forked = resume_session(store.repo, session_id, data["at"])
        memory = cls.from_defaults(
            session_id=session_id,
            chat_store=store,
            insert_method=InsertMethod(data.get("insert_method", "system")),
            memory_blocks=blocks,
            live=live,
            **options,
        )
        memory._forked_from = (data["session_id"], data["at"]) if forked else None
        return memory

    @property
    def forked_from(self) -> tuple[str, str | None] | None:
        """``(session id, commit)`` this memory's fork started from, when :meth:`from_dict` forked."""
        return self._forked_from

    def __reduce__(self) -> tuple:
        # Pickling (and PickleSerializer) store the handle too, never the repository.
        return (GitMemory.from_dict, (self.to_dict(),))

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> GitMemory:
        # A handle: even a deep copy shares the session (it lives in git, not in this
        # object) and the open repository; only the list of blocks is its own.
        copied = self.__copy__()
        copied.__dict__["memory_blocks"] = list(self.memory_blocks)
        return copied


def _chat_store(
    chat_store: Any, path: str | os.PathLike[str] | None, repo: ReasoningRepo | None, create: bool
) -> GitChatStore:
    """The store ``from_defaults`` uses: ``chat_store`` if it is ours, else one on ``path``/``repo``."""
    if chat_store is None:
        return GitChatStore(path if path is not None or repo is not None else _default_path(), repo=repo, create=create)
    if not isinstance(chat_store, GitChatStore):
        raise UnsupportedOptionError(
            f"GitMemory.from_defaults(chat_store=<{type(chat_store).__name__}>): GitMemory keeps its messages in "
            "git; pass chat_store=GitChatStore('agent.git') or path='agent.git' (to keep this store, use "
            "llama-index's own Memory.from_defaults(chat_store=...))"
        )
    if repo is not None and repo.gitdir != chat_store.repo.gitdir:
        raise UnsupportedOptionError(
            f"chat_store is on {chat_store.path} but repo= is {repo.gitdir}; pass only one of them"
        )
    if path is not None and Path(path).resolve() != Path(chat_store.path).resolve():
        raise UnsupportedOptionError(f"chat_store is on {chat_store.path} but path= is {path}; pass only one of them")
    return chat_store


def _block_spec(block: BaseMemoryBlock) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": block.name, "class": f"{type(block).__module__}:{type(block).__qualname__}"}
    try:
        spec["config"] = block.model_dump(mode="json")
    except Exception:  # an LLM or vector store inside: only the live object can come back
        spec["config"] = None
    return spec


def _rebuild_block(spec: dict[str, Any], live: GitMemory | None) -> BaseMemoryBlock | None:
    module, _, qualname = str(spec.get("class", "")).partition(":")
    cls: Any = sys.modules.get(module)
    if cls is None and module.startswith(_IMPORTABLE):
        # Blocks of llama-index and of this package may be imported; any other module must
        # already be loaded (a handle never makes us import arbitrary code).
        try:
            cls = importlib.import_module(module)
        except ImportError:
            cls = None
    for part in qualname.split("."):
        cls = getattr(cls, part, None)
    if isinstance(cls, type) and issubclass(cls, BaseMemoryBlock) and spec.get("config") is not None:
        try:
            return cls.model_validate(spec["config"])
        except Exception:
            pass
    if live is not None:
        for block in live.memory_blocks:
            if block.name == spec.get("name"):
                return block
    warnings.warn(
        f"memory block {spec.get('name')!r} ({spec.get('class')}) cannot be rebuilt from its "
        "handle; add it again to the restored memory's memory_blocks",
        stacklevel=3,
    )
    return None
