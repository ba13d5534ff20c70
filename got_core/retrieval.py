"""Ranked retrieval over a reasoning repository (DESIGN §2).

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

import re
from typing import Mapping, Sequence

from got_core._index import DerivedIndex
from got_core.types import CommitInfo, Hit

__all__ = ["DEFAULT_WEIGHTS", "keywords", "search", "rows_to_infos", "tag_value"]

DEFAULT_WEIGHTS: Mapping[str, float] = {"score": 0.7, "tag": 0.2, "recency": 0.1, "match": 0.0}

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = frozenset("""a an the and or but if then else of to in on at by for with from into onto is are was were be
been being it its this that these those what which who whom whose how why when where there here as so such not no
do does did done can could should would will shall may might must have has had i you he she we they them our your
their his her my me us than too very just also any all each every some most more less much many few one two get got
use using used about above below over under again further once only own same both between through during before
after while until up down out off""".split())


def keywords(query: str, limit: int = 32) -> list[str]:
    """Distinct lowercase content words of ``query`` (stop words and 1-letter words dropped)."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if (len(word) > 1 or word.isdigit()) and word not in _STOP:
            seen.setdefault(word, None)
        if len(seen) >= limit:
            break
    return list(seen)


def tag_value(tags: Sequence[str]) -> tuple[float, str | None]:
    """The ρ tag term for a commit's tags: (value, the deciding tag)."""
    for t in tags:
        if t.startswith("success_") or t == "best" or t.startswith("best_"):
            return 1.0, t
    for t in tags:
        if t.startswith("failed_"):
            return 0.0, t
    return 0.5, None


def rows_to_infos(index: DerivedIndex, rows: Sequence[tuple]) -> list[CommitInfo]:
    """Index rows -> :class:`CommitInfo` with tags and scores."""
    tags = index.tags_for(r[1] for r in rows)
    return [CommitInfo(r[1], r[2], tuple((r[4] or "").split()), r[3], "", (), tuple(tags.get(r[1], ())), r[5])
            for r in rows]


def search(index: DerivedIndex, query: str, k: int, *, refs: Sequence[str] | None = None,
           weights: Mapping[str, float] | None = None) -> list[Hit]:
    """The ``k`` best hits for ``query`` by ρ (see the module docstring).

    Args:
        index: a synced derived index.
        query: free text; its keywords select candidates.
        k: how many hits; ``k <= 0`` gives ``[]``.
        refs: restrict to commits reachable from these full refs.
        weights: override any of ``score``, ``tag``, ``recency``, ``match``.
    """
    if k <= 0:
        return []
    w = dict(DEFAULT_WEIGHTS)
    if weights:
        w.update(weights)
    words = keywords(query)
    rows = {r[0]: r for r in index.words(words, refs, limit=max(100, 20 * k))}
    phrase = query.strip()
    if 3 <= len(phrase) <= 200:
        for r in index.pickaxe(phrase, refs, added_only=True):
            rows.setdefault(r[0], r)
    if not rows:
        return []
    tmin, tmax = index.time_range(refs)
    span = max(tmax - tmin, 1)
    tags = index.tags_for(r[1] for r in rows.values())
    hits = []
    wordset = set(words)
    for r in rows.values():
        _crow, oid, message, ctime, _parents, score, node_id, problem_id = r
        tag, which = tag_value(tags.get(oid, ()))
        recency = (ctime - tmin) / span if tmax > tmin else 1.0
        present = set(_WORD.findall(message.lower())) & wordset
        match = len(present) / len(wordset) if wordset else 1.0
        rho = (w["score"] * (score or 0.0) + w["tag"] * tag + w["recency"] * recency + w["match"] * match)
        hits.append(Hit(oid, message.split("\n", 1)[0], rho, score, which, recency, match,
                        node_id or "", problem_id or ""))
    hits.sort(key=lambda h: (-h.rho, -h.match, -h.recency, h.oid))
    return hits[:k]
