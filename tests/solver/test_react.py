"""The ReAct inner loop: robust action parsing, the step budget, native tool calls, traces."""

from __future__ import annotations

import json
import re

import pytest

from got_core.errors import ConfigError, ModelError
from got_core.solver.models import ChatResponse, ToolCall, Usage
from got_core.solver.react import (
    FINAL_PROMPT,
    arun_react,
    format_tool_instructions,
    parse_action,
    run_react,
)
from got_core.solver.tools import get_tools
from got_core.testing import ScriptedChatModel

TOOLS = get_tools(["calculator", "sympy", "lp"])
NAMES = [t.name for t in TOOLS]
QUESTION = [
    {"role": "system", "content": format_tool_instructions(TOOLS)},
    {"role": "user", "content": "What is 17 * 23?"},
]
STEP_KEYS = {
    "step",
    "call",
    "type",
    "thought",
    "action",
    "action_input",
    "observation",
    "ok",
    "error_type",
    "native",
    "tool_call_id",
    "tool_ms",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
    "model",
    "finish_reason",
}


class Spy(ScriptedChatModel):
    """A scripted model that also remembers the generation options of each call."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.options = []

    def _complete(self, messages, **kwargs):
        self.options.append(kwargs)
        return super()._complete(messages, **kwargs)


@pytest.mark.parametrize(
    "text, kind, tool, value",
    [
        ("Thought: multiply\nAction: calculator\nAction Input: 17*23", "action", "calculator", "17*23"),
        ("**Thought:** hmm\n**Action:** `Calculator`\n**Action Input:** `3*4`", "action", "calculator", "3*4"),
        ("### Action: SymPy\nAction Input:\n```\nsolve x**2 = 4\n```\n", "action", "sympy", "solve x**2 = 4"),
        ('Action: calculator\nAction Input: {"input": "2**10"}', "action", "calculator", "2**10"),
        (
            'action: the LP tool\naction input: "maximize x subject to x <= 1"',
            "action",
            "lp",
            "maximize x subject to x <= 1",
        ),
        ("ACTION: calculator\nACTION_INPUT: '5+5'", "action", "calculator", "5+5"),
        ("Action: Calculator[2+3]", "action", "calculator", "2+3"),
        ("Action: calculator\n```python\n1+1\n```", "action", "calculator", "1+1"),
        ('```json\n{"action": "calculator", "action_input": "7*6"}\n```', "action", "calculator", "7*6"),
        (
            "Action: lp\nAction Input: maximize 3x + 2y\nsubject to x + y <= 4\nx, y >= 0\nObservation: 99",
            "action",
            "lp",
            "maximize 3x + 2y\nsubject to x + y <= 4\nx, y >= 0",
        ),
        ("Action: calculator\nAction Input: 1+1\nObservation: 2\nFinal Answer: 2", "action", "calculator", "1+1"),
        ("Final Answer: 42", "final", None, "42"),
        ("I compared them.\n**Final Answer:** **B**", "final", None, "B"),
        ("final answer: x = 3\nAction: calculator\nAction Input: 1", "final", None, "x = 3"),
        ('{"action": "Final Answer", "action_input": "42"}', "final", None, "42"),
        ("The answer is B because of symmetry.", "none", None, None),
    ],
)
def test_parse_action_formats(text, kind, tool, value):
    parsed = parse_action(text, NAMES)
    assert parsed.kind == kind
    assert parsed.tool == tool
    assert (parsed.tool_input if kind == "action" else parsed.final_answer) == value


def test_parse_action_keeps_thought_and_end():
    text = "Thought: I need a product\nAction: calculator\nAction Input: 6*7\nObservation: made up"
    parsed = parse_action(text)
    assert parsed.thought == "I need a product"
    assert text[: parsed.end].rstrip().endswith("6*7")


def test_text_actions_then_final_answer():
    model = Spy(
        [
            "Thought: multiply\nAction: calculator\nAction Input: 17 * 23\nObservation: 999\nFinal Answer: 999",
            "Thought: done\nFinal Answer: 391",
        ]
    )
    result = run_react(model, QUESTION, TOOLS, temperature=0.2, seed=3)
    assert (result.answer, result.stop_reason, result.n_calls) == ("391", "final", 2)
    assert result.final_text == "Thought: done\nFinal Answer: 391"
    act, fin = result.steps
    assert (act["type"], act["action"], act["action_input"], act["observation"], act["ok"]) == (
        "action",
        "calculator",
        "17 * 23",
        "391",
        True,
    )
    assert act["thought"] == "multiply" and act["call"] == 1 and act["prompt_tokens"] > 0
    assert (fin["type"], fin["thought"], fin["call"]) == ("final", "done", 2)
    # the hallucinated observation was cut by the stop sequence and never reached the history
    second = model.received[1]
    assert second[-2] == {
        "role": "assistant",
        "content": "Thought: multiply\nAction: calculator\nAction Input: 17 * 23",
    }
    assert second[-1] == {"role": "user", "content": "Observation: 391"}
    assert model.options[0] == {"temperature": 0.2, "seed": 3, "stop": ["\nObservation:"]}
    assert QUESTION[-1] == {"role": "user", "content": "What is 17 * 23?"}  # caller's list untouched
    assert result.usage == model.usage and result.usage.total_tokens > 0
    lines = result.to_jsonl().splitlines()
    assert len(lines) == 2 and all(set(json.loads(line)) == STEP_KEYS for line in lines)


def test_budget_is_never_exceeded_and_a_final_answer_is_asked_once():
    model = Spy(
        default="Thought: again\nAction: calculator\nAction Input: 1+1",
        rules=[(re.escape(FINAL_PROMPT), "Final Answer: 2")],
    )
    result = run_react(model, QUESTION, TOOLS, max_steps=3, native_tools=True)
    tool_steps = [s for s in result.steps if s["type"] == "action"]
    assert len(tool_steps) == 3 and model.n_calls == 4 == result.n_calls
    assert (result.answer, result.stop_reason) == ("2", "budget")
    assert result.steps[-1]["type"] == "forced_final"
    assert all("tools" in o for o in model.options[:3]) and "tools" not in model.options[3]
    assert model.received[3][-1] == {"role": "user", "content": FINAL_PROMPT}


def test_budget_without_final_prompt_returns_last_text():
    model = ScriptedChatModel(default="Action: calculator\nAction Input: 2+2")
    result = run_react(model, QUESTION, TOOLS, max_steps=2, final_prompt=None)
    assert model.n_calls == 2 and result.stop_reason == "budget" and result.answer is None
    assert result.final_text == "Action: calculator\nAction Input: 2+2"


def test_zero_steps_runs_no_tool():
    model = Spy(["Action: calculator\nAction Input: 2+2"])
    result = run_react(model, QUESTION, TOOLS, max_steps=0, native_tools=True)
    assert model.n_calls == 1 and "tools" not in model.options[0]
    assert all(s["observation"] is None for s in result.steps)
    with pytest.raises(ConfigError):
        run_react(model, QUESTION, TOOLS, max_steps=-1)


def test_native_tool_calls_are_answered_with_tool_messages():
    calls = [ToolCall("c1", "calculator", {"input": "2**10"}), ToolCall("c2", "sympy", {"input": "solve x - 3 = 0"})]
    model = Spy([ChatResponse(text="", tool_calls=calls, usage=Usage(10, 4)), "Final Answer: 1024 and 3"])
    result = run_react(model, QUESTION, TOOLS, native_tools=True)
    assert result.answer == "1024 and 3"
    history = model.received[1]
    assert history[-3]["role"] == "assistant" and [c["id"] for c in history[-3]["tool_calls"]] == ["c1", "c2"]
    assert history[-2] == {"role": "tool", "tool_call_id": "c1", "content": "1024"}
    assert history[-1] == {"role": "tool", "tool_call_id": "c2", "content": "x = 3"}
    first, second, final = result.steps
    assert first["native"] and second["native"] and first["call"] == second["call"] == 1
    assert (first["prompt_tokens"], second["prompt_tokens"]) == (10, 0)  # tokens counted once per call
    assert model.options[0]["tools"][0]["function"]["name"] == "calculator"
    assert final["type"] == "final"


def test_tool_failures_become_observations():
    model = ScriptedChatModel(
        [
            "Action: python\nAction Input: import os",
            "Action: calculator",
            "Action: calculator\nAction Input: 9**9**9",
            "Final Answer: gave up",
        ]
    )
    result = run_react(model, QUESTION, TOOLS, max_steps=3)
    obs = [s["observation"] for s in result.steps[:3]]
    assert obs[0].startswith("Error: UnknownToolError") and "calculator, sympy, lp" in obs[0]
    assert obs[1].startswith("Error: ToolInputError: missing input")
    assert obs[2].startswith("Error: ToolLimitError")
    assert [s["ok"] for s in result.steps[:3]] == [False, False, False]
    assert result.answer == "gave up" and result.stop_reason == "budget"


def test_plain_text_is_the_answer():
    result = run_react(ScriptedChatModel(["The answer is (C)."]), QUESTION, ["calculator"])
    assert (result.final_text, result.answer, result.stop_reason, result.n_calls) == (
        "The answer is (C).",
        None,
        "text",
        1,
    )
    assert result.steps[0]["type"] == "text"


def test_model_errors_propagate():
    with pytest.raises(ModelError):
        run_react(ScriptedChatModel([]), QUESTION, TOOLS)


async def test_async_loop_matches_sync():
    script = ["Action: calculator\nAction Input: 6*7", "Final Answer: 42"]
    sync = run_react(ScriptedChatModel(script), QUESTION, TOOLS)
    asyn = await arun_react(ScriptedChatModel(script), QUESTION, TOOLS)
    strip = lambda steps: [{k: v for k, v in s.items() if k != "tool_ms"} for s in steps]  # noqa: E731
    assert strip(asyn.steps) == strip(sync.steps)
    assert (asyn.answer, asyn.usage) == (sync.answer, sync.usage) == ("42", sync.usage)


def test_instructions_name_every_tool_and_the_protocol():
    text = format_tool_instructions(TOOLS, max_steps=3)
    for name in NAMES:
        assert f"- {name}:" in text
    assert "Action Input:" in text and "Final Answer:" in text and "at most 3 times" in text
