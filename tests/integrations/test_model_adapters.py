"""LangChain and LlamaIndex models behind our ChatModel protocol, tested with the frameworks' own test models."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from langchain_core.language_models.fake_chat_models import (
    FakeListChatModel,
    GenericFakeChatModel,
    ParrotFakeChatModel,
)
from langchain_core.messages import AIMessage
from llama_index.core.llms import MockLLM

from got_core.errors import ModelError
from got_core.solver.models import ChatModel, ToolCall, Usage
from got_core.solver.react import run_react
from got_integrations.models import LangChainChatModel, LlamaIndexLLM

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "what is six times seven"}]


def test_langchain_text_answer_is_recorded():
    model = LangChainChatModel(FakeListChatModel(responses=["forty two"]), model_name="fake")
    assert isinstance(model, ChatModel)
    r = model.complete(MSGS, temperature=0.0, seed=1)
    assert r.text == "forty two" and r.finish_reason == "stop" and r.model == "fake"
    assert r.usage == Usage(7, 2, estimated=True)
    assert model.calls[-1].prompt_tokens == 7 and model.n_calls == 1


def test_langchain_messages_are_converted_by_role():
    parrot = LangChainChatModel(ParrotFakeChatModel())  # answers with the last message it got
    history = [
        *MSGS,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": '{"input": "6*7"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "user", "content": "so?"},
    ]
    assert parrot.complete(history).text == "so?"
    converted = parrot._to_langchain(history)
    assert [type(m).__name__ for m in converted] == [
        "SystemMessage",
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "HumanMessage",
    ]
    assert converted[2].tool_calls[0]["args"] == {"input": "6*7"} and converted[3].tool_call_id == "c1"


def test_langchain_tool_calls_and_usage_metadata():
    message = AIMessage(
        content="",
        tool_calls=[{"name": "calculator", "args": {"input": "6*7"}, "id": "t1"}],
        usage_metadata={"input_tokens": 12, "output_tokens": 5, "total_tokens": 17},
    )
    model = LangChainChatModel(GenericFakeChatModel(messages=iter([message, "Final Answer: 42"])))
    r = model.complete(MSGS)
    assert r.tool_calls == [ToolCall("t1", "calculator", {"input": "6*7"})] and r.finish_reason == "tool_calls"
    assert r.usage == Usage(12, 5)
    # the same model drives the ReAct loop: the native call runs the real calculator
    model2 = LangChainChatModel(GenericFakeChatModel(messages=iter([message, "Final Answer: 42"])))
    result = run_react(model2, MSGS, ["calculator"])
    assert result.answer == "42" and result.steps[0]["observation"] == "42"


def test_langchain_stop_is_honoured_and_failures_are_model_errors():
    model = LangChainChatModel(FakeListChatModel(responses=["Action: calculator\nAction Input: 1+1\nObservation: 3"]))
    assert model.complete(MSGS, stop=["\nObservation:"]).text == "Action: calculator\nAction Input: 1+1"
    exhausted = LangChainChatModel(GenericFakeChatModel(messages=iter([])))
    with pytest.raises(ModelError, match="LangChain model"):
        exhausted.complete(MSGS)
    assert exhausted.calls[-1].error.startswith("ModelError")


async def test_langchain_async():
    model = LangChainChatModel(FakeListChatModel(responses=["a", "b"]))
    assert model.complete(MSGS).text == "a"
    assert (await model.acomplete(MSGS)).text == "b"
    assert model.n_calls == 2


def test_llamaindex_chat_is_recorded():
    model = LlamaIndexLLM(MockLLM(max_tokens=3))
    assert isinstance(model, ChatModel)
    r = model.complete(MSGS, max_tokens=3)
    assert r.text == "text text text" and r.usage == Usage(7, 3, estimated=True)
    assert model.calls[-1].completion_tokens == 3 and model.model_name == "unknown"


def test_llamaindex_sees_every_message():
    echo = LlamaIndexLLM(MockLLM(), model_name="mock")  # MockLLM without max_tokens echoes its prompt
    text = echo.complete([*MSGS, {"role": "tool", "tool_call_id": "c1", "content": "42"}]).text
    assert "be brief" in text and "what is six times seven" in text and "42" in text
    assert echo.calls[-1].model == "mock"


async def test_llamaindex_async_and_react_loop():
    model = LlamaIndexLLM(MockLLM(max_tokens=2))
    assert (await model.acomplete(MSGS)).text == "text text"
    result = run_react(model, MSGS, ["calculator"])
    assert (result.stop_reason, result.final_text, result.n_calls) == ("text", "text text", 1)


def test_llamaindex_failures_are_model_errors():
    class Broken(MockLLM):
        def chat(self, messages, **kwargs):
            raise RuntimeError("backend down")

    model = LlamaIndexLLM(Broken())
    with pytest.raises(ModelError, match="backend down"):
        model.complete(MSGS)
