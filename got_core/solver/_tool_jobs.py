"""The jobs the tool workers run: sympy and PuLP (and the calculator), parsed safely.

Each ``*_plan`` turns the model's text into a checked plan (a syntax tree against a
whitelist, never ``eval``); each ``*_job`` runs one inside a worker process of
:mod:`got_core.solver._tool_worker`, which imports this module in the child only.
:mod:`got_core.solver.tools` calls the plans in the parent to refuse hostile input
before it reaches a worker.
"""

from __future__ import annotations

import ast
import keyword
import math
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from got_core.solver._safe_math import (
    MAX_COMB_N,
    MAX_FACTORIAL,
    MAX_INT_BITS,
    ToolInputError,
    ToolLimitError,
    _arith,
    _check_magnitude,
    _check_name,
    _fmt,
    calculate,
    parse_expression,
)

_SYMPY_COMMANDS = ("solve", "simplify", "evaluate", "expand", "factor", "diff", "integrate")
_SYMPY_FUNCS = frozenset(
    {
        "sqrt",
        "cbrt",
        "root",
        "exp",
        "log",
        "ln",
        "sin",
        "cos",
        "tan",
        "cot",
        "sec",
        "csc",
        "asin",
        "acos",
        "atan",
        "atan2",
        "sinh",
        "cosh",
        "tanh",
        "abs",
        "Abs",
        "floor",
        "ceiling",
        "ceil",
        "factorial",
        "binomial",
        "comb",
        "gcd",
        "lcm",
        "min",
        "max",
        "Min",
        "Max",
        "re",
        "im",
        "sign",
    }
)
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
    for m in re.finditer(rf"(?<!\S)(?:{words})(?!\S)", text):
        found = m
        if not last:
            break
    return (text[: found.start()], text[found.end() :]) if found else (text, None)


def _sympy_plan(text: str) -> dict[str, Any]:
    """Parse a sympy-tool command into validated ASTs (pure: no sympy needed)."""
    m = re.match(r"\s*({})\b\s*:?\s*(.*)\Z".format("|".join(_SYMPY_COMMANDS)), text, re.I | re.S)
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
        return (
            sp.Integer(v)
            if isinstance(v, int)
            else sp.Rational(Fraction(repr(v)).numerator, Fraction(repr(v)).denominator)
        )
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
        result = (
            a + b
            if op is ast.Add
            else a - b
            if op is ast.Sub
            else a * b
            if op is ast.Mult
            else a / b
            if op is ast.Div
            else sp.floor(a / b)
            if op is ast.FloorDiv
            else sp.Mod(a, b)
            if op is ast.Mod
            else _sympy_pow(sp, a, b)
        )
        if _sympy_big(result):
            raise ToolLimitError(f"an intermediate number has over {MAX_INT_BITS} bits; use smaller numbers")
        return result
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)  # guaranteed by _validate
    name, args = node.func.id, [_to_sympy(a, sp) for a in node.args]
    if name == "factorial" and args and args[0].is_Number and args[0] > MAX_FACTORIAL:
        raise ToolLimitError(f"factorial({args[0]}) is over the limit of {MAX_FACTORIAL}")
    if name in ("binomial", "comb") and args and args[0].is_Number and args[0] > MAX_COMB_N:
        raise ToolLimitError(f"{name}({args[0]}, ...) is over the limit of n = {MAX_COMB_N}")
    fn = {"ln": sp.log, "abs": sp.Abs, "ceil": sp.ceiling, "comb": sp.binomial, "min": sp.Min, "max": sp.Max}.get(
        name
    ) or getattr(sp, name)
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
    exprs = [sp.Eq(_to_sympy(l, sp), _to_sympy(r, sp)) if r is not None else _to_sympy(l, sp) for l, r in plan["exprs"]]
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
            raise ToolInputError(
                f"evaluate needs numbers only, but the expression has symbols {names}; use 'solve' or 'simplify'"
            )
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
    shown = [
        ", ".join(f"{k} = {_sympy_fmt(sp, v)}" for k, v in sorted(s.items(), key=lambda kv: str(kv[0])))
        for s in solutions
    ]
    return " or ".join(shown)


# --------------------------------------------------------------------------- linear programming

_LP_HEAD = re.compile(r"\s*(maximi[sz]e|minimi[sz]e|max|min)\b\s*:?\s*(.*)\Z", re.I | re.S)
_LP_ST = re.compile(r"\b(?:subject\s+to|such\s+that|st)\b\s*:?|(?<!\w)s\.\s*t\.\s*:?", re.I)
_LP_DECL = re.compile(r"(integers?|int|general|binary|binaries|bin)\s*:?\s+(.+)\Z", re.I | re.S)
_LP_MULTI = re.compile(r"([A-Za-z]\w*(?:\s*,\s*[A-Za-z]\w*)+)\s*(<=|>=|==|=|<|>)\s*(.+)\Z", re.S)
MAX_LP_VARS = 500


def _linear(node: ast.expr) -> tuple[dict[str, float], float]:
    """``{variable: coefficient}, constant`` of a linear expression (refuses non-linear ones)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):  # parse_expression allows no other
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
        raise ToolInputError(
            "start with 'maximize' or 'minimize', e.g. 'maximize 3x + 2y subject to x + y <= 4; x, y >= 0'"
        )
    sense, rest = m.group(1).lower().startswith("max"), m.group(2)
    st = _LP_ST.search(rest)
    if st:
        objective, rest = rest[: st.start()], rest[st.end() :]
    else:
        objective, _, rest = rest.partition("\n") if "\n" in rest else rest.partition(";")
    parse = lambda s, cmp: parse_expression(s, names=lambda n: True, compare=cmp)  # noqa: E731
    plan: dict[str, Any] = {
        "maximize": sense,
        "objective": _linear(parse(objective.strip() or "0", False)),
        "constraints": [],
        "integer": set(),
        "binary": set(),
    }
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
            stmt = stmt[label.end() :]
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
        hint = {
            "Infeasible": "no point satisfies every constraint; check their directions",
            "Unbounded": "the objective can grow without limit; did you forget bounds such as x >= 0?",
        }
        return f"status: {status}\n{hint.get(status, 'the solver found no optimal solution')}"
    value = pulp.value(prob.objective)
    lines = ["status: Optimal", f"objective: {_fmt(round(float(value or 0.0), 9))}"]
    lines += [f"{n} = {_fmt(round(float(v.varValue or 0.0), 9))}" for n, v in order.items()]
    return "\n".join(lines)


_JOBS: dict[str, Callable[[str, float], str]] = {"sympy": _sympy_job, "lp": _lp_job, "calculator": calculate}
