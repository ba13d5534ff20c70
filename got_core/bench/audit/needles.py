"""How the audit looks for a gold answer or a gold letter in text (one rule for every check).

**Answers.** An answer of at least :data:`MIN_ANSWER_CHARS` characters counts wherever it
occurs, exactly and case-sensitively (``git log -S`` semantics). A shorter one (``"2"``,
``"24"``, ``"1/4"``: 58% of MATH-500's answers) is never skipped; it is matched as a
*whole token* — not inside a longer number or word (``"2"`` is not in ``"12"``, ``"2x"``,
``"x^2"``, ``"0.25"``) — and it counts where its *context states it as an answer*: right
after ``answer`` / ``final answer`` (``is``, ``:``, ``=``), ``result``, ``solution``,
``value``, ``equals``, ``gives``, ``yields``, ``gold``, ``expected``, ``correct``, after
``=`` or inside ``\\boxed{}``. Other whole-token occurrences are chance (``"2"`` in ``"check
both cases, at most 2 roots"``); the checks list them with their context but do not fail
on them.

**Letters.** A gold option letter counts where a marker states it: ``gold``/``expected``/
``correct`` (``answer``/``letter``/``option``) ``is``/``:``/``=`` X, ``answer is`` X,
``answer:`` X, ``\\boxed{X}`` — a capital letter standing alone (``Answer: A good
approach`` is prose). **Keys.** A JSON key that names the gold (``gold_letter``,
``expected_answer``, ``correct_option``, ``ground_truth``, ``answer_key`` …) holding the
gold value counts too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MIN_ANSWER_CHARS",
    "Occurrence",
    "answer_needles",
    "gold_keys",
    "letter_markers",
    "occurrences",
    "states_answer",
]

#: Answers at least this long count anywhere; shorter ones count as whole tokens stated as answers.
MIN_ANSWER_CHARS = 4

# What may stand right before a short answer for it to be stated as an answer (the window
# ends at the answer; spaces, $, (, {, ** and \( may come between).
_CUE = re.compile(
    r"(?:\\boxed\s*\{|\\fbox\s*\{"
    r"|\b(?:final\s+)?answers?\b\**(?:\s+(?:is|was|would\s+be|should\s+be|equals?))?\s*[:=]?"
    r"|\b(?:result|solution|value|gold|expected|correct|equals?|gives|yields)\b"
    r"(?:\s+(?:is|was|answer|option|letter|choice))?\s*[:=]?"
    r"|=)"
    r"[\s$*({\[]*(?:\\\(|\\\[)?[\s$*({\[]*$",
    re.IGNORECASE,
)
_CUE_WINDOW = 48
_CONTEXT = 36

_LETTER_MARKER = re.compile(
    r"(?:\\boxed\s*\{\s*(?:\\text\s*\{\s*)?\(?"
    r"|\b(?:gold(?:en)?|expected|correct|right|true|reference)"
    r"(?:[\s_-]*(?:answer|letter|option|choice|label)s?)?\**\s*(?:is|was|:|=)\s*"
    r"|\b(?:final\s+)?answer\b\**\s*(?:is|was|:|=)\s*"
    r"|\banswer[\s_-]*key\b\s*(?:is|:|=)?\s*)"
    r"[*\"'(\[{\s]*(?:(?:option|letter|choice)\s+)?(?P<l>(?-i:[A-Z]))(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_GOLD_KEY = re.compile(
    r"^(?:gold(?:en)?|expected|reference|ground[_ -]?truth|correct|target|true)"
    r"(?:[_ -]?(?:answer|letter|option|choice|label|solution|output|value))?s?$"
    r"|^answer[_ -]?key$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Occurrence:
    """One place an answer occurs in a text.

    Attributes:
        needle: the answer as searched for (stripped).
        context: the text around it, on one line (for the report).
        stated: whether it counts: a long answer anywhere, a short one stated as an answer.
        start: where it starts in the text.
    """

    needle: str
    context: str
    stated: bool
    start: int = 0


def answer_needles(answer: str | None, min_chars: int = MIN_ANSWER_CHARS) -> tuple[list[str], list[str]]:
    """Split an answer into one matched anywhere and one matched as a stated whole token.

    Returns:
        ``([answer], [])`` when the stripped answer has at least ``min_chars`` characters,
        else ``([], [answer])`` (``([], [])`` for an empty answer).
    """
    text = (answer or "").strip()
    if not text:
        return [], []
    return ([text], []) if len(text) >= min_chars else ([], [text])


def _context(text: str, start: int, end: int) -> str:
    snippet = text[max(0, start - _CONTEXT) : end + _CONTEXT]
    return ("…" if start > _CONTEXT else "") + " ".join(snippet.split()) + ("…" if end + _CONTEXT < len(text) else "")


def _token(needle: str) -> re.Pattern[str]:
    # Not inside a longer number, word or power: no letter, digit, '.', '^', '_', '/', '\' or
    # '-' just before; no letter, digit, '^', '_', '/' just after, nor a decimal / thousands tail.
    return re.compile(r"(?<![\w.^_/\\-])" + re.escape(needle) + r"(?![\w^_/]|[.,]\d)")


def occurrences(text: str, answer: str | None, min_chars: int = MIN_ANSWER_CHARS) -> list[Occurrence]:
    """Every occurrence of ``answer`` in ``text`` by the module's rule (long: anywhere; short: whole tokens).

    Args:
        text: where to look.
        answer: the gold answer (``None`` or blank finds nothing).
        min_chars: the length from which an answer counts anywhere.
    """
    long, short = answer_needles(answer, min_chars)
    out: list[Occurrence] = []
    for needle in long:
        start = text.find(needle)
        while start >= 0:
            out.append(Occurrence(needle, _context(text, start, start + len(needle)), True, start))
            start = text.find(needle, start + 1)
    for needle in short:
        for m in _token(needle).finditer(text):
            window = text[max(0, m.start() - _CUE_WINDOW) : m.start()]
            out.append(Occurrence(needle, _context(text, m.start(), m.end()), bool(_CUE.search(window)), m.start()))
    return out


def states_answer(text: str, answer: str | None, min_chars: int = MIN_ANSWER_CHARS) -> bool:
    """Whether ``text`` states ``answer`` by the module's rule (what a lesson must never do)."""
    return any(o.stated for o in occurrences(text, answer, min_chars))


def letter_markers(text: str, letters: str = "ABCDEFGHIJ") -> list[tuple[str, str]]:
    """``(letter, context)`` for every option letter a marker states in ``text``."""
    out = []
    for m in _LETTER_MARKER.finditer(text):
        letter = m.group("l")
        if letter not in letters:
            continue
        if letter in "AI" and re.match(r"\s+[a-z]", text[m.end() :]):
            continue  # "Answer: A good approach ..." is prose
        out.append((letter, _context(text, m.start("l"), m.end("l"))))
    return out


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            where = f"{path}.{k}" if path else str(k)
            yield where, str(k), v
            yield from _walk(v, where)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")


def gold_keys(value: Any, answer: str | None, letter: str | None, min_chars: int = MIN_ANSWER_CHARS) -> list[str]:
    """Paths of JSON keys that name the gold (``expected_answer``, ``gold_letter`` …) and hold it.

    Args:
        value: parsed JSON (a node's metadata, a trace step).
        answer: the gold answer.
        letter: the gold letter (multiple choice), or ``None``.
        min_chars: as for :func:`occurrences`.
    """
    out = []
    for path, key, v in _walk(value):
        if not _GOLD_KEY.match(key.strip()) or isinstance(v, (dict, list)):
            continue
        text = str(v).strip()
        gold_letter = bool(letter) and text.strip("()* ").upper() == letter
        if gold_letter or (answer and (text == answer.strip() or states_answer(text, answer, min_chars))):
            out.append(f"{path} = {text[:40]!r}")
    return out
