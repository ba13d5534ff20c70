"""libgit2's process-wide settings, set here once: the tree cache limit, fsync, strict object creation."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pygit2

_strict_lock = threading.Lock()
_strict_depth = 0


@contextmanager
def _trusted_writes() -> Iterator[None]:
    """Skip libgit2's per-object existence checks while we write trees and commits.

    Every entry we insert is an object we just wrote or one already in the base tree,
    so the checks (an odb lookup per inserted entry, per parent, per tree) only cost
    time (~10% of a write). The option is process-wide in libgit2, so it is switched off
    for the duration of our own writes only, and back on when the last one finishes.
    """
    global _strict_depth
    with _strict_lock:
        _strict_depth += 1
        if _strict_depth == 1:
            pygit2.settings.enable_strict_object_creation(False)
    try:
        yield
    finally:
        with _strict_lock:
            _strict_depth -= 1
            if _strict_depth == 0:
                pygit2.settings.enable_strict_object_creation(True)


# libgit2 caches only objects under 4 KiB it has read; a notes root tree (256 fan-out
# entries, ~7 KiB) is read by every note write, so let trees up to 256 KiB be cached too.
pygit2.settings.cache_object_limit(pygit2.enums.ObjectType.TREE, 256 * 1024)


_FSYNC = [False]  # libgit2 has no getter for its process-wide switch: remember what we set


def enable_fsync() -> None:
    """fsync objects and refs from now on (libgit2 keeps this setting per process)."""
    pygit2.settings.enable_fsync_gitdir(True)
    _FSYNC[0] = True


def fsync_enabled() -> bool:
    """Whether :func:`enable_fsync` was called in this process (packs written here follow it)."""
    return _FSYNC[0]
