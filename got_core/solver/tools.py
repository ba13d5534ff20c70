"""Tools the model may call in the ReAct loop: a calculator, SymPy and a PuLP LP solver.

§3.2 of the paper (arXiv 2606.14470): the inner loop may call tools. Their input
is model text, so it is treated as hostile:

* it is parsed with ``ast.parse(mode="eval")`` and walked by hand over a
  whitelist of node types; numbers and SymPy/PuLP objects are built directly.
  Nothing is ever ``eval``-ed, ``exec``-ed or ``sympify``-ed (``sympify`` and
  ``parse_expr`` call ``eval``);
* attribute access, subscripts, imports, dunder or underscore names, lambdas,
  comprehensions, strings, keyword arguments and unknown functions are refused;
* inputs over :data:`MAX_INPUT_CHARS`, nesting over :data:`MAX_DEPTH`, and integer
  results over :data:`MAX_INT_BITS` (``9**9**9``) are refused before any work;
* every tool (the calculator too) runs in a worker process under its
  :attr:`Tool.timeout` (wall clock; ``RLIMIT_CPU`` as a second stop) and
  :attr:`Tool.memory_mb` (``RLIMIT_AS``); on timeout the worker is killed and a
  fresh one starts on the next call. ``get_tools(timeout=..., memory_mb=...)`` sets both.

Failures come back as a :class:`ToolResult` whose ``error`` names the problem
and what to write instead; internally they are :class:`~got_core.errors.ToolError`
subclasses.

The layers: :mod:`got_core.solver._safe_math` (the whitelist parser, the
calculator, the typed errors) ← :mod:`got_core.solver._tool_worker` (the child
process) ← this module (SymPy and LP jobs, :class:`Tool` and the registry).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from got_core.errors import ConfigError, ToolError
from got_core.solver._safe_math import _CONSTANTS as _CALC_CONSTANTS
from got_core.solver._safe_math import _FUNCS as _CALC_FUNCS
from got_core.solver._safe_math import (
    MAX_DEPTH,
    MAX_INPUT_CHARS,
    MAX_INT_BITS,
    MAX_OUTPUT_CHARS,
    ToolInputError,
    ToolLimitError,
    ToolTimeoutError,
    UnsafeInputError,
    calculate,
    parse_expression,
)
from got_core.solver._tool_jobs import _lp_plan, _sympy_plan
from got_core.solver._tool_worker import _CALC_WORKER, _WORKER, shutdown_worker

__all__ = [
    "MAX_DEPTH",
    "MAX_INPUT_CHARS",
    "MAX_INT_BITS",
    "TOOLS",
    "Tool",
    "ToolInputError",
    "ToolLimitError",
    "ToolResult",
    "ToolTimeoutError",
    "UnsafeInputError",
    "calculate",
    "get_tools",
    "parse_expression",
    "shutdown_worker",
]


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns to the model.

    Attributes:
        ok: whether the tool produced an answer.
        output: the answer text (empty on failure).
        error: ``"ErrorType: what went wrong; what to do"`` on failure.
        error_type: the error class name (``"UnsafeInputError"``...), for traces.
    """

    ok: bool
    output: str = ""
    error: str = ""
    error_type: str = ""

    @property
    def observation(self) -> str:
        """The text to show the model: the output, or ``"Error: ..."``."""
        return self.output if self.ok else f"Error: {self.error}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Tool:
    """A tool: prompt text, a JSON schema for native tool calls, and a safe runner.

    Attributes:
        name: how the model names it (``Action: <name>``).
        description: what to put in the prompt (input format and an example).
        parameters: JSON schema of the native-call arguments (one string, ``input``).
        func: ``func(text, timeout, memory_bytes) -> str``; raises :class:`ToolError`
            subclasses and must keep to both limits (the built-in tools run their work in
            a worker process that is killed at the deadline).
        timeout: wall-clock seconds allowed per call.
        memory_mb: address space the call may use, in MiB.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[[str, float, int], str]
    timeout: float = 10.0
    memory_mb: int = 1024

    def spec(self) -> dict[str, Any]:
        """The OpenAI ``tools=[...]`` entry for native tool calling."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def run(self, text: Any) -> ToolResult:
        """Run the tool on model text (or native-call arguments); never raises for bad input.

        Args:
            text: a string, or a dict of arguments (``{"input": ...}``).

        Returns:
            A :class:`ToolResult`; failures carry a typed, readable error.
        """
        try:
            output = self.func(_coerce_input(text), self.timeout, int(self.memory_mb) << 20)
            if len(output) > MAX_OUTPUT_CHARS:
                output = output[:MAX_OUTPUT_CHARS] + " ... [output truncated]"
            return ToolResult(True, output)
        except ToolError as exc:
            return ToolResult(False, "", f"{type(exc).__name__}: {exc}", type(exc).__name__)
        except Exception as exc:  # a tool must answer the model, whatever broke
            return ToolResult(False, "", f"ToolError: {self.name} failed ({type(exc).__name__}: {exc})", "ToolError")


_FENCE = re.compile(r"^```[\w-]*\s*\n?(.*?)\n?```$", re.S)


def _coerce_input(value: Any) -> str:
    if isinstance(value, dict):
        for key in ("input", "expression", "query", "problem", "text"):
            if isinstance(value.get(key), str):
                return _coerce_input(value[key])
        strings = [v for v in value.values() if isinstance(v, str)]
        if len(strings) == 1:
            return _coerce_input(strings[0])
        raise ToolInputError(f'pass the tool input as {{"input": "<text>"}}, not {json.dumps(value)[:120]}')
    if not isinstance(value, str):
        raise ToolInputError(f"tool input must be text, not {type(value).__name__}")
    if len(value) > MAX_INPUT_CHARS:
        raise ToolLimitError(f"input is {len(value)} characters; the limit is {MAX_INPUT_CHARS}")
    text = value.strip()
    fence = _FENCE.match(text)
    if fence:
        text = fence.group(1).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        text = text[1:-1].strip()
    if "\x00" in text:
        raise ToolInputError("input contains a NUL character")
    if not text:
        raise ToolInputError("input is empty; give the expression to compute")
    return text


# --------------------------------------------------------------------------- sympy


# --------------------------------------------------------------------------- registry


def _calculator_tool(text: str, timeout: float, memory_bytes: int | None = None) -> str:
    parse_expression(text, functions=set(_CALC_FUNCS), names=lambda n: n in _CALC_CONSTANTS)  # refuse here
    return _CALC_WORKER.call("calculator", text, timeout, memory_bytes)


def _sympy_tool(text: str, timeout: float, memory_bytes: int | None = None) -> str:
    _sympy_plan(text)  # refuse hostile input here, before it reaches the worker
    return _WORKER.call("sympy", text, timeout, memory_bytes)


def _lp_tool(text: str, timeout: float, memory_bytes: int | None = None) -> str:
    _lp_plan(text)
    return _WORKER.call("lp", text, timeout, memory_bytes)


_SCHEMA = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "the tool input text"}},
    "required": ["input"],
}

TOOLS: dict[str, Tool] = {
    "calculator": Tool(
        "calculator",
        "Arithmetic on one expression. Numbers, + - * / // % ** (or ^), parentheses; functions sqrt, cbrt, "
        "exp, ln, log(x[, base]), log10, log2, sin, cos, tan, asin, acos, atan, atan2, sinh, cosh, tanh, abs, "
        "round, floor, ceil, factorial, comb, perm, gcd, lcm, min, max, hypot, degrees, radians; constants "
        "pi, e, tau. Integers stay exact; angles are radians. Example: 2**10 / (3 + sqrt(16))",
        _SCHEMA,
        _calculator_tool,
        5.0,
        512,
    ),
    "sympy": Tool(
        "sympy",
        "Symbolic math (SymPy). Input: a command, then math in Python syntax ('**' or '^' for powers, "
        "'2x' means 2*x). solve <equation>[; <equation>...] [for x, y] (e.g. 'solve x**2 - 4 = 0', "
        "'solve x + y = 3; x - y = 1'); simplify <expr>; expand <expr>; factor <expr>; evaluate <expr> "
        "(exact and numeric value, e.g. 'evaluate sqrt(2)*3'); diff <expr> [wrt x]; integrate <expr> "
        "[wrt x] [from a to b]. Functions: sqrt, exp, log, sin, cos, tan, asin, acos, atan, Abs, floor, "
        "ceiling, factorial, binomial, gcd, lcm, Min, Max; constants pi, E, I, oo.",
        _SCHEMA,
        _sympy_tool,
        10.0,
        4096,
    ),
    "lp": Tool(
        "lp",
        "Linear / integer programming (PuLP with CBC). Input: 'maximize <linear expr> subject to "
        "<constraint>; <constraint>; ...' (or minimize). Constraints use <=, >= or = and are separated by "
        "';' or new lines; '3x' means 3*x. Variables are unbounded unless you bound them: 'x >= 0' or "
        "'x, y >= 0'. Declare 'integer x, y' or 'binary z' as statements. Example: maximize 3x + 2y "
        "subject to x + y <= 4; x + 3y <= 6; x, y >= 0. Answers the status, the objective and each variable.",
        _SCHEMA,
        _lp_tool,
        20.0,
        4096,
    ),
}


def get_tools(
    names: list[str] | tuple[str, ...] | None = None, *, timeout: float | None = None, memory_mb: int | None = None
) -> list[Tool]:
    """Look tools up by name (all of them when ``names`` is ``None``).

    Args:
        names: tool names from :data:`TOOLS`, in the order wanted.
        timeout: override every tool's wall-clock limit in seconds (defaults: calculator
            5, sympy 10, lp 20).
        memory_mb: override every tool's memory limit in MiB (defaults: calculator 512,
            sympy and lp 4096).

    Raises:
        ConfigError: an unknown name, a non-positive timeout or a memory limit under 64 MiB.
    """
    chosen = list(TOOLS) if names is None else list(names)
    unknown = [n for n in chosen if n not in TOOLS]
    if unknown:
        raise ConfigError(f"unknown tool(s) {', '.join(map(repr, unknown))}; available: {', '.join(TOOLS)}")
    if timeout is not None and not timeout > 0:
        raise ConfigError("tool timeout must be positive")
    if memory_mb is not None and (not isinstance(memory_mb, int) or isinstance(memory_mb, bool) or memory_mb < 64):
        raise ConfigError("tool memory_mb must be an int of at least 64 (MiB)")
    tools = [TOOLS[n] for n in chosen]
    if timeout is not None:
        tools = [dataclasses.replace(t, timeout=timeout) for t in tools]
    if memory_mb is not None:
        tools = [dataclasses.replace(t, memory_mb=memory_mb) for t in tools]
    return tools
