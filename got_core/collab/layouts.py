"""Two layouts of lesson files on a memory branch, and why the choice decides what a merge sees.

§6.3 of arXiv 2606.14470 merges agents' memories with git; whether two agents'
contradictory lessons *conflict* depends only on whether they land in the same file:

* ``keyed`` (the git backend's own, :func:`got_core.memory.git.lesson_path`): one file
  per topic key, ``lessons/<hh>/<topic key>.md``. Two agents writing different lessons on
  one topic edit the same file: the merge conflicts and shows both sides.
* ``content``: one file per lesson, named by the hash of its text,
  ``lessons/<hh>/<lesson id>.md``. Different lessons are always different files, so a
  merge never conflicts — and two contradictory lessons on one topic both land, silently.
  This is the paper's structural caveat: a content-addressed layout cannot surface a
  contradiction, whatever the merge does. (One text learned by two agents with
  different scores is still one file edited twice: that conflicts in either layout.)

:class:`LessonMemory` is the git memory with either layout, and an optional topic
prefix (an agent working on one domain keeps its topics in that domain's namespace,
which is what makes disjoint domains merge without conflicts). Both layouts read back
the same way: every file holds :func:`~got_core.memory.git.render_topic_file` blocks, so
:func:`got_core.collab.agents.lessons_at` and ``all_lessons`` see every lesson either way.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Any, Literal

from got_core.errors import ConfigError, CorruptRepositoryError
from got_core.memory.base import Lesson, Outcome
from got_core.memory.git import LESSON_WEIGHTS, GitMemory, lesson_path, parse_topic_file, render_topic_file
from got_core.names import decode_component, encode_component
from got_core.repo import Publish, ReasoningRepo

__all__ = ["LAYOUTS", "Layout", "LessonMemory", "content_path", "lesson_id", "path_for"]

Layout = Literal["keyed", "content"]
LAYOUTS: tuple[Layout, ...] = ("keyed", "content")
_LESSON_ID = re.compile(r"[0-9a-f]{16}")


def lesson_id(text: str) -> str:
    """The id of a lesson's text (the ``Got-Lesson`` trailer): 16 hex digits of its SHA-1."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def content_path(text: str) -> str:
    """Path of a lesson's file in the content layout: ``lessons/<hh>/<lesson id>.md``."""
    lid = lesson_id(text)
    return f"lessons/{lid[:2]}/{lid}.md"


def path_for(lesson: Lesson, layout: Layout) -> str:
    """Where ``lesson`` lives in ``layout``."""
    return lesson_path(lesson.topic_key) if layout == "keyed" else content_path(lesson.text)


class LessonMemory(GitMemory):
    """A git memory whose lesson files follow ``layout``, with topics under ``topic_prefix``.

    Args:
        repo: the repository (shared with its owner, e.g. a :class:`~got_core.collab.Worker`).
        branch: the memory branch.
        layout: ``keyed`` (one file per topic key) or ``content`` (one file per lesson text).
        topic_prefix: prepended as ``<prefix>/`` to every topic key stored (e.g. a domain).
        read_only: refuse writes silently.

    Raises:
        ConfigError: an unknown layout.
    """

    def __init__(
        self,
        *,
        repo: ReasoningRepo,
        branch: str = "memory",
        layout: Layout = "keyed",
        topic_prefix: str = "",
        read_only: bool = False,
    ) -> None:
        if layout not in LAYOUTS:
            raise ConfigError(f"unknown lesson layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
        super().__init__(repo=repo, branch=branch, read_only=read_only)
        self.layout: Layout = layout
        self.topic_prefix = topic_prefix.strip("/")

    def _prepare(
        self,
        text: str,
        outcome: Outcome,
        topic_key: str,
        source_problem: str,
        score: float,
        meta: dict[str, Any] | None,
    ) -> Lesson:
        lesson = super()._prepare(text, outcome, topic_key, source_problem, score, meta)
        prefix = self.topic_prefix + "/" if self.topic_prefix else ""
        if prefix and not lesson.topic_key.startswith(prefix):
            lesson = Lesson(
                lesson.text,
                prefix + lesson.topic_key,
                lesson.source_problem,
                lesson.outcome,
                lesson.score,
                lesson.created,
                lesson.meta,
            )
        return lesson

    # -- the content layout (the keyed one is GitMemory's own) ----------------------------
    def _file(self, rev: str | None, path: str) -> list[Lesson]:
        if rev is None or self.repo is None:
            return []
        try:
            raw = self.repo.read_file(rev, path)
        except KeyError:
            return []
        where = f"{path} at {rev[:12]}"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRepositoryError(
                f"{where} is not UTF-8 text ({exc}); restore it from an earlier commit of the memory branch"
            ) from None
        return parse_topic_file(text, where)

    def _store(self, lesson: Lesson) -> Lesson:
        if self.layout == "keyed":
            return super()._store(lesson)
        repo = self.repo
        if repo is None:
            raise ConfigError("this git memory was opened read-only at a missing path; it stores nothing")
        path = content_path(lesson.text)

        def build(tip: str | None) -> Publish:
            old = self._file(tip, path)
            stored = lesson
            if old:  # the same text again raises confidence, not the count
                first = old[0]
                stored = Lesson(
                    first.text,
                    first.topic_key,
                    first.source_problem or lesson.source_problem,
                    lesson.outcome,
                    max(first.score, lesson.score),
                    first.created,
                    first.meta,
                )
            message = (
                f"lesson({lesson.outcome}): {lesson.text.splitlines()[0][:60]}\n\n{lesson.text}\n\n"
                f"Got-Topic: {encode_component(stored.topic_key, 'topic key')}\n"
                f"Got-Lesson: {lesson_id(lesson.text)}\n"
                f"Got-Outcome: {lesson.outcome}\n"
                f"Got-Score: {stored.score:.6f}\n"
            )
            if lesson.source_problem:
                message += f"Got-Problem: {encode_component(lesson.source_problem, 'problem id')}\n"
            oid = repo.prepare_commit([tip] if tip else [], {path: render_topic_file([stored])}, message)
            return Publish(oid, stored)

        return repo.update_ref(self.ref, build)

    def _query(self, query: str, k: int) -> list[Lesson]:
        if self.layout == "keyed" or self.repo is None:
            return super()._query(query, k)
        tip = self.repo.tip(self.ref)
        if tip is None:
            return []
        out: list[Lesson] = []
        seen: set[str] = set()
        for hit in self.repo.search(query, k=2 * k + 2, refs=[self.ref], weights=LESSON_WEIGHTS):
            trailers = hit.trailers()
            lid, topic = trailers.get("Lesson"), trailers.get("Topic")
            if not lid or not _LESSON_ID.fullmatch(lid) or topic is None or lid in seen:
                continue
            for lesson in self._file(tip, f"lessons/{lid[:2]}/{lid}.md"):
                if lesson_id(lesson.text) == lid and lesson.topic_key == decode_component(topic):
                    seen.add(lid)
                    out.append(dataclasses.replace(lesson, relevance=round(hit.rho, 6)))
            if len(out) >= k:
                break
        return out[:k]
