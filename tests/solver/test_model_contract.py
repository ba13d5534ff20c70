"""The shipped chat-model contract, run against the scripted model and the OpenAI-compatible client.

The client talks HTTP to the stand-in server on 127.0.0.1 (plain and streamed answers);
each model of a test gets its own script on the one server, selected by model name.
"""

from __future__ import annotations

import itertools

import pytest

from got_core.solver.openai_compat import OpenAICompatibleModel
from got_core.testing import ChatModelContract, ScriptedChatModel, StandInOpenAIServer


class TestScriptedChatModel(ChatModelContract):
    def make_model(self, replies):
        return ScriptedChatModel(replies)

    def seen_options(self, model):
        return list(model.received_options)


class _Scripts:
    """Per-model scripts on one stand-in server: each model is served under its own name."""

    def __init__(self):
        self.replies: dict[str, list[str]] = {}
        self.requests: dict[str, list[dict]] = {}
        self.names = itertools.count()

    def respond(self, request):
        name = request.get("model", "")
        self.requests.setdefault(name, []).append(request)
        script = self.replies.get(name)
        if not script:
            raise LookupError(f"the script of {name!r} is used up")  # the server answers HTTP 500
        return script.pop(0)


@pytest.fixture(scope="module")
def standin():
    """One stand-in server for the module (stopping one waits out its poll interval)."""
    scripts = _Scripts()
    with StandInOpenAIServer(responder=scripts.respond) as server:
        yield server, scripts


class TestOpenAICompatibleModel(ChatModelContract):
    scripts_tool_calls = False  # the stand-in server answers text only
    stream = False

    @pytest.fixture(autouse=True)
    def _serve(self, standin):
        self.server, self.scripts = standin

    def make_model(self, replies):
        name = f"contract-model-{next(self.scripts.names)}"
        self.scripts.replies[name] = [r for r in replies if isinstance(r, str)]
        assert len(self.scripts.replies[name]) == len(replies), "the stand-in server scripts text replies only"
        return OpenAICompatibleModel(self.server.url, name, max_retries=0, stream=self.stream)

    def seen_options(self, model):
        return self.scripts.requests.get(model.model_name, [])


class TestOpenAICompatibleModelStreaming(TestOpenAICompatibleModel):
    stream = True


class _DropsOptions(ScriptedChatModel):
    """Deliberately broken: never hands the generation options (stop included) to its backend."""

    def _complete(self, messages, **options):
        return super()._complete(messages)


class _BrokenModelContract(TestScriptedChatModel):
    def make_model(self, replies):
        return _DropsOptions(replies)


def test_a_model_that_drops_its_options_fails_the_contract():
    contract = _BrokenModelContract()
    ask = lambda model, messages, **options: model.complete(messages, **options)  # noqa: E731
    for check in (contract.test_generation_options_reach_the_backend, contract.test_stop_cuts_the_text):
        with pytest.raises(AssertionError):
            check(ask)
    contract.test_a_text_answer(ask)  # what it does not break still passes
