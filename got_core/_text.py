"""Shared text helpers: stop words, a tiny stemmer, tokenisation (no NLP dependency), and the
answer-cue rule (what states a value as an answer) that the audit and every lesson writer share."""

from __future__ import annotations

import re

__all__ = [
    "ANSWER_CUE",
    "CUE_WINDOW",
    "STOP_WORDS",
    "WORD",
    "normalize_text",
    "stated_values",
    "states_some_answer",
    "stem",
    "strip_stated_answers",
    "tokenize",
]

#: Function words that carry no topic; negations are kept on purpose
#: ("do not divide by zero" must not merge with "divide by zero").
STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "let",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "one",
        "get",
        "got",
        "use",
        "used",
        "using",
        "make",
        "first",
    ]
)

WORD = re.compile(r"[^\W_]+", re.UNICODE)


def stem(word: str) -> str:
    """Strip a common English suffix so "roots"/"root" and "solving"/"solve" meet."""
    # A deliberately tiny suffix stripper: enough that "roots"/"root" and
    # "solving"/"solve" meet, without a stemming dependency.
    w = word
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    elif len(w) > 4 and w.endswith(("ies", "ied")):
        w = w[:-3] + "y"
    elif (len(w) > 4 and w.endswith("ed")) or (len(w) > 4 and w.endswith(("ches", "shes", "sses", "xes", "zes"))):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if len(w) > 4 and w.endswith("e"):
        w = w[:-1]
    return w


def tokenize(text: str) -> list[str]:
    """Content tokens of ``text``: lowercased, stop words dropped, lightly stemmed.

    Args:
        text: any string.

    Returns:
        The tokens in order (repeats kept).
    """
    out = []
    for word in WORD.findall(text.lower()):
        if word in STOP_WORDS or (len(word) < 2 and not word.isdigit()):
            continue
        out.append(stem(word))
    return out


def normalize_text(text: str) -> str:
    """``text`` lowercased with punctuation and spacing collapsed (exact-duplicate key)."""
    return " ".join(WORD.findall(text.lower()))


# ----------------------------------------------------------------------------- answer cues

#: What may stand right before a value for it to be *stated as an answer*: ``answer`` /
#: ``final answer`` (``is``, ``:``, ``=``), ``result``, ``solution``, ``value``, ``equals``,
#: ``gives``, ``yields``, ``gold``, ``expected``, ``correct``, ``=`` or ``\\boxed{``; the match
#: ends where the value starts (spaces, ``$``, ``(``, ``{``, ``**`` and ``\\(`` may come between).
#: The audit (``got_core.bench.audit.needles``) counts a short gold answer with this rule, so a
#: lesson cleaned by :func:`strip_stated_answers` can never fail it, whatever the gold is.
ANSWER_CUE = re.compile(
    r"(?:\\boxed\s*\{|\\fbox\s*\{"
    r"|\b(?:final\s+)?answers?\b\**(?:\s+(?:is|was|would\s+be|should\s+be|equals?))?\s*[:=]?"
    r"|\b(?:result|solution|value|gold|expected|correct|equals?|gives|yields)\b"
    r"(?:\s+(?:is|was|answer|option|letter|choice))?\s*[:=]?"
    r"|=)"
    r"[\s$*({\[]*(?:\\\(|\\\[)?[\s$*({\[]*$",
    re.IGNORECASE,
)
#: How many characters before a value :data:`ANSWER_CUE` looks at.
CUE_WINDOW = 48

# Where a value may start, as a whole token (the audit's token rule: nothing of a longer
# number, word or power just before): a number, a LaTeX value, a tuple or interval, a
# letter standing alone (a variable, an option letter).
_VALUE = re.compile(
    r"(?<![\w.^_/\\-])"
    r"(?:[-+\u2212]?\d"
    r"|\\(?:[dt]?frac|sqrt|pi|infty|text|mathrm|mathbf|pm|mp|emptyset|varnothing)(?![A-Za-z])"
    r"|\((?=\s*[-+]?[\d\\])"
    r"|[A-Za-z](?![\w^_/]))"
)
# Lessons are held to more than the audit's cue: an answer word with a few words and a verb
# before the value ("the answer to this question is 1", "the result we get is $2x$").
_WIDE_CUE = re.compile(
    r"\b(?:final\s+)?(?:answers?|results?|solutions?|values?)\b"
    r"[^.!?\n]{0,40}?\b(?:is|was|are|were|equals?|be|becomes?|comes\s+(?:out\s+)?to)\s*[:=]?"
    r"[\s$*({\[]*(?:\\\(|\\\[)?[\s$*({\[]*$",
    re.IGNORECASE,
)
_BOXED_ANY = re.compile(r"\\(?:boxed|fbox)\s*\{")
_PROSE_LETTER = re.compile(r"\s+[a-z]")
_PARTS = re.compile(r"(?<=[.!?;])\s+|\n+")


def stated_values(text: str) -> list[int]:
    """Where ``text`` states *some* value as an answer: the start of every value token that
    :data:`ANSWER_CUE` precedes within :data:`CUE_WINDOW` characters, and every ``\\boxed{``.

    A value is a number, a LaTeX value (``\\frac``, ``\\sqrt``, ``\\pi`` …), a tuple or a
    letter standing alone; ``a``, ``A`` and ``I`` followed by a word are prose. Besides the
    audit's cue, an answer word followed within a few words by a verb counts (``the answer to
    this question is 1``), so the rule is stricter than the audit's. It needs no gold answer,
    so cleaning with it leaks nothing about any test question.
    """
    out = [m.start() for m in _BOXED_ANY.finditer(text)]
    for m in _VALUE.finditer(text):
        if m.group() in ("a", "A", "I") and _PROSE_LETTER.match(text, m.end()):
            continue
        window = text[max(0, m.start() - CUE_WINDOW) : m.start()]
        if ANSWER_CUE.search(window) or _WIDE_CUE.search(window):
            out.append(m.start())
    return sorted(out)


def states_some_answer(text: str) -> bool:
    """Whether ``text`` states any value as an answer (see :func:`stated_values`)."""
    return bool(stated_values(text))


def strip_stated_answers(text: str) -> str:
    """``text`` without every sentence (or line) that states a value as an answer.

    A sentence is dropped when a stated value falls in it; when the cue sits in the
    sentence before (``Final answer:`` on one line, the value on the next), that one goes
    too. The result never satisfies :func:`states_some_answer`.

    Returns:
        The kept sentences joined by single spaces (possibly empty).
    """
    parts = [p.strip() for p in _PARTS.split(text) if p and p.strip()]
    while True:
        starts, pos = [], 0
        for p in parts:
            starts.append(pos)
            pos += len(p) + 1
        joined = " ".join(parts)
        hits = stated_values(joined)
        if not hits:
            return joined
        i = max(j for j, s in enumerate(starts) if s <= hits[0])
        drop = {i} if states_some_answer(parts[i]) or i == 0 else {i - 1, i}
        parts = [p for j, p in enumerate(parts) if j not in drop]
