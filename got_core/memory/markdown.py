"""The ``markdown`` backend: one human-readable ``memory.md``.

§3.4 of the paper (arXiv 2606.14470): the simplest persistent substrate is a
markdown file of lessons the agent reads back by keyword. This one adds what
the paper's version needs to be usable for long: deduplication (the same
advice learned twice raises its confidence instead of repeating it),
confidence-weighted BM25 retrieval, atomic rewrites and a file lock so two
processes writing at once lose nothing.

File layout (every lesson is the quoted text under its topic heading; the
comment above it holds its metadata, one JSON line)::

    # Agent memory
    <!-- got-memory: markdown v1 -->

    ## quadratic-roots

    **insight** · confidence 0.62 · seen 2×
    <!-- got-lesson {"lines": 1, "outcome": "insight", "score": 0.62, ...} -->
    > Check the discriminant before solving for real roots.

The tokeniser (:mod:`got_core._text`) and the file lock / atomic write
(:mod:`got_core.memory._files`) are shared with the ``graph`` backend.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import replace
from pathlib import Path

from got_core._text import normalize_text, tokenize
from got_core.errors import ConfigError, CorruptRepositoryError, StorageError
from got_core.memory._files import atomic_write_bytes, file_stamp, locked, prepare_store_dir
from got_core.memory.base import BaseMemory, Lesson

__all__ = ["MEMORY_FILE", "MarkdownMemory"]

#: The file name inside the backend directory.
MEMORY_FILE = "memory.md"
_LOCK_FILE = ".memory.md.lock"
_MAGIC = "<!-- got-memory: markdown v1 -->"
_REC_PREFIX = "<!-- got-lesson "
_REC_SUFFIX = " -->"

#: Near-duplicates within a topic: token-set Jaccard at or above this merges.
NEAR_DUPLICATE = 0.8
#: How strongly a repeated lesson reinforces the stored confidence (noisy-OR, damped).
REINFORCE = 0.5
_BM25_K1 = 1.2
_BM25_B = 0.75


class MarkdownMemory(BaseMemory):
    """Lessons in a human-readable ``memory.md``, keyword retrieval by BM25 × confidence.

    Writes re-read the file under an exclusive lock, merge, and atomically
    replace it, so concurrent writers in several processes lose nothing and
    readers never see a half-written file. Reads re-parse only when the file
    changed on disk.

    Deduplication: a lesson whose normalised text equals a stored one, or whose
    token set is a near-duplicate (Jaccard ≥ :data:`NEAR_DUPLICATE`) of one in
    the same topic, is merged into it: the stored confidence rises by a damped
    noisy-OR (``s ← 1 − (1 − s)(1 − REINFORCE · s_new)``) and ``seen`` counts
    the repeats (returned as ``meta["seen"]``). The stored text, topic and
    outcome stay those of the first occurrence.

    Args:
        path: the backend directory (created if missing); ``memory.md`` lives in it.
        read_only: refuse writes silently and never create anything on disk.
        fsync: fsync each rewrite (durability against power loss, slower).
        create: when false the store must exist already (reads of a mistyped path fail
            instead of showing an empty memory).

    Raises:
        ConfigError: no path given.
        RepositoryNotFoundError: ``create=False`` and no markdown memory at ``path``.
        StorageError: the directory cannot be created or written.
        CorruptRepositoryError: ``memory.md`` exists but is not a memory file
            this backend wrote (it is left untouched).
    """

    name = "markdown"
    path: Path  # never None here: __init__ refuses a missing path

    def __init__(
        self, path: str | Path | None = None, *, read_only: bool = False, fsync: bool = False, create: bool = True
    ) -> None:
        if path is None:
            raise ConfigError("the markdown memory needs a directory path, e.g. path='runs/memory'")
        super().__init__(path, read_only=read_only)
        self.file = self.path / MEMORY_FILE
        self.fsync = fsync
        self._lock_path = self.path / _LOCK_FILE
        self._thread_lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._reset_index()
        prepare_store_dir(
            self.path,
            self._lock_path,
            "markdown memory",
            "memory.md",
            read_only=read_only,
            create=create,
            markers=(self.file,),
        )
        self._refresh()

    # -- in-memory index ---------------------------------------------------------------
    def _reset_index(self) -> None:
        self._lessons: list[Lesson] = []
        self._seen: list[int] = []
        self._tokens: list[list[str]] = []
        self._textsets: list[frozenset[str]] = []  # for near-duplicate checks
        self._blocks: list[str | None] = []  # rendered markdown per lesson, None when stale
        self._by_norm: dict[str, int] = {}
        self._by_topic: dict[str, list[int]] = {}
        self._postings: dict[str, dict[int, int]] = {}
        self._total_len = 0

    def _index(self, lesson: Lesson, seen: int) -> None:
        i = len(self._lessons)
        text_toks = tokenize(lesson.text)
        toks = text_toks + tokenize(lesson.topic_key.replace("-", " "))
        self._lessons.append(lesson)
        self._seen.append(seen)
        self._tokens.append(toks)
        self._textsets.append(frozenset(text_toks))
        self._blocks.append(None)
        self._by_norm.setdefault(normalize_text(lesson.text), i)
        self._by_topic.setdefault(lesson.topic_key, []).append(i)
        for tok in toks:
            bucket = self._postings.setdefault(tok, {})
            bucket[i] = bucket.get(i, 0) + 1
        self._total_len += len(toks)

    def _file_stamp(self) -> tuple[int, int, int] | None:
        return file_stamp(self.file)

    def _refresh(self) -> None:
        stamp = self._file_stamp()
        if stamp == self._stamp and (stamp is not None or not self._lessons):
            return
        self._reset_index()
        if stamp is not None:
            try:
                data = self.file.read_bytes()
            except OSError as exc:
                raise StorageError(f"cannot read {self.file}: {exc}") from None
            for lesson, seen in _parse(data, self.file):
                self._index(lesson, seen)
        self._stamp = stamp

    def _view(self, i: int, relevance: float = 0.0) -> Lesson:
        lesson = self._lessons[i]
        return replace(lesson, meta={**lesson.meta, "seen": self._seen[i]}, relevance=relevance)

    # -- BaseMemory hooks --------------------------------------------------------------
    def _store(self, lesson: Lesson) -> Lesson:
        with locked(self._lock_path, self._thread_lock):
            self._refresh()  # another process may have written since we last looked
            i = self._find_duplicate(lesson)
            if i is None:
                self._index(lesson, 1)
                i = len(self._lessons) - 1
            else:
                old = self._lessons[i]
                merged = 1.0 - (1.0 - old.score) * (1.0 - REINFORCE * lesson.score)
                self._lessons[i] = replace(old, score=round(min(1.0, merged), 6))
                self._seen[i] += 1
                self._blocks[i] = None
            try:
                atomic_write_bytes(self.file, self._render().encode("utf-8"), fsync=self.fsync)
            except StorageError:
                self._stamp = None  # force a re-read: the in-memory change never landed
                raise
            self._stamp = self._file_stamp()
            return self._view(i)

    def _find_duplicate(self, lesson: Lesson) -> int | None:
        i = self._by_norm.get(normalize_text(lesson.text))
        if i is not None:
            return i
        toks = frozenset(tokenize(lesson.text))
        if not toks:
            return None
        for j in self._by_topic.get(lesson.topic_key, []):
            other = self._textsets[j]
            if len(toks & other) / len(toks | other) >= NEAR_DUPLICATE:
                return j
        return None

    def _query(self, query: str, k: int) -> list[Lesson]:
        # Reads hold the in-process lock (not the file lock): re-parsing replaces
        # the index, and a writer thread must not change it under the ranking.
        with self._thread_lock:
            return self._rank(query, k)

    def _rank(self, query: str, k: int) -> list[Lesson]:
        self._refresh()
        n = len(self._lessons)
        terms = set(tokenize(query))
        if not n or not terms:
            return []
        avgdl = self._total_len / n or 1.0
        scores: dict[int, float] = {}
        for term in terms:
            posting = self._postings.get(term)
            if not posting:
                continue
            df = len(posting)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            for i, tf in posting.items():
                dl = len(self._tokens[i])
                norm = tf + _BM25_K1 * (1 - _BM25_B + _BM25_B * dl / avgdl)
                scores[i] = scores.get(i, 0.0) + idf * tf * (_BM25_K1 + 1) / norm
        # Confidence weighting: a lesson at confidence 0 counts half as much as one at 1.
        ranked = sorted(
            ((s * (0.5 + 0.5 * self._lessons[i].score), i) for i, s in scores.items()),
            key=lambda item: (-item[0], -self._lessons[item[1]].score, item[1]),
        )
        return [self._view(i, round(rel, 6)) for rel, i in ranked[:k]]

    def _all(self) -> list[Lesson]:
        with self._thread_lock:
            self._refresh()
            return [self._view(i) for i in range(len(self._lessons))]

    # -- rendering ---------------------------------------------------------------------
    def _render(self) -> str:
        order: list[str] = []
        groups: dict[str, list[int]] = {}
        for i, lesson in enumerate(self._lessons):
            if lesson.topic_key not in groups:
                order.append(lesson.topic_key)
                groups[lesson.topic_key] = []
            groups[lesson.topic_key].append(i)
        out = [
            "# Agent memory",
            _MAGIC,
            "",
            f"_{len(self._lessons)} lessons in {len(order)} topics, written by GitOfThoughts. "
            "Each lesson is the quoted text; the comment above it holds its metadata._",
            "",
        ]
        for topic in order:
            out.append(f"## {' '.join(topic.split())}")
            out.append("")
            for i in groups[topic]:
                block = self._blocks[i]
                if block is None:
                    block = "\n".join(_render_lesson(self._lessons[i], self._seen[i]))
                    self._blocks[i] = block
                out.append(block)
                out.append("")
        return "\n".join(out)


def _render_lesson(lesson: Lesson, seen: int) -> list[str]:
    text_lines = lesson.text.split("\n")
    record = {
        "lines": len(text_lines),
        "topic_key": lesson.topic_key,
        "outcome": lesson.outcome,
        "score": lesson.score,
        "seen": seen,
        "created": lesson.created,
        "source_problem": lesson.source_problem,
        "meta": lesson.meta,
    }
    # "--" may only occur inside JSON strings, where \u002d is the same character;
    # escaping it keeps the HTML comment from ending early in a renderer.
    payload = json.dumps(record, ensure_ascii=True, sort_keys=True, default=str)
    payload = payload.replace("--", "\\u002d\\u002d")
    head = f"**{lesson.outcome}** · confidence {lesson.score:.2f} · seen {seen}×"
    return [head, _REC_PREFIX + payload + _REC_SUFFIX] + [("> " + line) if line else ">" for line in text_lines]


def _parse(data: bytes, where: Path) -> list[tuple[Lesson, int]]:
    def corrupt(why: str) -> CorruptRepositoryError:
        return CorruptRepositoryError(
            f"{where} is not a readable GitOfThoughts memory file ({why}); it was left "
            "untouched: restore it from a backup, or move it away to start an empty memory"
        )

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise corrupt(f"not UTF-8: {exc}") from None
    if not text.strip():
        return []  # an empty file holds nothing to lose
    lines = text.split("\n")
    if _MAGIC not in (line.strip() for line in lines[:20]):
        raise corrupt(f"the marker line {_MAGIC!r} is missing")
    out: list[tuple[Lesson, int]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith(_REC_PREFIX):
            i += 1
            continue
        if not line.endswith(_REC_SUFFIX):
            raise corrupt(f"line {i + 1}: unterminated lesson record")
        try:
            rec = json.loads(line[len(_REC_PREFIX) : -len(_REC_SUFFIX)])
            n_lines = int(rec["lines"])
            body = lines[i + 1 : i + 1 + n_lines]
            if n_lines < 1 or len(body) != n_lines or not all(b.startswith(">") for b in body):
                raise ValueError(f"expected {n_lines} quoted text lines")
            lesson = Lesson(
                text="\n".join(b[2:] if b.startswith("> ") else b[1:] for b in body),
                topic_key=str(rec["topic_key"]),
                source_problem=str(rec.get("source_problem", "")),
                outcome=rec["outcome"],
                score=float(rec["score"]),
                created=float(rec.get("created", 0.0)),
                meta=dict(rec.get("meta") or {}),
            )
            seen = int(rec.get("seen", 1))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise corrupt(f"line {i + 1}: {str(exc)[:120]}") from None
        if lesson.outcome not in ("insight", "success", "failure") or not lesson.text.strip():
            raise corrupt(f"line {i + 1}: bad outcome or empty text")
        out.append((lesson, seen))
        i += 1 + n_lines
    return out
