"""``LessonMemoryBlock``: lessons from any GitOfThoughts memory backend, in the prompt.

A llama-index memory block (``BaseMemoryBlock[str]``) that asks a
:class:`~got_core.memory.MemoryBackend` — chosen by name, the paper's one-line
switch (§4.2: ``none``, ``markdown``, ``vector``, ``graph``, ``git``) — for the
lessons most relevant to the latest user message, and hands them to
``Memory``'s template (inside ``<memory><lessons>…</lessons></memory>`` of the
system message by default)::

    memory = GitMemory.from_defaults(
        path="agent.git", session_id="alice",
        memory_blocks=[LessonMemoryBlock(backend="markdown", path="runs/memory", k=3)],
    )

Lessons are written by whoever distils them (the solver, a reviewer, a script),
not by the chat: messages flushed out of the short-term window are not lessons,
so this block does not accept them (``accept_short_term_memory=False``).
The paper's finding applies: retrieved lessons help only when they are close
to the problem at hand (§5, the copyability threshold), so keep ``k`` small.
"""

from __future__ import annotations

import asyncio
from typing import Any

from got_core.errors import MissingExtraError

try:
    from llama_index.core.base.llms.types import ChatMessage, TextBlock
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.memory.memory import BaseMemoryBlock
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("LlamaIndex adapter", "llamaindex", _exc) from None

from got_core.errors import ConfigError
from got_core.memory import MemoryBackend, get_backend

__all__ = ["LessonMemoryBlock"]


def _text_of(message: ChatMessage) -> str:
    return "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock)).strip()


class LessonMemoryBlock(BaseMemoryBlock[str]):
    """Retrieves lessons from a GitOfThoughts memory backend into the prompt.

    Args:
        backend: the backend's registry name (``none``, ``markdown``, ``vector``, ``graph``, ``git``).
        path: where that backend keeps its data.
        k: how many lessons to retrieve per call.
        backend_options: extra options for :func:`got_core.memory.get_backend`
            (``read_only=True`` is the default: the prompt only reads lessons).
        name: the block's name (the XML tag in the memory template).
        priority: llama-index truncation priority (0 = never truncate; default 1).

    Raises:
        ConfigError: ``k`` below 1 (on construction); an unknown backend name (on first use).
    """

    name: str = Field(default="lessons", description="The name of the memory block.")
    description: str | None = Field(
        default="Lessons learned on earlier problems (answer-free advice).",
        description="A description of the memory block.",
    )
    priority: int = Field(default=1, description="Truncation priority (0 = never truncate).")
    accept_short_term_memory: bool = Field(
        default=False, description="Flushed chat messages are not lessons, so they are not accepted."
    )
    backend: str = Field(default="git", description="Memory backend registry name.")
    path: str | None = Field(default=None, description="Where the backend keeps its data.")
    k: int = Field(default=3, description="Lessons retrieved per call.")
    backend_options: dict[str, Any] = Field(
        default_factory=lambda: {"read_only": True}, description="Options for got_core.memory.get_backend."
    )
    _memory: MemoryBackend | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        if not isinstance(self.k, int) or self.k < 1:
            raise ConfigError(f"k must be a positive int, got {self.k!r}")

    @classmethod
    def from_backend(cls, memory: MemoryBackend, **fields: Any) -> LessonMemoryBlock:
        """A block over an already open backend (its name and path are recorded for handles).

        A block built this way serializes by name and path; one whose backend has no
        path (an in-memory test double) can only come back within the same process.
        """
        path = getattr(memory, "path", None)
        block = cls(backend=getattr(memory, "name", "custom"), path=str(path) if path else None, **fields)
        block._memory = memory
        return block

    @property
    def memory(self) -> MemoryBackend:
        """The backend, opened on first use."""
        if self._memory is None:
            self._memory = get_backend(self.backend, path=self.path, **self.backend_options)
        return self._memory

    def query_for(self, messages: list[ChatMessage] | None) -> str:
        """The retrieval query: the latest user message's text (empty when there is none)."""
        for message in reversed(messages or []):
            if message.role == "user":
                text = _text_of(message)
                if text:
                    return text
        return ""

    def render(self, query: str) -> str:
        """The block's text for ``query``: one ``- [topic] lesson`` line per lesson, best first."""
        if not query.strip():
            return ""
        lessons = self.memory.get_relevant(query, self.k)
        return "\n".join(f"- [{lesson.topic_key}] {lesson.text}" for lesson in lessons)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        # Backends may embed or scan files: keep the event loop free.
        return await asyncio.to_thread(self.render, self.query_for(messages))

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Chat messages are not lessons: nothing is stored (see the module docstring)."""
        return None

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Drop the least relevant lessons (last lines) until about ``tokens_to_truncate`` are saved."""
        lines = content.splitlines()
        saved = 0
        while lines and saved < tokens_to_truncate:
            saved += max(1, len(lines.pop()) // 4)  # ~4 characters per token
        return "\n".join(lines) or None
