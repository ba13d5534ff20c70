"""Staged object writes: the objects of one ref move, written as ONE pack (a mixin of ``GitRepo``).

A loose object is a file of its own (0.1-3 ms on a busy disk), and libgit2 checks every
new object against the object database first, which misses and rescans ``objects/pack``
(ARCHITECTURE §6). While the builder of a ref move runs (:func:`got_core.storage.refs.update_ref`
opens :meth:`_Staging.staged_writes` around it), the blobs, trees and commits this handle
writes are kept in memory instead: their ids computed in Python from the bytes libgit2
would write, reads of them answered from memory. :meth:`_Staging.flush_staged` writes them
as one pack (:func:`~got_core.storage.packs.install_pack`); the ref transaction calls it
after every ref is locked and checked, before any ref moves, so no ref ever points at
an object that is only in memory, a lost race writes nothing (the objects stay staged and
are reused by the next attempt), and a killed writer leaves at most a pack of
unreachable objects.

Anything that hands an object to libgit2 itself (a walk, a merge, a lookup as a pygit2
object, a fetch or push) flushes first. Only SHA-1 repositories stage; others, and every
write outside a ref move, stay loose. ``GOT_PACK_WRITES=0`` switches staging off.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pygit2

from got_core.errors import CorruptRepositoryError
from got_core.storage.git._handle import _TYPE_NAMES, _Handle
from got_core.storage.git._settings import fsync_enabled
from got_core.storage.packs import JOINED, assemble_pack, install_pack, object_id, pack_entry

#: Objects of the last flushes kept in memory (the next write's base, the next read).
_RECENT_MAX = 512
_RECENT_MAX_BYTES = 4 << 20
#: Staging stops (the objects are flushed) once this many bytes are in memory.
_STAGED_MAX_BYTES = 64 << 20
#: The entries of the packs this handle wrote lately, kept for the next merge of small packs
#: (``_packing``), which then reads none of them back: at most this many bytes.
_OWN_PACKS_MAX_BYTES = 4 << 20
#: Packs this handle writes between two fresh object databases (:meth:`_Staging.forget_packs`).
ODB_RENEW_PACKS = 32
#: Large trees read raw lately that are kept (the next read of the same write).
_READ_TREES = 8
#: Notes directories this handle's notes writes built lately, kept for the next write into
#: them: at most this many bytes (4 MiB holds every ``ab/`` of a notes tree to ~150k notes).
NOTES_TREES_MAX_BYTES = 4 << 20

_ACTIVE = threading.local()  # the handles staging in this thread (for :func:`flush_staged_writes`)


class ReadTrees:
    """Raw trees kept by id (ids name content: an entry can never go stale), for ``_raw_read``.

    ``recent``: the last :data:`_READ_TREES` trees read from the object database (a tree read
    raw is read again in the same write: a note's lookups, then the build of its notes tree).
    ``notes``: the directories of the notes root (``ab/``) the handle's notes writes built
    (each of at least 1 KiB and a notes directory taken whole, ``notes_fanout.keep_written_dirs``),
    :data:`NOTES_TREES_MAX_BYTES` at most, the oldest dropped first: at 10k notes a write's
    ``ab/`` was written ~256 writes earlier, long gone from the objects of the last flushes, and
    libgit2 would inflate it from its pack and hash it again. A write that reads one replaces
    it, so a hit moves it to ``recent`` (where the build that follows finds it) instead of
    keeping it here. ``written``: the directories of the root the last notes write changed,
    looked for in the next write's base (:meth:`got_core.storage.git.GitRepo.notes_fanout_changes`).
    """

    __slots__ = ("notes", "notes_bytes", "recent", "written")

    def __init__(self) -> None:
        self.recent: dict[str, tuple[str, bytes]] = {}
        self.notes: OrderedDict[str, bytes] = OrderedDict()
        self.notes_bytes = 0
        self.written: set[str] = set()

    def get(self, oid: str) -> tuple[str, bytes] | None:
        """(kind, content) of a kept tree, else None."""
        found = self.recent.get(oid)
        if found is not None:
            return found
        data = self.notes.pop(oid, None)
        if data is None:
            return None
        self.notes_bytes -= len(data)
        answer = "tree", data
        self.keep_read(oid, answer)
        return answer

    def keep_read(self, oid: str, answer: tuple[str, bytes]) -> None:
        """Keep a tree just read (the last :data:`_READ_TREES`)."""
        if len(self.recent) >= _READ_TREES:
            self.recent.pop(next(iter(self.recent)))
        self.recent[oid] = answer

    def keep_notes(self, oid: str, data: bytes) -> None:
        """Keep a notes directory a write built (the caller checked it is one; its bytes are that id's)."""
        if oid in self.notes or len(data) > NOTES_TREES_MAX_BYTES // 8:
            return
        self.notes[oid] = data
        self.notes_bytes += len(data)
        while self.notes_bytes > NOTES_TREES_MAX_BYTES:
            self.notes_bytes -= len(self.notes.popitem(last=False)[1])


def _enabled() -> bool:
    return os.environ.get("GOT_PACK_WRITES", "1").strip().lower() not in ("0", "false", "no", "off")


def flush_staged_writes() -> None:
    """Write every object this thread's handles hold staged (before a ``git`` subprocess reads the repository)."""
    for handle in list(getattr(_ACTIVE, "handles", ())):
        handle.flush_staged()


class _Staging(_Handle):
    """The staging area of one handle (one thread's)."""

    _staged: dict[str, tuple[str, bytes]]  # id -> (kind, content), in write order
    _staged_bytes: int
    _staging: int  # depth of nested staged_writes scopes
    _recent: dict[str, tuple[str, bytes]]  # objects of the last flushes (on disk)
    _recent_bytes: int
    _built: dict[bytes, dict[bytes, tuple[bytes, bytes]]]  # entries of trees built (large ones) or looked into lately
    _sha1: bool
    _packs_written: int
    _odb_packs: int  # _packs_written when libgit2's object database was last opened afresh
    _own_packs: dict[str, dict[bytes, bytes]]  # pack name -> its entries (binary id -> record)
    _own_sizes: dict[str, int]  # pack name -> the bytes of its entries (as _own_packs)
    _own_crcs: dict[str, dict[bytes, int]]  # pack name -> the CRC-32s of its entries (as _own_packs)
    _own_bytes: int
    _read_trees: ReadTrees  # trees read raw lately, notes directories written lately (ids name content)

    @contextmanager
    def staged_writes(self) -> Iterator[None]:
        """Stage the objects written inside the scope (nested scopes share one area).

        Leaving the outermost scope normally writes what is still staged (a builder that
        answered ``Keep`` may hand its objects on); leaving it by an exception drops them
        (nothing refers to them).
        """
        if not (self._sha1 and _enabled()):
            yield
            return
        self._staging += 1
        joined = (JOINED.gitdir, JOINED.stage)
        if self._staging == 1:
            handles = getattr(_ACTIVE, "handles", None)
            if handles is None:
                handles = _ACTIVE.handles = []
            handles.append(self)
            JOINED.gitdir, JOINED.stage = Path(self.gitdir), self._stage  # write_pack joins this move
        ok = False
        try:
            yield
            ok = True
        finally:
            self._staging -= 1
            if self._staging == 0:
                _ACTIVE.handles.remove(self)
                JOINED.gitdir, JOINED.stage = joined
                if ok:
                    self.flush_staged()
                else:
                    self._staged.clear()
                    self._staged_bytes = 0

    def _stage(self, kind: str, data: bytes) -> str | None:
        """Stage one object; its id, or None when this write goes loose (not staging)."""
        if not self._staging:
            return None
        return self._stage_known(object_id(kind, data), kind, data)

    def _stage_known(self, oid: str, kind: str, data: bytes) -> str:
        """Stage one object whose id the caller computed from these very bytes (a tree
        :func:`~got_core.storage.packs.build_tree_objects` built and hashed): not hashed again."""
        if oid not in self._staged:
            self._staged[oid] = (kind, data)
            self._staged_bytes += len(data)
            if self._staged_bytes > _STAGED_MAX_BYTES:
                self.flush_staged()  # a huge batch: memory is bounded, the pack is just split
        return oid

    def _in_memory(self, oid: str) -> tuple[str, bytes] | None:
        """(kind, content) of a staged or recently flushed object, else None."""
        found = self._staged.get(oid)
        return found if found is not None else self._recent.get(oid)

    def _raw_read(self, oid: str) -> tuple[str, bytes]:
        """(kind, content) of any object: from memory, else from the object database.

        The one "memory first" read every raw reader uses (``read_raw``, tree entries,
        tree building, pack merging). A kind libgit2 reports that is none of the four
        object types is named ``"unknown"``, never taken for a tag.

        Raises:
            CorruptRepositoryError: missing or unreadable.
        """
        found = self._in_memory(oid)
        if found is None:
            found = self._read_trees.get(oid)
        if found is not None:
            return found
        try:
            kind, data = self._odb_read(oid)
        except (pygit2.GitError, ValueError, KeyError) as exc:
            raise CorruptRepositoryError(
                f"object {oid} cannot be read from {self.gitdir}: {exc}; run `got fsck`"
            ) from None
        answer = _TYPE_NAMES.get(int(kind), "unknown"), data
        if answer[0] == "tree" and len(data) <= _RECENT_MAX_BYTES // 8:
            self._read_trees.keep_read(oid, answer)
        return answer

    def _raw_header(self, oid: str) -> tuple[str, int] | None:
        """(kind, size) of an object, from memory or its header in the object database
        (the content is not loaded); None when the store lacks it or cannot read it."""
        found = self._in_memory(oid)
        if found is not None:
            return found[0], len(found[1])
        try:
            kind, size = self._odb_header(oid)
        except (pygit2.GitError, ValueError, KeyError):
            return None
        return _TYPE_NAMES.get(int(kind), "unknown"), int(size)

    def flush_staged(self) -> None:
        """Write the staged objects as one pack (fsync as :func:`fsync_enabled` says).

        Raises:
            StorageError: the pack cannot be written (the objects stay staged).
        """
        if not self._staged:
            return
        objects = list(self._staged.values())
        # the ids are known (staging hashed each object): only the entries are built here
        records = {bytes.fromhex(oid): pack_entry(kind, data) for oid, (kind, data) in self._staged.items()}
        crcs: dict[bytes, int] = {}  # filled by the assembly: kept for the next merge, not computed again
        pack, index = assemble_pack(records, crcs)
        name = install_pack(self.gitdir, pack, index, fsync=fsync_enabled())
        self._packs_written += 1
        self._own_pack(name, records, crcs)
        if self._packs_written - self._odb_packs >= ODB_RENEW_PACKS:
            self.forget_packs()
        # what a move wrote is what the next reads and the next move's builder ask for (its
        # base trees, a checkpoint read right after its put): answered from memory, libgit2
        # would first miss the new pack and re-list objects/pack
        size = sum(len(data) for _kind, data in objects)
        if len(self._recent) + len(objects) > _RECENT_MAX or self._recent_bytes + size > _RECENT_MAX_BYTES:
            self._recent.clear()
            self._recent_bytes = 0
        if size <= _RECENT_MAX_BYTES:
            self._recent.update(self._staged)
            self._recent_bytes += size
        self._staged.clear()
        self._staged_bytes = 0

    def forget_packs(self) -> None:
        """Give libgit2 a fresh object database, which knows only the packs on disk now.

        libgit2 never forgets a pack it loaded: one merged away since (small-pack merges,
        ``got gc``, another process's repack) stays in its list with its index mapped and
        its pack open, and every lookup that misses (each write's new commit, before its
        pack is known) searches all of them: ~0.8 ms a miss after 3,000 writes in one
        handle against ~25 us fresh, and the disk of the removed packs is not freed while
        the process lives. Called every :data:`ODB_RENEW_PACKS` packs this handle writes
        (~40 us each time) and after ``got gc``; objects already read stay valid.
        """
        objects = self.gitdir / "objects"
        try:  # a linked worktree's objects are in the common directory
            common = (self.gitdir / "commondir").read_text(encoding="utf-8").strip()
        except OSError:
            pass
        else:
            objects = (self.gitdir / common / "objects").resolve()
        try:
            odb = pygit2.Odb(os.fspath(objects))
        except (pygit2.GitError, OSError, ValueError):
            return  # keep the database libgit2 has: slower, still correct
        self._r.set_odb(odb)
        self._odb_packs = self._packs_written

    def _own_pack(self, name: str, records: dict[bytes, bytes] | None, crcs: dict[bytes, int] | None = None) -> None:
        """Remember the entries of pack ``name`` this handle wrote (None: forget it), and the
        CRC-32s of those entries its index lists (``crcs``), which a merge copies with them."""
        old = self._own_packs.pop(name, None)
        self._own_crcs.pop(name, None)
        if old is not None:
            self._own_bytes -= self._own_sizes.pop(name)
        if records is None:
            return
        size = sum(map(len, records.values()))
        if size > _OWN_PACKS_MAX_BYTES:
            return
        while self._own_packs and self._own_bytes + size > _OWN_PACKS_MAX_BYTES:
            oldest = next(iter(self._own_packs))
            del self._own_packs[oldest]
            self._own_crcs.pop(oldest, None)
            self._own_bytes -= self._own_sizes.pop(oldest)
        self._own_packs[name] = records
        if crcs is not None:
            self._own_crcs[name] = crcs
        self._own_sizes[name] = size
        self._own_bytes += size

    def _get(self, oid: str) -> pygit2.Object:
        if oid in self._staged:  # libgit2 reads it as an object: it must be on disk
            self.flush_staged()
        return super()._get(oid)

    def _flush_for_libgit2(self) -> None:
        """Before an operation libgit2 runs on objects by itself (walks, merges, transfers)."""
        if self._staged:
            self.flush_staged()
