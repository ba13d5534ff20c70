"""A bounded number of packs: small packs consolidated as they accumulate (a mixin of ``GitRepo``).

Every ref move writes its objects as one pack (``_staging``), and libgit2 pays per pack
on every miss (it re-lists ``objects/pack`` and compares each name with the packs it
knows: a read of a brand-new object costs ~60 us with one pack, ~0.5 ms with 300,
~2.4 ms with 1000). So once more than :data:`MAX_PACKS` packs hold the objects, the
small ones are merged into one, as ``git repack --geometric=2`` chooses them: the
packs that do not already form a progression in which each holds at least twice the
objects of the one before. One process at a time does it (a try-lock, a plain ``flock``
where there is ``fcntl``: a writer that finds it taken goes on). Entries are copied as
they are, with their CRC-32s: this handle's own from memory, another writer's checked
once against their ``.idx`` (:func:`~got_core.storage.packs.pack_records`); only deltas
(packs git wrote), tags and entries that fail the check are read through libgit2, which
resolves and checks them, and packed again. A damaged object stops the merge with
:class:`~got_core.errors.CorruptRepositoryError`, nothing written or removed. The merged
pack is in place before the merged-away ones go, each ``.idx`` before its ``.pack``, so
a reader in another process always finds every object (libgit2 and git take a pack
that can no longer be opened as "not here" and re-list the directory).
Large packs are settled behind a multi-pack-index instead (:meth:`_Packing._settle`), so a
new process's first read of an old object opens one pack index, not every one. Settled packs
do not count against :data:`MAX_PACKS`: libgit2 finds their objects with one lookup in the
multi-pack-index and searches only the packs it does not cover, so counting them would make
a long history merge its small packs ever more often (every few writes once the settled
packs alone neared the limit) for no read it saves.
``got gc`` (``git repack -a -d``) still folds everything into one pack.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pygit2 import GitError

from got_core.errors import CorruptRepositoryError, StorageError
from got_core.storage.git._settings import fsync_enabled
from got_core.storage.git._staging import _Staging
from got_core.storage.midx import MIDX_NAME, midx_packs, write_midx
from got_core.storage.packs import TYPE_CODES, assemble_pack, install_pack, pack_records, records_of

try:
    import fcntl
except ImportError:  # Windows: filelock's lock (LockFileEx) instead
    fcntl = None  # type: ignore[assignment]

#: Packs tolerated before the small ones are merged.
MAX_PACKS = 16
#: A pack larger than this is never merged here (``got gc`` repacks it with deltas).
MERGE_LIMIT_BYTES = 32 << 20
#: The smallest pack (in objects) that is settled: covered by the multi-pack-index, never merged here.
SETTLE_MIN_OBJECTS = 1024
_IDX_FIXED = 8 + 1024 + 40  # header, fan-out table and the two checksums of a v2 index
#: the lock file's open: never through a symbolic link (the repository may be hostile: a link would
#: make us create a file elsewhere), never blocking on a FIFO put there, closed in a child's exec
_LOCK_FLAGS = (
    os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
)


def _weight(idx: str) -> int:
    """Objects in a pack, from its index's size (28 bytes per object without 64-bit offsets)."""
    return max(1, (os.stat(idx).st_size - _IDX_FIXED) // 28)


def geometric_split(weights: list[int], factor: int = 2) -> int:
    """How many of the packs (sorted by ``weights``, ascending) to merge: git's ``--geometric`` rule."""
    n = len(weights)
    i = n - 1
    while i > 0 and weights[i] >= factor * weights[i - 1]:
        i -= 1
    split = i + 1 if i else 0
    total = sum(weights[:split])
    while split < n and weights[split] < factor * total:
        total += weights[split]
        split += 1
    return split


class _Packing(_Staging):
    """Consolidating small packs."""

    _packs_checked: int
    #: unsettled packs in the directory by what this handle knows (its last listing and its own since)
    _pack_estimate: int
    #: (stamp, names) of the multi-pack-index read last
    _covered: tuple[tuple[int, int, int], frozenset[str]] | None = None
    #: the try-lock of merging packs (``<gitdir>/got/packs.lock``) where there is no ``fcntl``
    #: (filelock's lock object, made at the first merge)
    _packs_lock: Any = None

    def maybe_consolidate(self) -> int:
        """After this handle wrote packs: merge small packs when there are too many.

        Returns the number of packs merged away (0: nothing to do, or another process is at it).
        """
        if self._packs_written == self._packs_checked:
            return 0
        # the directory is listed only when the packs this handle knows of (the count it last
        # listed, plus its own since) may pass the limit: a listing per write costs 10-20 us, and
        # on a file system whose directories keep the names of removed files (tmpfs) it grows
        # with every pack ever written. Other writers' packs are found at the next listing.
        self._pack_estimate += self._packs_written - self._packs_checked
        self._packs_checked = self._packs_written
        if self._pack_estimate <= MAX_PACKS:
            return 0
        root = os.fspath(self.gitdir / "objects" / "pack")
        try:
            names = {e.name for e in os.scandir(root)}
        except OSError:
            return 0
        covered = self._settled_names(root, names)
        count = sum(1 for n in names if n.endswith(".idx") and n[5:-4] not in covered)
        try:
            merged = self.consolidate_packs() if count > MAX_PACKS else 0
        except CorruptRepositoryError:
            merged = 0  # this write is done and whole; the damaged pack is left to `got fsck` / `got gc`
        self._pack_estimate = count - merged
        return merged

    def _settled_names(self, root: str, names: set[str]) -> frozenset[str]:
        """The packs the multi-pack-index covers (read again only when its file changed)."""
        if MIDX_NAME not in names:
            return frozenset()
        try:
            st = os.stat(f"{root}/{MIDX_NAME}")
        except OSError:
            return frozenset()
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        if self._covered is not None and self._covered[0] == stamp:
            return self._covered[1]
        covered = frozenset(midx_packs(self.gitdir))
        self._covered = (stamp, covered)
        return covered

    def consolidate_packs(self, max_packs: int = MAX_PACKS) -> int:
        """Merge the small packs into one (see the module doc); returns how many were merged away
        (0: nothing to do, or another process is at it).

        Raises:
            StorageError: the merged pack cannot be written (nothing was removed).
            CorruptRepositoryError: an object of a pack to merge is damaged (nothing was
                written or removed; ``got fsck`` names it).
        """
        held = self._lock_packs()
        if held is None:
            return 0  # another process consolidates, or the lock cannot be made
        try:
            return self._consolidate(self.gitdir / "objects" / "pack", max_packs)
        finally:
            self._unlock_packs(held)

    def _lock_packs(self) -> Any:
        """Take the try-lock of merging packs, ``<gitdir>/got/packs.lock``; what
        :meth:`_unlock_packs` releases, or None when another process holds it (or it cannot be made).

        Where there is ``fcntl`` (POSIX) it is a plain ``flock`` on a descriptor of the lock file,
        the lock filelock takes there, so processes of older versions exclude this one and back,
        without filelock's machinery: four system calls (an open, a ``flock`` and, at the release,
        an unlock and a close) where filelock 4.3 makes 46 for a reused lock object (a ``getpid``
        per debug log call, a stat of each parent directory, a ``mkdir`` and ``fstat`` checks).
        Elsewhere filelock's lock.
        """
        folder = f"{os.fspath(self.gitdir)}/got"
        if fcntl is None:
            return self._lock_packs_filelock(folder)
        path = f"{folder}/packs.lock"
        try:
            try:
                fd = os.open(path, _LOCK_FLAGS, 0o644)
            except FileNotFoundError:  # no got/ yet
                os.makedirs(folder, exist_ok=True)
                fd = os.open(path, _LOCK_FLAGS, 0o644)
        except OSError:
            return None  # a read-only or vanished directory: no merge this time
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by another process (EWOULDBLOCK), or no locks here
            os.close(fd)
            return None
        return fd

    def _lock_packs_filelock(self, folder: str) -> Any:
        import filelock  # only where there is no fcntl

        try:
            lock = self._packs_lock
            if lock is None:  # made once per handle: filelock resolves its path and registers it
                os.makedirs(folder, exist_ok=True)
                lock = self._packs_lock = filelock.FileLock(f"{folder}/packs.lock")
            lock.acquire(timeout=0)
        except filelock.Timeout:
            return None
        except OSError:
            self._packs_lock = None  # the directory went away or is read-only: made again next time
            return None
        return lock

    @staticmethod
    def _unlock_packs(held: Any) -> None:
        if isinstance(held, int):
            try:  # unlocked before the close: a child forked meanwhile shares the descriptor's lock
                fcntl.flock(held, fcntl.LOCK_UN)
            finally:
                os.close(held)
        else:
            held.release()

    def _consolidate(self, folder: Path, max_packs: int) -> int:
        root = os.fspath(folder)
        try:
            names = {e.name for e in os.scandir(root)}
        except OSError:
            return 0
        packs: list[tuple[int, str]] = []  # (objects, pack name)
        settled = self._settle(root, names)
        try:
            for entry in names:
                if not entry.endswith(".idx") or not entry.startswith("pack-"):
                    continue
                name = entry[5:-4]
                if f"pack-{name}.keep" in names or f"pack-{name}.promisor" in names or name in settled:
                    continue  # git's markers, or covered by the multi-pack-index: leave these packs alone
                own = self._own_packs.get(name)
                if own is not None:  # written by this handle: its size is known
                    weight, size = len(own), self._own_sizes[name]
                else:
                    weight, size = _weight(f"{root}/{entry}"), os.stat(f"{root}/pack-{name}.pack").st_size
                if size > MERGE_LIMIT_BYTES:
                    continue
                packs.append((weight, name))
        except OSError:
            return 0  # a pack went away while we looked (another repack): try next time
        if len(packs) <= max_packs // 2:
            return 0
        packs.sort()
        # the small packs are merged, the large ones stay: each object is re-packed about
        # log2(packs written) times in all, and the count stays near MAX_PACKS (about 16 at
        # 100k writes of 9 objects each)
        split = geometric_split([w for w, _ in packs])
        if split < 2:
            return 0
        chosen = [name for _, name in packs[:split]]
        records: dict[bytes, bytes] = {}
        crcs: dict[bytes, int] = {}  # the CRCs known of the entries in records: not computed again
        try:
            for name in chosen:
                # packs this handle wrote lately are read from memory, their CRCs with them; the
                # others' entries are copied as they are, checked against their index's CRCs
                copied = self._own_packs.get(name)
                if copied is not None:
                    known = self._own_crcs.get(name) or {}
                    whole: list[bytes] = []
                else:
                    copy = pack_records(Path(root, f"pack-{name}.idx"))
                    copied, known, whole = copy.records, copy.crcs, copy.whole
                if len(known) == len(copied):  # a CRC for each entry (known's ids are copied's): in bulk
                    # an id already there (an object two packs hold) takes this pack's entry and
                    # CRC together, so each entry kept keeps its own CRC
                    records.update(copied)
                    crcs.update(known)
                else:
                    for digest, record in copied.items():
                        if digest not in records:
                            records[digest] = record
                            crc = known.get(digest)
                            if crc is not None:
                                crcs[digest] = crc
                if whole:  # deltas (packs git wrote) or damaged entries: read, checked and packed again
                    objects = [self._raw_read(digest.hex()) for digest in whole if digest not in records]
                    if any(kind not in TYPE_CODES for kind, _ in objects):
                        return 0  # annotated tags are not packed here: `got gc` folds such packs
                    for digest, record in records_of(objects).items():
                        records.setdefault(digest, record)
        except (OSError, GitError):
            return 0  # a pack vanished while we read it (another repack): try next time
        pack, index = assemble_pack(records, crcs)
        merged_name = install_pack(self.gitdir, pack, index, fsync=fsync_enabled())
        merged = 0
        for name in chosen:
            if name == merged_name:
                continue  # the merged pack is one of them (the others held nothing else)
            self._own_pack(name, None)
            for suffix in (".idx", ".rev", ".bitmap", ".pack"):  # the index first: readers find packs by it
                if suffix not in (".idx", ".pack") and f"pack-{name}{suffix}" not in names:
                    continue
                try:
                    os.unlink(f"{root}/pack-{name}{suffix}")
                except FileNotFoundError:
                    continue
                except OSError:
                    break
            merged += 1
        self._own_pack(merged_name, records, crcs)  # it may be merged again, with the next small ones
        return merged

    def _settle(self, root: str, names: set[str]) -> set[str]:
        """Cover the large packs with the multi-pack-index; returns the packs it covers.

        A cold read then finds an object of the settled packs with one lookup instead of
        opening each ``.idx`` (libgit2 searches the packs newest first, and the oldest
        objects are in the largest pack). A pack is settled once it holds at least
        :data:`SETTLE_MIN_OBJECTS` objects and half as many as the settled packs together,
        so the index is rewritten each time the settled objects grow by half (each object
        is indexed a few times in all) and there are about log(objects) settled packs; a
        pack over :data:`MERGE_LIMIT_BYTES`, which is never merged here, is settled too.
        Settled packs are never merged or removed here (a reader holding an older
        multi-pack-index finds every pack it names); ``got gc`` folds them.
        """
        gitdir = self.gitdir
        listed = self._settled_names(root, names)
        settled = {n for n in listed if f"pack-{n}.idx" in names and f"pack-{n}.pack" in names}
        try:
            total = sum(_weight(f"{root}/pack-{n}.idx") for n in settled)
            fresh = []
            for entry in names:
                name = entry[5:-4]
                if not (entry.startswith("pack-") and entry.endswith(".idx")) or name in settled:
                    continue
                if f"pack-{name}.keep" in names or f"pack-{name}.promisor" in names:
                    continue
                own = self._own_packs.get(name)
                weight = len(own) if own is not None else _weight(f"{root}/{entry}")
                if weight >= max(SETTLE_MIN_OBJECTS, total // 2):
                    fresh.append(name)
                elif (
                    self._own_sizes[name] if own is not None else os.stat(f"{root}/pack-{name}.pack").st_size
                ) > MERGE_LIMIT_BYTES:
                    # never merged here (too large): settled, or such packs would pile up outside the
                    # index, and each write past the limit would try to merge again
                    fresh.append(name)
            # an index that names a gone pack, or cannot be read (damaged), is rewritten
            if not fresh and len(settled) == len(listed) and (listed or MIDX_NAME not in names):
                return settled
            if settled or fresh:
                write_midx(gitdir, sorted(settled | set(fresh)), fsync=fsync_enabled())
            else:  # every pack it named is gone (stock git repacked without rewriting it)
                os.unlink(f"{root}/{MIDX_NAME}")
        except (CorruptRepositoryError, OSError, StorageError):
            return settled  # a pack went away or the directory is read-only: as before
        return settled | set(fresh)
