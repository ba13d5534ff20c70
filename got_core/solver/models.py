"""The chat-model seam of the solver: one protocol and one recording base.

§3.2 of the paper (arXiv 2606.14470) holds the agent fixed and swaps only the
memory substrate, so every model call must be measurable in the same way:
tokens in/out and latency are recorded for each call by :class:`BaseChatModel`,
whatever sits behind it (vLLM over HTTP, a LangChain or LlamaIndex model, the
scripted stand-in in :mod:`got_core.testing`).

::

    ChatModel (Protocol)          complete(messages, ...) -> ChatResponse; acomplete(...)
    └── BaseChatModel             records every call in .calls / .usage; one hook: _complete
        ├── OpenAICompatibleModel the way vLLM serves models (:mod:`got_core.solver.openai_compat`)
        ├── got_core.solver.scripted.ScriptedChatModel
        └── got_integrations.models.LangChainChatModel / LlamaIndexLLM

Messages are plain OpenAI-style dicts (``{"role": "user", "content": "..."}``);
assistant messages may carry ``tool_calls`` and tool results use ``role="tool"``.
"""

from __future__ import annotations

import abc
import asyncio
import json
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from got_core.errors import (
    InvalidInputError,
    ModelResponseError,
)

__all__ = [
    "START_SERVER_HINT",
    "BaseChatModel",
    "CallRecord",
    "ChatModel",
    "ChatResponse",
    "ToolCall",
    "Usage",
    "estimate_tokens",
    "validate_messages",
]

#: Said whenever no server answers; the CLI and ``check_endpoint`` share it.
START_SERVER_HINT = (
    "start an OpenAI-compatible server, e.g. `vllm serve <model>` "
    "(it listens on http://127.0.0.1:8000/v1), or point GOT_BASE_URL / --base-url "
    "at any OpenAI-compatible endpoint"
)


def estimate_tokens(text: str | None) -> int:
    """Approximate a token count as the number of whitespace-separated words.

    Used when a backend reports no usage (scripted models, some framework
    models, streams without a usage chunk), so budgets never see zero.
    """
    return len(text.split()) if text else 0


@dataclass
class Usage:
    """Token counts of one call or a running total.

    Attributes:
        prompt_tokens: tokens sent to the model.
        completion_tokens: tokens the model produced.
        estimated: True when any count came from :func:`estimate_tokens`
            rather than from the backend.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.estimated or other.estimated,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict, with ``total_tokens``."""
        return {**asdict(self), "total_tokens": self.total_tokens}


@dataclass
class ToolCall:
    """A native tool call requested by the model.

    Attributes:
        id: the call id to echo back in the ``role="tool"`` message.
        name: the tool name.
        arguments: parsed JSON arguments, or the raw string when it was not JSON.
    """

    id: str
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)

    def to_message_dict(self) -> dict[str, Any]:
        """The OpenAI wire form, for the assistant message that carried this call."""
        args = self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": args}}


@dataclass
class ChatResponse:
    """One model answer.

    Attributes:
        text: the assistant text ("" when the model only called tools).
        tool_calls: native tool calls, in order.
        usage: token counts of this call.
        latency_ms: wall-clock milliseconds; ``None`` lets :class:`BaseChatModel`
            fill in its own measurement.
        model: the model name the backend reported.
        finish_reason: ``"stop"``, ``"length"``, ``"tool_calls"``... when known.
        retries: how many times an HTTP client retried before this answer.
    """

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    latency_ms: float | None = None
    model: str = ""
    finish_reason: str | None = None
    retries: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (for traces)."""
        return {
            "text": self.text,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "usage": self.usage.to_dict(),
            "latency_ms": self.latency_ms,
            "model": self.model,
            "finish_reason": self.finish_reason,
            "retries": self.retries,
        }


@dataclass
class CallRecord:
    """What :class:`BaseChatModel` remembers about each call.

    Attributes:
        model: model name.
        prompt_tokens / completion_tokens: token counts (0 on failure).
        latency_ms: wall-clock milliseconds including retries.
        started: ``time.time()`` at the start of the call.
        finish_reason: as reported.
        retries: how many times the call was retried (HTTP clients only).
        error: ``"ErrorType: message"`` when the call failed, else ``None``.
    """

    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    started: float = 0.0
    finish_reason: str | None = None
    retries: int = 0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)


@runtime_checkable
class ChatModel(Protocol):
    """What the solver needs from a chat model: one call, sync and async."""

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        stop: list[str] | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> ChatResponse:
        """Answer ``messages``; ``None`` arguments mean the model's own defaults.

        ``tools`` are OpenAI function specs (see ``got_core.solver.tools.Tool.spec``).
        Raises :class:`~got_core.errors.ModelError` (or a subclass) on failure.
        """
        ...

    async def acomplete(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        stop: list[str] | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> ChatResponse:
        """The async twin of :meth:`complete`."""
        ...


def validate_messages(messages: Any) -> list[dict[str, Any]]:
    """Check the OpenAI message shape and return the list unchanged.

    Raises:
        InvalidInputError: not a non-empty list of dicts each with a string ``role``.
    """
    if not isinstance(messages, (list, tuple)) or not messages:
        raise InvalidInputError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise InvalidInputError(f"message {i} must be a dict with a string 'role' and a 'content', got {msg!r:.80}")
    return list(messages)


class BaseChatModel(abc.ABC):
    """Records every call (tokens, latency) around one abstract hook, :meth:`_complete`.

    Attributes:
        model_name: reported in records when the response names no model.
        calls: the most recent :class:`CallRecord` objects (a bounded deque).
        usage: running token totals over all calls.
        n_calls: number of calls made, failed ones included.
    """

    def __init__(self, model_name: str = "", *, history: int = 1000) -> None:
        self.model_name = model_name
        self.calls: deque[CallRecord] = deque(maxlen=history)
        self.usage = Usage()
        self.n_calls = 0
        self._record_lock = threading.Lock()

    @abc.abstractmethod
    def _complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        """Produce one answer; ``kwargs`` are the non-``None`` generation options."""

    async def _acomplete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        """Async hook; by default runs :meth:`_complete` in a worker thread."""
        return await asyncio.to_thread(self._complete, messages, **kwargs)

    @staticmethod
    def _options(**kwargs: Any) -> dict[str, Any]:
        return {k: v for k, v in kwargs.items() if v is not None}

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        stop: list[str] | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> ChatResponse:
        """See :meth:`ChatModel.complete`; the call is recorded in :attr:`calls`.

        Raises:
            InvalidInputError: malformed ``messages``.
            ModelError: the backend failed (subclasses for timeouts and bad answers).
        """
        messages = validate_messages(messages)
        opts = self._options(temperature=temperature, max_tokens=max_tokens, seed=seed, stop=stop, tools=tools)
        started, t0 = time.time(), time.perf_counter()
        try:
            response = self._complete(messages, **opts)
        except BaseException as exc:
            self._record_failure(exc, started, t0)
            raise
        return self._record(response, started, t0)

    async def acomplete(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        stop: list[str] | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> ChatResponse:
        """Async twin of :meth:`complete`, recorded the same way."""
        messages = validate_messages(messages)
        opts = self._options(temperature=temperature, max_tokens=max_tokens, seed=seed, stop=stop, tools=tools)
        started, t0 = time.time(), time.perf_counter()
        try:
            response = await self._acomplete(messages, **opts)
        except BaseException as exc:
            self._record_failure(exc, started, t0)
            raise
        return self._record(response, started, t0)

    def _record(self, response: ChatResponse, started: float, t0: float) -> ChatResponse:
        if not isinstance(response, ChatResponse):
            raise ModelResponseError(
                f"{type(self).__name__}._complete returned {type(response).__name__}, not ChatResponse"
            )
        if response.latency_ms is None:
            response.latency_ms = (time.perf_counter() - t0) * 1000.0
        if not response.model:
            response.model = self.model_name
        record = CallRecord(
            model=response.model,
            prompt_tokens=response.usage.prompt_tokens,
            completion_tokens=response.usage.completion_tokens,
            latency_ms=response.latency_ms,
            started=started,
            finish_reason=response.finish_reason,
            retries=response.retries,
        )
        with self._record_lock:
            self.calls.append(record)
            self.usage = self.usage + response.usage
            self.n_calls += 1
        return response

    def _record_failure(self, exc: BaseException, started: float, t0: float) -> None:
        record = CallRecord(
            model=self.model_name,
            latency_ms=(time.perf_counter() - t0) * 1000.0,
            started=started,
            retries=getattr(exc, "retries", 0),
            error=f"{type(exc).__name__}: {exc}",
        )
        with self._record_lock:
            self.calls.append(record)
            self.n_calls += 1

    def reset_usage(self) -> None:
        """Forget recorded calls and totals."""
        with self._record_lock:
            self.calls.clear()
            self.usage = Usage()
            self.n_calls = 0


# ----------------------------------------------------------------------------- OpenAI-compatible
