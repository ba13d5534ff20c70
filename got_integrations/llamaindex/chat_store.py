"""``GitChatStore``: llama-index's ``AsyncDBChatStore`` on a git repository.

Each key (session id) is one ref, ``refs/got/sessions/<encoded key>``; each
message one JSON file; each write one commit (see :mod:`._session` for the
layout). :class:`~got_integrations.llamaindex.memory.GitMemory` stands on it,
and it also plugs into llama-index's own ``Memory``::

    from llama_index.core.memory import Memory
    memory = Memory.from_defaults(session_id="alice", chat_store=GitChatStore("agent.git"))

(with plain ``Memory`` a flush costs a second commit; ``GitMemory`` folds it into one).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from got_core.errors import CorruptRepositoryError, InvalidInputError, MissingExtraError

try:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore, MessageStatus
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("LlamaIndex adapter", "llamaindex", _exc) from None

from got_core.repo import ReasoningRepo
from got_integrations.llamaindex._session import Plan, SessionLog, SessionState, StoredMessage, list_sessions
from got_integrations.llamaindex._window import first_safe_index

__all__ = ["GitChatStore", "to_message", "to_payload"]


def to_payload(message: Any, what: str = "message") -> dict[str, Any]:
    """The JSON form of a chat message, as stored in its file.

    Raises:
        InvalidInputError: not a ``ChatMessage`` (or a dict one can be built from), or
            holding values JSON cannot represent.
    """
    if isinstance(message, dict):
        try:
            message = ChatMessage.model_validate(message)
        except ValueError as exc:
            raise InvalidInputError(f"{what} is not a chat message: {exc}") from None
    if not isinstance(message, ChatMessage):
        raise InvalidInputError(f"{what} must be a llama-index ChatMessage, not {type(message).__name__}")
    try:
        return message.model_dump(mode="json")
    except Exception as exc:  # pydantic raises its own serialization errors
        raise InvalidInputError(
            f"{what} holds a value JSON cannot store ({exc}); keep additional_kwargs to plain data"
        ) from None


def to_message(payload: dict[str, Any], where: str = "a stored chat message") -> ChatMessage:
    """A fresh ``ChatMessage`` from its stored JSON form (callers may mutate it).

    Raises:
        CorruptRepositoryError: the payload does not make a ``ChatMessage`` (damaged data).
    """
    try:
        return ChatMessage.model_validate(payload)
    except Exception as exc:  # pydantic's ValidationError, or anything a damaged value trips
        raise CorruptRepositoryError(
            f"{where} is not a chat message llama-index can read ({type(exc).__name__}: {str(exc)[:160]})"
        ) from None


def _as_list(messages: Any) -> list[Any]:
    if isinstance(messages, (ChatMessage, dict, str, bytes)) or not isinstance(messages, Iterable):
        raise InvalidInputError(f"expected a list of ChatMessage, not {type(messages).__name__}")
    return list(messages)


class GitChatStore(AsyncDBChatStore):
    """A git-backed chat store: sessions are refs, messages are files, writes are commits.

    Args:
        path: the repository (created when missing unless ``create=False``).
        repo: an open :class:`~got_core.repo.ReasoningRepo` to use instead of ``path``.
        create: create the repository when it does not exist.

    Raises:
        RepositoryNotFoundError: no repository at ``path`` and ``create`` is false.
    """

    path: str = Field(description="The git directory holding the sessions.")
    _repo: ReasoningRepo = PrivateAttr()
    _logs: dict = PrivateAttr(default_factory=dict)
    _logs_lock: Any = PrivateAttr(default_factory=threading.Lock)

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        repo: ReasoningRepo | None = None,
        create: bool = True,
        **data: Any,
    ) -> None:
        if repo is None:
            if path is None:
                raise InvalidInputError("GitChatStore needs a repository path (or repo=ReasoningRepo)")
            repo = ReasoningRepo(Path(path), create=create)
        super().__init__(path=str(repo.gitdir), **data)
        self._repo = repo

    @classmethod
    def class_name(cls) -> str:
        """The llama-index component name."""
        return "GitChatStore"

    @property
    def repo(self) -> ReasoningRepo:
        """The repository."""
        return self._repo

    def session(self, key: str) -> SessionLog:
        """The :class:`SessionLog` of ``key`` (one per key, cached).

        Raises:
            InvalidNameError: an empty or over-long key.
        """
        with self._logs_lock:
            log = self._logs.get(key)
            if log is None:
                log = self._logs[key] = SessionLog(self._repo, key, validate=ChatMessage.model_validate)
            return log

    # ------------------------------------------------------------------ sync core
    def active(self, log: SessionLog, state: SessionState) -> list[StoredMessage]:
        """The short-term window of ``state``: unarchived messages, never opening with a tool result."""
        stored = log.messages(state, archived=False)
        skip = first_safe_index([m.role for m in stored])
        return stored[skip:]

    def read(self, key: str, status: MessageStatus | None = MessageStatus.ACTIVE) -> list[StoredMessage]:
        """Stored messages of ``key`` with ``status`` (None: all), oldest first; [] for a new key."""
        log = self.session(key)
        return self._select(log, log.state(full=status != MessageStatus.ACTIVE), status)

    def _select(self, log: SessionLog, state: SessionState, status: MessageStatus | None) -> list[StoredMessage]:
        if status is None:
            return log.messages(state)
        active = self.active(log, state)
        if status == MessageStatus.ACTIVE:
            return active
        keep = {m.seq for m in active}
        return [m for m in log.messages(state) if m.seq not in keep]

    def read_messages(
        self,
        key: str,
        status: MessageStatus | None = MessageStatus.ACTIVE,
        limit: int | None = None,
        offset: int | None = None,
    ) -> list[ChatMessage]:
        """Synchronous :meth:`get_messages`."""
        stored = self.read(key, status)
        start = offset or 0
        stored = stored[start : start + limit] if limit is not None else stored[start:]
        return [to_message(m.data) for m in stored]

    def append(self, key: str, messages: Any, status: MessageStatus = MessageStatus.ACTIVE) -> str | None:
        """Add messages in one commit; returns it (None for an empty list: nothing is written)."""
        payloads = [to_payload(m, f"message {i}") for i, m in enumerate(_as_list(messages))]
        if not payloads:
            return None

        def plan(state: SessionState) -> Plan:
            extra = None
            if status == MessageStatus.ARCHIVED:
                first = state.next_seq
                extra = set(state.archived_extra) | set(range(first, first + len(payloads)))
            return Plan("put", add=payloads, archived_extra=extra)

        return self.session(key).write(plan, full=False)[0]

    def replace(self, key: str, messages: Any, status: MessageStatus = MessageStatus.ACTIVE) -> str | None:
        """Replace every message of ``key`` in one commit (numbers are never reused)."""
        payloads = [to_payload(m, f"message {i}") for i, m in enumerate(_as_list(messages))]

        def plan(state: SessionState) -> Plan | None:
            if not payloads and not state.blobs:
                return None
            floor = state.next_seq
            window = floor if status == MessageStatus.ACTIVE else floor + len(payloads)
            return Plan("set", add=payloads, delete=state.seqs, window_start=window, seq_floor=floor, archived_extra=())

        return self.session(key).write(plan)[0]

    def remove(
        self, key: str, which: str, n: int | None = None, seq: int | None = None, status: MessageStatus | None = None
    ) -> list[ChatMessage]:
        """Delete or archive messages in one commit; returns them.

        Args:
            key: the session.
            which: ``"oldest"`` (delete the ``n`` oldest active), ``"archive"`` (archive them),
                ``"one"`` (delete message number ``seq``), ``"status"`` (delete all with ``status``).
        """
        log = self.session(key)

        def plan(state: SessionState) -> Plan | None:
            if which in ("oldest", "archive"):
                chosen = self.active(log, state)[: max(0, n or 0)]
            elif which == "one":
                chosen = log.load(state, [seq]) if seq in state.blobs else []
            else:
                chosen = self._select(log, state, status)
            if not chosen:
                return None
            result = [to_message(m.data) for m in chosen]
            seqs = [m.seq for m in chosen]
            if which == "archive":
                window = max(seqs) + 1
                return Plan(
                    "archive",
                    window_start=max(window, state.window_start),
                    result=result,
                    archived_extra={s for s in state.archived_extra if s >= window},
                )
            return Plan(
                "delete" if which != "status" else "reset", delete=seqs, seq_floor=state.next_seq, result=result
            )

        return log.write(plan, full=which not in ("oldest", "archive"))[1] or []

    # ------------------------------------------------------------------ AsyncDBChatStore
    async def get_messages(
        self,
        key: str,
        status: MessageStatus | None = MessageStatus.ACTIVE,
        limit: int | None = None,
        offset: int | None = None,
    ) -> list[ChatMessage]:
        """Messages of ``key`` with ``status`` (None: all), oldest first; [] for an unknown key."""
        return self.read_messages(key, status, limit, offset)

    async def count_messages(self, key: str, status: MessageStatus | None = MessageStatus.ACTIVE) -> int:
        """How many messages ``key`` holds with ``status``."""
        return len(self.read(key, status))

    async def add_message(self, key: str, message: ChatMessage, status: MessageStatus = MessageStatus.ACTIVE) -> None:
        """Append one message (one commit)."""
        self.append(key, [message], status)

    async def add_messages(
        self, key: str, messages: list[ChatMessage], status: MessageStatus = MessageStatus.ACTIVE
    ) -> None:
        """Append messages (one commit; none for an empty list)."""
        self.append(key, messages, status)

    async def set_messages(
        self, key: str, messages: list[ChatMessage], status: MessageStatus = MessageStatus.ACTIVE
    ) -> None:
        """Replace all messages of ``key`` (one commit)."""
        self.replace(key, messages, status)

    async def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Delete message number ``idx`` (its file number); returns it, or None when absent."""
        removed = self.remove(key, "one", seq=idx)
        return removed[0] if removed else None

    async def delete_messages(self, key: str, status: MessageStatus | None = None) -> None:
        """Delete every message of ``key`` with ``status`` (None: all), in one commit."""
        self.remove(key, "status", status=status)

    async def delete_oldest_messages(self, key: str, n: int) -> list[ChatMessage]:
        """Delete the ``n`` oldest active messages (one commit) and return them."""
        return self.remove(key, "oldest", n=n)

    async def archive_oldest_messages(self, key: str, n: int) -> list[ChatMessage]:
        """Archive the ``n`` oldest active messages (one commit) and return them."""
        return self.remove(key, "archive", n=n)

    async def get_keys(self) -> list[str]:
        """Every session id in the repository."""
        return list(list_sessions(self._repo))
