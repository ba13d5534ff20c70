"""``GitMemory``: lessons as commits on the long-lived ``memory`` branch (§3.4, backend "git").

Layout (one file per topic key, so two agents' contradictory lessons on one topic
conflict when their memory branches are merged)::

    memory branch
    └── lessons/<hh>/<topic key>.md     hh = first two hex digits of sha1(key): a fan-out
                                         that keeps every tree small at 10k+ topics

A topic file holds the lessons on that topic, oldest first, each behind a one-line
JSON header (``<!-- got-lesson {...} -->``). Each ``add_*`` is one commit whose
message carries the lesson text and ``Got-*`` trailers, so retrieval is git's own
search over the branch (``--grep`` keywords and ``-S`` pickaxe through the derived
index), ranked by ρ with a keyword-match term (see :mod:`got_core.repo.retrieval`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

from got_core.errors import ConfigError, CorruptRepositoryError, RepositoryNotFoundError
from got_core.memory.base import BaseMemory, Lesson, stored_lesson
from got_core.names import decode_component, encode_component
from got_core.repo import Publish, ReasoningRepo
from got_core.storage.refnames import branch_ref

__all__ = ["MEMORY_BRANCH", "GitMemory", "lesson_path", "parse_topic_file", "render_topic_file"]

MEMORY_BRANCH = "memory"
#: ρ weights for lessons: the paper's 0.7/0.2/0.1 plus a keyword-match term, so the
#: lesson that shares the query's words outranks a confident but unrelated one.
LESSON_WEIGHTS = {"score": 0.7, "tag": 0.2, "recency": 0.1, "match": 1.0}

_HEADER_PREFIX = "<!-- got-lesson "
_HEADER = re.compile(r"^<!-- got-lesson (\{.*\}) -->$")


def lesson_path(topic_key: str) -> str:
    """Path of a topic's file on the memory branch: ``lessons/<hh>/<encoded key>.md``."""
    fan = hashlib.sha1(topic_key.encode("utf-8")).hexdigest()[:2]
    return f"lessons/{fan}/{encode_component(topic_key, 'topic key')}.md"


def _lesson_id(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def render_topic_file(lessons: list[Lesson]) -> str:
    """Serialise a topic's lessons (human-readable markdown, one JSON header per lesson).

    The header records how many lines the lesson text has, so any text — even lines
    that look like headers — round-trips verbatim.
    """
    blocks = []
    for lesson in lessons:
        header = {
            "id": _lesson_id(lesson.text),
            "topic_key": lesson.topic_key,
            "lines": lesson.text.count("\n") + 1,
            "outcome": lesson.outcome,
            "score": lesson.score,
            "source_problem": lesson.source_problem,
            "created": lesson.created,
            "meta": lesson.meta,
        }
        blocks.append(f"<!-- got-lesson {json.dumps(header, sort_keys=True, ensure_ascii=False)} -->\n{lesson.text}\n")
    return "\n".join(blocks)


def parse_topic_file(text: str, where: str = "a topic file") -> list[Lesson]:
    """Read the lessons of a topic file written by :func:`render_topic_file` (or by a merge).

    Lines outside a lesson block (blank lines, a merge's separators) are skipped; a
    header that does not parse, or a block cut short, is damage.

    Raises:
        CorruptRepositoryError: a damaged header or lesson block (the message names ``where``).
    """
    lessons: list[Lesson] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _HEADER.match(lines[i])
        i += 1
        if not m and not lines[i - 1].startswith(_HEADER_PREFIX):
            continue
        try:
            if not m:
                raise ValueError("the header line is cut short")
            header = json.loads(m.group(1))
            if not isinstance(header, dict):
                raise ValueError("the header is not a JSON object")
            n = header.get("lines", 1)
            if not isinstance(n, int) or isinstance(n, bool) or n < 1 or i + n > len(lines):
                raise ValueError(f"the lesson should have {str(n)[:20]} line(s), the file has {len(lines) - i} left")
            body = "\n".join(lines[i : i + n])
            lesson = stored_lesson(
                {
                    "text": body,
                    "topic_key": header.get("topic_key", ""),
                    "source_problem": header.get("source_problem", ""),
                    "outcome": header.get("outcome", "insight"),
                    "score": header.get("score", 0.5),
                    "created": header.get("created", 0.0),
                    "meta": header.get("meta") or {},
                }
            )
        except (ValueError, TypeError, RecursionError) as exc:
            raise CorruptRepositoryError(
                f"{where} has a damaged lesson at line {i} ({str(exc)[:120]}); restore the file "
                "from an earlier commit of the memory branch (`git log memory -- <path>`)"
            ) from None
        i += n
        lessons.append(lesson)
    return lessons


def _topic_text(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptRepositoryError(
            f"{where} is not UTF-8 text ({exc}); restore it from an earlier commit of the memory branch"
        ) from None


class GitMemory(BaseMemory):
    """Lessons on the ``memory`` branch of a reasoning repository.

    Args:
        path: the repository (created as a bare repo when missing, unless ``create=False``);
            or pass ``repo``.
        read_only: refuse writes silently (frozen-memory protocol arms).
        repo: share an open :class:`ReasoningRepo` (e.g. the solver's own).
        branch: the branch that holds lessons.
        create: when false the repository must exist already; nothing is created.

    Raises:
        RepositoryNotFoundError: ``create=False`` and no repository at ``path``.
        RepositoryAccessError: the repository belongs to another user or cannot be read.
    """

    name = "git"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        read_only: bool = False,
        repo: ReasoningRepo | None = None,
        branch: str = MEMORY_BRANCH,
        create: bool = True,
    ) -> None:
        if repo is None:
            if path is None:
                raise ConfigError("the git memory backend needs a path (or repo=)")
            if read_only and create and not Path(path).exists():
                # read-only creates nothing: a missing store reads as an empty memory
                super().__init__(Path(path), read_only=True)
                self.repo: ReasoningRepo | None = None
                self.branch = branch
                self.ref = branch_ref(branch)
                return
            try:
                repo = ReasoningRepo(path, create=create)
            except RepositoryNotFoundError:
                if create:
                    raise
                raise RepositoryNotFoundError(
                    f"no git memory at {path} (no repository there); check the path, or store a "
                    "lesson there first to create one"
                ) from None
        super().__init__(repo.gitdir, read_only=read_only)
        self.repo = repo
        self.branch = branch
        self.ref = repo.ref(branch)

    # -- storage ---------------------------------------------------------------------
    def _topic(self, rev: str | None, key: str) -> list[Lesson]:
        if rev is None or self.repo is None:
            return []
        path = lesson_path(key)
        try:
            raw = self.repo.read_file(rev, path)
        except KeyError:
            return []
        where = f"{path} at {rev[:12]}"
        return parse_topic_file(_topic_text(raw, where), where)

    def _store(self, lesson: Lesson) -> Lesson:
        repo = self.repo
        if repo is None:  # only a read-only memory has no repository, and it never stores
            raise ConfigError("this git memory was opened read-only at a missing path; it stores nothing")
        path = lesson_path(lesson.topic_key)

        def build(tip: str | None) -> Publish:
            current = self._topic(tip, lesson.topic_key)
            same = [i for i, old in enumerate(current) if old.text == lesson.text]
            if same:  # deduplicate: the same advice again raises confidence, not the count
                old = current[same[0]]
                stored = Lesson(
                    old.text,
                    old.topic_key,
                    old.source_problem or lesson.source_problem,
                    lesson.outcome,
                    max(old.score, lesson.score),
                    old.created,
                    old.meta,
                )
                current[same[0]] = stored
            else:
                stored = lesson
                current.append(lesson)
            first = lesson.text.splitlines()[0][:60]
            message = (
                f"lesson({lesson.outcome}): {first}\n\n{lesson.text}\n\n"
                f"Got-Topic: {encode_component(lesson.topic_key, 'topic key')}\n"
                f"Got-Lesson: {_lesson_id(lesson.text)}\n"
                f"Got-Outcome: {lesson.outcome}\n"
                f"Got-Score: {stored.score:.6f}\n"
            )
            if lesson.source_problem:
                message += f"Got-Problem: {encode_component(lesson.source_problem, 'problem id')}\n"
            oid = repo.prepare_commit([tip] if tip else [], {path: render_topic_file(current)}, message)
            return Publish(oid, stored)

        # another writer moving the branch makes the builder re-read the topic on the new tip
        return repo.update_ref(self.ref, build)

    def _query(self, query: str, k: int) -> list[Lesson]:
        if self.repo is None:
            return []
        tip = self.repo.tip(self.ref)
        if tip is None:
            return []
        hits = self.repo.search(query, k=2 * k + 2, refs=[self.ref], weights=LESSON_WEIGHTS)
        out: list[Lesson] = []
        seen: set[str] = set()
        files: dict[str, list[Lesson]] = {}
        for hit in hits:
            trailers = hit.trailers()
            lesson_id = trailers.get("Lesson")
            topic = trailers.get("Topic")
            if not lesson_id or topic is None or lesson_id in seen:
                continue
            key = decode_component(topic)
            if key not in files:
                files[key] = self._topic(tip, key)
            for lesson in files[key]:
                if _lesson_id(lesson.text) == lesson_id:
                    seen.add(lesson_id)
                    out.append(dataclasses.replace(lesson, relevance=round(hit.rho, 6)))
                    break
            if len(out) >= k:
                break
        return out

    def _all(self) -> list[Lesson]:
        if self.repo is None:
            return []
        tip = self.repo.tip(self.ref)
        if tip is None:
            return []
        out = []
        for path, data in sorted(self.repo.files(tip, "lessons").items()):
            if path.endswith(".md"):
                where = f"{path} at {tip[:12]}"
                out.extend(parse_topic_file(_topic_text(data, where), where))
        return out

    def storage_bytes(self) -> int:
        """Bytes of the repository directory (objects, refs and the derived index)."""
        if self.repo is None:
            return 0
        return sum(p.stat().st_size for p in Path(self.repo.gitdir).rglob("*") if p.is_file())

    def close(self) -> None:
        """Release the repository's index handle."""
        if self.repo is not None:
            self.repo.close()
