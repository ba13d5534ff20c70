"""Ranked retrieval over a reasoning repository (ARCHITECTURE §3).

Candidates come from git's own search verbs, answered by the derived index:
keyword hits over commit messages (``git log --grep``) and content hits
(``git log -S``, pickaxe; only commits that *add* the text). They are ranked by

    ρ = 0.7·s_comb + 0.2·tag + 0.1·recency   (+ w_match·match, 0 by default)

where ``s_comb`` is the node's combined score (its note, or the ``Got-Score``
trailer), ``tag`` is 1 for a ``success_*``/``best`` tag, 0.5 untagged and 0 for
``failed_*``, ``recency`` is the commit time scaled to [0, 1] over the searched
history, and ``match`` is the fraction of query keywords the message contains.
The weights are configurable per call.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence

from got_core._text import STOP_WORDS
from got_core.errors import InvalidInputError, InvalidNameError
from got_core.names import decode_component
from got_core.storage.index import CommitRow, DerivedIndex
from got_core.types import CommitInfo, Hit, tag_value
from got_core.validate import clean_text

__all__ = ["DEFAULT_WEIGHTS", "keywords", "rows_to_infos", "search", "stem", "tag_value", "terms"]

DEFAULT_WEIGHTS: Mapping[str, float] = {"score": 0.7, "tag": 0.2, "recency": 0.1, "match": 0.0}

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = STOP_WORDS


def stem(word: str) -> str:
    """A light suffix stripper so "distances" matches "distance" (the index uses Porter)."""
    for suffix in ("ations", "ation", "ings", "ing", "ies", "ied", "es", "ed", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def terms(text: str) -> set[str]:
    """Stemmed content words of ``text``."""
    return {stem(w) for w in _WORD.findall(text.lower())}


def _fold(text: str) -> str:
    # the index's tokenizer folds diacritics (unicode61 remove_diacritics 2); so do we
    return "".join(ch for ch in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(ch))


def keywords(query: str, limit: int = 32) -> list[str]:
    """Distinct lowercase content words of ``query`` (stop words and 1-letter words dropped)."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(_fold(query)):
        if (len(word) > 1 or word.isdigit()) and word not in _STOP:
            seen.setdefault(word, None)
        if len(seen) >= limit:
            break
    return list(seen)


def _decoded(value: str | None) -> str:
    # trailers hold ids encoded (names.encode_component); hand them back as they were given
    if not value:
        return ""
    try:
        return decode_component(value)
    except InvalidNameError:
        return value


def _check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    if not isinstance(weights, Mapping):
        raise InvalidInputError(f"weights must be a mapping, not {type(weights).__name__}")
    out = {}
    for name, value in weights.items():
        if name not in DEFAULT_WEIGHTS:
            raise InvalidInputError(f"unknown weight {name!r}; use {sorted(DEFAULT_WEIGHTS)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InvalidInputError(f"weight {name!r} must be a finite number, not {value!r}")
        out[name] = float(value)
    return out


def rows_to_infos(index: DerivedIndex, rows: Sequence[CommitRow]) -> list[CommitInfo]:
    """Index rows -> :class:`CommitInfo` with tags and scores."""
    tags = index.tags_for(r.oid for r in rows)
    return [
        CommitInfo(r.oid, r.message, r.parent_list, r.time, "", (), tuple(tags.get(r.oid, ())), r.score) for r in rows
    ]


def search(
    index: DerivedIndex,
    query: str,
    k: int,
    *,
    refs: Sequence[str] | None = None,
    weights: Mapping[str, float] | None = None,
) -> list[Hit]:
    """The ``k`` best hits for ``query`` by ρ (see the module docstring).

    Candidates are commits whose message holds a query keyword (``--grep``; words
    that start with the keyword's stem, after an IDF cut of words that occur nearly
    everywhere) plus, for a one-token query such as an identifier or a number, the
    commits that added it to a file (``-S``).

    Args:
        index: a synced derived index.
        query: free text.
        k: how many hits; ``k <= 0`` gives ``[]``.
        refs: restrict to commits reachable from these full refs.
        weights: override any of ``score``, ``tag``, ``recency``, ``match``.

    Raises:
        InvalidInputError: a query that is not text, a ``k`` that is not an int, or
            weights with unknown names or values that are not finite numbers.
    """
    query = clean_text(query, "search query")
    if isinstance(k, bool) or not isinstance(k, int):
        raise InvalidInputError(f"k must be an int, not {type(k).__name__}")
    w = dict(DEFAULT_WEIGHTS)
    if weights:
        w.update(_check_weights(weights))
    if k <= 0:
        return []
    stems = [stem(word) for word in keywords(query)]
    phrase = query.strip()
    extra: list[int] = []
    if 3 <= len(phrase) <= 64 and not any(ch.isspace() for ch in phrase):
        extra = [r.rowid for r in index.pickaxe(phrase, refs, added_only=True)]
    rows = index.ranked(stems, refs, w, k, extra)
    tags = index.tags_for(r.oid for r in rows)
    hits = []
    for r in rows:
        _value, which = tag_value(tags.get(r.oid, ()))
        hits.append(
            Hit(
                r.oid,
                r.message.split("\n", 1)[0],
                float(r.rho),
                r.score,
                which,
                float(r.recency),
                float(r.match),
                _decoded(r.node_id),
                _decoded(r.problem_id),
                r.message,
            )
        )
    return hits
