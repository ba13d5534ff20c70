"""Adapters that let any LangChain chat model or LlamaIndex LLM drive the GitOfThoughts solver.

Both wrap a framework model into :class:`got_core.solver.models.BaseChatModel`, so
every call is recorded (tokens in/out, latency) exactly like the OpenAI-compatible
client. Frameworks are imported when an adapter is built, never at module import:

* :class:`LangChainChatModel` needs ``langchain-core`` (extra ``langgraph``);
* :class:`LlamaIndexLLM` needs ``llama-index-core`` (extra ``llamaindex``).

When a framework reports no token usage (test models, some providers), counts are
estimated as whitespace words and flagged ``Usage.estimated``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from got_core.errors import GotError, MissingExtraError, ModelError, ModelTimeoutError
from got_core.solver.models import (
    BaseChatModel,
    ChatResponse,
    ToolCall,
    Usage,
    estimate_tokens,
)

__all__ = ["LangChainChatModel", "LlamaIndexLLM"]


def _text_of(content: Any) -> str:
    """Flatten str / content-block lists (LangChain, LlamaIndex) into text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and part.get("type", "text") == "text":
                out.append(str(part.get("text", "")))
        return "".join(out)
    return str(content)


def _cut_at_stop(response: ChatResponse, stop: list[str] | None) -> ChatResponse:
    # Frameworks may ignore `stop`; cut client-side so every adapter honours it.
    for s in stop or []:
        i = response.text.find(s) if s else -1
        if i >= 0:
            response.text = response.text[:i]
            response.finish_reason = "stop"
    return response


def _usage(prompt: int | None, completion: int | None, messages: list[dict[str, Any]], text: str) -> Usage:
    if prompt or completion:
        return Usage(int(prompt or 0), int(completion or 0))
    words = sum(estimate_tokens(_text_of(m.get("content"))) for m in messages)
    return Usage(words, estimate_tokens(text), estimated=True)


def _wrap_failure(what: str, exc: Exception) -> GotError:
    if isinstance(exc, GotError):
        return exc
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return ModelTimeoutError(f"{what} timed out ({exc}); raise its timeout")
    return ModelError(f"{what} failed ({type(exc).__name__}: {exc})")


def _tool_call_from_openai(tc: Any) -> ToolCall:
    """A ToolCall from an OpenAI-shaped dict or object (``id``, ``function.name/arguments``)."""
    get = (lambda o, k: o.get(k)) if isinstance(tc, dict) else (lambda o, k: getattr(o, k, None))
    fn = get(tc, "function") or {}
    name = fn.get("name") if isinstance(fn, dict) else getattr(fn, "name", "")
    args = fn.get("arguments") if isinstance(fn, dict) else getattr(fn, "arguments", "")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            pass
    return ToolCall(id=str(get(tc, "id") or ""), name=str(name or ""), arguments=args or {})


class LangChainChatModel(BaseChatModel):
    """Any LangChain ``BaseChatModel`` behind the GitOfThoughts :class:`ChatModel` protocol.

    Args:
        chat_model: e.g. ``ChatOpenAI(...)``, ``ChatAnthropic(...)`` or a LangChain fake model.
        model_name: name for records; defaults to the model's ``model_name``/``model`` field.
        pass_generation_kwargs: forward ``temperature``/``max_tokens``/``seed`` to
            ``invoke`` (most providers accept them there; turn off for those that do not).

    Raises:
        MissingExtraError: ``langchain-core`` is not installed (extra ``langgraph``).
    """

    def __init__(self, chat_model: Any, *, model_name: str | None = None, pass_generation_kwargs: bool = True) -> None:
        try:
            from langchain_core import messages as lc_messages
        except ImportError as exc:
            raise MissingExtraError("LangChainChatModel", "langgraph", exc) from None
        name = model_name or getattr(chat_model, "model_name", None) or getattr(chat_model, "model", None)
        super().__init__(str(name or type(chat_model).__name__))
        self.chat_model = chat_model
        self.pass_generation_kwargs = pass_generation_kwargs
        self._lc = lc_messages

    def _to_langchain(self, messages: list[dict[str, Any]]) -> list[Any]:
        lc = self._lc
        out: list[Any] = []
        for m in messages:
            role, content = m["role"], _text_of(m.get("content"))
            if role in ("system", "developer"):
                out.append(lc.SystemMessage(content=content))
            elif role == "assistant":
                calls = [_tool_call_from_openai(tc) for tc in m.get("tool_calls") or []]
                out.append(
                    lc.AIMessage(
                        content=content,
                        tool_calls=[
                            {
                                "name": c.name,
                                "args": c.arguments if isinstance(c.arguments, dict) else {"input": c.arguments},
                                "id": c.id,
                            }
                            for c in calls
                        ],
                    )
                )
            elif role == "tool":
                out.append(lc.ToolMessage(content=content, tool_call_id=str(m.get("tool_call_id", ""))))
            else:
                out.append(lc.HumanMessage(content=content))
        return out

    def _prepare(self, messages: list[dict[str, Any]], kwargs: dict[str, Any]) -> tuple[Any, list[Any], dict]:
        runnable = self.chat_model
        if kwargs.get("tools"):
            try:
                runnable = runnable.bind_tools(kwargs["tools"])
            except NotImplementedError:
                pass  # the text Action/Action Input protocol still works
        call_kwargs: dict[str, Any] = {}
        if kwargs.get("stop"):
            call_kwargs["stop"] = list(kwargs["stop"])
        if self.pass_generation_kwargs:
            call_kwargs.update({k: kwargs[k] for k in ("temperature", "max_tokens", "seed") if k in kwargs})
        return runnable, self._to_langchain(messages), call_kwargs

    def _convert(self, message: Any, messages: list[dict[str, Any]], stop: list[str] | None) -> ChatResponse:
        text = _text_of(getattr(message, "content", message))
        calls = [
            ToolCall(id=str(c.get("id") or ""), name=str(c.get("name", "")), arguments=c.get("args") or {})
            for c in getattr(message, "tool_calls", None) or []
        ]
        meta = getattr(message, "usage_metadata", None) or {}
        resp_meta = getattr(message, "response_metadata", None) or {}
        token_usage = resp_meta.get("token_usage") or resp_meta.get("usage") or {}
        usage = _usage(
            meta.get("input_tokens") or token_usage.get("prompt_tokens"),
            meta.get("output_tokens") or token_usage.get("completion_tokens"),
            messages,
            text,
        )
        finish = resp_meta.get("finish_reason") or resp_meta.get("stop_reason") or ("tool_calls" if calls else "stop")
        model = resp_meta.get("model_name") or resp_meta.get("model") or self.model_name
        return _cut_at_stop(
            ChatResponse(text=text, tool_calls=calls, usage=usage, model=str(model), finish_reason=str(finish)), stop
        )

    def _complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        runnable, lc_messages, call_kwargs = self._prepare(messages, kwargs)
        try:
            message = runnable.invoke(lc_messages, **call_kwargs)
        except Exception as exc:
            raise _wrap_failure(f"LangChain model {self.model_name}", exc) from exc
        return self._convert(message, messages, kwargs.get("stop"))

    async def _acomplete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        runnable, lc_messages, call_kwargs = self._prepare(messages, kwargs)
        try:
            message = await runnable.ainvoke(lc_messages, **call_kwargs)
        except Exception as exc:
            raise _wrap_failure(f"LangChain model {self.model_name}", exc) from exc
        return self._convert(message, messages, kwargs.get("stop"))


class LlamaIndexLLM(BaseChatModel):
    """Any LlamaIndex LLM behind the GitOfThoughts :class:`ChatModel` protocol.

    Native tool specs are not forwarded (LlamaIndex exposes tool calling through
    its own tool classes); the text ``Action:`` protocol works with every LLM, and
    tool calls an LLM reports in ``additional_kwargs["tool_calls"]`` are returned.

    Args:
        llm: e.g. ``llama_index.llms.openai_like.OpenAILike(...)`` or ``MockLLM()``.
        model_name: name for records; defaults to ``llm.metadata.model_name``.
        pass_generation_kwargs: forward ``temperature``/``max_tokens``/``seed`` to ``chat``.

    Raises:
        MissingExtraError: ``llama-index-core`` is not installed (extra ``llamaindex``).
    """

    def __init__(self, llm: Any, *, model_name: str | None = None, pass_generation_kwargs: bool = True) -> None:
        try:
            from llama_index.core.llms import ChatMessage, MessageRole
        except ImportError as exc:
            raise MissingExtraError("LlamaIndexLLM", "llamaindex", exc) from None
        try:
            name = model_name or llm.metadata.model_name
        except Exception:  # metadata is a property some LLMs compute lazily
            name = model_name
        super().__init__(str(name or type(llm).__name__))
        self.llm = llm
        self.pass_generation_kwargs = pass_generation_kwargs
        self._ChatMessage, self._Role = ChatMessage, MessageRole

    def _to_llamaindex(self, messages: list[dict[str, Any]]) -> list[Any]:
        roles = {r.value for r in self._Role}
        out = []
        for m in messages:
            role = m["role"] if m["role"] in roles else "user"
            extra: dict[str, Any] = {}
            if m.get("tool_calls"):
                extra["tool_calls"] = m["tool_calls"]
            if m.get("tool_call_id"):
                extra["tool_call_id"] = m["tool_call_id"]
            out.append(
                self._ChatMessage(role=self._Role(role), content=_text_of(m.get("content")), additional_kwargs=extra)
            )
        return out

    def _call_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if not self.pass_generation_kwargs:
            return {}
        return {k: kwargs[k] for k in ("temperature", "max_tokens", "seed") if k in kwargs}

    def _convert(self, response: Any, messages: list[dict[str, Any]], stop: list[str] | None) -> ChatResponse:
        message = response.message
        text = _text_of(message.content)
        calls = [_tool_call_from_openai(tc) for tc in (message.additional_kwargs or {}).get("tool_calls") or []]
        extra = dict(response.additional_kwargs or {})
        raw = response.raw
        raw_usage = raw.get("usage") if isinstance(raw, dict) else getattr(raw, "usage", None)
        if raw_usage is not None:
            get = raw_usage.get if isinstance(raw_usage, dict) else (lambda k: getattr(raw_usage, k, None))
            extra.setdefault("prompt_tokens", get("prompt_tokens"))
            extra.setdefault("completion_tokens", get("completion_tokens"))
        usage = _usage(extra.get("prompt_tokens"), extra.get("completion_tokens"), messages, text)
        return _cut_at_stop(
            ChatResponse(
                text=text,
                tool_calls=calls,
                usage=usage,
                model=self.model_name,
                finish_reason="tool_calls" if calls else "stop",
            ),
            stop,
        )

    def _complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        try:
            response = self.llm.chat(self._to_llamaindex(messages), **self._call_kwargs(kwargs))
        except Exception as exc:
            raise _wrap_failure(f"LlamaIndex LLM {self.model_name}", exc) from exc
        return self._convert(response, messages, kwargs.get("stop"))

    async def _acomplete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        try:
            response = await self.llm.achat(self._to_llamaindex(messages), **self._call_kwargs(kwargs))
        except Exception as exc:
            raise _wrap_failure(f"LlamaIndex LLM {self.model_name}", exc) from exc
        return self._convert(response, messages, kwargs.get("stop"))
