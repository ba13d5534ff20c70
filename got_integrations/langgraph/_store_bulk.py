"""Big store commits as one pack: a batch of many puts (or a TTL sweep) writes one file.

Written loose, a batch of a thousand puts is a thousand blob files plus a tree file per
namespace it touches, and creating files is most of its cost (ARCHITECTURE §6). Here
the blobs and the new trees go into one pack (:func:`got_core.storage.packs.write_pack`),
the commit stays a loose object, and the ref moves through ``repo.update_ref`` as any
write does. Small batches stay loose: a pack per single put would leave thousands of
packs for readers to search until the next ``repo.maintenance()``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from got_core.repo import Publish, ReasoningRepo
from got_core.storage.packs import build_tree_objects, sha1_repository, write_pack
from got_integrations.langgraph._layout import blob_sha

__all__ = ["PACK_MIN", "BulkWriter"]

#: A commit changing at least this many item files is written as one pack.
PACK_MIN = 64


class BulkWriter:
    """Writes one commit of many file changes as a pack (blobs and trees) and a loose commit.

    Args:
        repo: the repository.
    """

    def __init__(self, repo: ReasoningRepo) -> None:
        self.repo = repo
        self.enabled = sha1_repository(repo.gitdir)

    def wanted(self, changes: Mapping[str, bytes | None]) -> bool:
        """Whether a commit of ``changes`` should be written as a pack."""
        return self.enabled and len(changes) >= PACK_MIN

    def builder(self, payload: Mapping[str, bytes | None], message: str) -> Callable[[str | None], Publish]:
        """An ``update_ref`` builder writing ``payload`` (file contents already validated by
        ``repo.file_payload``; None deletes) on the tip it is given.

        Returns ``Publish(commit, (commit, parent))``.
        """
        blobs = [("blob", data) for data in payload.values() if data is not None]
        ids = {path: (blob_sha(data) if data is not None else None) for path, data in payload.items()}

        def build(current: str | None) -> Publish:
            git = self.repo.git
            base = git.commit_tree(current) if current else None
            root, trees = build_tree_objects(git.read_raw, base, ids)
            if root is None:  # every file deleted: libgit2 writes git's empty tree
                oid = self.repo.prepare_commit([current] if current else [], dict(payload), message)
                return Publish(oid, (oid, current))
            write_pack(self.repo.gitdir, blobs + trees)
            oid = self.repo.write_commit(root, [current] if current else [], message)
            return Publish(oid, (oid, current))

        return build
