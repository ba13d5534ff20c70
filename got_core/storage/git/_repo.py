"""``GitRepo``, composed from one mixin per part, and ``init_bare``."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pygit2
from pygit2 import GitError

from got_core.errors import StorageError
from got_core.storage._access import check_readable, refuse_unopenable
from got_core.storage.git._commits import _Commits
from got_core.storage.git._merge import _Merge
from got_core.storage.git._objects import _Objects
from got_core.storage.git._packing import MAX_PACKS, _Packing
from got_core.storage.git._raw import _Raw
from got_core.storage.git._refs import _Refs
from got_core.storage.git._remotes import _Remotes
from got_core.storage.git._staging import ReadTrees
from got_core.storage.packs import TreeCache, sha1_repository


class GitRepo(_Objects, _Commits, _Refs, _Merge, _Remotes, _Raw, _Packing):
    """A bare (or existing) git repository, driven through libgit2.

    Args:
        path: the repository (a bare ``*.git`` directory, or a work tree / its ``.git``).
        create: initialise a bare repository when none exists.
        initial_branch: HEAD's branch for a new repository.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True, initial_branch: str = "master") -> None:
        path = Path(path)
        try:
            self._r = pygit2.Repository(str(path), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
        except (GitError, KeyError) as exc:
            refuse_unopenable(path, str(exc), create)
            try:
                self._r = pygit2.init_repository(str(path), bare=True, initial_head=initial_branch)
            except (GitError, OSError) as exc2:
                raise StorageError(f"cannot create a repository at {path}: {exc2}") from None
        else:
            check_readable(Path(self._r.path))
        self.gitdir = Path(self._r.path)
        self.workdir = Path(self._r.workdir) if self._r.workdir else None
        # tree of each commit this handle wrote lately: the next write on top of it needs
        # that tree, and libgit2 caches objects it read, not ones it wrote
        self._trees: dict[str, str] = {}
        self._entries: dict[str, frozenset[bytes]] = {}  # raw entries of trees compared lately
        # objects of the ref move being built, written as one pack before it moves (_staging)
        self._staged: dict[str, tuple[str, bytes]] = {}
        self._staged_bytes = 0
        self._staging = 0
        self._recent: dict[str, tuple[str, bytes]] = {}
        self._recent_bytes = 0
        # trees built or looked into lately (64 large ones; small ones by id, raw and parsed)
        self._built = TreeCache(64, 32)
        self._sha1 = sha1_repository(self.gitdir)
        self._packs_written = self._packs_checked = self._odb_packs = 0
        self._pack_estimate = MAX_PACKS  # unknown: the first write lists the pack directory
        self._own_packs: dict[str, dict[bytes, bytes]] = {}
        self._own_sizes: dict[str, int] = {}
        self._own_crcs: dict[str, dict[bytes, int]] = {}
        self._own_bytes = 0
        self._read_trees = ReadTrees()
        self._moved_to: dict[str, str | None] = {}
        self._packed: tuple[tuple[int, ...], mmap.mmap] | None = None


def init_bare(path: Path) -> None:
    """Create an empty bare repository at ``path`` (an existing empty directory), in-process.

    Raises:
        StorageError: the directory cannot be written.
    """
    try:
        pygit2.init_repository(str(path), bare=True)
    except (GitError, OSError) as exc:
        raise StorageError(f"cannot create a repository at {path}: {exc}") from None
