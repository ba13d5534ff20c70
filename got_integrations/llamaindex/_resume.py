"""Resuming a session as of a commit: the fork a stale handle continues on (no llama-index import).

A serialized ``GitMemory`` handle (so a ``Context.to_dict()``) records the session's
commit when it was saved. Resuming it continues from exactly that commit:

* the session's tip is still that commit: the handle continues on the session itself;
* the session moved on since (more turns were written): the handle continues on a
  **fork**, a new session ``<session>.fork-<12 hex of the commit>`` whose ref
  (``refs/got/sessions/<session>.fork-<12 hex>``) starts at that commit, so the resumed
  run sees the conversation as it was and its writes never mix with the later turns.
  Resuming the same stale handle again reuses the fork while nothing was written to it,
  else takes the next free name (``...-2``, ``...-3``, ...).

A handle saved before the session's first write records no commit; when the session
has been written since, its fork is ``<session>.fork-empty`` (and starts empty).

The choice is made once, when the handle is resumed: a memory that continues on the
session itself is an ordinary ``GitMemory`` from then on (a write another process makes
to the session afterwards is seen, as with any two writers of one session).
"""

from __future__ import annotations

import re

from got_core.errors import InvalidInputError, UnknownRefError
from got_core.repo import Keep, Publish, ReasoningRepo
from got_integrations.llamaindex._session import session_ref

__all__ = ["FORK_MARK", "MAX_FORKS", "fork_name", "resume_session"]

#: What separates a session id from its fork suffix.
FORK_MARK = ".fork-"
#: Forks of one commit before resuming refuses (each resume of a stale handle that
#: was then written to takes one).
MAX_FORKS = 1000
_OID = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def fork_name(session_id: str, at: str | None, number: int = 1) -> str:
    """The session id of fork ``number`` of ``session_id`` at commit ``at`` (None: before any write)."""
    base = f"{session_id}{FORK_MARK}{at[:12] if at else 'empty'}"
    return base if number == 1 else f"{base}-{number}"


def resume_session(repo: ReasoningRepo, session_id: str, at: str | None) -> tuple[str, bool]:
    """The session a handle saved at commit ``at`` continues on.

    Args:
        repo: the repository.
        session_id: the handle's session.
        at: the session's commit when the handle was saved (None: it had none).

    Returns:
        ``(session id, forked)``: ``session_id`` itself when its tip is still ``at``,
        else the fork (created at ``at`` when new).

    Raises:
        InvalidInputError: ``at`` is not a commit id.
        UnknownRefError: ``at`` is not in the session's history (the handle is from
            another repository, or the ref was moved by another tool).
        InvalidNameError: an unusable session id.
        ConcurrentUpdateError: the fork ref kept moving.
    """
    if at is not None and (not isinstance(at, str) or not _OID.match(at)):
        raise InvalidInputError(f"the handle's commit {str(at)[:50]!r} is not a commit id; was the handle edited?")
    tip = repo.tip(session_ref(session_id))
    if tip == at:
        return session_id, False
    if at is not None and (tip is None or not repo.git.has_object(at) or not repo.git.is_ancestor(at, tip)):
        raise UnknownRefError(
            f"commit {at[:12]} of the handle is not in session {session_id!r}'s history in {repo.gitdir}; "
            "resume it with live=True (GitMemory.from_dict(data, live=True)) to continue from the "
            "session's newest commit, or check the repository path"
        )
    for number in range(1, MAX_FORKS + 1):
        name = fork_name(session_id, at, number)

        def build(current: str | None) -> Publish | Keep:
            if current == at:
                return Keep(True)  # a fork nobody wrote to yet (or absent, for at=None): reuse it
            if current is None:
                return Publish(at, True)  # at is not None here: a new fork starts at it
            return Keep(False)  # someone continued this fork already: try the next name

        if repo.update_ref(session_ref(name), build):
            return name, True
    raise InvalidInputError(
        f"session {session_id!r} already has {MAX_FORKS} forks at {str(at)[:12]}; "
        "resume with live=True or start a new session id"
    )
