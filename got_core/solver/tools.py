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

import ast
import dataclasses
import json
import keyword
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable

from got_core.errors import ConfigError, ToolError
from got_core.solver._safe_math import (
    MAX_COMB_N,
    MAX_DEPTH,
    MAX_FACTORIAL,
    MAX_INPUT_CHARS,
    MAX_INT_BITS,
    MAX_OUTPUT_CHARS,
    ToolInputError,
    ToolLimitError,
    ToolTimeoutError,
    UnsafeInputError,
    _arith,
    _check_magnitude,
    _check_name,
    _fmt,
    calculate,
    parse_expression,
)
from got_core.solver._safe_math import _CONSTANTS as _CALC_CONSTANTS
from got_core.solver._safe_math import _FUNCS as _CALC_FUNCS
from got_core.solver._tool_worker import _CALC_WORKER, _WORKER, shutdown_worker

__all__ = [
    "Tool",
    "ToolResult",
    "ToolInputError",
    "UnsafeInputError",
    "ToolLimitError",
    "ToolTimeoutError",
    "TOOLS",
    "get_tools",
    "parse_expression",
    "calculate",
    "shutdown_worker",
    "MAX_INPUT_CHARS",
    "MAX_DEPTH",
    "MAX_INT_BITS",
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
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}

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

_SYMPY_COMMANDS = ("solve", "simplify", "evaluate", "expand", "factor", "diff", "integrate")
_SYMPY_FUNCS = frozenset({
    "sqrt", "cbrt", "root", "exp", "log", "ln", "sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos",
    "atan", "atan2", "sinh", "cosh", "tanh", "abs", "Abs", "floor", "ceiling", "ceil", "factorial",
    "binomial", "comb", "gcd", "lcm", "min", "max", "Min", "Max", "re", "im", "sign",
})
_SINGLE_EQ = re.compile(r"(?<![<>=!])=(?!=)")


def _split_top(text: str) -> list[str]:
    """Split on ';' and new lines, and on top-level commas when they separate equations."""
    parts = [p.strip() for p in re.split(r"[;\n]+", text) if p.strip()]
    if len(parts) == 1 and len(_SINGLE_EQ.findall(parts[0])) > 1:
        pieces, depth, start = [], 0, 0
        for i, ch in enumerate(parts[0]):
            depth += ch in "([{"
            depth -= ch in ")]}"
            if ch == "," and depth == 0:
                pieces.append(parts[0][start:i])
                start = i + 1
        parts = [p.strip() for p in [*pieces, parts[0][start:]] if p.strip()]
    return parts


def _equation(text: str) -> tuple[ast.expr, ast.expr | None]:
    sides = _SINGLE_EQ.split(text)
    if len(sides) > 2:
        raise ToolInputError(f"{text[:60]!r} has more than one '='; write one equation per ';'")
    parse = lambda s: parse_expression(s, functions=_SYMPY_FUNCS, names=lambda n: True, compare=True)  # noqa: E731
    return (parse(sides[0]), parse(sides[1])) if len(sides) == 2 else (parse(sides[0]), None)


def _names(text: str) -> list[str]:
    found = [n for n in re.split(r"[\s,]+", text.strip()) if n]
    for n in found:
        _check_name(n, lambda _n: True)
    return found


def _keyword_split(text: str, words: str, last: bool = True) -> tuple[str, str | None]:
    """Split at the last (or first) whitespace-delimited keyword; linear time on hostile input."""
    found = None
    for m in re.finditer(r"(?<!\S)(?:%s)(?!\S)" % words, text):
        found = m
        if not last:
            break
    return (text[: found.start()], text[found.end():]) if found else (text, None)


def _sympy_plan(text: str) -> dict[str, Any]:
    """Parse a sympy-tool command into validated ASTs (pure: no sympy needed)."""
    m = re.match(r"\s*(%s)\b\s*:?\s*(.*)\Z" % "|".join(_SYMPY_COMMANDS), text, re.I | re.S)
    cmd, body = (m.group(1).lower(), m.group(2)) if m else ("", text)
    if not body.strip():
        raise ToolInputError(f"nothing after {cmd!r}; e.g. 'solve x**2 - 4 = 0'")
    plan: dict[str, Any] = {"cmd": cmd, "vars": [], "bounds": None}
    if cmd in ("", "solve"):
        head, tail = _keyword_split(body, "for")
        if tail is not None and re.fullmatch(r"\s*[A-Za-z][\w\s,]*", tail):
            plan["vars"], body = _names(tail), head
        if not cmd:
            cmd = plan["cmd"] = "solve" if _SINGLE_EQ.search(body) else "auto"
    if cmd in ("diff", "integrate"):
        body, bounds = _keyword_split(body, "from")
        if bounds is not None:
            if cmd == "diff":
                raise ToolInputError("'from a to b' only applies to integrate")
            low, high = _keyword_split(bounds, "to", last=False)
            if high is None:
                raise ToolInputError("write the bounds as 'from a to b'")
            plan["bounds"] = (_equation(low)[0], _equation(high)[0])
        body, var = _keyword_split(body, "wrt|with respect to")
        plan["vars"] = _names(var) if var is not None else []
    plan["exprs"] = [_equation(p) for p in (_split_top(body) if cmd == "solve" else [body])]
    if len(plan["exprs"]) > 50:
        raise ToolLimitError("at most 50 equations per call")
    return plan


def _sympy_big(v: Any) -> bool:
    return bool(v.is_Rational) and max(int(v.p).bit_length(), int(v.q).bit_length()) > MAX_INT_BITS


def _sympy_pow(sp: Any, base: Any, exp: Any) -> Any:
    # 9**9**9 would make sympy compute a 370-million-digit integer: refuse before Pow evaluates.
    if exp.is_Number and base.is_number and base not in (0, 1, -1):
        if abs(exp) > MAX_INT_BITS:
            raise ToolLimitError(f"the exponent {str(exp)[:30]} is too large for a numeric base; use logarithms")
        if base.is_Rational:
            size = max(abs(int(base.p)), abs(int(base.q)), 2)
            if abs(float(exp)) * math.log2(size) > MAX_INT_BITS:
                raise ToolLimitError(f"{base}**{exp} would have over ~3,900 digits; use logarithms")
    return sp.Pow(base, exp)


def _to_sympy(node: ast.expr, sp: Any) -> Any:
    """Build a SymPy object from a validated AST (never from a string)."""
    if isinstance(node, ast.Constant):
        v = node.value
        return sp.Integer(v) if isinstance(v, int) else sp.Rational(Fraction(repr(v)).numerator,
                                                                       Fraction(repr(v)).denominator)
    if isinstance(node, ast.Name):
        consts = {"pi": sp.pi, "E": sp.E, "e": sp.E, "I": sp.I, "oo": sp.oo, "inf": sp.oo, "infinity": sp.oo}
        return consts.get(node.id) or sp.Symbol(node.id)
    if isinstance(node, ast.UnaryOp):
        v = _to_sympy(node.operand, sp)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Compare):
        rel = {ast.Eq: sp.Eq, ast.NotEq: sp.Ne, ast.Lt: sp.Lt, ast.LtE: sp.Le, ast.Gt: sp.Gt, ast.GtE: sp.Ge}
        items = [_to_sympy(n, sp) for n in [node.left, *node.comparators]]
        parts = [rel[type(op)](a, b) for op, a, b in zip(node.ops, items, items[1:])]
        return parts[0] if len(parts) == 1 else sp.And(*parts)
    if isinstance(node, ast.BinOp):
        a, b = _to_sympy(node.left, sp), _to_sympy(node.right, sp)
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
            raise ToolInputError("division by zero")
        op = type(node.op)
        result = (a + b if op is ast.Add else a - b if op is ast.Sub else a * b if op is ast.Mult
                  else a / b if op is ast.Div else sp.floor(a / b) if op is ast.FloorDiv
                  else sp.Mod(a, b) if op is ast.Mod else _sympy_pow(sp, a, b))
        if _sympy_big(result):
            raise ToolLimitError(f"an intermediate number has over {MAX_INT_BITS} bits; use smaller numbers")
        return result
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)  # guaranteed by _validate
    name, args = node.func.id, [_to_sympy(a, sp) for a in node.args]
    if name == "factorial" and args and args[0].is_Number and args[0] > MAX_FACTORIAL:
        raise ToolLimitError(f"factorial({args[0]}) is over the limit of {MAX_FACTORIAL}")
    if name in ("binomial", "comb") and args and args[0].is_Number and args[0] > MAX_COMB_N:
        raise ToolLimitError(f"{name}({args[0]}, ...) is over the limit of n = {MAX_COMB_N}")
    fn = {"ln": sp.log, "abs": sp.Abs, "ceil": sp.ceiling, "comb": sp.binomial, "min": sp.Min,
          "max": sp.Max}.get(name) or getattr(sp, name)
    try:
        return fn(*args)
    except TypeError as exc:
        raise ToolInputError(f"{name}() got the wrong number of arguments ({exc})") from None


def _sympy_fmt(sp: Any, v: Any) -> str:
    text = sp.sstr(v)
    if getattr(v, "is_number", False) and not v.is_Rational and v.is_real is not False and v.is_finite is not False:
        approx = sp.sstr(sp.N(v, 15))
        if approx != text:
            text += f" (≈ {approx})"
    return text


def _sympy_job(text: str, timeout: float) -> str:
    import sympy as sp

    plan = _sympy_plan(text)
    exprs = [sp.Eq(_to_sympy(l, sp), _to_sympy(r, sp)) if r is not None else _to_sympy(l, sp)
             for l, r in plan["exprs"]]
    syms = [sp.Symbol(n) for n in plan["vars"]]
    free = sorted(set().union(*(getattr(e, "free_symbols", set()) for e in exprs)), key=str)
    cmd, expr = plan["cmd"], exprs[0]
    if cmd == "auto":
        cmd = "simplify" if free else "evaluate"
    if cmd == "solve":
        return _sympy_solve(sp, exprs, syms or free)
    if cmd in ("simplify", "expand", "factor"):
        return sp.sstr(getattr(sp, cmd)(expr))
    if cmd == "evaluate":
        if free:
            names = ", ".join(map(str, free))
            raise ToolInputError(f"evaluate needs numbers only, but the expression has symbols {names}; "
                                 "use 'solve' or 'simplify'")
        return _sympy_fmt(sp, expr) if isinstance(expr, sp.Expr) else sp.sstr(expr)
    var = syms[0] if syms else (free[0] if len(free) == 1 else None)
    if var is None:
        raise ToolInputError(f"say which variable: '{cmd} <expr> wrt x' (symbols: {', '.join(map(str, free))})")
    if cmd == "diff":
        return sp.sstr(sp.diff(expr, var))
    if plan["bounds"] is not None:
        a, b = (_to_sympy(n, sp) for n in plan["bounds"])
        return _sympy_fmt(sp, sp.integrate(expr, (var, a, b)))
    return sp.sstr(sp.integrate(expr, var)) + " + C"


def _sympy_solve(sp: Any, exprs: list[Any], syms: list[Any]) -> str:
    kept = []
    for e in exprs:
        if e is sp.true:
            continue
        if e is sp.false:
            return "no solution (an equation is false for every value)"
        kept.append(e)
    if not syms or not kept:
        raise ToolInputError("nothing to solve for: the equations have no variables (use 'evaluate')")
    if any(isinstance(e, sp.Rel) and not isinstance(e, (sp.Eq, sp.Ne)) for e in kept):
        if len(syms) != 1:
            raise ToolInputError("inequalities can be solved for one variable only: add 'for x'")
        return sp.sstr(sp.solve(kept, syms[0]))
    try:
        solutions = sp.solve(kept, syms, dict=True)
    except NotImplementedError as exc:
        raise ToolInputError(f"sympy cannot solve this system in closed form ({exc})") from None
    if not solutions:
        return "no solution"
    shown = [", ".join(f"{k} = {_sympy_fmt(sp, v)}" for k, v in sorted(s.items(), key=lambda kv: str(kv[0])))
             for s in solutions]
    return " or ".join(shown)


# --------------------------------------------------------------------------- linear programming

_LP_HEAD = re.compile(r"\s*(maximi[sz]e|minimi[sz]e|max|min)\b\s*:?\s*(.*)\Z", re.I | re.S)
_LP_ST = re.compile(r"\b(?:subject\s+to|such\s+that|st)\b\s*:?|(?<!\w)s\.\s*t\.\s*:?", re.I)
_LP_DECL = re.compile(r"(integers?|int|general|binary|binaries|bin)\s*:?\s+(.+)\Z", re.I | re.S)
_LP_MULTI = re.compile(r"([A-Za-z]\w*(?:\s*,\s*[A-Za-z]\w*)+)\s*(<=|>=|==|=|<|>)\s*(.+)\Z", re.S)
MAX_LP_VARS = 500


def _linear(node: ast.expr) -> tuple[dict[str, float], float]:
    """``{variable: coefficient}, constant`` of a linear expression (refuses non-linear ones)."""
    if isinstance(node, ast.Constant):
        return {}, node.value
    if isinstance(node, ast.Name):
        return {node.id: 1}, 0
    if isinstance(node, ast.UnaryOp):
        c, k = _linear(node.operand)
        return ({v: -x for v, x in c.items()}, -k) if isinstance(node.op, ast.USub) else (c, k)
    if isinstance(node, ast.BinOp):
        (ca, ka), (cb, kb) = _linear(node.left), _linear(node.right)
        op = type(node.op)
        if op in (ast.Add, ast.Sub):
            s = 1 if op is ast.Add else -1
            return {v: ca.get(v, 0) + s * cb.get(v, 0) for v in {**ca, **cb}}, ka + s * kb
        if op is ast.Mult and (not ca or not cb):
            (c, k), f = ((cb, kb), ka) if not ca else ((ca, ka), kb)
            return {v: x * f for v, x in c.items()}, _check_magnitude(k * f)
        if op is ast.Div and not cb:
            if kb == 0:
                raise ToolInputError("division by zero")
            return {v: x / kb for v, x in ca.items()}, ka / kb
        if not ca and not cb:
            return {}, _check_magnitude(_arith(node.op, ka, kb))
    raise ToolInputError(f"{ast.unparse(node)[:60]!r} is not linear; LP needs sums of number*variable")


def _lp_plan(text: str) -> dict[str, Any]:
    """Parse the LP text format into validated linear forms (pure: no pulp needed)."""
    m = _LP_HEAD.match(text)
    if not m:
        raise ToolInputError("start with 'maximize' or 'minimize', e.g. "
                             "'maximize 3x + 2y subject to x + y <= 4; x, y >= 0'")
    sense, rest = m.group(1).lower().startswith("max"), m.group(2)
    st = _LP_ST.search(rest)
    if st:
        objective, rest = rest[: st.start()], rest[st.end():]
    else:
        objective, _, rest = rest.partition("\n") if "\n" in rest else rest.partition(";")
    parse = lambda s, cmp: parse_expression(s, names=lambda n: True, compare=cmp)  # noqa: E731
    plan: dict[str, Any] = {"maximize": sense, "objective": _linear(parse(objective.strip() or "0", False)),
                            "constraints": [], "integer": set(), "binary": set()}
    for stmt in (s.strip() for s in re.split(r"[;\n]+", rest)):
        if not stmt:
            continue
        decl = _LP_DECL.match(stmt)
        if decl:
            kind = "binary" if decl.group(1).lower().startswith("bin") else "integer"
            plan[kind].update(_names(decl.group(2)))
            continue
        label = re.match(r"([A-Za-z_]\w*)\s*:\s*(?=\S)", stmt)  # an optional label "c1:"
        if label and not keyword.iskeyword(label.group(1)):
            stmt = stmt[label.end():]
        multi = _LP_MULTI.match(stmt)
        lines = [f"{v} {multi.group(2)} {multi.group(3)}" for v in _names(multi.group(1))] if multi else [stmt]
        for line in lines:
            node = parse(_SINGLE_EQ.sub("==", line), True)
            if not isinstance(node, ast.Compare) or any(isinstance(op, ast.NotEq) for op in node.ops):
                raise ToolInputError(f"{line[:60]!r} is not a constraint; use <=, >= or =")
            sides = [_linear(n) for n in [node.left, *node.comparators]]
            for op, (ca, ka), (cb, kb) in zip(node.ops, sides, sides[1:]):
                coefs = {v: ca.get(v, 0) - cb.get(v, 0) for v in {**ca, **cb}}
                sense_c = "==" if isinstance(op, ast.Eq) else "<=" if isinstance(op, (ast.Lt, ast.LtE)) else ">="
                plan["constraints"].append((coefs, ka - kb, sense_c, line))
    if not plan["constraints"]:
        raise ToolInputError("no constraints: add 'subject to <constraint>; ...' (e.g. x + y <= 4; x, y >= 0)")
    names = set(plan["objective"][0]).union(*(c[0] for c in plan["constraints"]), plan["integer"], plan["binary"])
    if len(names) > MAX_LP_VARS:
        raise ToolLimitError(f"{len(names)} variables; the limit is {MAX_LP_VARS}")
    return plan


def _lp_job(text: str, timeout: float) -> str:
    import pulp

    plan = _lp_plan(text)
    prob = pulp.LpProblem("got_lp", pulp.LpMaximize if plan["maximize"] else pulp.LpMinimize)
    order: dict[str, Any] = {}

    def var(name: str) -> Any:
        if name not in order:
            cat = "Binary" if name in plan["binary"] else "Integer" if name in plan["integer"] else "Continuous"
            order[name] = pulp.LpVariable(name, cat=cat)
        return order[name]

    def expr(coefs: dict[str, float], const: float) -> Any:
        return pulp.lpSum(float(c) * var(v) for v, c in coefs.items() if c) + float(const)

    prob += expr(*plan["objective"])
    for coefs, const, sense, line in plan["constraints"]:
        if not any(coefs.values()):
            ok = const <= 0 if sense == "<=" else const >= 0 if sense == ">=" else const == 0
            if not ok:
                return f"status: Infeasible\nthe constraint {line!r} is false for every choice of variables"
            continue
        e = expr(coefs, const)
        prob += (e <= 0) if sense == "<=" else (e >= 0) if sense == ">=" else (e == 0)
    for name in sorted(plan["integer"] | plan["binary"]):
        var(name)
    prob.solve(pulp.PULP_CBC_CMD(msg=False, timeLimit=max(1, int(timeout))))
    status = pulp.LpStatus[prob.status]
    if status != "Optimal":
        hint = {"Infeasible": "no point satisfies every constraint; check their directions",
                "Unbounded": "the objective can grow without limit; did you forget bounds such as x >= 0?"}
        return f"status: {status}\n{hint.get(status, 'the solver found no optimal solution')}"
    value = pulp.value(prob.objective)
    lines = ["status: Optimal", f"objective: {_fmt(round(float(value or 0.0), 9))}"]
    lines += [f"{n} = {_fmt(round(float(v.varValue or 0.0), 9))}" for n, v in order.items()]
    return "\n".join(lines)


_JOBS: dict[str, Callable[[str, float], str]] = {"sympy": _sympy_job, "lp": _lp_job, "calculator": calculate}


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


_SCHEMA = {"type": "object", "properties": {"input": {"type": "string", "description": "the tool input text"}},
           "required": ["input"]}

TOOLS: dict[str, Tool] = {
    "calculator": Tool(
        "calculator",
        "Arithmetic on one expression. Numbers, + - * / // % ** (or ^), parentheses; functions sqrt, cbrt, "
        "exp, ln, log(x[, base]), log10, log2, sin, cos, tan, asin, acos, atan, atan2, sinh, cosh, tanh, abs, "
        "round, floor, ceil, factorial, comb, perm, gcd, lcm, min, max, hypot, degrees, radians; constants "
        "pi, e, tau. Integers stay exact; angles are radians. Example: 2**10 / (3 + sqrt(16))",
        _SCHEMA, _calculator_tool, 5.0, 512),
    "sympy": Tool(
        "sympy",
        "Symbolic math (SymPy). Input: a command, then math in Python syntax ('**' or '^' for powers, "
        "'2x' means 2*x). solve <equation>[; <equation>...] [for x, y] (e.g. 'solve x**2 - 4 = 0', "
        "'solve x + y = 3; x - y = 1'); simplify <expr>; expand <expr>; factor <expr>; evaluate <expr> "
        "(exact and numeric value, e.g. 'evaluate sqrt(2)*3'); diff <expr> [wrt x]; integrate <expr> "
        "[wrt x] [from a to b]. Functions: sqrt, exp, log, sin, cos, tan, asin, acos, atan, Abs, floor, "
        "ceiling, factorial, binomial, gcd, lcm, Min, Max; constants pi, E, I, oo.",
        _SCHEMA, _sympy_tool, 10.0, 4096),
    "lp": Tool(
        "lp",
        "Linear / integer programming (PuLP with CBC). Input: 'maximize <linear expr> subject to "
        "<constraint>; <constraint>; ...' (or minimize). Constraints use <=, >= or = and are separated by "
        "';' or new lines; '3x' means 3*x. Variables are unbounded unless you bound them: 'x >= 0' or "
        "'x, y >= 0'. Declare 'integer x, y' or 'binary z' as statements. Example: maximize 3x + 2y "
        "subject to x + y <= 4; x + 3y <= 6; x, y >= 0. Answers the status, the objective and each variable.",
        _SCHEMA, _lp_tool, 20.0, 4096),
}


def get_tools(names: list[str] | tuple[str, ...] | None = None, *, timeout: float | None = None,
              memory_mb: int | None = None) -> list[Tool]:
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
