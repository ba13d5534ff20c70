"""The chat-model contract as a pytest test class, for any implementation to reuse.

Every chat model the solver drives (:class:`~got_core.solver.openai_compat.OpenAICompatibleModel`,
the scripted model, the LangChain and LlamaIndex adapters) passes this contract,
and so can a new one: subclass :class:`ChatModelContract` in a test module (the
class name must start with ``Test``), say how to build a model that answers a
script, and how to read back what its backend received::

    from got_core.testing import ChatModelContract

    class TestMyModel(ChatModelContract):
        def make_model(self, replies):
            return MyChatModel(FakeBackend(replies))

        def seen_options(self, model):
            return model.backend.requests   # one dict of options per call

What the contract checks, each through :meth:`complete` and :meth:`acomplete`:
the :class:`~got_core.solver.models.ChatModel` protocol, the same answer sync and
async, usage accounting (per call, running totals, the call records), the shape of
native tool calls, ``temperature`` / ``max_tokens`` / ``seed`` reaching the backend,
``stop`` cutting the text, malformed messages refused as
:class:`~got_core.errors.InvalidInputError` before anything is recorded, and backend
failures raised as :class:`~got_core.errors.ModelError` and recorded as failed calls.

The model under test is a :class:`~got_core.solver.models.BaseChatModel` (that is
where the recording lives). This module imports pytest; ``import got_core.testing``
does not load it (the name is resolved on first use).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from got_core.errors import GotError, InvalidInputError, ModelError
from got_core.solver.models import BaseChatModel, CallRecord, ChatModel, ChatResponse, ToolCall, Usage

__all__ = ["CALCULATOR_SPEC", "ChatModelContract", "Reply"]

#: What a script entry may be: assistant text, or a response carrying native tool calls.
Reply = str | ChatResponse

#: An OpenAI function spec, as ``got_core.solver.tools.Tool.spec`` writes them.
CALCULATOR_SPEC = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
    },
}

QUESTION = [
    {"role": "system", "content": "You are a careful solver."},
    {"role": "user", "content": "What is six times seven?"},
]

BAD_MESSAGES = [
    [],
    "What is six times seven?",
    [{"content": "no role"}],
    [{"role": 3, "content": "x"}],
    ["not a dict"],
    None,
]


def _tool_reply() -> ChatResponse:
    return ChatResponse(tool_calls=[ToolCall("call_1", "calculator", {"expression": "6*7"})])


class ChatModelContract:
    """The contract every chat model passes; subclass it once per implementation.

    Attributes:
        scripts_tool_calls: the backend behind :meth:`make_model` can answer with native
            tool calls (a script entry that is a :class:`ChatResponse` with ``tool_calls``).
            When false the contract checks only that tool specs are accepted and a text
            answer comes back with no tool calls.

    Override :meth:`make_model` and :meth:`seen_options`.
    """

    scripts_tool_calls: bool = True

    def make_model(self, replies: list[Reply]) -> BaseChatModel:
        """A model whose backend answers ``replies`` in order, one per call.

        Args:
            replies: text replies, and (when :attr:`scripts_tool_calls`) responses whose
                ``tool_calls`` the backend must return as native tool calls.

        Returns:
            The model under test. Once the replies are used up, the next call must fail
            in the backend (the contract expects a :class:`ModelError`).
        """
        raise NotImplementedError(f"{type(self).__name__} must define make_model(replies)")

    def seen_options(self, model: BaseChatModel) -> list[dict[str, Any]]:
        """The generation options the backend of ``model`` received, one dict per call, in order.

        Only ``temperature``, ``max_tokens`` and ``seed`` are compared; other keys are ignored.
        """
        raise NotImplementedError(f"{type(self).__name__} must define seen_options(model)")

    # -- how each test calls the model ------------------------------------------------------
    @pytest.fixture(params=["sync", "async"])
    def ask(self, request: pytest.FixtureRequest) -> Callable[..., ChatResponse]:
        """Call ``model.complete`` or, in a fresh event loop, ``model.acomplete``."""
        if request.param == "sync":
            return lambda model, messages, **options: model.complete(messages, **options)
        return lambda model, messages, **options: asyncio.run(model.acomplete(messages, **options))

    # -- the protocol -----------------------------------------------------------------------
    def test_is_a_recording_chat_model(self) -> None:
        model = self.make_model(["unused"])
        assert isinstance(model, ChatModel) and isinstance(model, BaseChatModel)
        assert model.n_calls == 0 and list(model.calls) == [] and model.usage.total_tokens == 0

    def test_a_text_answer(self, ask: Callable[..., ChatResponse]) -> None:
        model = self.make_model(["Six times seven is 42."])
        response = ask(model, QUESTION)
        assert isinstance(response, ChatResponse)
        assert response.text == "Six times seven is 42."
        assert response.tool_calls == []
        assert response.finish_reason == "stop"
        assert isinstance(response.model, str) and response.model
        assert isinstance(response.latency_ms, float) and response.latency_ms >= 0
        assert isinstance(response.usage, Usage)
        assert response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0
        json.dumps(response.to_dict())  # a trace can store it

    def test_sync_and_async_answer_alike(self) -> None:
        script: list[Reply] = ["First answer: 42.", "Second answer, a longer one: forty-two."]
        if self.scripts_tool_calls:
            script.append(_tool_reply())
        sync_model, async_model = self.make_model(list(script)), self.make_model(list(script))
        for _ in script:
            a = sync_model.complete(QUESTION, tools=[CALCULATOR_SPEC])
            b = asyncio.run(async_model.acomplete(QUESTION, tools=[CALCULATOR_SPEC]))
            assert (a.text, a.finish_reason) == (b.text, b.finish_reason)
            assert [c.to_dict() for c in a.tool_calls] == [c.to_dict() for c in b.tool_calls]
            assert a.usage == b.usage
        assert sync_model.usage == async_model.usage and sync_model.n_calls == async_model.n_calls == len(script)

    # -- usage accounting -------------------------------------------------------------------
    def test_usage_is_recorded_per_call_and_in_total(self, ask: Callable[..., ChatResponse]) -> None:
        model = self.make_model(["one", "two words", "and three words"])
        responses = [ask(model, QUESTION) for _ in range(3)]
        assert model.n_calls == 3 and len(model.calls) == 3
        total = Usage()
        for response, record in zip(responses, model.calls):
            assert isinstance(record, CallRecord) and record.error is None
            assert (record.prompt_tokens, record.completion_tokens) == (
                response.usage.prompt_tokens,
                response.usage.completion_tokens,
            )
            assert record.model == response.model and record.finish_reason == response.finish_reason
            assert record.latency_ms >= 0 and record.started > 0
            total = total + response.usage
        assert model.usage == total
        assert model.usage.total_tokens == model.usage.prompt_tokens + model.usage.completion_tokens > 0
        model.reset_usage()
        assert model.n_calls == 0 and list(model.calls) == [] and model.usage == Usage()

    # -- tool calls -------------------------------------------------------------------------
    def test_tool_calls_have_the_protocol_shape(self, ask: Callable[..., ChatResponse]) -> None:
        if not self.scripts_tool_calls:
            model = self.make_model(["No tool needed: 42."])
            response = ask(model, QUESTION, tools=[CALCULATOR_SPEC])
            assert response.text == "No tool needed: 42." and response.tool_calls == []
            return
        model = self.make_model([_tool_reply(), "The calculator says 42."])
        response = ask(model, QUESTION, tools=[CALCULATOR_SPEC])
        assert response.finish_reason == "tool_calls"
        (call,) = response.tool_calls
        assert isinstance(call, ToolCall)
        assert (call.id, call.name, call.arguments) == ("call_1", "calculator", {"expression": "6*7"})
        wire = call.to_message_dict()
        assert wire["type"] == "function" and json.loads(wire["function"]["arguments"]) == {"expression": "6*7"}
        # the call and its result go back to the model in OpenAI form, and it answers
        follow_up = [
            *QUESTION,
            {"role": "assistant", "content": response.text, "tool_calls": [wire]},
            {"role": "tool", "tool_call_id": call.id, "content": "42"},
        ]
        final = ask(model, follow_up, tools=[CALCULATOR_SPEC])
        assert final.text == "The calculator says 42." and final.tool_calls == []
        assert model.n_calls == 2

    # -- generation options -----------------------------------------------------------------
    def test_generation_options_reach_the_backend(self, ask: Callable[..., ChatResponse]) -> None:
        model = self.make_model(["first", "second"])
        ask(model, QUESTION, temperature=0.25, max_tokens=64, seed=7)
        ask(model, QUESTION, temperature=0.9, max_tokens=16, seed=11)
        seen = self.seen_options(model)
        assert len(seen) == 2
        for options, want in zip(seen, [(0.25, 64, 7), (0.9, 16, 11)]):
            assert (options.get("temperature"), options.get("max_tokens"), options.get("seed")) == want, options

    def test_stop_cuts_the_text(self, ask: Callable[..., ChatResponse]) -> None:
        model = self.make_model(["alpha beta STOP gamma delta", "no stop sequence here"])
        cut = ask(model, QUESTION, stop=["STOP"])
        assert cut.text == "alpha beta " and cut.finish_reason == "stop"
        whole = ask(model, QUESTION, stop=["STOP"])
        assert whole.text == "no stop sequence here"

    # -- errors -----------------------------------------------------------------------------
    @pytest.mark.parametrize("bad", BAD_MESSAGES, ids=range(len(BAD_MESSAGES)))
    def test_malformed_messages_are_refused_before_the_backend(
        self, ask: Callable[..., ChatResponse], bad: Any
    ) -> None:
        model = self.make_model(["never sent"])
        with pytest.raises(InvalidInputError):
            ask(model, bad)
        assert model.n_calls == 0 and list(model.calls) == []
        assert ask(model, QUESTION).text == "never sent"  # the script was not consumed

    def test_a_backend_failure_is_a_model_error_and_is_recorded(self, ask: Callable[..., ChatResponse]) -> None:
        model = self.make_model(["the only reply"])
        assert ask(model, QUESTION).text == "the only reply"
        before = model.usage
        with pytest.raises(ModelError) as info:
            ask(model, QUESTION)  # the script is used up: the backend fails
        assert isinstance(info.value, GotError) and str(info.value)
        assert model.n_calls == 2 and len(model.calls) == 2
        failed = model.calls[-1]
        assert failed.error and failed.error.startswith(type(info.value).__name__ + ":")
        assert (failed.prompt_tokens, failed.completion_tokens) == (0, 0)
        assert model.usage == before  # a failed call adds no tokens

    def test_concurrent_async_calls_are_each_recorded_once(self) -> None:
        model = self.make_model(["same answer"] * 4)

        async def four() -> list[ChatResponse]:
            return list(await asyncio.gather(*(model.acomplete(QUESTION) for _ in range(4))))

        responses = asyncio.run(four())
        assert [r.text for r in responses] == ["same answer"] * 4
        assert model.n_calls == 4 and len(model.calls) == 4
        assert model.usage == sum((r.usage for r in responses), Usage())
