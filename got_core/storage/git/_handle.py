"""The shared part of the pygit2 layer: plain types, object-type names and the handle's lookups."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pygit2
from pygit2 import GitError

from got_core.errors import CorruptRepositoryError

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
#: What reading a damaged or partial history can raise, for callers that index as far as they can.
READ_ERRORS: tuple[type[Exception], ...] = (CorruptRepositoryError, GitError)


class RefRace(Exception):
    """Internal: a compare-and-swap on a ref lost (moved, created, or locked by another writer)."""


class BlobId(str):
    """A change value meaning "this existing blob", so unchanged content is reused, not rewritten."""


@dataclass(frozen=True, slots=True)
class CommitData:
    """A commit as plain data."""

    oid: str
    tree: str
    parents: tuple[str, ...]
    message: str
    author_name: str
    author_email: str
    time: int


_TYPE_NAMES = {
    int(pygit2.GIT_OBJECT_COMMIT): "commit",
    int(pygit2.GIT_OBJECT_TREE): "tree",
    int(pygit2.GIT_OBJECT_BLOB): "blob",
    int(pygit2.GIT_OBJECT_TAG): "tag",
}


class _Handle:
    """The pygit2 handle every part of :class:`~got_core.storage.git.GitRepo` shares, and its lookups.

    Attributes are set by ``GitRepo.__init__``; each mixin reads them through this base.
    """

    _r: pygit2.Repository
    gitdir: Path
    workdir: Path | None
    # tree of each commit this handle wrote lately: the next write on top of it needs
    # that tree, and libgit2 caches objects it read, not ones it wrote
    _trees: dict[str, str]
    _entries: dict[str, frozenset[bytes]]  # raw entries of trees compared lately

    # A miss is asked twice: libgit2 re-lists objects/pack on a miss, and a pack it listed
    # can be merged away (storage/git/_packing.py) before it opens it; the merged pack was
    # written first, so the second ask (which re-lists again) finds the object there.
    def _lookup(self, oid: str) -> pygit2.Object | None:
        obj = self._r.get(oid)
        return obj if obj is not None else self._r.get(oid)

    def _odb_read(self, oid: str) -> tuple[int, bytes]:
        try:
            return self._r.odb.read(oid)
        except KeyError:
            return self._r.odb.read(oid)

    def _odb_header(self, oid: str) -> tuple[int, int]:
        try:
            return self._r.odb.read_header(oid)
        except KeyError:
            return self._r.odb.read_header(oid)

    def _get(self, oid: str) -> pygit2.Object:
        try:
            obj = self._lookup(oid)
        except (GitError, ValueError) as exc:
            raise CorruptRepositoryError(f"object {oid} cannot be read: {exc}; run `got fsck`") from None
        if obj is None:
            raise CorruptRepositoryError(f"object {oid} is missing from {self.gitdir}; run `got fsck`")
        return obj

    def _empty_tree(self) -> str:
        return str(self._r.TreeBuilder().write())

    def _tree(self, oid: str, what: str = "tree") -> pygit2.Tree:
        obj = self._get(oid)
        if not isinstance(obj, pygit2.Tree):
            raise CorruptRepositoryError(f"{what} {oid} is a {obj.type_str}, expected a tree; run `got fsck`")
        return obj

    def _commit(self, oid: str) -> pygit2.Commit:
        obj = self._get(oid)
        if not isinstance(obj, pygit2.Commit):
            raise CorruptRepositoryError(f"object {oid} is a {obj.type_str}, expected a commit")
        return obj

    def _commit_tree(self, oid: str) -> pygit2.Tree:
        return self._tree(str(self._commit(oid).tree_id), f"tree of commit {oid}")
