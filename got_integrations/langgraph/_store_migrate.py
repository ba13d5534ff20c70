"""Moving a store written before the namespace fan-out into it: one commit, once.

Stores written before the fan-out keep each namespace's directory at the root of the
store's tree (``memories/user5/k.json``), so a put rewrote the tree listing every
namespace under ``memories/``. The fan-out layout
(:func:`~got_integrations.langgraph._store_doc.namespace_dir`) puts three levels of hash
buckets above it (``ns.3/a/f/memories/user5/k.json``). Readers accept both layouts; the
first write of a :class:`~got_integrations.langgraph.store.GitStore` object looks at the
root of the store's tree once (one tree read) and, when it holds a legacy directory, moves
every legacy item file to its new path in ONE commit before its own: the blobs stay as
they are (only trees are written, as one pack), so the history's item contents and their
ids are unchanged. The commit goes through ``repo.update_ref``: a writer killed before the
ref moves leaves the store as it was, and a lost race plans the move again on the new tip.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Mapping

from got_core.errors import GotError
from got_core.repo import Keep, Publish, ReasoningRepo
from got_core.storage.git import BlobId
from got_core.storage.packs import build_tree_objects, sha1_repository, write_pack
from got_integrations.langgraph._store_doc import is_bucket, item_path, ns_from_blob
from got_integrations.langgraph._store_index import ItemIndex, Row

__all__ = ["LayoutMigrationMixin"]

logger = logging.getLogger("got_integrations.langgraph.store")


class LayoutMigrationMixin:
    """``GitStore.migrate_layout`` (the host provides the repository, the ref, the index)."""

    repo: ReasoningRepo
    ref: str
    index: ItemIndex
    _write_lock: threading.Lock
    _layout_checked: bool = False

    def _row_of(self, path: str, blob: str) -> Row:  # pragma: no cover - the host defines it
        raise NotImplementedError

    def migrate_layout(self) -> int:
        """Move the item files of the layout before the namespace fan-out to their fan-out
        paths, in one commit; returns how many moved (0: nothing to do, no commit).

        A store's first write does this itself; call it to migrate without writing.

        Raises:
            CorruptRepositoryError: a legacy item file that is not what the store writes.
        """
        with self._write_lock:
            return self._migrate_layout()

    def _legacy_roots(self, tip: str | None) -> list[str]:
        """The root entries of ``tip``'s tree that are legacy namespace directories."""
        if tip is None:
            return []
        return [name for name, is_dir in self.repo.list_dir(tip, "") if is_dir and not is_bucket(name)]

    def _migrate_layout(self) -> int:
        tip = self.index.fresh()
        if not self._legacy_roots(tip):
            self._layout_checked = True
            return 0
        # the index already knows every item at its tip: path -> row (blob ids confirm it)
        known = {row.path: row for row in self.index.all_rows()}
        moved: list[tuple[Row, Row]] = []

        dropped: list[Row] = []

        def plan(current: str | None) -> dict[str, str | None]:
            moved.clear()
            dropped.clear()
            ids: dict[str, str | None] = {}
            if current is None:
                return ids
            legacy: dict[str, str] = {}
            present: set[str] = set()  # item files already at a fan-out path (a mixed tree: rare)
            for name, is_dir in self.repo.list_dir(current, ""):
                if is_dir and is_bucket(name):
                    present.update(self.repo.list_files(current, name))
                elif is_dir:
                    legacy.update(self.repo.list_files(current, name))
            for path, blob in legacy.items():
                if not path.endswith(".json"):
                    continue  # not an item file (someone's README): left where it is
                row = known.get(path)
                if row is None or row.blob != blob:
                    row = self._row_of(path, blob)  # reads and validates the file
                new = item_path(ns_from_blob(row.ns), row.key.decode("utf-8", "surrogatepass"))
                ids[path] = None
                if new in present:  # also written at its fan-out path: that file wins
                    dropped.append(row)
                    continue
                present.add(new)
                ids[new] = blob
                moved.append((row, row._replace(path=new)))
            return ids

        build = self._moves_builder(plan, "store: move items into the namespace fan-out layout\n")
        result = self.repo.update_ref(self.ref, build, tip_hint=tip)
        self._layout_checked = True
        if result is None:
            return 0
        commit, parent = result
        self.index.forget_stamp()
        try:
            self.index.apply_own(parent, commit, [new for _, new in moved], [old for old, _ in moved] + dropped)
        except (GotError, sqlite3.Error) as exc:  # the move is in git; the next read catches up
            logger.warning(
                "GitStore index did not record the layout move %s (%s); the next read catches up", commit, exc
            )
        logger.info("GitStore moved %d item(s) of %s into the namespace fan-out layout", len(moved), self.ref)
        return len(moved)

    def _moves_builder(
        self, plan: Callable[[str | None], Mapping[str, str | None]], message: str
    ) -> Callable[[str | None], Publish | Keep]:
        """An ``update_ref`` builder of a commit moving existing blobs (``plan(tip)``: path ->
        blob id, None deletes); its trees are one pack (loose in a repository that is not SHA-1)."""
        packs = sha1_repository(self.repo.gitdir)

        def build(current: str | None) -> Publish | Keep:
            ids = plan(current)
            if not ids or current is None:
                return Keep(None)
            git = self.repo.git
            if packs:
                root, trees = build_tree_objects(git.read_raw, git.commit_tree(current), dict(ids))
                if root is not None:
                    write_pack(self.repo.gitdir, trees)
                    oid = self.repo.write_commit(root, [current], message)
                    return Publish(oid, (oid, current))
            payload = {p: (None if b is None else BlobId(b)) for p, b in ids.items()}
            oid = self.repo.prepare_commit([current], payload, message)
            return Publish(oid, (oid, current))

        return build
