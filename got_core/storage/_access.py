"""Why a repository cannot be opened: ownership, permissions, something else in the way.

libgit2 answers "could not open" for all of them; these checks look at the filesystem
so the error says what is wrong and what to do, and so nothing is ever created over a
directory that already holds files. Used by :class:`got_core.storage.git.GitRepo`.
"""

from __future__ import annotations

import os
from pathlib import Path

from got_core.errors import RepositoryAccessError, RepositoryNotFoundError, StorageError

__all__ = ["check_readable", "owner_hint", "refuse_unopenable"]


def owner_hint(path: Path) -> str:
    try:
        uid = path.stat().st_uid
    except OSError:
        return "another user"
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name!r} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _unreadable(path: Path) -> Path | None:
    """The first of a repository's own entries this process may not read, or None."""
    for p in (path, path / "HEAD", path / "config", path / "objects", path / "refs"):
        try:
            exists = p.exists()
        except OSError:
            return p
        if exists and not os.access(p, os.R_OK | (os.X_OK if p.is_dir() else 0)):
            return p
    return None


def check_readable(gitdir: Path) -> None:
    bad = _unreadable(gitdir)
    if bad is not None:
        raise RepositoryAccessError(
            f"permission denied: cannot read {bad} (owned by {owner_hint(bad)}); "
            "fix its permissions or open the repository as a user who can read it"
        )


def refuse_unopenable(path: Path, why: str, create: bool) -> None:
    """Explain why libgit2 would not open ``path``; returns only when creating one there is safe.

    Raises:
        RepositoryAccessError: a repository owned by another user, or one this user cannot read.
        RepositoryNotFoundError: nothing there and ``create`` is false, or something that is
            not a repository (never overwritten).
        StorageError: ``path`` is a file.
    """
    try:
        exists, is_dir = path.exists(), path.is_dir()
        entries = None
        if is_dir:
            with os.scandir(path) as listing:
                entries = next(listing, None)
    except PermissionError:
        raise RepositoryAccessError(
            f"permission denied: cannot read {path} (owned by {owner_hint(path)}); "
            "fix its permissions or choose another path"
        ) from None
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc}") from None
    if exists and not is_dir:
        raise StorageError(f"{path} is a file, not a directory; choose another repository path") from None
    bad = _unreadable(path) if exists else None
    if bad is not None:
        raise RepositoryAccessError(
            f"permission denied: cannot read {bad} (owned by {owner_hint(bad)}), so the repository "
            f"at {path} cannot be opened; fix its permissions or open it as a user who can read it"
        ) from None
    if "not owned by current user" in why:
        raise RepositoryAccessError(
            f"the repository at {path} belongs to {owner_hint(path)}, not to the current user, "
            "so git refuses to open it (its safe.directory rule); if you trust it, run "
            f"`git config --global --add safe.directory {path.resolve()}`, or run as its owner"
        ) from None
    if exists and entries is not None:
        raise RepositoryNotFoundError(
            f"{path} holds files but no git repository that can be opened ({why}); nothing was "
            "created over it: choose another path, or move it away"
        ) from None
    if not create:
        raise RepositoryNotFoundError(
            f"no git repository at {path}; create one with ReasoningRepo.init({str(path)!r})"
        ) from None
