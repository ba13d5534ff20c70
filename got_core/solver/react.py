"""The ReAct inner loop (§3.2 of arXiv 2606.14470): think, call a tool, observe, at most 3 times.

Each tree-of-thoughts node runs this loop. The model may act in either of two ways:

* text (works with any server): ``Thought: ... / Action: <tool> / Action Input: <input>``,
  answered with ``Observation: ...``; ``Final Answer: ...`` ends the loop;
* native ``tool_calls`` (OpenAI function calling), answered with ``role="tool"`` messages.

Every step becomes a JSON-able dict (thought, action, input, observation, tokens,
latency), one ``trace.jsonl`` line of the node's commit. The budget is strict:
never more than ``max_steps`` model calls that may use tools, then at most one
more call asking for the final answer.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from got_core.errors import ConfigError
from got_core.solver.models import ChatModel, ChatResponse, Usage
from got_core.solver.tools import Tool, ToolResult, get_tools

__all__ = [
    "FINAL_PROMPT",
    "ParsedAction",
    "ReactResult",
    "arun_react",
    "format_tool_instructions",
    "parse_action",
    "run_react",
]

#: Sent once when the tool budget is spent.
FINAL_PROMPT = (
    "You have used all your tool calls. Do not call any tool. "
    "Give your final answer now, on a line starting with 'Final Answer:'."
)

_KEYWORD = re.compile(
    r"^[ \t>#*_`-]*(thought|action[ _]?input|action|final[ _]?answer|observation)[ \t*_`]*:[ \t*_]*",
    re.I | re.M,
)
_FENCE = re.compile(r"```[\w-]*[ \t]*\n?(.*?)```", re.S)
_BRACKET_FORM = re.compile(r"^([\w.-]+)\s*[\[(](.*)[\])]\s*$", re.S)


@dataclass
class ParsedAction:
    """What a model message asks for.

    Attributes:
        kind: ``"action"`` (call a tool), ``"final"`` (a ``Final Answer:``) or ``"none"``
            (plain text: treat it as the answer).
        thought: the reasoning before the action or answer.
        tool: the tool name (lower case; resolved against ``tool_names`` when given).
        tool_input: the tool input, unwrapped from fences, quotes and JSON.
        final_answer: the text after ``Final Answer:``.
        end: offset in the text where the action ends (text after it is ignored).
    """

    kind: Literal["action", "final", "none"]
    thought: str = ""
    tool: str | None = None
    tool_input: str | None = None
    final_answer: str | None = None
    end: int = 0


def _canonical(word: str) -> str:
    w = re.sub(r"[ _]", "", word.lower())
    return {"actioninput": "input", "finalanswer": "final"}.get(w, w)


def _unwrap(value: str) -> str:
    """Strip fences, quotes and JSON wrappers from a tool input."""
    text = value.strip()
    fence = _FENCE.search(text)
    if fence and not text[: fence.start()].strip():
        text = fence.group(1).strip()
    if text.startswith(("{", '"', "[")):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, str):
            return data.strip()
        if isinstance(data, dict):
            for key in ("input", "action_input", "expression", "query", "problem", "text"):
                if isinstance(data.get(key), str):
                    return data[key].strip()
            strings = [v for v in data.values() if isinstance(v, str)]
            if len(strings) == 1:
                return strings[0].strip()
    while len(text) >= 2 and text[0] == text[-1] and text[0] in "`'\"":
        text = text[1:-1].strip()
    return text


def _resolve(name: str, tool_names: Iterable[str] | None) -> str:
    raw = name.strip().strip("`'\"*[]().:").strip().lower()
    names = [n.lower() for n in tool_names or []]
    if raw in names or not names:
        return raw
    words = re.findall(r"[a-z0-9_]+", raw)
    hits = [n for n in names if n in words] or [n for n in names if n in raw]
    return hits[0] if len(hits) == 1 else raw


def _json_action(text: str, tool_names: Iterable[str] | None) -> ParsedAction | None:
    """LangChain-style ``{"action": ..., "action_input": ...}`` blobs, fenced or bare."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    start = text.find("{")
    if start >= 0:
        candidates.append(text[start : text.rfind("}") + 1])
    for cand in candidates:
        try:
            data = json.loads(cand.strip())
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("action"), str):
            arg = data.get("action_input", data.get("input", ""))
            arg = arg if isinstance(arg, str) else json.dumps(arg)
            thought = text[: text.find(cand)].strip() if cand in text else ""
            thought = re.sub(r"```[\w-]*\s*$", "", thought).strip()
            if re.sub(r"[ _]", "", data["action"].lower()) == "finalanswer":
                return ParsedAction("final", thought=thought, final_answer=arg.strip(), end=len(text))
            return ParsedAction(
                "action",
                thought=thought,
                tool=_resolve(data["action"], tool_names),
                tool_input=_unwrap(arg),
                end=len(text),
            )
    return None


def parse_action(text: str, tool_names: Iterable[str] | None = None) -> ParsedAction:
    """Find a tool call or a final answer in model text.

    Tolerates markdown (``**Action:**``, ``### Final Answer:``), any letter case,
    ``Action Input`` in code fences, quotes or JSON, the original ReAct form
    ``Action: tool[input]``, LangChain JSON blobs, and hallucinated
    ``Observation:`` lines (everything after the action is ignored). Whichever of
    ``Action:`` and ``Final Answer:`` comes first wins.

    Args:
        text: the model message.
        tool_names: known tool names, used to resolve loose names ("the SymPy tool").

    Returns:
        A :class:`ParsedAction`; ``kind == "none"`` when the text has neither.
    """
    text = text or ""
    marks = [(m.start(), m.end(), _canonical(m.group(1))) for m in _KEYWORD.finditer(text)]
    first = next((mk for mk in marks if mk[2] in ("action", "final")), None)
    if first is None:
        return _json_action(text, tool_names) or ParsedAction("none", thought=text.strip(), end=len(text))
    start, body, kind = first
    thought_marks = [mk for mk in marks if mk[0] < start and mk[2] == "thought"]
    thought = text[thought_marks[-1][1] if thought_marks else 0 : start].strip()
    later = [mk for mk in marks if mk[0] > start]
    if kind == "final":
        stop = later[0][0] if later else len(text)
        answer = text[body:stop].strip().strip("*_").strip()
        return ParsedAction("final", thought=thought, final_answer=answer, end=stop)
    line_end = text.find("\n", body)
    line_end = len(text) if line_end < 0 else line_end
    tool_text = text[body:line_end].strip()
    # the input normally follows the action; a few models write it first
    inp = next((mk for mk in later if mk[2] == "input"), None) or next(
        (mk for mk in marks if mk[0] < start and mk[2] == "input"), None
    )
    stop_kinds = ("observation", "thought", "action", "final")
    if inp is not None:
        end = next((mk[0] for mk in marks if mk[0] > inp[0] and mk[2] in stop_kinds), len(text))
        tool_input: str | None = _unwrap(text[inp[1] : end])
        end = max(end, line_end)
    else:
        end = next((mk[0] for mk in later if mk[2] in stop_kinds), len(text))
        bracket = _BRACKET_FORM.match(tool_text)
        if bracket:
            tool_text, tool_input = bracket.group(1), _unwrap(bracket.group(2))
        else:
            rest = text[line_end:end].strip()
            tool_input = _unwrap(rest) if rest else None
    return ParsedAction("action", thought=thought, tool=_resolve(tool_text, tool_names), tool_input=tool_input, end=end)


def format_tool_instructions(tools: Iterable[Tool], max_steps: int = 3) -> str:
    """The system-prompt paragraph that teaches the text protocol and lists the tools."""
    lines = ["You can use these tools:"]
    lines += [f"- {t.name}: {t.description}" for t in tools]
    lines += [
        "",
        "To use a tool, write exactly these lines and then stop:",
        "Thought: <your reasoning>",
        "Action: <tool name>",
        "Action Input: <the tool input>",
        f"You will receive 'Observation: <result>'. You may use tools at most {max_steps} times.",
        "When you know the answer, write a line 'Final Answer: <answer>'.",
    ]
    return "\n".join(lines)


@dataclass
class ReactResult:
    """The outcome of one ReAct loop.

    Attributes:
        final_text: the last model message in full (the node's thought text).
        steps: JSON-able dicts, one per tool call or answer, ready for ``trace.jsonl``.
        usage: tokens over every model call of the loop.
        answer: the text after ``Final Answer:``, or ``None`` if the model never wrote one.
        stop_reason: ``"final"`` (a Final Answer), ``"text"`` (plain text, no action),
            ``"budget"`` (tool budget spent; a final answer was asked for once).
        n_calls: model calls made (at most ``max_steps + 1``).
    """

    final_text: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    answer: str | None = None
    stop_reason: str = "final"
    n_calls: int = 0

    def to_jsonl(self) -> str:
        """The steps as ``trace.jsonl`` text (one JSON object per line)."""
        return "".join(json.dumps(s, ensure_ascii=False, sort_keys=True) + "\n" for s in self.steps)


class _Loop:
    """The loop's state; sync and async drivers share it (tools always run synchronously)."""

    def __init__(
        self,
        messages: list[dict[str, Any]],
        tools: Any,
        max_steps: int,
        native_tools: bool,
        final_prompt: str | None,
        stop_at_observation: bool,
        observation_chars: int,
        gen_kwargs: dict[str, Any],
    ) -> None:
        if max_steps < 0:
            raise ConfigError("max_steps must be >= 0")
        resolved = [t if isinstance(t, Tool) else get_tools([t])[0] for t in (tools or [])]
        self.tools = {t.name.lower(): t for t in resolved}
        self.messages = [dict(m) for m in messages]
        self.max_steps, self.native, self.final_prompt = max_steps, native_tools, final_prompt
        self.observation_chars = observation_chars
        self.gen = dict(gen_kwargs)
        if stop_at_observation:
            self.gen["stop"] = [*(self.gen.get("stop") or []), "\nObservation:"]
        self.result = ReactResult(final_text="")
        self.done = False
        self.forcing = False

    def request(self) -> dict[str, Any] | None:
        """Keyword arguments for the next model call, or ``None`` when finished."""
        if self.done:
            return None
        kwargs = dict(self.gen)
        if self.native and self.tools and not self.forcing and self.max_steps > 0:
            kwargs["tools"] = [t.spec() for t in self.tools.values()]
        return {"messages": list(self.messages), **kwargs}

    def _step(self, resp: ChatResponse | None, first: bool, **fields: Any) -> None:
        base = {
            "step": len(self.result.steps) + 1,
            "call": self.result.n_calls,
            "type": "action",
            "thought": "",
            "action": None,
            "action_input": None,
            "observation": None,
            "ok": None,
            "error_type": None,
            "native": False,
            "tool_call_id": None,
            "tool_ms": 0.0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "latency_ms": 0.0,
            "model": "",
            "finish_reason": None,
        }
        if resp is not None and first:
            base.update(
                prompt_tokens=resp.usage.prompt_tokens,
                completion_tokens=resp.usage.completion_tokens,
                latency_ms=resp.latency_ms or 0.0,
                model=resp.model,
                finish_reason=resp.finish_reason,
            )
        base.update(fields)
        self.result.steps.append(base)

    def _run_tool(self, name: str | None, tool_input: Any) -> tuple[ToolResult, float]:
        t0 = time.perf_counter()
        tool = self.tools.get((name or "").lower())
        if tool is None:
            avail = ", ".join(self.tools) or "none"
            res = ToolResult(
                False, "", f"UnknownToolError: no tool named {name!r}; available tools: {avail}", "UnknownToolError"
            )
        elif tool_input is None or (isinstance(tool_input, str) and not tool_input.strip()):
            res = ToolResult(
                False,
                "",
                "ToolInputError: missing input; write 'Action Input: <input>' on the line after 'Action:'",
                "ToolInputError",
            )
        else:
            res = tool.run(tool_input)
        return res, (time.perf_counter() - t0) * 1000.0

    def _observation(self, res: ToolResult) -> str:
        obs = res.observation
        if len(obs) > self.observation_chars:
            obs = obs[: self.observation_chars] + " ... [truncated]"
        return obs

    def feed(self, resp: ChatResponse) -> None:
        """Consume one model answer: run the requested tools or finish."""
        r = self.result
        r.n_calls += 1
        r.usage = r.usage + resp.usage
        text = resp.text or ""
        if self.forcing or self.max_steps == 0:  # no tool may run now: take the text as the answer
            parsed = parse_action(text, self.tools)
            answer = parsed.final_answer if parsed.kind == "final" else None
            reason = "budget" if self.forcing else "final" if answer is not None else "text"
            self._step(resp, True, type="forced_final" if self.forcing else "final", thought=parsed.thought)
            self._finish(text, answer, reason)
            return
        if resp.tool_calls:
            self.messages.append(
                {
                    "role": "assistant",
                    "content": text or None,
                    "tool_calls": [c.to_message_dict() for c in resp.tool_calls],
                }
            )
            for i, call in enumerate(resp.tool_calls):
                res, ms = self._run_tool(call.name, call.arguments)
                obs = self._observation(res)
                self.messages.append({"role": "tool", "tool_call_id": call.id, "content": obs})
                shown = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
                self._step(
                    resp,
                    i == 0,
                    thought=text.strip() if i == 0 else "",
                    action=call.name,
                    action_input=shown,
                    observation=obs,
                    ok=res.ok,
                    error_type=res.error_type or None,
                    native=True,
                    tool_call_id=call.id,
                    tool_ms=ms,
                )
            self._after_action(text)
            return
        parsed = parse_action(text, self.tools)
        if parsed.kind == "action":
            res, ms = self._run_tool(parsed.tool, parsed.tool_input)
            obs = self._observation(res)
            self.messages.append({"role": "assistant", "content": text[: parsed.end].rstrip()})
            self.messages.append({"role": "user", "content": f"Observation: {obs}"})
            self._step(
                resp,
                True,
                thought=parsed.thought,
                action=parsed.tool,
                action_input=parsed.tool_input,
                observation=obs,
                ok=res.ok,
                error_type=res.error_type or None,
                tool_ms=ms,
            )
            self._after_action(text)
            return
        final = parsed.kind == "final"
        self._step(resp, True, type="final" if final else "text", thought=parsed.thought)
        self._finish(text, parsed.final_answer if final else None, "final" if final else "text")

    def _after_action(self, text: str) -> None:
        if self.result.n_calls < self.max_steps:
            return
        if self.final_prompt:
            self.forcing = True
            self.messages.append({"role": "user", "content": self.final_prompt})
        else:
            self._finish(text, None, "budget")

    def _finish(self, text: str, answer: str | None, reason: str) -> None:
        self.result.final_text, self.result.answer, self.result.stop_reason = text, answer, reason
        self.done = True


def run_react(
    model: ChatModel,
    messages: list[dict[str, Any]],
    tools: Iterable[Tool | str] | None,
    max_steps: int = 3,
    *,
    native_tools: bool = False,
    final_prompt: str | None = FINAL_PROMPT,
    stop_at_observation: bool = True,
    observation_chars: int = 2000,
    **gen_kwargs: Any,
) -> ReactResult:
    """Run the ReAct loop until a final answer or the tool budget runs out.

    Args:
        model: any :class:`~got_core.solver.models.ChatModel`.
        messages: the conversation so far (not modified); include
            :func:`format_tool_instructions` in the system prompt for text-format tools.
        tools: :class:`Tool` objects or names from ``got_core.solver.tools.TOOLS``.
        max_steps: most model calls that may use tools (§3.2: 3).
        native_tools: also offer the tools as OpenAI function specs (the server must
            support tool calling; native ``tool_calls`` in answers are handled either way).
        final_prompt: asked once when the budget is spent; ``None`` returns the last text.
        stop_at_observation: add ``"\\nObservation:"`` to the stop sequences.
        observation_chars: longest observation shown to the model.
        **gen_kwargs: ``temperature``, ``max_tokens``, ``seed``, ``stop`` for every call.

    Returns:
        A :class:`ReactResult`.

    Raises:
        ModelError: a model call failed (tools never raise; their errors become observations).
        ConfigError: a negative ``max_steps`` or an unknown tool name.
    """
    loop = _Loop(
        messages, tools, max_steps, native_tools, final_prompt, stop_at_observation, observation_chars, gen_kwargs
    )
    while (req := loop.request()) is not None:
        loop.feed(model.complete(req.pop("messages"), **req))
    return loop.result


async def arun_react(
    model: ChatModel,
    messages: list[dict[str, Any]],
    tools: Iterable[Tool | str] | None,
    max_steps: int = 3,
    *,
    native_tools: bool = False,
    final_prompt: str | None = FINAL_PROMPT,
    stop_at_observation: bool = True,
    observation_chars: int = 2000,
    **gen_kwargs: Any,
) -> ReactResult:
    """Async twin of :func:`run_react` (model calls awaited, tools run in a thread)."""
    loop = _Loop(
        messages, tools, max_steps, native_tools, final_prompt, stop_at_observation, observation_chars, gen_kwargs
    )
    while (req := loop.request()) is not None:
        resp = await model.acomplete(req.pop("messages"), **req)
        await asyncio.to_thread(loop.feed, resp)
    return loop.result
