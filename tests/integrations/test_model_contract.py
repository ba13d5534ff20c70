"""The shipped chat-model contract, run against the LangChain and LlamaIndex adapters.

Each adapter wraps a scripted model from its framework's own test utilities:
LangChain's ``GenericFakeChatModel`` (what it received is read from LangChain's own
callbacks) and LlamaIndex's ``MockFunctionCallingLLM`` (its response generator sees
every call's options).
"""

from __future__ import annotations

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from llama_index.core.llms import ChatMessage
from llama_index.core.llms.mock import MockFunctionCallingLLM

from got_core.solver.models import ChatResponse
from got_core.testing import ChatModelContract
from got_integrations.models import LangChainChatModel, LlamaIndexLLM


class _InvocationParams(BaseCallbackHandler):
    """Records the invocation parameters LangChain reports for each chat-model call."""

    def __init__(self):
        self.seen = []

    def on_chat_model_start(self, serialized, messages, **kwargs):
        self.seen.append(dict(kwargs.get("invocation_params") or {}))


def _ai_message(reply):
    if isinstance(reply, ChatResponse):
        return AIMessage(
            content=reply.text, tool_calls=[{"name": c.name, "args": c.arguments, "id": c.id} for c in reply.tool_calls]
        )
    return AIMessage(content=reply)


class TestLangChainChatModel(ChatModelContract):
    def make_model(self, replies):
        handler = _InvocationParams()
        fake = GenericFakeChatModel(messages=iter([_ai_message(r) for r in replies]), callbacks=[handler])
        model = LangChainChatModel(fake)
        model.contract_handler = handler
        return model

    def seen_options(self, model):
        return model.contract_handler.seen


class _Script:
    """A LlamaIndex response generator answering a script; it fails once the script is used up."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.seen = []

    def __call__(self, messages, **kwargs):
        self.seen.append(kwargs)
        if not self.replies:
            raise LookupError("the script is used up")
        reply = self.replies.pop(0)
        if isinstance(reply, ChatResponse):
            calls = [c.to_message_dict() for c in reply.tool_calls]
            return ChatMessage(role="assistant", content=reply.text, additional_kwargs={"tool_calls": calls})
        return ChatMessage(role="assistant", content=reply)


class TestLlamaIndexLLM(ChatModelContract):
    def make_model(self, replies):
        script = _Script(replies)
        model = LlamaIndexLLM(MockFunctionCallingLLM(response_generator=script))
        model.contract_script = script
        return model

    def seen_options(self, model):
        return model.contract_script.seen
