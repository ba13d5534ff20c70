"""The one ref-transaction primitive: every ref move in the project goes through here.

"Update this ref from its current tip with this builder, retrying on a lost race within a
deadline" (docs/ARCHITECTURE.md, invariant 3). A writer never hand-rolls the
read-tip → build → compare-and-swap → retry loop; it hands a *builder* to
:func:`update_ref` (one ref) or :func:`update_refs` (several refs published together):

* the builder is called with the ref's current tip (``None`` when the ref does not exist)
  and returns :class:`Publish` (move the ref to ``target``; ``None`` deletes it) or
  :class:`Keep` (leave it; e.g. the tag already points where it should). Either carries
  the value the call returns;
* the move is a compare-and-swap against the tip the builder saw; when another writer won
  the race, the builder runs again on the new tip, after a short random back-off;
* a builder that cannot accept the tip it sees (a caller demanded a specific expected
  tip, or explicit parents the ref has moved past) raises
  :class:`~got_core.errors.ConcurrentUpdateError` itself: that is a final answer, never a
  retry signal;
* past the deadline the primitive raises :class:`~got_core.errors.ConcurrentUpdateError`;
  a ref lock older than ``stale_lock_seconds`` is taken as left by a killed writer and
  removed, so one crash cannot block a ref forever.

Objects written by a builder whose move then lost are unreferenced, which ``git fsck``
accepts and ``git gc`` collects; nothing acknowledged is ever lost.

After a move took effect, the optional ``moved`` hook hears ``(ref, old, new)`` of every
ref it moved (the derived index learns of our own writes that way, ARCHITECTURE §3).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from got_core.errors import ConcurrentUpdateError, InvalidInputError
from got_core.storage.git import GitRepo, RefRace

__all__ = ["DEFAULT_POLICY", "Keep", "Moved", "Publish", "RetryPolicy", "update_ref", "update_refs"]


@dataclass(frozen=True)
class Publish:
    """A builder's answer: move the ref to ``target`` (None deletes it); the call returns ``value``."""

    target: str | None
    value: Any = None


@dataclass(frozen=True)
class Keep:
    """A builder's answer: leave the ref as it is; the call returns ``value``."""

    value: Any = None


@dataclass(frozen=True)
class RetryPolicy:
    """How long a writer keeps trying when other writers win the race for a ref.

    Attributes:
        timeout: seconds before :class:`ConcurrentUpdateError`.
        stale_lock_seconds: a ref lock older than this was left by a killed writer and is
            removed (a live writer holds one for well under a millisecond).
        min_backoff, max_backoff: the random pause between attempts, in seconds.
    """

    timeout: float = 15.0
    stale_lock_seconds: float = 5.0
    min_backoff: float = 0.0002
    max_backoff: float = 0.003

    def attempts(self, what: str, git: GitRepo | None = None, refs: Sequence[str] = ()) -> Iterator[int]:
        """Attempt numbers until the deadline, backing off (and breaking stale locks) between them.

        Used by :func:`update_ref` and by the few retries that are not local ref moves (a
        push that met another pusher's lock on the peer).

        Raises:
            ConcurrentUpdateError: past :attr:`timeout`.
        """
        deadline = time.monotonic() + self.timeout
        attempt = 0
        while True:
            yield attempt
            attempt += 1
            if time.monotonic() > deadline:
                raise ConcurrentUpdateError(
                    f"{what} kept moving (or stayed locked) for {self.timeout:.0f} s; "
                    "another writer is busy on it, or a lock file was left behind"
                )
            if git is not None and any(git.break_stale_lock(r, self.stale_lock_seconds) for r in refs):
                continue
            time.sleep(random.uniform(self.min_backoff, self.max_backoff))


DEFAULT_POLICY = RetryPolicy()

Builder = Callable[[str | None], "Publish | Keep"]
MultiBuilder = Callable[[dict[str, str | None]], "dict[str, str | None] | Keep"]
#: The post-publish hook: called with ``(ref, old, new)`` for each ref a transaction moved.
Moved = Callable[[Sequence[tuple[str, str | None, str | None]]], None]


_UNKNOWN: Any = object()


class _Tips(dict[str, str | None]):
    """The tips a multi-ref builder gets: the named refs' tips, and any other ref's on first ``tips[name]``.

    A builder that only learns which ref it needs from another ref's tip (a node's tag
    is named after an id derived from the branch tip) reads it here; the read becomes
    part of the compare-and-swap. :attr:`seen` keeps what was read, whatever the
    builder does to the mapping.
    """

    def __init__(self, git: GitRepo, tips: dict[str, str | None], hints: Mapping[str, str | None]) -> None:
        super().__init__(tips)
        self._git = git
        self._hints = hints
        self.seen = dict(tips)

    def __missing__(self, name: str) -> str | None:
        tip = self.seen[name] = self._hints[name] if name in self._hints else self._git.ref_target(name)
        self[name] = tip
        return tip


def update_ref(
    git: GitRepo,
    name: str,
    build: Builder,
    policy: RetryPolicy = DEFAULT_POLICY,
    *,
    retry: bool = True,
    tip_hint: str | Any | None = _UNKNOWN,
    moved: Moved | None = None,
) -> Any:
    """Move ``name`` with ``build(tip)``, compare-and-swap, retrying lost races (see the module doc).

    Args:
        git: the repository handle of this thread.
        name: the full ref name (already validated).
        build: called with the current tip; returns :class:`Publish` or :class:`Keep`.
        policy: deadline and back-off.
        retry: False for a strict compare-and-swap: the first lost race raises
            :class:`ConcurrentUpdateError` instead of calling the builder again (for
            callers that built on a tip they were given, e.g. explicit parents).
        tip_hint: the tip the caller last saw (its own last write): the first attempt
            builds on it without reading the ref; the compare-and-swap still checks it,
            so a stale hint only costs one more attempt.
        moved: called with ``[(name, old, new)]`` once the move took effect.

    Returns:
        The ``value`` of the builder's answer that took effect.

    Raises:
        ConcurrentUpdateError: past the deadline, or raised by the builder.
        StorageError: the disk refused the write.
    """
    with git.staged_writes():  # the builder's objects go to disk as one pack, just before the move
        value = _update_ref(git, name, build, policy, retry, tip_hint, moved)
    git.maybe_consolidate()
    return value


def _update_ref(
    git: GitRepo,
    name: str,
    build: Builder,
    policy: RetryPolicy,
    retry: bool,
    tip_hint: str | Any | None,
    moved: Moved | None,
) -> Any:
    attempts = policy.attempts(name, git, (name,))
    while True:
        attempt = next(attempts)
        tip = tip_hint if attempt == 0 and tip_hint is not _UNKNOWN else git.ref_target(name)
        answer = build(tip)
        if isinstance(answer, Keep):
            return answer.value
        try:
            if answer.target is None:
                if tip is None:
                    return answer.value
                git.delete_ref(name, tip)
            else:
                git.cas_ref(name, answer.target, tip)
        except RefRace:
            if not retry:
                raise ConcurrentUpdateError(
                    f"{name} moved while this write was built on {tip or 'nothing'}; re-read its tip and retry"
                ) from None
            continue
        if moved is not None:
            moved([(name, tip, answer.target)])
        return answer.value


def update_refs(
    git: GitRepo,
    names: tuple[str, ...],
    build: MultiBuilder,
    value: Callable[[], Any] | None = None,
    policy: RetryPolicy = DEFAULT_POLICY,
    moved: Moved | None = None,
    *,
    expected: Mapping[str, str | None] | None = None,
) -> Any:
    """Move several refs together: ``build({name: tip})`` returns ``{name: new target}``.

    The builder may also read the tip of a ref not in ``names`` (``tips[other]``, which
    reads it) and answer for it: it is moved from the tip read, like the named ones.
    All the refs are locked, checked against the tips the builder saw and written as one
    libgit2 ref transaction; a ref left out of the answer is not touched, ``None`` deletes
    one. Returning :class:`Keep` changes nothing.

    ``moved`` is called with ``[(name, old, new)]`` for the refs that moved.

    ``expected`` is a hint, ``{name: tip}`` (None: the ref does not exist), for refs
    whose tips the caller believes it knows, typically where its own last move left them
    (:meth:`GitRepo.moved_tips`): the first attempt hands those tips to the builder
    without reading the refs (a named ref or one the builder reads on the way). It is
    never trusted: the transaction compares every ref, under its lock, with the tip the
    builder saw, so a wrong hint (a ref another process or ``git update-ref`` moved
    meanwhile) loses that compare-and-swap: nothing moves, and the next attempt reads
    every ref and builds again (the first attempt's objects are written unreferenced).
    No ref is ever moved from a value that was not checked. Give no hints to a builder
    that refuses a tip it did not expect (explicit parents, an expected value): it would
    refuse the stale hint instead of being retried.

    Returns:
        ``value()`` after the refs moved (or the :class:`Keep`'s value).

    Raises:
        ConcurrentUpdateError: past the deadline, or raised by the builder.
        StorageError: the disk refused the writes.
    """
    with git.staged_writes():  # the builder's objects go to disk as one pack, just before the move
        result = _update_refs(git, names, build, policy, moved, dict(expected or {}))
    git.maybe_consolidate()
    if result is _MOVED:
        return value() if value is not None else None
    return result


_MOVED: Any = object()


def _update_refs(
    git: GitRepo,
    names: tuple[str, ...],
    build: MultiBuilder,
    policy: RetryPolicy,
    moved: Moved | None,
    expected: dict[str, str | None],
) -> Any:
    locked = list(names)  # the refs whose stale locks the retries may break (the ones read, too)
    attempts = policy.attempts(", ".join(names), git, locked)
    while True:
        # hints only on the first attempt: a lost race means one may be stale, so refs are read
        hints = expected if next(attempts) == 0 else {}
        tips = _Tips(git, {n: hints[n] if n in hints else git.ref_target(n) for n in names}, hints)
        answer = build(tips)
        locked[:] = tips.seen
        if isinstance(answer, Keep):
            return answer.value
        unread = [n for n in answer if n not in tips.seen]
        if unread:
            raise InvalidInputError(
                f"the builder answered for {', '.join(sorted(unread))} without reading its tip (tips[name]); "
                "a ref is only moved from a tip the builder saw"
            )
        updates: Mapping[str, tuple[str | None, str | None]] = {
            n: (tips.seen[n], target) for n, target in answer.items() if target != tips.seen[n]
        }
        try:
            git.cas_refs(updates)
        except RefRace:
            continue
        if moved is not None and updates:
            moved([(n, old, new) for n, (old, new) in updates.items()])
        return _MOVED
