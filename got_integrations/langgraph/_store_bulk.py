"""Store commits as one pack, their trees built from the writer's own copies.

Written loose, a batch of a thousand puts is a thousand blob files plus a tree file per
namespace it touches, and creating files is most of its cost (ARCHITECTURE §6). Here
the blobs and the new trees go into one pack (:func:`got_core.storage.packs.write_pack`,
which joins the ref move's own pack), and the ref moves through ``repo.update_ref`` as
any write does. Every commit of the store is built this way, a single put too: the trees
come from the raw trees this writer wrote lately and the namespace directories it parsed
(:class:`BulkWriter`), so a put neither reads its base trees back from the object database
nor parses its namespace's directory again. Only a repository whose objects are not SHA-1
(where object ids cannot be computed here) goes through libgit2 (:meth:`BulkWriter.loose_builder`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping

from got_core.errors import PayloadTooLargeError
from got_core.repo import Publish, ReasoningRepo
from got_core.storage.packs import TreeCache, build_tree_objects, sha1_repository, write_pack
from got_integrations.langgraph._layout import blob_sha

__all__ = ["PACK_MIN", "PARSED_TREES", "TREE_CACHE_BYTES", "BulkWriter"]

#: A commit changing at least this many item files is a bulk batch (:meth:`BulkWriter.wanted`
#: without ``always``); the store's own commits ask with ``always`` (every size is built here).
PACK_MIN = 64
#: How many bytes of recently packed trees a writer keeps to build the next commit on.
TREE_CACHE_BYTES = 32 << 20
#: How many parsed directory trees (of 16 entries or more) a writer keeps for the next commit:
#: a batch rewrites one per namespace it touches (1,000 at 100k items in the benchmark).
PARSED_TREES = 4096


class BulkWriter:
    """Writes one commit of many file changes as a pack (blobs and trees) and a loose commit.

    Args:
        repo: the repository.
    """

    def __init__(self, repo: ReasoningRepo) -> None:
        self.repo = repo
        self._enabled: bool | None = None  # SHA-1 repository? read at the first big commit
        # trees this writer packed lately, by id: the next batch starts from them, and reading
        # them back would search every pack (a tree never changes, so a copy is always right)
        self._trees: OrderedDict[str, bytes] = OrderedDict()
        self._tree_bytes = 0
        # the entries of the namespace directories this writer built lately: a batch over a
        # thousand namespaces parses none of their trees again (the bucket trees above them
        # are spliced from their raw bytes, kept in _trees)
        self._parsed = TreeCache(PARSED_TREES, min_entries=16)

    def _read_raw(self, oid: str) -> tuple[str, bytes]:
        data = self._trees.get(oid)
        return ("tree", data) if data is not None else self.repo.git.read_raw(oid)

    def _remember(self, ids: list[str], objects: list[tuple[str, bytes]]) -> None:
        for oid, (kind, data) in zip(ids, objects):
            if kind == "tree" and oid not in self._trees:
                self._trees[oid] = data
                self._tree_bytes += len(data)
        # oldest first; popitem, not next(iter(...)): a plain dict's first live entry sits behind
        # every slot removed before it, so evicting a thousand trees a batch walked them over and over
        while self._tree_bytes > TREE_CACHE_BYTES and self._trees:
            self._tree_bytes -= len(self._trees.popitem(last=False)[1])

    def wanted(self, changes: Mapping[str, bytes | None], *, always: bool = False) -> bool:
        """Whether a commit of ``changes`` should be written by :meth:`builder` (``always``:
        whatever its size, as the store's commits are; never in a repository that is not SHA-1)."""
        if len(changes) < PACK_MIN and not always:
            return False
        if self._enabled is None:
            self._enabled = sha1_repository(self.repo.gitdir)
        return self._enabled

    def loose_builder(self, changes: Mapping[str, bytes | None], message: str) -> Callable[[str | None], Publish]:
        """An ``update_ref`` builder writing ``changes`` as loose objects (``repo.prepare_commit``).

        Raises:
            InvalidNameError / PayloadTooLargeError: see ``repo.file_payload``.
        """
        payload = self.repo.file_payload(changes)

        def build(current: str | None) -> Publish:
            oid = self.repo.prepare_commit([current] if current else [], payload, message)
            return Publish(oid, (oid, current))

        return build

    def builder(
        self, payload: Mapping[str, bytes | None], message: str, *, ids: Mapping[str, str | None] | None = None
    ) -> Callable[[str | None], Publish]:
        """An ``update_ref`` builder writing ``payload`` (path -> file content, None deletes)
        on the tip it is given; ``ids`` (path -> blob id, as :func:`blob_sha` gives) when the
        caller has them.

        Returns ``Publish(commit, (commit, parent))``.

        Raises:
            PayloadTooLargeError: a file over the repository's ``max_file_bytes``.
            InvalidNameError: (when building) an unsafe path.
        """
        limit = self.repo.max_file_bytes
        for path, data in payload.items():  # the paths are checked as the trees are built
            if data is not None and len(data) > limit:
                raise PayloadTooLargeError(f"file {path}", len(data), limit)
        blobs = [("blob", data) for data in payload.values() if data is not None]
        if ids is None or ids.keys() != payload.keys():
            ids = {path: (blob_sha(data) if data is not None else None) for path, data in payload.items()}

        def build(current: str | None) -> Publish:
            git = self.repo.git
            base = git.commit_tree(current) if current else None
            root, trees = build_tree_objects(self._read_raw, base, ids, self._parsed)
            if root is None:  # every file deleted: libgit2 writes git's empty tree
                oid = self.repo.prepare_commit([current] if current else [], dict(payload), message)
                return Publish(oid, (oid, current))
            objects = blobs + trees
            self._remember(write_pack(self.repo.gitdir, objects), objects)
            oid = self.repo.write_commit(root, [current] if current else [], message)
            return Publish(oid, (oid, current))

        return build
