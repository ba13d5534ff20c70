"""A scripted function-calling LLM for llama-index agents: tests, cookbooks, demos.

:class:`ScriptedFunctionCallingLLM` is a real ``FunctionCallingLLM`` (so
``FunctionAgent``, ``ReActAgent`` and ``AgentWorkflow`` accept it) whose answers
come from a script, never from a model, and which records every input it got::

    llm = ScriptedFunctionCallingLLM([
        ScriptedToolCall("add", {"a": 2, "b": 3}),   # turn 1: call a tool ...
        "2 + 3 = 5.",                                # ... then answer
    ])
    agent = FunctionAgent(tools=[add], llm=llm)
    llm.calls[-1]   # the messages of the last call, for assertions

Tool calls are ``ToolCallBlock`` blocks on the assistant message (llama-index's
provider-neutral form) with deterministic ids ``call_1``, ``call_2``, … .
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from got_core.errors import MissingExtraError, ModelError

try:
    from llama_index.core.base.llms.types import (
        ChatMessage,
        ChatResponse,
        ChatResponseAsyncGen,
        ChatResponseGen,
        CompletionResponse,
        CompletionResponseAsyncGen,
        CompletionResponseGen,
        LLMMetadata,
        TextBlock,
        ToolCallBlock,
    )
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.llms.function_calling import FunctionCallingLLM
    from llama_index.core.llms.llm import ToolSelection
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("LlamaIndex adapter", "llamaindex", _exc) from None

__all__ = ["ScriptedFunctionCallingLLM", "ScriptedReply", "ScriptedToolCall"]


@dataclass(frozen=True)
class ScriptedToolCall:
    """One tool call the scripted LLM makes.

    Attributes:
        name: the tool's name.
        kwargs: its arguments.
        id: the call id (default: ``call_<n>``, counted per LLM).
        text: optional assistant text sent along with the call.
    """

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    text: str = ""


#: One scripted reply: text, one tool call, parallel tool calls, a whole message,
#: or a function of the input messages returning one of those.
ScriptedReply = str | ScriptedToolCall | Sequence[ScriptedToolCall] | ChatMessage | Callable[[list[ChatMessage]], Any]


class ScriptedFunctionCallingLLM(FunctionCallingLLM):
    """A ``FunctionCallingLLM`` that replays a script (a test double, clearly not a model).

    Each call consumes the next reply; when the script runs out, ``default`` answers
    if given, otherwise the call raises :class:`~got_core.errors.ModelError`.

    Args:
        replies: the script, consumed in order (see :data:`ScriptedReply`).
        default: the reply once the script is exhausted (None: raise).
        model_name: reported in ``metadata``.

    Attributes:
        calls: the input messages of every call so far (deep copies), oldest first.
    """

    _queue: list[Any] = PrivateAttr(default_factory=list)
    _calls: list[list[ChatMessage]] = PrivateAttr(default_factory=list)
    _default: Any = PrivateAttr(default=None)
    _name: str = PrivateAttr(default="scripted")
    _ids: int = PrivateAttr(default=0)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    def __init__(
        self,
        replies: Sequence[ScriptedReply] = (),
        *,
        default: ScriptedReply | None = None,
        model_name: str = "scripted-function-calling",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._queue = list(replies)
        self._default = default
        self._name = model_name

    @classmethod
    def class_name(cls) -> str:
        """The llama-index component name."""
        return "ScriptedFunctionCallingLLM"

    @property
    def metadata(self) -> LLMMetadata:
        """A chat, function-calling model with a large context window."""
        return LLMMetadata(
            context_window=128_000,
            num_output=1024,
            is_chat_model=True,
            is_function_calling_model=True,
            model_name=self._name,
        )

    @property
    def calls(self) -> list[list[ChatMessage]]:
        """Inputs of every call so far (deep copies), oldest first."""
        return self._calls

    @property
    def remaining(self) -> int:
        """Replies left in the script."""
        return len(self._queue)

    def add_replies(self, *replies: ScriptedReply) -> None:
        """Append replies to the script."""
        with self._lock:
            self._queue.extend(replies)

    # ------------------------------------------------------------------ the script
    def _next_id(self) -> str:
        self._ids += 1
        return f"call_{self._ids}"

    def _reply(self, messages: Sequence[ChatMessage]) -> ChatResponse:
        history = [m.model_copy(deep=True) for m in messages]
        with self._lock:
            self._calls.append(history)
            if self._queue:
                reply = self._queue.pop(0)
            elif self._default is not None:
                reply = self._default
            else:
                raise ModelError(
                    f"the scripted LLM ran out of replies after {len(self._calls) - 1} calls; "
                    "add more with add_replies() or pass default="
                )
            if callable(reply) and not isinstance(reply, (ChatMessage, ScriptedToolCall)):
                reply = reply([m.model_copy(deep=True) for m in messages])
            message = self._to_message(reply)
        return ChatResponse(message=message, raw={"scripted": True})

    def _to_message(self, reply: Any) -> ChatMessage:
        if isinstance(reply, ChatMessage):
            return reply.model_copy(deep=True)
        if isinstance(reply, str):
            return ChatMessage(role="assistant", content=reply)
        calls = [reply] if isinstance(reply, ScriptedToolCall) else list(reply)
        if not calls or not all(isinstance(c, ScriptedToolCall) for c in calls):
            raise ModelError(f"a scripted reply must be text, ScriptedToolCall(s) or a ChatMessage, not {reply!r}")
        blocks: list[Any] = [TextBlock(text=calls[0].text)] if calls[0].text else []
        blocks += [
            ToolCallBlock(tool_call_id=c.id or self._next_id(), tool_name=c.name, tool_kwargs=dict(c.kwargs))
            for c in calls
        ]
        return ChatMessage(role="assistant", blocks=blocks)

    # ------------------------------------------------------------------ FunctionCallingLLM
    def _prepare_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """The chat arguments: history plus the user message (tools are only recorded)."""
        messages = list(chat_history or [])
        if user_msg is not None:
            messages.append(ChatMessage(role="user", content=user_msg) if isinstance(user_msg, str) else user_msg)
        return {"messages": messages, "tools": [t.metadata.name for t in tools]}

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        """The ``ToolCallBlock`` blocks of the response as tool selections.

        Raises:
            ValueError: no tool call and ``error_on_no_tool_call`` (llama-index's contract).
        """
        selections = [
            ToolSelection(
                tool_id=b.tool_call_id or "",
                tool_name=b.tool_name,
                tool_kwargs=b.tool_kwargs if isinstance(b.tool_kwargs, dict) else {},
            )
            for b in response.message.blocks
            if isinstance(b, ToolCallBlock)
        ]
        if not selections and error_on_no_tool_call:
            raise ValueError("expected at least one tool call in the scripted response")
        return selections

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """The next scripted reply."""
        return self._reply(messages)

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """The next scripted reply."""
        return self._reply(messages)

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        """The next scripted reply as a one-chunk stream."""
        response = self._reply(messages)

        def gen() -> ChatResponseGen:
            yield ChatResponse(message=response.message, delta=response.message.content or "", raw=response.raw)

        return gen()

    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        """The next scripted reply as a one-chunk async stream."""
        response = self._reply(messages)

        async def gen() -> ChatResponseAsyncGen:
            yield ChatResponse(message=response.message, delta=response.message.content or "", raw=response.raw)

        return gen()

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """The next scripted reply's text, for a prompt."""
        response = self._reply([ChatMessage(role="user", content=prompt)])
        return CompletionResponse(text=response.message.content or "", raw=response.raw)

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """The next scripted reply's text, for a prompt."""
        return self.complete(prompt, formatted, **kwargs)

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        """The next scripted reply's text as a one-chunk stream."""
        response = self.complete(prompt, formatted, **kwargs)

        def gen() -> CompletionResponseGen:
            yield CompletionResponse(text=response.text, delta=response.text, raw=response.raw)

        return gen()

    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseAsyncGen:
        """The next scripted reply's text as a one-chunk async stream."""
        response = self.complete(prompt, formatted, **kwargs)

        async def gen() -> CompletionResponseAsyncGen:
            yield CompletionResponse(text=response.text, delta=response.text, raw=response.raw)

        return gen()
