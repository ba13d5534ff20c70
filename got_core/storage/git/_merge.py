"""Three-way merges of commit trees, in memory (a mixin of ``GitRepo``)."""

from __future__ import annotations

from collections.abc import Mapping

import pygit2
from pygit2 import GitError
from pygit2.enums import MergeFavor

from got_core.errors import CorruptRepositoryError, StorageError, UntrustedContentError
from got_core.storage.git._staging import _Staging


class _Merge(_Staging):
    """Three-way merges in memory."""

    def merge_trees(
        self, base: str | None, ours: str, theirs: str, *, write: bool = True
    ) -> tuple[str | None, list[tuple[str, str | None, str | None, str | None]], pygit2.Index]:
        """Three-way merge of commit trees in memory.

        Args:
            write: write the merged tree of a clean merge (False: only find the conflicts).

        Returns:
            (tree SHA, or None when conflicted or not ``write``; conflicts as (path, base, ours,
            theirs) blob SHAs; an opaque merge state for :meth:`resolve_merge`).

        Raises:
            UntrustedContentError: a tree holds a path libgit2 refuses (``..``, ``.git``, ...).
            CorruptRepositoryError: an object is missing or damaged.
        """
        try:
            base_tree = self._commit_tree(base) if base else self._tree(self._empty_tree())
            idx = self._r.merge_trees(
                base_tree, self._commit_tree(ours), self._commit_tree(theirs), favor=MergeFavor.NORMAL
            )
            conflicts = []
            if idx.conflicts is not None:
                for anc, our, their in idx.conflicts:
                    entry = our or their or anc
                    conflicts.append(
                        (
                            entry.path,
                            str(anc.id) if anc else None,
                            str(our.id) if our else None,
                            str(their.id) if their else None,
                        )
                    )
            if conflicts or not write:
                return None, sorted(conflicts), idx
            return str(idx.write_tree(self._r)), [], idx
        except (GitError, OSError, KeyError, ValueError) as exc:
            raise _merge_error(exc, ours, theirs) from None

    def resolve_merge(self, state: pygit2.Index, decisions: Mapping[str, bytes | None]) -> str:
        """Write the merged tree after deciding each conflicted path (bytes, or None to delete).

        Raises:
            CorruptRepositoryError: conflicts are left undecided, or the tree cannot be written.
            UntrustedContentError: a decided path is one libgit2 refuses.
        """
        idx = state  # the in-memory index merge_trees returned
        try:
            for path, content in decisions.items():
                if idx.conflicts is not None and path in idx.conflicts:
                    del idx.conflicts[path]
                if content is None:
                    try:
                        idx.remove(path)
                    except (GitError, OSError, KeyError):
                        pass
                else:
                    idx.add(pygit2.IndexEntry(path, self._r.create_blob(content), pygit2.enums.FileMode.BLOB))
            if idx.conflicts is not None and len(list(idx.conflicts)):
                raise CorruptRepositoryError("merge still has undecided conflicts")
            return str(idx.write_tree(self._r))
        except (GitError, OSError, KeyError, ValueError) as exc:
            raise _merge_error(exc, None, None) from None


def _merge_error(exc: BaseException, ours: str | None, theirs: str | None) -> Exception:
    """A typed error for a libgit2 merge failure (it raises raw GitError for hostile paths)."""
    text = str(exc)
    between = f" merging {theirs} into {ours}" if ours and theirs else ""
    if "invalid path" in text.lower():
        return UntrustedContentError(
            f"refusing to merge{between}: {text}; the branch holds a path git refuses "
            "(see `got fsck`), so it cannot be merged",
            path=text.partition("'")[2].rstrip("'") or None,
        )
    if isinstance(exc, OSError):
        return StorageError(f"cannot write the merge{between}: {exc}")
    return CorruptRepositoryError(f"merge{between} failed: {text}; run `got fsck`")
