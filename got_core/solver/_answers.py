"""Reading model text without gold answers: answers, self-ratings, verdicts, answer-free lessons.

The solver never sees a gold answer (§4.1 of arXiv 2606.14470: the fairness audit
``git log -S <gold>`` must find nothing the agent could have copied), so every
judgement here is made from the model's own text:

* :func:`extract_answer` — the option letter (the benchmark checker's own
  :func:`~got_core.bench.checking.extract_choice`, so solver and checker agree) or
  a free-form math answer (the last ``\\boxed{…}``, else an ``Answer:`` line);
* :func:`parse_confidence`, :func:`parse_candidate_scores`, :func:`parse_verdict` —
  self-ratings, cross-check scores and verifier verdicts, parsed robustly;
* :func:`answer_free` — strips the final answer and the option texts out of a
  distilled lesson, drops every sentence that states *any* value as an answer (the
  audit's cue rule, ``got_core._text.strip_stated_answers``: a wrong answer to the study
  problem may be a test question's right one), and refuses the lesson when a trace of
  them survives.
"""

from __future__ import annotations

import re
from fractions import Fraction

from got_core._text import strip_stated_answers
from got_core.choices import extract_choice

__all__ = [
    "LETTERS",
    "WITHHELD",
    "answer_free",
    "extract_answer",
    "extract_math_answer",
    "normalize_math",
    "parse_candidate_scores",
    "parse_confidence",
    "parse_verdict",
]

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: What an answer mention becomes in a lesson.
WITHHELD = "[answer withheld]"

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_LINE = re.compile(r"^[\s*#>_-]*(?:final\s+answer|answer)\s*[:=]\s*(.+?)\s*$", re.I | re.M)
_WRAPPERS = re.compile(r"^(?:\$+|\\\(|\\\[)|(?:\$+|\\\)|\\\])$")


def _boxed_contents(text: str) -> list[str]:
    """Contents of every ``\\boxed{…}``, with nested braces balanced."""
    out = []
    for m in _BOXED.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            out.append(text[m.end() : i - 1].strip())
    return out


def _clean_math(answer: str) -> str | None:
    text = answer.strip().strip("*_`").strip()
    for _ in range(2):
        text = _WRAPPERS.sub("", text).strip()
    boxed = _boxed_contents(text)
    if boxed:
        text = boxed[-1]
    text = text.rstrip(".").strip()
    return text or None


def extract_math_answer(text: str | None, final: str | None = None) -> str | None:
    """A free-form answer: the ``Final Answer:`` text, else the last ``\\boxed{}``, else an ``Answer:`` line.

    Args:
        text: the whole model message.
        final: the text after ``Final Answer:`` when the ReAct loop found one.

    Returns:
        The answer with ``$…$`` / ``\\boxed{}`` wrappers removed, or ``None``.
    """
    if final and final.strip():
        cleaned = _clean_math(final.strip().splitlines()[0] if not _BOXED.search(final) else final)
        if cleaned:
            return cleaned
    text = text or ""
    boxed = _boxed_contents(text)
    if boxed and boxed[-1]:
        return boxed[-1]
    lines = _ANSWER_LINE.findall(text)
    return _clean_math(lines[-1]) if lines else None


def extract_answer(
    text: str | None, final: str | None = None, n_choices: int | None = None
) -> tuple[str | None, str | None]:
    """``(answer, letter)`` from model text; for multiple choice ``answer == letter``.

    Args:
        text: the whole model message.
        final: the ``Final Answer:`` text, tried first.
        n_choices: the number of options, or ``None`` for a free-form question.

    Returns:
        ``(None, None)`` when nothing answer-like is found.
    """
    if n_choices:
        for source in (final, text):
            if source and source.strip():
                letter = extract_choice(source, n_choices)
                if letter:
                    return letter, letter
        return None, None
    answer = extract_math_answer(text, final)
    return answer, None


_LATEX_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:/\d+)?")


def normalize_math(answer: str | None) -> str | None:
    """A canonical form for comparing free-form answers between siblings (not a checker).

    Spaces, ``$``, ``\\left``/``\\right``, ``\\!``, a leading ``x =`` and trailing
    units-free dots are dropped; ``\\frac{a}{b}`` becomes ``a/b``; numbers are
    compared as exact fractions (``0.5`` == ``1/2`` == ``\\frac{1}{2}``).
    """
    if answer is None:
        return None
    text = answer.strip().strip("$").strip()
    text = re.sub(r"\\(?:left|right|!|,|;|quad|displaystyle)", "", text)
    text = re.sub(r"\\text\s*\{([^{}]*)\}", r"\1", text)
    text = _LATEX_FRAC.sub(r"(\1)/(\2)", text)
    text = re.sub(r"^[a-zA-Z]\s*=\s*", "", text)
    text = re.sub(r"\s+", "", text).rstrip(".").replace("{", "(").replace("}", ")").replace(",", "")
    bare = re.sub(r"^\((-?\d+)\)/\((\d+)\)$", r"\1/\2", text)
    if _NUMBER.fullmatch(bare):
        try:
            value = Fraction(bare)
            return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
        except (ValueError, ZeroDivisionError):
            pass
    return text.lower()


_CONFIDENCE = re.compile(
    r"(?:confidence|certainty|probability(?:\s+(?:that|of)[^:\n]{0,60})?|self[- ]?rating|rating)"
    r"(?:\s+(?:level|score))?\s*(?:is|of|[:=])?\s*\**\s*(\d+(?:\.\d+)?)\s*(%|/\s*100|/\s*10|out\s+of\s+10)?",
    re.I,
)


def _to_unit(value: str, scale: str | None) -> float | None:
    x = float(value)
    scale = (scale or "").replace(" ", "").lower()
    if scale in ("%", "/100"):
        x /= 100.0
    elif scale in ("/10", "outof10"):
        x /= 10.0
    elif x > 1.0:
        x = x / 10.0 if x <= 10.0 and float(value).is_integer() and "." not in value else x / 100.0
    return x if 0.0 <= x <= 1.0 else None


def parse_confidence(text: str | None) -> float | None:
    """The model's self-rating in [0, 1] (``Confidence: 0.8``, ``80%``, ``8/10``); the last one wins."""
    if not text:
        return None
    found = [(_to_unit(m.group(1), m.group(2))) for m in _CONFIDENCE.finditer(text)]
    found = [x for x in found if x is not None]
    return found[-1] if found else None


_CANDIDATE = re.compile(
    r"^[\s*#>_-]*(?:candidate|option|choice|answer|solution)?\s*\(?([A-Za-z]|\d{1,2})\)?\s*\**\s*[:=\-–]\s*\**\s*"
    r"(\d+(?:\.\d+)?)\s*(%|/\s*100|/\s*10)?",
    re.I | re.M,
)


def parse_candidate_scores(text: str | None, labels: list[str]) -> dict[str, float]:
    """Scores per candidate from a comparison answer (``Candidate 2: 0.7`` or ``B: 70%``).

    Args:
        text: the model's comparison.
        labels: the candidate labels as shown (``"1"``, ``"2"``… or letters).

    Returns:
        ``{label: score in [0, 1]}`` for the candidates it rated (the last rating wins).
    """
    wanted = {label.upper() for label in labels}
    out: dict[str, float] = {}
    for m in _CANDIDATE.finditer(text or ""):
        label = m.group(1).upper()
        value = _to_unit(m.group(2), m.group(3))
        if label in wanted and value is not None:
            out[label] = value
    return out


_VERDICT = re.compile(
    r"verdict\s*\**\s*[:=]?\s*\**\s*(correct|incorrect|wrong|right|yes|no|valid|invalid|true|false|"
    r"agree|disagree|accept|reject)",
    re.I,
)
_POSITIVE = {"correct", "right", "yes", "valid", "true", "agree", "accept"}
_REASON = re.compile(r"reason\s*[:=]\s*(.+)", re.I)


def parse_verdict(text: str | None) -> tuple[bool | None, str]:
    """``(agrees, reason)`` from a verifier answer; ``agrees`` is ``None`` when no verdict is given."""
    text = text or ""
    verdicts = _VERDICT.findall(text)
    reason_m = _REASON.search(text)
    reason = (reason_m.group(1) if reason_m else text).strip().splitlines()[0][:300] if text.strip() else ""
    if not verdicts:
        return None, reason
    return verdicts[-1].lower() in _POSITIVE, reason


def _variants(answer: str) -> set[str]:
    base = answer.strip()
    out = {base, base.strip("$"), base.replace(" ", "")}
    cleaned = _clean_math(base)
    if cleaned:
        out |= {cleaned, cleaned.replace(" ", "")}
    norm = normalize_math(base)
    if norm and norm != base.lower():
        out.add(norm)
    return {v for v in out if v}


def _strip_one(text: str, needle: str) -> str:
    if re.fullmatch(r"[\w.]+", needle):
        # short numbers and words are stripped as whole tokens, not inside other words
        pattern = r"(?<![\w.])" + re.escape(needle) + r"(?![\w])"
    else:
        pattern = re.escape(needle)
    return re.sub(pattern, WITHHELD, text, flags=re.I)


def _letter_mentions(letters: str) -> re.Pattern[str]:
    cls = f"[{letters}]"
    return re.compile(
        rf"\\boxed\s*\{{\s*{cls}\s*\}}|\(\s*{cls}\s*\)|\b{cls}\)|"
        rf"\b(?:option|choice|letter|answer(?:\s+is)?|answer\s*:)\s*\**\s*{cls}\b",
        re.I,
    )


def answer_free(
    text: str,
    answers: list[str],
    option_texts: list[str] | None = None,
    n_choices: int | None = None,
    *,
    drop_stated: bool = True,
) -> str | None:
    """Strip answers and option texts from a lesson; ``None`` when it cannot be made answer-free.

    Args:
        text: the distilled lesson.
        answers: the final answer string(s) of the question (any form).
        option_texts: every option's text (multiple choice); all are stripped, since
            a lesson naming an option would leak it to the next paraphrase.
        n_choices: the number of options; option-letter mentions (``(B)``, ``option B``,
            ``answer is B``) are stripped too.
        drop_stated: drop every sentence that states some value as an answer
            (``The answer is $x = 2$``), whatever the value; off only for a worked
            example shown on purpose (a method with its steps).

    Returns:
        The cleaned lesson, or ``None`` when an answer survives the stripping
        (case-insensitively, spaces ignored) or nothing useful is left.
    """
    needles: set[str] = set()
    for item in [*(answers or []), *(option_texts or [])]:
        if item and item.strip():
            needles |= _variants(item)
    cleaned = text
    for needle in sorted(needles, key=len, reverse=True):  # longest first: "12.5" before "12"
        cleaned = _strip_one(cleaned, needle)
    if n_choices:
        cleaned = _letter_mentions(LETTERS[:n_choices]).sub(WITHHELD, cleaned)
    cleaned = re.sub(r"(?:\s*\[answer withheld\]){2,}", " " + WITHHELD, cleaned).strip()
    if drop_stated:
        cleaned = strip_stated_answers(cleaned)
    squashed = re.sub(r"\s+", "", cleaned).lower()
    for needle in needles:
        probe = re.sub(r"\s+", "", needle).lower()
        if len(probe) >= 3 and probe in squashed:
            return None  # survived in some other spelling: refuse rather than leak
    residue = re.sub(re.escape(WITHHELD), "", cleaned)
    if len(re.findall(r"[A-Za-z]{3,}", residue)) < 4:
        return None  # nothing left worth keeping
    return cleaned
