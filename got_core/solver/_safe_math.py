"""The safe-math layer of the solver tools: a whitelist expression parser and a calculator.

§3.2 of the paper (arXiv 2606.14470) lets the ReAct loop call tools on model
text, so that text is hostile. :func:`parse_expression` parses it with
``ast.parse(mode="eval")`` and walks the tree over a whitelist of node types;
nothing is ever ``eval``-ed, ``exec``-ed or ``sympify``-ed. Attribute access,
subscripts, imports, dunder or underscore names, lambdas, comprehensions,
strings and keyword arguments are refused; inputs over :data:`MAX_INPUT_CHARS`,
nesting over :data:`MAX_DEPTH` and integers over :data:`MAX_INT_BITS` are
refused before any work. :func:`calculate` evaluates a validated tree by hand.

The typed tool errors live here, at the bottom of the tools layering
(``_safe_math`` ← ``_tool_worker`` ← ``tools``); :mod:`got_core.solver.tools`
re-exports them.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from typing import Any

from got_core.errors import ToolError

__all__ = [
    "MAX_COMB_N",
    "MAX_DEPTH",
    "MAX_FACTORIAL",
    "MAX_INPUT_CHARS",
    "MAX_INT_BITS",
    "MAX_OUTPUT_CHARS",
    "ToolInputError",
    "ToolLimitError",
    "ToolTimeoutError",
    "UnsafeInputError",
    "calculate",
    "parse_expression",
]

MAX_INPUT_CHARS = 10_000
MAX_DEPTH = 100
#: About 3,900 decimal digits: below Python's 4,300-digit int/str conversion limit.
MAX_INT_BITS = 13_000
MAX_FACTORIAL = 1_000
MAX_COMB_N = 5_000
MAX_OUTPUT_CHARS = 4_000


class ToolInputError(ToolError):
    """The tool could not understand its input (syntax, unknown function, wrong form)."""


class UnsafeInputError(ToolInputError):
    """The input used a construct tools never run (attributes, imports, lambdas...)."""


class ToolLimitError(ToolError):
    """The input or its result is over a size, depth or magnitude limit."""


class ToolTimeoutError(ToolError):
    """The tool did not finish within its wall-clock limit (its worker was restarted)."""


# --------------------------------------------------------------------------- safe parsing

# Atomic group: "1e5" is one number, never "1" followed by the name "e5".
_NUMBER_THEN_WORD = re.compile(
    r"(?<![\w.])((?>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?))(?=[ \t]*[A-Za-z_(])"
)
_CLOSE_THEN_WORD = re.compile(r"\)(?=[ \t]*[A-Za-z0-9_(])")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}\Z")
_REFUSED = {
    ast.Attribute: "attribute access ('.name')",
    ast.Subscript: "subscripts ('[...]')",
    ast.Lambda: "lambda",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.NamedExpr: "assignment (':=')",
    ast.IfExp: "conditional expressions",
    ast.Starred: "star arguments",
    ast.JoinedStr: "strings",
    ast.List: "lists",
    ast.Dict: "dicts",
    ast.Set: "sets",
    ast.Tuple: "tuples (separate equations with ';')",
    ast.BoolOp: "'and'/'or' (separate equations with ';')",
    ast.Await: "await",
    ast.Yield: "yield",
}
_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
_CMPOPS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _normalise(text: str) -> str:
    """Cosmetic rewrites of common math notation (string edits only, nothing runs)."""
    text = text.replace("^", "**").replace("\u00d7", "*").replace("\u00f7", "/").replace("\u2212", "-")
    text = text.replace("\u00b7", "*").replace("\u2264", "<=").replace("\u2265", ">=")
    text = _NUMBER_THEN_WORD.sub(r"\1*", text)  # 2x -> 2*x, 3(x+1) -> 3*(x+1)
    return _CLOSE_THEN_WORD.sub(")*", text)  # (x+1)(x-1) -> (x+1)*(x-1)


def parse_expression(
    text: str,
    *,
    functions: frozenset[str] | set[str] = frozenset(),
    names: Callable[[str], bool] = lambda name: False,
    compare: bool = False,
) -> ast.expr:
    """Parse one math expression and check it against a whitelist, without running it.

    Args:
        text: the expression (``^`` means power, ``2x`` means ``2*x``).
        functions: names that may be called, ``f(a, b)``; only positional arguments.
        names: predicate for bare names that may appear (variables, constants).
        compare: whether comparisons (``<``, ``<=``, ``==``...) are allowed.

    Returns:
        The validated expression node.

    Raises:
        ToolLimitError: over :data:`MAX_INPUT_CHARS` or nested over :data:`MAX_DEPTH`.
        UnsafeInputError: a construct outside the whitelist.
        ToolInputError: a syntax error, an unknown name or function, a non-numeric literal.
    """
    if len(text) > MAX_INPUT_CHARS:
        raise ToolLimitError(f"expression is {len(text)} characters; the limit is {MAX_INPUT_CHARS}")
    src = _normalise(text.strip())
    try:
        tree = ast.parse(src, mode="eval")
    except SyntaxError as exc:
        msg = exc.msg or "invalid syntax"
        if "nested" in msg:
            raise ToolLimitError(f"expression is nested too deeply ({msg})") from None
        raise ToolInputError(f"cannot parse {text[:60]!r}: {msg}; write one expression such as 2*(3 + 4)") from None
    except (RecursionError, MemoryError):
        raise ToolLimitError("expression is nested too deeply to parse; split it into smaller steps") from None
    except ValueError as exc:
        raise ToolInputError(f"cannot parse {text[:60]!r}: {exc}") from None
    _validate(tree.body, functions, names, compare)
    return tree.body


def _validate(root: ast.expr, functions: Any, names: Callable[[str], bool], compare: bool) -> None:
    stack: list[tuple[ast.AST, int]] = [(root, 1)]  # iterative: hostile depth cannot blow our stack
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ToolLimitError(f"expression is nested deeper than {MAX_DEPTH} levels; split it into steps")
        kind = type(node)
        if kind in _REFUSED:
            raise UnsafeInputError(f"{_REFUSED[kind]} is not allowed; write plain math such as 2*(x + 1)")
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UnsafeInputError(
                    f"only numbers are allowed as literals, not {type(value).__name__} {value!r:.40}"
                )
            if isinstance(value, float) and not math.isfinite(value):
                raise ToolLimitError("a number literal is too large for a float (e.g. 1e999); rescale it")
            if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
                raise ToolLimitError(
                    f"a number literal has over {MAX_INT_BITS} bits (~3,900 digits); "
                    "use scientific notation or logarithms"
                )
            continue
        if isinstance(node, ast.Name):
            _check_name(node.id, names)
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, _BINOPS):
            stack += [(node.left, depth + 1), (node.right, depth + 1)]
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            stack.append((node.operand, depth + 1))
        elif isinstance(node, ast.Compare) and compare and all(isinstance(op, _CMPOPS) for op in node.ops):
            stack += [(n, depth + 1) for n in [node.left, *node.comparators]]
        elif isinstance(node, ast.Call):
            func = node.func
            if not isinstance(func, ast.Name):
                raise UnsafeInputError("only named functions such as sqrt(x) may be called")
            _check_name(func.id, lambda _n: True)
            if func.id not in functions:
                allowed = ", ".join(sorted(functions)) or "none"
                raise ToolInputError(f"unknown function {func.id!r}; allowed functions: {allowed}")
            if node.keywords:
                raise UnsafeInputError(f"keyword arguments are not allowed in {func.id}(...)")
            stack += [(a, depth + 1) for a in node.args]
        else:
            what = type(getattr(node, "op", node)).__name__
            raise UnsafeInputError(f"{what} is not allowed here; use numbers, names, + - * / ** and functions")


def _check_name(name: str, allowed: Callable[[str], bool]) -> None:
    if "__" in name or name.startswith("_"):
        raise UnsafeInputError(f"names starting with '_' or containing '__' are not allowed ({name[:40]!r})")
    if not _NAME.match(name):
        raise ToolInputError(f"name {name[:40]!r} is not a plain identifier of at most 32 ASCII characters")
    if not allowed(name):
        raise ToolInputError(f"unknown name {name!r}; the calculator has no variables (use the sympy tool for algebra)")


# --------------------------------------------------------------------------- calculator

_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _int_arg(name: str, v: Any, limit: int | None = None) -> int:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or v < 0:
        raise ToolInputError(f"{name}() needs a non-negative integer, got {_fmt(v)}")
    if limit is not None and v > limit:
        raise ToolLimitError(f"{name}({v}) is over the limit of {limit}")
    return v


def _round_digits(n: Any) -> int:
    # round(5, -10**1000) would build 10**(10**1000): keep the digit count small.
    if not isinstance(n, int) or abs(n) > 100:
        raise ToolInputError(f"round(x, n) needs an integer n between -100 and 100, got {_fmt(n)}")
    return n


_FUNCS: dict[str, tuple[tuple[int, int], Callable[..., Any]]] = {
    "sqrt": ((1, 1), math.sqrt),
    "cbrt": ((1, 1), lambda x: math.copysign(abs(x) ** (1 / 3), x)),
    "exp": ((1, 1), math.exp),
    "ln": ((1, 1), math.log),
    "log": ((1, 2), math.log),
    "log10": ((1, 1), math.log10),
    "log2": ((1, 1), math.log2),
    "sin": ((1, 1), math.sin),
    "cos": ((1, 1), math.cos),
    "tan": ((1, 1), math.tan),
    "asin": ((1, 1), math.asin),
    "acos": ((1, 1), math.acos),
    "atan": ((1, 1), math.atan),
    "atan2": ((2, 2), math.atan2),
    "sinh": ((1, 1), math.sinh),
    "cosh": ((1, 1), math.cosh),
    "tanh": ((1, 1), math.tanh),
    "abs": ((1, 1), abs),
    "round": ((1, 2), lambda x, n=0: round(x, _round_digits(n))),
    "floor": ((1, 1), math.floor),
    "ceil": ((1, 1), math.ceil),
    "factorial": ((1, 1), lambda n: math.factorial(_int_arg("factorial", n, MAX_FACTORIAL))),
    "comb": ((2, 2), lambda n, k: math.comb(_int_arg("comb", n, MAX_COMB_N), _int_arg("comb", k))),
    "perm": ((2, 2), lambda n, k: math.perm(_int_arg("perm", n, MAX_COMB_N), _int_arg("perm", k))),
    "gcd": ((1, 64), math.gcd),
    "lcm": ((1, 64), lambda *a: _lcm(*a)),
    "min": ((1, 64), min),
    "max": ((1, 64), max),
    "hypot": ((1, 64), math.hypot),
    "degrees": ((1, 1), math.degrees),
    "radians": ((1, 1), math.radians),
}


def _lcm(*args: Any) -> int:
    # One pair at a time, each result checked: lcm of 64 numbers near the limit would
    # otherwise build a 800,000-bit integer (seconds of work) before the size check.
    acc = 1
    for v in args:
        acc = _check_magnitude(math.lcm(acc, v))
    return acc


def _check_magnitude(v: Any) -> Any:
    if isinstance(v, int) and v.bit_length() > MAX_INT_BITS:
        raise ToolLimitError(
            f"an intermediate integer has over {MAX_INT_BITS} bits (~3,900 digits); "
            "work with logarithms or smaller numbers"
        )
    if isinstance(v, float) and not math.isfinite(v):
        raise ToolLimitError("a result overflowed to infinity; rescale the numbers")
    return v


def _pow(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        if b < 0:
            if a == 0:
                raise ToolInputError("0 cannot be raised to a negative power")
            return a**b  # a float; an int too large for a float raises OverflowError
        if abs(a) > 1 and b * math.log2(abs(a)) > MAX_INT_BITS:
            raise ToolLimitError(
                f"{_fmt(a)}**{_fmt(b)} would have about {int(b * math.log10(abs(a))) + 1} digits; "
                f"the limit is ~3,900 (use logarithms: {b}*log10({a}))"
            )
        return a**b
    try:
        result = math.pow(a, b)
    except ValueError:
        raise ToolInputError(f"{_fmt(a)}**{_fmt(b)} is not a real number") from None
    return result


def _arith(op: ast.operator, a: Any, b: Any) -> Any:
    if isinstance(op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
        raise ToolInputError("division by zero")
    if isinstance(op, ast.Add):
        return a + b
    if isinstance(op, ast.Sub):
        return a - b
    if isinstance(op, ast.Mult):
        return a * b
    if isinstance(op, ast.Div):
        return a // b if isinstance(a, int) and isinstance(b, int) and a % b == 0 else a / b
    if isinstance(op, ast.FloorDiv):
        return a // b
    if isinstance(op, ast.Mod):
        return a % b
    return _pow(a, b)


def _eval_number(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp):
        v = _eval_number(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        return _check_magnitude(_arith(node.op, _eval_number(node.left), _eval_number(node.right)))
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)  # guaranteed by _validate
    (lo, hi), fn = _FUNCS[node.func.id]
    if not lo <= len(node.args) <= hi:
        raise ToolInputError(
            f"{node.func.id}() takes {lo}{'' if lo == hi else f' to {hi}'} argument(s), got {len(node.args)}"
        )
    args = [_eval_number(a) for a in node.args]
    try:
        return _check_magnitude(fn(*args))
    except ValueError as exc:
        raise ToolInputError(f"{node.func.id}({', '.join(_fmt(a) for a in args)}) is undefined ({exc})") from None


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.15g}"
    return str(v)


def calculate(text: str, timeout: float = 0.0) -> str:
    """Evaluate one arithmetic expression exactly where possible (integers stay exact).

    Input size, nesting depth, every literal and every intermediate integer are capped
    (no step builds an integer over :data:`MAX_INT_BITS`), so the work is small; the
    ``calculator`` tool still runs this in its worker process under a hard wall-clock and
    memory limit. ``timeout`` is accepted for symmetry and not used here.

    Raises:
        ToolInputError / UnsafeInputError / ToolLimitError: see :func:`parse_expression`;
            also division by zero, domain errors and oversized results.
    """
    node = parse_expression(text, functions=set(_FUNCS), names=lambda n: n in _CONSTANTS)
    try:
        return _fmt(_eval_number(node))
    except (OverflowError, MemoryError):
        raise ToolLimitError("the result is too large; rescale the numbers or use logarithms") from None
    except RecursionError:
        raise ToolLimitError("expression is nested too deeply; split it into steps") from None
    except (TypeError, ZeroDivisionError) as exc:
        raise ToolInputError(f"cannot compute {text[:60]!r}: {exc}") from None
