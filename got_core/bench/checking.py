"""Answer checking, the same checker for every arm (§4 of arXiv 2606.14470).

Multiple choice — :func:`extract_choice` (rules in :mod:`got_core.choices`) reads the
letter a response commits to.

Free-form MATH answers — :func:`check_math` uses ``math_verify`` (``parse`` /
``verify``): boxed extraction, LaTeX and numeric equivalence. The last
``\\boxed{}`` of a response is its answer (as for letters, the last one wins).

Timeouts: math-verify's own are ``signal.alarm`` based. They raise outside the
main thread, and in the main thread they cancel any alarm the caller had set
(pytest-timeout's, a solver's). So we always pass ``parsing_timeout=None`` /
``timeout_seconds=None`` and run the check in a daemon watchdog thread joined
with ``timeout_s``: the same behaviour from every thread; on a timeout the
caller gets ``False`` at once and the abandoned check finishes in the
background. No timeout of either kind can interrupt one long C-level big-integer
operation (``10^{10^{10}}`` holds the GIL), so numeric power towers and
factorials whose value would exceed 100 000 digits are refused up front as
wrong answers.
"""

from __future__ import annotations

import math
import re
import threading
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from got_core.choices import extract_choice, valid_letters
from got_core.errors import InvalidInputError, MissingExtraError

if TYPE_CHECKING:
    from got_core.bench.datasets import Problem

__all__ = [
    "MAX_MATH_CHARS",
    "check_answer",
    "check_choice",
    "check_math",
    "extract_choice",
]

#: Only the tail of a response is handed to math-verify: final answers come last,
#: and parsing a whole transcript is slow and invites pathological input.
MAX_MATH_CHARS = 4000


def check_choice(text: str, gold_letter: str, n_choices: int = 4) -> bool:
    """Whether a response picks the gold option.

    Args:
        text: the model's response.
        gold_letter: the correct letter in display order (case-insensitive).
        n_choices: how many options the question has.

    Returns:
        ``True`` when :func:`extract_choice` returns ``gold_letter``.

    Raises:
        InvalidInputError: ``gold_letter`` is not one of the first ``n_choices``
            letters, or ``text`` is not a string.
    """
    letters = valid_letters(n_choices)
    gold = gold_letter.strip().upper() if isinstance(gold_letter, str) else ""
    if len(gold) != 1 or gold not in letters:
        raise InvalidInputError(f"gold letter must be one of {', '.join(letters)}, not {gold_letter!r}")
    return extract_choice(text, n_choices) == gold


# --- MATH ------------------------------------------------------------------------------------

# Integer arithmetic that no timeout can interrupt (see the module docstring): numeric
# power towers ("10^{10^{10}}", "(10)^(10**10)") and factorials are sized before parsing.
_TOWER = re.compile(r"\d+(?:\s*[)}]*\s*(?:\^|\*\*)\s*[{(]*\s*\d+)+")
_TOWER_NUM = re.compile(r"\d+")
_FACTORIAL = re.compile(r"(\d+)\s*!")
#: Integer results above this many decimal digits are refused as answers.
_MAX_DIGITS = 100_000


def _tower_too_big(numbers: list[str]) -> bool:
    """Whether the right-associative tower ``n0^(n1^(...))`` has over ``_MAX_DIGITS`` digits."""
    if any(len(n) > 50 for n in numbers[:-1]) or len(numbers[-1]) > 50:
        # Literals this long only appear in towers meant to blow up (and int() of a
        # 4300+ digit string raises anyway).
        return any(int(n[:50]) > 1 for n in numbers[:-1])
    exponent = int(numbers[-1])
    for raw in reversed(numbers[:-1]):
        base = int(raw)
        if base <= 1:
            exponent = base if exponent > 0 else 1
            continue
        if exponent * math.log10(base) > _MAX_DIGITS:
            return True
        exponent = base**exponent
    return False


def _is_explosive(text: str) -> bool:
    for m in _TOWER.finditer(text):
        if _tower_too_big(_TOWER_NUM.findall(m.group(0))):
            return True
    return any(len(f) > 5 for f in _FACTORIAL.findall(text))


_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")


def _last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (balanced braces), or ``None``."""
    starts = [m.end() for m in _BOX_OPEN.finditer(text)]
    for start in reversed(starts):
        depth = 1
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i]
    return None


def _candidate(text: str) -> str:
    """What math-verify reads: the last boxed answer when there is one, else the tail.

    The last box is the answer a response commits to (a model that corrects itself
    is scored on its correction, as for multiple choice), and reading only it keeps
    power towers in the reasoning from tripping the pre-screen.
    """
    tail = text[-MAX_MATH_CHARS:]
    boxed = _last_boxed(tail)
    return "\\boxed{" + boxed + "}" if boxed is not None and boxed.strip() else tail


def _math_verify() -> Any:
    try:
        import math_verify
    except ImportError as exc:
        raise MissingExtraError("MATH answer checking", "solver", exc) from None
    return math_verify


@lru_cache(maxsize=4096)
def _parse_gold(gold: str) -> tuple[Any, ...]:
    mv = _math_verify()
    # Gold answers are bare LaTeX ("\\frac{1}{2}"); boxing them selects LaTeX extraction.
    return tuple(mv.parse("\\boxed{" + gold + "}", parsing_timeout=None))


def _verify(text: str, gold: str) -> bool:
    mv = _math_verify()
    try:
        gold_parsed = list(_parse_gold(gold))
        pred = mv.parse(text, parsing_timeout=None)
        if not gold_parsed or not pred:
            return False
        return bool(mv.verify(gold_parsed, pred, timeout_seconds=None))
    except Exception:
        # math-verify and sympy raise on odd input; a response the checker cannot
        # read is a wrong answer, never a crashed run.
        return False


def check_math(text: str, gold_answer: str, timeout_s: float = 5.0) -> bool:
    """Whether a response's final answer equals the gold MATH answer (math-verify).

    ``\\boxed{}`` answers are preferred; LaTeX and numeric forms compare by value
    (``0.5`` equals ``\\frac{1}{2}``; ``\\sqrt{2}/2`` equals ``\\frac{\\sqrt2}{2}``).
    Safe from any thread (see the module docstring for how timeouts work there).

    Args:
        text: the model's response. Its last ``\\boxed{}`` is the answer; without
            one, the last :data:`MAX_MATH_CHARS` characters are read.
        gold_answer: the gold answer as LaTeX, as MATH-500's ``answer`` field stores it.
        timeout_s: seconds allowed for parsing and comparison before ``False`` is returned.

    Returns:
        ``True`` when math-verify finds the answers equivalent; ``False`` when they
        differ, the response has no readable answer, or checking failed or timed out.

    Raises:
        InvalidInputError: ``text`` is not a string, ``gold_answer`` is empty, or ``timeout_s`` <= 0.
        MissingExtraError: math-verify is not installed (extra ``solver``).
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"response must be str, not {type(text).__name__}")
    if not isinstance(gold_answer, str) or not gold_answer.strip():
        raise InvalidInputError("gold answer must be a non-empty string")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise InvalidInputError(f"timeout_s must be a positive number, not {timeout_s!r}")
    _math_verify()  # fail loudly on a missing extra, not as a silent False
    tail = _candidate(text)
    if not tail.strip() or _is_explosive(tail):
        return False
    gold = gold_answer.strip()
    result: list[bool] = []
    # A watchdog thread rather than math-verify's signal alarms (module docstring).
    worker = threading.Thread(target=lambda: result.append(_verify(tail, gold)), name="got-math-verify", daemon=True)
    worker.start()
    worker.join(timeout_s)
    return bool(result and result[0])


def check_answer(problem: Problem, text: str) -> bool:
    """Score a response against a problem, dispatching on ``problem.kind``.

    Args:
        problem: a :class:`~got_core.bench.datasets.Problem`.
        text: the model's response.

    Returns:
        ``True`` when the response is correct.

    Raises:
        InvalidInputError: unknown kind, or an MCQ problem without a gold letter.
    """
    if problem.kind == "mcq":
        if not problem.gold_letter:
            raise InvalidInputError(f"problem {problem.id!r} is multiple choice but has no gold letter")
        return check_choice(text, problem.gold_letter, n_choices=len(problem.choices) or 4)
    if problem.kind == "math":
        return check_math(text, problem.answer)
    raise InvalidInputError(f"problem {problem.id!r} has unknown kind {problem.kind!r}; expected 'math' or 'mcq'")
