"""Reading the option letter a response commits to (shared by the solver and the checkers).

Multiple choice — :func:`extract_choice` reads the letter a response commits to.
Rules, in order:

1. **Explicit answers** win: ``\\boxed{C}`` (also ``\\boxed{\\text{(C)}}``), and a
   letter right after an answer phrase — ``Answer: C``, ``the answer is **C**``,
   ``final answer: (c)``, ``the correct choice is option C``. If there are several,
   the **last** one wins (a model that corrects itself is scored on its correction).
2. Otherwise **marked letters**: ``(C)``, ``C)``, ``**C**``, or a line holding only
   the letter (``C`` / ``C.``). Again the last one wins.
3. Otherwise ``None``: no guess is made from bare letters in prose.

Only the first ``n_choices`` letters count, case-insensitively. A bare letter
after an answer phrase must stand alone: ``Answer: A good approach is …`` is
prose (the article "A", or "I"), and a lowercase letter followed by a word
(``the answer is a bit subtle``) is not an answer either.

"""

from __future__ import annotations

import re

from got_core.errors import InvalidInputError

__all__ = ["extract_choice", "valid_letters"]

# Words that may follow a letter answer in prose ("Answer: B because ...").
_FOLLOWERS = frozenset({"is", "because", "since", "as", "which", "was", "would", "seems", "and"})
# Capital letters that are also English words; after them a word means prose ("A good ...").
_WORDLIKE = frozenset({"A", "I"})

_ANSWER_PHRASE = re.compile(
    r"(?:\b(?:final|correct|best|right)\s+)?\b(?:answer|choice|option)\b\**"
    r"(?:\s+(?:is|would\s+be|should\s+be|must\s+be|will\s+be)\b"
    r"(?:\s+(?:therefore|thus|clearly|definitely|likely|probably))?\s*:?|\s*[:=])"
    r"\s*\**\s*(?:(?:option|choice|letter)\b\s*)?",
    re.IGNORECASE,
)
_LETTER_AFTER = re.compile(
    r"(?P<open>(?:[\s*_(\[{$]|\\\(|\\textbf\{|\\text\{|\\mathrm\{)*)(?P<l>[A-Za-z])(?![A-Za-z0-9])"
)
_BOXED = re.compile(
    r"\\boxed\s*\{\s*(?:\\(?:text|textbf|mathrm|mathbf)\s*\{\s*)?\(?\s*(?P<l>[A-Za-z])\s*\)?\s*\}?\s*\}"
)
# Marked letters. "(c)" but not "f(c)"; "C)" after a space or colon, or at a line start.
_PAREN = re.compile(r"(?<![A-Za-z0-9\\_^])\(\s*(?P<l>[A-Za-z])\s*\)")
_CLOSE_UPPER = re.compile(r"(?<![^\s:])(?P<l>[A-Z])\)")
_CLOSE_LINE = re.compile(r"^[\s*_>#-]*(?P<l>[A-Za-z])\)", re.MULTILINE)
_BOLD = re.compile(r"\*\*\s*\(?(?P<l>[A-Za-z])\)?\s*\*\*")
_ALONE = re.compile(r"^[\s*_>#-]*\(?(?P<l>[A-Za-z])\)?[.:]?[\s*_]*$", re.MULTILINE)


def valid_letters(n_choices: int) -> str:
    """The first ``n_choices`` option letters (``"ABCD"`` for 4).

    Raises:
        InvalidInputError: ``n_choices`` is not an integer from 2 to 26.
    """
    if isinstance(n_choices, bool) or not isinstance(n_choices, int) or not 2 <= n_choices <= 26:
        raise InvalidInputError(f"n_choices must be an integer from 2 to 26, not {n_choices!r}")
    return "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:n_choices]


def _explicit(text: str, letters: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for boxed in _BOXED.finditer(text):
        if boxed.group("l").upper() in letters:
            found.append((boxed.start(), boxed.group("l").upper()))
    for phrase in _ANSWER_PHRASE.finditer(text):
        m = _LETTER_AFTER.match(text, phrase.end())
        if not m:
            continue
        raw = m.group("l")
        if raw.upper() not in letters:
            continue
        enclosed = bool(m.group("open").strip())
        follow = re.match(r"\s+([A-Za-z]+)", text[m.end() :])
        if not enclosed and follow:
            word = follow.group(1)
            # "Answer: A good approach" / "the answer is a bit subtle": prose, not a letter.
            if (raw in _WORDLIKE or raw.islower()) and word.lower() not in _FOLLOWERS:
                continue
        found.append((m.start("l"), raw.upper()))
    return found


def _marked(text: str, letters: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for pattern in (_PAREN, _CLOSE_UPPER, _CLOSE_LINE, _BOLD, _ALONE):
        for m in pattern.finditer(text):
            if m.group("l").upper() in letters:
                found.append((m.start("l"), m.group("l").upper()))
    return found


def extract_choice(text: str, n_choices: int = 4) -> str | None:
    """The option letter a response commits to, or ``None`` (rules in the module docstring).

    Args:
        text: the model's response.
        n_choices: how many options the question has (letters ``A`` onwards).

    Returns:
        An upper-case letter among the first ``n_choices``, or ``None`` when the
        response names none.

    Raises:
        InvalidInputError: ``text`` is not a string, or ``n_choices`` is out of range.
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"response must be str, not {type(text).__name__}")
    letters = valid_letters(n_choices)
    for tier in (_explicit, _marked):
        hits = tier(text, letters)
        if hits:
            return max(hits)[1]  # last position wins
    return None
