"""Shared text helpers: stop words, a tiny stemmer, tokenisation (no NLP dependency)."""

from __future__ import annotations

import re

__all__ = ["STOP_WORDS", "WORD", "normalize_text", "stem", "tokenize"]

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
