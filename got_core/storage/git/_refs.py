"""Refs (a mixin of ``GitRepo``): reading them, ref transactions (compare-and-swap under
libgit2's locks), stale locks, packing; and libgit2's ref-name rule."""

from __future__ import annotations

import bisect
import mmap
import os
import re
import stat as _stat
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pygit2
from pygit2 import GitError

from got_core.errors import StorageError
from got_core.storage.git._handle import RefRace
from got_core.storage.git._staging import _Staging
from got_core.storage.refscan import _packed_prefix, packed_has_prefix, packed_under

_HEX40 = re.compile(rb"[0-9a-f]{40}")
#: How long a ref lock that another writer (or ``git pack-refs``) held for a moment is tried again
#: before the failure counts as the disk's (git's own ``core.filesRefLockTimeout`` is 0.1 s; this
#: allows for a busy machine).
LOCK_RETRY_S = 1.0
#: ... and at least this many times, whatever the clock says.
LOCK_RETRY_TRIES = 30
#: ``packed-refs`` up to this size is kept in memory between ref creations (:meth:`_Refs._packed_has`).
PACKED_KEEP_BYTES = 16 << 20
#: A ``packed-refs`` changed this recently (ns) is read afresh: another change within the file
#: system's timestamp granularity could leave the same stamp (git's racy-git rule). Whole-second
#: stamps (ext3, HFS+, FAT, some network file systems) get two seconds; nanosecond stamps (ext4,
#: xfs, btrfs, tmpfs: a clock tick of a few ms) get 100 ms.
_RACY_NS = 2_000_000_000
_RACY_FINE_NS = 100_000_000
#: The sparse index of a kept ``packed-refs`` (:func:`_sample_records`) names one record per this many bytes.
PACKED_SAMPLE_BYTES = 4096


def is_valid_ref_name(name: str) -> bool:
    """Whether libgit2 accepts ``name`` as a ref name (``git_reference_name_is_valid``).

    Names holding NUL are refused here: pygit2 hands the name to C as a NUL-terminated
    string, so ``"refs/heads/a\\0b"`` would be judged as ``"refs/heads/a"`` (and accepted).
    Lone surrogates (text that is not UTF-8) are refused too.

    Args:
        name: the full ref name, e.g. ``refs/heads/main``.

    Returns:
        True when libgit2 would create a ref of that name.
    """
    if "\x00" in name:
        return False
    try:
        return bool(pygit2.reference_is_valid_name(name))
    except UnicodeEncodeError:
        return False


def _sample_records(m: mmap.mmap) -> tuple[list[bytes], list[int]] | None:
    """A sparse index of a sorted ``packed-refs`` copy: the names and offsets of its first
    record and of one record per :data:`PACKED_SAMPLE_BYTES` after it (~180 at 10k refs).

    None when the header does not say ``sorted`` or a sampled record is not ``<40 hex> <name>``
    (the caller searches the copy as before). A question is then a binary search of the names
    (C) and one ``find`` within a few KB (:func:`_sampled_prefix`), where the search of the whole
    copy ran ~14 Python steps of finds and slices: ~140k instructions at 10k refs, the price of
    every node write's new tag.
    """
    end = len(m)
    if m[:1] != b"#":
        return None
    nl = m.find(b"\n")
    if nl < 0 or b" sorted" not in m[:nl]:
        return None
    names: list[bytes] = []
    starts: list[int] = []
    at = nl + 1
    while at < end:
        while m[at : at + 1] == b"^":  # a peeled line belongs to the record before it
            nl = m.find(b"\n", at)
            at = end if nl < 0 else nl + 1
        if at >= end:
            break
        nl = m.find(b"\n", at)
        stop = end if nl < 0 else nl
        if stop - at < 42 or m[at + 40 : at + 41] != b" " or m.find(b" ", at, at + 40) >= 0:
            return None
        names.append(m[at + 41 : stop])
        starts.append(at)
        nl = m.find(b"\n", at + PACKED_SAMPLE_BYTES)  # the next sample: the line after that one
        at = end if nl < 0 else nl + 1
    return names, starts


def _sampled_prefix(m: mmap.mmap, names: list[bytes], starts: list[int], want: bytes) -> bool:
    """Whether a record's name in the sorted copy ``m`` starts with ``want``, by its sparse index.

    The first name at or after ``want`` lies after the last sample before it and no later than
    the first sample at or after it: ``" " + want`` is looked for there (a name follows the
    record's one space; ids and peeled lines hold none)."""
    at = bisect.bisect_left(names, want)
    lo = starts[at - 1] if at else (starts[0] if starts else len(m))
    if at < len(starts):
        nl = m.find(b"\n", starts[at])
        hi = len(m) if nl < 0 else nl
    else:
        hi = len(m)
    return m.find(b" " + want, lo, hi) >= 0


class _Refs(_Staging):
    """Reading refs and moving them in ref transactions."""

    _moved_to: dict[str, str | None]  # where this handle's last transactions left refs (hints)
    _packed: tuple[tuple[int, ...], mmap.mmap] | None  # packed-refs as last read: (stamp, content)
    _ident_pinned: bool = False  # libgit2 told the reflog identity (_pin_reflog_ident)
    #: a sparse index of the kept packed-refs (:func:`_sample_records`): (stamp, names, starts)
    _packed_samples: tuple[tuple[int, ...], list[bytes], list[int]] | None = None

    def ref_target(self, name: str) -> str | None:
        """Direct target SHA of a ref (symbolic refs resolved), or None when absent."""
        try:
            ref = self._r.references.get(name)
        except (GitError, ValueError):
            return None
        if ref is None:
            return None
        try:
            if ref.type == pygit2.enums.ReferenceType.SYMBOLIC:
                ref = ref.resolve()
            return str(ref.target)
        except (GitError, KeyError):
            return None

    def peel_to_commit(self, oid: str) -> str | None:
        """The commit an object (annotated tag or commit) points to, or None."""
        found = self._in_memory(oid) if isinstance(oid, str) else None
        if found is not None and found[0] == "commit":
            return oid
        self._flush_for_libgit2()
        try:
            obj = self._lookup(oid)
            return None if obj is None else str(obj.peel(pygit2.Commit).id)
        except (GitError, ValueError, AttributeError, pygit2.InvalidSpecError):
            return None

    def list_refs(self, prefix: str = "refs/") -> dict[str, str]:
        """All direct refs under ``prefix``: name -> target SHA (tags not peeled).

        Scoped to the prefix: only the loose refs in the directory the prefix names (and
        below it) are read, and ``packed-refs`` is searched from the prefix on (it is
        sorted), so one thread's refs cost the same among ten or a hundred thousand refs.
        Anything that listing cannot vouch for (a prefix outside ``refs/``, a name
        libgit2 would refuse or that is not UTF-8, a loose file that is neither a SHA
        nor a symbolic ref, an unsorted or unusual ``packed-refs``, a SHA-256
        repository) is answered by libgit2's iterator over every ref, as before.
        """
        if self._sha1 and prefix.startswith("refs/") and "\x00" not in prefix:
            found = self._list_refs_scoped(prefix)
            if found is not None:
                return found
        return self._list_refs_all(prefix)

    def _list_refs_all(self, prefix: str) -> dict[str, str]:
        out = {}
        for ref in self._r.references.iterator():
            name = ref.name
            if not name.startswith(prefix):
                continue
            target = ref.target
            if isinstance(target, str):  # symbolic
                continue
            out[name] = str(target)
        return out

    def _list_refs_scoped(self, prefix: str) -> dict[str, str] | None:
        """:meth:`list_refs` from the loose directory and the packed-refs range of ``prefix``, or None."""
        root = os.fspath(self.gitdir)
        top, _sep, _rest = prefix.rpartition("/")  # the deepest directory the prefix names
        parts = top.split("/")
        for depth in range(1, len(parts) + 1):  # every directory on the way: real ones, or absent
            try:
                st = os.lstat(f"{root}/{'/'.join(parts[:depth])}")
            except (FileNotFoundError, NotADirectoryError):
                break
            except OSError:
                return None
            if not _stat.S_ISDIR(st.st_mode):
                if _stat.S_ISLNK(st.st_mode):
                    return None  # a link in the way: libgit2 decides what it lists
                break
        loose: dict[str, str | None] = {}  # name -> SHA, None for a symbolic ref
        stack = [top]
        while stack:
            rel = stack.pop()
            try:
                with os.scandir(f"{root}/{rel}") as it:
                    entries = list(it)
            except (FileNotFoundError, NotADirectoryError):
                continue  # no such directory (or it went away): nothing loose under it
            except OSError:
                return None
            for entry in entries:
                name = f"{rel}/{entry.name}"
                if not name.startswith(prefix) and not prefix.startswith(name + "/"):
                    continue
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    return None
                if is_dir:
                    stack.append(name)
                    continue
                if name.endswith(".lock") or not name.startswith(prefix):
                    continue
                if not entry.is_file(follow_symlinks=False) or not is_valid_ref_name(name):
                    return None  # a link, or a name libgit2 treats its own way
                try:
                    with open(f"{root}/{name}", "rb") as f:
                        data = f.read(256)
                except FileNotFoundError:
                    continue  # packed meanwhile: git writes packed-refs before it removes the file
                except OSError:
                    return None
                if data.startswith(b"ref: "):
                    loose[name] = None
                elif len(data) >= 40 and _HEX40.fullmatch(data[:40]) and (len(data) == 40 or data[40:41].isspace()):
                    loose[name] = data[:40].decode("ascii")
                else:
                    return None  # damaged: libgit2 skips it and may answer the packed value
        packed = packed_under(self.gitdir, prefix)  # after the loose files (see above)
        if packed is None or not all(is_valid_ref_name(n) for n in packed.keys() - loose.keys()):
            return None
        out = {n: sha for n, sha in packed.items() if n not in loose}
        out.update((n, sha) for n, sha in loose.items() if sha is not None)
        return dict(sorted(out.items()))

    def direct_targets(self, names: Iterable[str]) -> dict[str, str | None]:
        """Target SHA of each named direct ref, as :meth:`list_refs` would list it.

        None for a name that is not a ref now: absent, symbolic, or not a valid ref name
        (a stray file under ``refs/``).
        """
        refs = self._r.references
        out: dict[str, str | None] = {}
        for name in names:
            try:
                ref = refs.get(name)
                target = None if ref is None else ref.target
            except (GitError, ValueError, UnicodeError, pygit2.InvalidSpecError):
                target = None
            out[name] = None if target is None or isinstance(target, str) else str(target)
        return out

    def moved_tips(self, names: Iterable[str]) -> dict[str, str | None]:
        """Where this handle's own last ref transactions left ``names`` (None: deleted); the
        names it has not moved are left out. A hint for :func:`~got_core.storage.refs.update_refs`'s
        ``expected``, never a read: another writer may have moved a ref since."""
        known = self._moved_to
        return {n: known[n] for n in names if n in known}

    def cas_ref(self, name: str, new: str, expected: str | None) -> None:
        """Move ``name`` from ``expected`` (None: must not exist) to ``new`` atomically.

        One ref transaction (:meth:`cas_refs`): the ref is written under its lock file
        after a check, under that lock, that it still holds ``expected``. Only
        :mod:`got_core.storage.refs` calls this; everything else moves refs through that
        module's retry primitive.

        Raises:
            RefRace: the ref did not hold ``expected``, or another writer held its lock.
            StorageError: the disk refused the write (the ref is unchanged).
        """
        self.cas_refs({name: (expected, new)})

    def delete_ref(self, name: str, expected: str | None = None) -> bool:
        """Delete a ref (only while it still points at ``expected`` when given); False when absent.

        Raises:
            RefRace: the ref moved away from ``expected`` or its lock was held.
            StorageError: the disk refused the change.
        """
        found: list[bool] = []

        def delete() -> None:
            ref = self._r.references.get(name)
            if ref is None:
                found.append(False)
                return
            if expected is not None and str(ref.target) != expected:
                raise RefRace(name)
            self.flush_staged()  # no ref moves while objects are only in memory
            ref.delete()
            self._moved_to.pop(name, None)
            found.append(True)

        self._ref_op(name, expected, delete, check_value=expected is not None)
        return found[-1]

    def cas_refs(self, updates: Mapping[str, tuple[str | None, str | None]]) -> None:
        """Move several refs at once: ``{name: (expected, new)}`` (``new`` None deletes).

        Every ref is locked first (libgit2's ref transaction), each is checked against its
        expected value under its lock, and only then are they all written. A ref that is
        created must not collide with another's path (``refs/a`` beside ``refs/a/b``),
        checked here with a lookup per parent and a binary search of ``packed-refs``:
        libgit2's plain ref writes check that by walking every packed ref, which made each
        write cost O(refs) (ARCHITECTURE §6).

        Raises:
            RefRace: a ref did not hold its expected value, or a lock was held.
            StorageError: the disk refused the writes, or a new ref's name collides
                with an existing ref's path.
        """
        if not updates:
            return
        if not self._ident_pinned:
            self._pin_reflog_ident()
        try:
            with self._r.transaction() as txn:
                for name in sorted(updates):
                    self._lock_ref(txn, name, updates[name][0])
                for name, (expected, new) in sorted(updates.items()):
                    if self.ref_target(name) != expected:
                        raise RefRace(name)
                    if expected is None and new is not None:
                        self._check_ref_path_free(name)
                    if new is None:
                        txn.remove(name)
                    else:
                        txn.set_target(name, new)
                # every ref is locked and checked: the objects staged for this move go to disk
                # now, as one pack, before any ref moves (a lost race above wrote nothing)
                self.flush_staged()
        except RefRace:
            self._moved_to.clear()  # another writer is about: the hints may be stale
            raise
        except (GitError, OSError, ValueError) as exc:
            if any(self._lost_race(n, e) for n, (e, _new) in updates.items()):
                raise RefRace(next(iter(updates))) from None
            raise StorageError(f"cannot update {', '.join(sorted(updates))} in {self.gitdir}: {exc}") from None
        if len(self._moved_to) >= 256:
            self._moved_to.clear()
        self._moved_to.update((name, new) for name, (_expected, new) in updates.items())

    def _pin_reflog_ident(self) -> None:
        """Tell libgit2 once who moves this handle's refs (``git_repository_set_ident``).

        Without it, every ref a transaction moves has libgit2 look up the identity of its
        reflog entry (``git_reference__log_signature``: a config snapshot, ``user.name`` and
        ``user.email`` looked up, a stat of each config file; ~50k instructions and 3 system
        calls a move), whether a reflog is written or not (a bare repository writes none). The
        identity pinned is the one that lookup finds: the configuration's ``user.name`` and
        ``user.email``, else ``unknown``, as of the handle's first ref move (a later change of
        the configuration is seen by the next handle).
        """
        self._ident_pinned = True
        try:
            who = self._r.default_signature
            name, email = who.name, who.email
        except (GitError, KeyError, ValueError, UnicodeError):
            name, email = "unknown", "unknown"
        try:
            self._r.set_ident(name, email)
        except (GitError, ValueError, TypeError):
            pass  # libgit2 keeps looking it up per move: slower, the same identity

    def _lock_ref(self, txn: pygit2.transaction.ReferenceTransaction, name: str, expected: str | None) -> None:
        """Lock one ref of a transaction; a lock another writer holds (or just held) is a lost race.

        A writer that held the lock and then gave up (its own transaction lost), or `git
        pack-refs` pruning the loose ref, leaves the ref as it was and the lock gone by the time
        we look, which the state cannot tell apart from a disk error: the lock is tried again,
        with a growing pause, for up to :data:`LOCK_RETRY_S` (and at least :data:`LOCK_RETRY_TRIES`
        times) before it is one.
        """
        deadline = time.monotonic() + LOCK_RETRY_S
        pause = 0.001
        tries = 0
        while True:
            tries += 1
            try:
                txn.lock_ref(name)
                return
            except (GitError, OSError, ValueError):
                if self._lost_race(name, expected):
                    raise RefRace(name) from None
                # the lock is gone and the ref unchanged: a writer or `git pack-refs` held it for a
                # moment (pack-refs locks each loose ref it prunes). Tried again, as git waits for a
                # held ref lock (core.filesRefLockTimeout); a disk that refuses keeps refusing.
                # a busy machine can stall this thread past the deadline between two tries:
                # the deadline only counts after LOCK_RETRY_TRIES of them
                if tries >= LOCK_RETRY_TRIES and time.monotonic() >= deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 0.05)

    def _check_ref_path_free(self, name: str) -> None:
        """Refuse to create ``name`` where a ref already lives at a parent or child path."""
        parts = name.split("/")
        parent = next((p for k in range(2, len(parts)) if self.ref_target(p := "/".join(parts[:k]))), None)
        clash = f"the ref {parent} exists" if parent is not None else None
        if clash is None:
            loose = f"{self.gitdir}/{name}"
            if self._packed_has(name + "/") or (
                os.path.isdir(loose) and any(files for _root, _dirs, files in os.walk(loose))
            ):
                clash = f"refs exist under {name}/"
        if clash is not None:
            raise StorageError(
                f"cannot create {name} in {self.gitdir}: {clash} (git keeps a ref and the refs under "
                "its name apart); choose another name or delete that ref"
            )

    def _packed_has(self, prefix: str) -> bool:
        """:func:`~got_core.storage.refscan.packed_has_prefix`, from a copy of ``packed-refs``
        kept while its stamp (device, inode, size, mtime, ctime) stays the same.

        Every new ref's creation asks this (a tag per node write): the file is opened and
        mapped once per change, not per write, and searched by a sparse index of its
        records (:func:`_sample_records`). Any rewrite gives the file a new ctime (git and
        libgit2 replace it, a new inode too); one within the timestamp granularity of the last
        could keep the stamp, so a file changed more recently than that (:data:`_RACY_NS`,
        :data:`_RACY_FINE_NS`) is read afresh.
        """
        path = f"{self.gitdir}/packed-refs"
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            self._packed = None
            return False
        stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        want = prefix.encode("utf-8", "surrogateescape")
        kept = self._packed
        if kept is not None and kept[0] == stamp:
            samples = self._packed_samples
            if samples is not None and samples[0] == stamp:
                return _sampled_prefix(kept[1], samples[1], samples[2], want)
            return _packed_prefix(kept[1], want)
        self._packed = None
        self._packed_samples = None
        fine = st.st_mtime_ns % 1_000_000_000 or st.st_ctime_ns % 1_000_000_000
        racy = _RACY_FINE_NS if fine else _RACY_NS
        if not 0 < st.st_size <= PACKED_KEEP_BYTES or time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < racy:
            return packed_has_prefix(self.gitdir, prefix)
        try:
            with open(path, "rb") as f:
                again = os.fstat(f.fileno())
                data = f.read(st.st_size + 1)
        except (FileNotFoundError, NotADirectoryError):
            return False
        if (again.st_dev, again.st_ino, again.st_size, again.st_mtime_ns, again.st_ctime_ns) != stamp or len(
            data
        ) != st.st_size:
            return packed_has_prefix(self.gitdir, prefix)  # replaced meanwhile: as before
        copy = mmap.mmap(-1, len(data))  # anonymous memory, not the file: nothing can cut it short
        copy.write(data)
        copy.seek(0)  # an mmap's find starts at its position by default
        self._packed = (stamp, copy)
        sampled = _sample_records(copy)
        if sampled is None:  # not sorted, or a record not laid out as git writes it: the copy's own search
            return _packed_prefix(copy, want)
        self._packed_samples = (stamp, *sampled)
        return _sampled_prefix(copy, sampled[0], sampled[1], want)

    def _ref_op(self, name: str, expected: str | None, op: Callable[[], None], *, check_value: bool = True) -> None:
        """Run one ref write; a failure is a lost race when the state says so, else retried once.

        A race is recognised from the repository's state, not from libgit2's message: the
        ref's lock file exists, or the ref no longer holds ``expected``.
        """
        for attempt in (0, 1):
            try:
                op()
                return
            except RefRace:
                raise
            except pygit2.AlreadyExistsError:
                raise RefRace(name) from None
            except (GitError, OSError, ValueError) as exc:
                if self._lost_race(name, expected if check_value else self.ref_target(name)):
                    raise RefRace(name) from None
                if attempt:
                    raise StorageError(f"cannot update {name} in {self.gitdir}: {exc}") from None

    def _lost_race(self, name: str, expected: str | None) -> bool:
        if (self.gitdir / (name + ".lock")).exists() or (self.gitdir / "packed-refs.lock").exists():
            return True
        return self.ref_target(name) != expected

    def break_stale_lock(self, name: str, max_age: float) -> bool:
        """Remove ``<ref>.lock`` left by a killed writer when older than ``max_age`` seconds."""
        for lock in (self.gitdir / (name + ".lock"), self.gitdir / "packed-refs.lock"):
            try:
                if time.time() - lock.stat().st_mtime > max_age:
                    lock.unlink()
                    return True
            except FileNotFoundError:
                continue
            except OSError:
                return False
        return False

    def compress_refs(self) -> None:
        """Pack loose refs into ``packed-refs`` (fast listing at 10k tags)."""
        try:
            self._r.compress_references()
        except (GitError, OSError):
            pass  # another writer holds packed-refs.lock (or the disk is read-only); packing is an optimisation

    def ref_dir_times(self) -> dict[str, float]:
        """The modification time of every directory under ``refs/`` (see :meth:`prune_empty_ref_dirs`)."""
        times: dict[str, float] = {}
        for dirpath, _dirs, _files in os.walk(self.gitdir / "refs"):
            try:
                times[dirpath] = os.stat(dirpath).st_mtime
            except OSError:
                continue
        return times

    def prune_empty_ref_dirs(self, times: dict[str, float], min_age: float = 60.0) -> int:
        """Remove empty directories under ``refs/`` left by packed refs (as ``git pack-refs`` does).

        ``times`` is :meth:`ref_dir_times` taken before packing (libgit2's packing locks every
        ref it packs, which touches each directory, and a removal touches the parent).
        ``refs/``, ``refs/heads`` and ``refs/tags`` stay (git needs them to see a repository);
        a directory not in ``times`` or changed within ``min_age`` seconds before them is left
        for a writer that may be about to create a ref in it. Returns how many were removed.
        """
        root = self.gitdir / "refs"
        keep = {root, root / "heads", root / "tags"}
        now = time.time()
        removed = 0
        for dirpath, _dirs, files in os.walk(root, topdown=False):
            path = Path(dirpath)
            if path in keep or files or now - times.get(dirpath, now) < min_age:
                continue
            try:
                path.rmdir()  # fails, harmlessly, if a writer put something in it meanwhile
                removed += 1
            except OSError:
                continue
        return removed
