"""What may have moved under ``refs/`` since the last look (ARCHITECTURE §3, §5 invariant 2).

The derived index asks this module, before every query, whether any ref may have
changed, and if so which. The answer comes from the file system, never from listing
every ref:

* git, libgit2 and JGit update a loose ref by writing ``<name>.lock`` and renaming it
  over ``<name>``, so every loose-ref change touches its directory's mtime and gives
  the file a new inode, mtime and size stamp; ``packed-refs`` is rewritten the same way;
* an *observation* records, for ``packed-refs`` and every directory under ``refs/``,
  that stamp, and for every loose ref file in a directory that was listed, the file's
  stamp. A directory whose stamp is unchanged holds the same files (a new, replaced or
  removed entry would have changed it), so only directories whose stamp moved are
  listed again, and only the files in them whose stamp moved are candidates;
* a stamp whose mtime is not older than the file system's clock at the start of the
  look is *racy* (git's "racy git" rule: a second change within the clock's resolution
  could leave the mtime as it is). The clock is read from the file system itself
  (:func:`fs_clock` touches a probe file beside the index), so the racy window is the
  file system's real timestamp resolution: nanoseconds where timestamps are fine,
  a tick or a second where they are coarse. A racy directory is listed again at the
  next look, and a racy file is a candidate again, until a look can trust the stamp;
* ``packed-refs`` changing (``git pack-refs``, ``got gc``, deleting a packed ref) is
  reported as such; the caller compares its lines with the ones it read last time
  (:func:`read_packed`), or lists every ref once when it has none.

Inode numbers alone do not tell a rewrite apart (ext4 hands a just-freed inode to the
next file, so a ref updated twice can come back with its old inode), hence the mtime
and size in every stamp. Our own writes are reported too (:meth:`Scanner.scan`'s
``pending``): they are candidates whatever the stamps say.

A write of our own cannot be folded into the stored observation without listing its
directory again: the mtime it leaves behind hides any other writer's change in the same
directory made since the last look. The directories a write touches are listed again
(only those, and only their loose refs, which packing keeps few), unless a
:class:`~got_core.storage.refwatch.RefWatch` has watched the directory since before the
previous look: then the kernel's events name the entries that changed, and only those
are looked at.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import re
import stat as _stat
import time
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from got_core.storage.refwatch import RefWatch

__all__ = [
    "ABSENT",
    "PACKED",
    "Scan",
    "Stamp",
    "fs_clock",
    "packed_has_prefix",
    "packed_names",
    "quick_dirty",
    "read_packed",
    "read_packed_digest",
    "scan",
    "stamp_of",
]

#: The observation key of the packed-refs file (stored beside the directories).
PACKED = "packed-refs"
#: Without a writable probe file, stamps younger than this (by the wall clock) are racy:
#: longer than the coarsest timestamps in use (FAT's 2 s).
_FALLBACK_RACY_NS = 3_000_000_000


class Stamp(NamedTuple):
    """What ``lstat`` said about a directory or a loose ref file, and whether it was racy."""

    ino: int
    mtime: int
    size: int
    racy: bool

    def same(self, other: Stamp) -> bool:
        """Same inode, mtime and size (the racy flag is not compared)."""
        return self.ino == other.ino and self.mtime == other.mtime and self.size == other.size


#: The stamp of a path that does not exist.
ABSENT = Stamp(0, 0, -1, False)


def _stamp(st: os.stat_result, clock: int) -> Stamp:
    mtime = st.st_mtime_ns
    # tuple.__new__ skips the named tuple's keyword constructor: this runs once per loose ref listed
    return tuple.__new__(Stamp, (st.st_ino, mtime, st.st_size, mtime >= clock))


def stamp_of(path: Path) -> Stamp:
    """The stamp of ``path`` now (:data:`ABSENT` when it does not exist; not judged racy)."""
    st = _lstat(path)
    return ABSENT if st is None else Stamp(st.st_ino, st.st_mtime_ns, st.st_size, False)


def fs_clock(probe: Path) -> int:
    """The file system's current time as it stamps files, in ns (git's racy-git reference).

    Sets ``probe``'s mtime to "now" and reads it back, so the answer has the file
    system's own resolution and clock. Call it *before* taking the stamps it judges: a
    stamp older than it cannot be repeated by a later change. Falls back to the wall
    clock minus a margin when the probe cannot be written (a read-only repository).
    """
    try:
        try:
            os.utime(probe)
        except FileNotFoundError:
            probe.touch()
        return os.stat(probe).st_mtime_ns
    except OSError:
        return time.time_ns() - _FALLBACK_RACY_NS


def read_packed(gitdir: Path) -> frozenset[bytes]:
    """The ref lines of ``packed-refs`` (``<sha> <name>`` and ``^<peeled>``; empty when absent)."""
    return read_packed_digest(gitdir)[0]


def read_packed_digest(gitdir: Path) -> tuple[frozenset[bytes], str]:
    """:func:`read_packed` and a digest of the file's bytes (the same bytes give the same lines).

    A process that holds no earlier lines to compare with compares the digest with the
    one stored with the observation instead of listing every ref.
    """
    try:
        data = (gitdir / PACKED).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return frozenset(), ""
    return _lines(data), hashlib.sha1(data, usedforsecurity=False).hexdigest()


def _lines(data: bytes) -> frozenset[bytes]:
    lines = set(data.split(b"\n"))
    lines.discard(b"")
    if data.startswith(b"#"):  # the header ("# pack-refs with: ..."), git's only comment line
        lines.discard(data.split(b"\n", 1)[0])
    return frozenset(lines)


def packed_names(lines: Set[bytes]) -> set[str]:
    """Ref names on ``packed-refs`` lines (peeled ``^`` lines belong to the line before)."""
    out = set()
    for line in lines:
        if not line.startswith(b"^"):
            _sha, _sep, name = line.partition(b" ")
            out.add(name.decode("utf-8", "surrogateescape"))
    return out


def packed_has_prefix(gitdir: Path, prefix: str) -> bool:
    """Whether ``packed-refs`` holds a ref whose name starts with ``prefix``.

    A binary search when the file says it is sorted (git and libgit2 write it so), a
    scan otherwise: the check a ref creation needs ("no ref lives under this name"),
    without the walk over every packed ref that libgit2's plain ref writes make.
    """
    want = prefix.encode("utf-8", "surrogateescape")
    try:
        with open(gitdir / PACKED, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return False
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                return _packed_prefix(m, want)
    except (FileNotFoundError, NotADirectoryError):
        return False


#: A packed-refs file this small is parsed here whatever share of it a prefix covers.
_SCOPED_MIN_BYTES = 1 << 16
_PACKED_LINE = re.compile(rb"([0-9a-f]{40}) ([^\s^][^\r\n]*)")
_PEELED_LINE = re.compile(rb"\^[0-9a-f]{40}")


def packed_under(gitdir: Path, prefix: str) -> dict[str, str] | None:
    """The refs of ``packed-refs`` whose names start with ``prefix``: name -> SHA.

    A binary search to the first name at or after ``prefix`` in a file that says it is
    sorted (git and libgit2 write it so), then the lines up to the last such name: the
    cost is that of the refs listed, not of every packed ref. None when the file cannot
    be vouched for line by line (not sorted, a line that is not ``<sha> <name>`` or
    ``^<sha>``, a name that is not UTF-8), or when the prefix's range is a quarter of
    a large file or more (parsed here, it costs more than libgit2's own walk of every ref):
    the caller then asks libgit2, as before.
    """
    want = prefix.encode("utf-8", "surrogateescape")
    try:
        with open(gitdir / PACKED, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return {}
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                return _packed_range(m, want)
    except (FileNotFoundError, NotADirectoryError):
        return {}


def _packed_range(m: mmap.mmap, want: bytes) -> dict[str, str] | None:
    if m[:1] != b"#":
        return None
    nl = m.find(b"\n")
    if nl < 0:
        return {}
    header = m[:nl]
    if b" sorted" not in header or b"\r" in header:
        return None
    at = _packed_seek(m, nl + 1, want)
    if at is None:
        return None
    if want and want[-1] < 0xFF and len(m) > _SCOPED_MIN_BYTES:
        stop = _packed_seek(m, at, want[:-1] + bytes([want[-1] + 1]))  # the first name past the prefix
        if stop is None or (stop - at) * 4 > len(m):
            return None  # a quarter of the file or more: libgit2's walk of every ref is cheaper
    out: dict[str, str] = {}
    end = len(m)
    while at < end:
        nl = m.find(b"\n", at)
        line = m[at : nl if nl >= 0 else end]
        at = end if nl < 0 else nl + 1
        if line.startswith(b"^"):
            if not _PEELED_LINE.fullmatch(line):
                return None
            continue
        found = _PACKED_LINE.fullmatch(line)
        if found is None:
            return None
        name = found.group(2)
        if not name.startswith(want):
            if name < want:
                return None  # not sorted after all
            break
        try:
            out[name.decode("utf-8")] = found.group(1).decode("ascii")
        except UnicodeDecodeError:
            return None
    return out


def _packed_seek(m: mmap.mmap, lo: int, want: bytes) -> int | None:
    """Offset of the first record whose name is >= ``want`` (records start at ``lo``)."""
    end = len(m)

    def line_end(at: int) -> int:
        nl = m.find(b"\n", at)
        return end if nl < 0 else nl

    hi = end
    while lo < hi:
        mid = (lo + hi) // 2
        nl = m.rfind(b"\n", lo, mid)
        start = lo if nl < 0 else nl + 1
        if m[start : start + 1] == b"^":  # a peeled line belongs to the record before it
            nxt = line_end(start) + 1
            if nxt >= hi:
                hi = start
                continue
            start = nxt
        record = m[start : line_end(start)]
        sha, sep, name = record.partition(b" ")
        if not sep or len(sha) != 40:
            return None
        if name < want:
            lo = line_end(start) + 1
        else:
            hi = start
    return lo


def _packed_prefix(m: mmap.mmap, want: bytes) -> bool:
    end = len(m)
    lo = 0
    if m[:1] == b"#":
        nl = m.find(b"\n")
        header = m[: nl if nl >= 0 else end]
        lo = end if nl < 0 else nl + 1
        if b" sorted" not in header:
            return m.find(b" " + want, lo) >= 0
    else:
        return m.find(b" " + want, lo) >= 0
    at = _packed_seek(m, lo, want)
    if at is None:  # a record that is not "<sha> <name>": the plain scan answers (a name follows one space)
        return m.find(b" " + want, lo) >= 0
    while at < end and m[at : at + 1] == b"^":  # peeled lines belong to the record before them
        nl = m.find(b"\n", at)
        at = end if nl < 0 else nl + 1
    if at >= end:
        return False
    nl = m.find(b"\n", at)
    return m[at : end if nl < 0 else nl].partition(b" ")[2].startswith(want)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _lstat_str(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def quick_dirty(gitdir: Path, seen: Mapping[str, Stamp], watch: RefWatch | None = None) -> bool:
    """Whether anything under ``refs/`` may have changed since ``seen`` was observed.

    One ``lstat`` per known directory and one for ``packed-refs``; True as soon as one
    differs or was racy (and True when nothing was observed yet). With ``watch``
    watching every directory of ``seen`` and :meth:`~RefWatch.quiet`, the kernel says
    that no directory changed since the last scan read its events (whatever their
    stamps, racy ones included): only ``packed-refs`` (not watched) is looked at.
    """
    if PACKED not in seen or "refs" not in seen:
        return True
    if watch is not None and watch.quiet() and all(rel == PACKED or watch.watching(rel) for rel in seen):
        before = seen[PACKED]
        return before.racy or not stamp_of(gitdir / PACKED).same(before)
    root = os.fspath(gitdir)
    for rel, before in seen.items():
        if before.racy:
            return True
        try:
            st: os.stat_result | None = os.lstat(f"{root}/{rel}")
        except (FileNotFoundError, NotADirectoryError):
            st = None
        if st is None:
            if before != ABSENT:
                return True
            continue
        if before.ino != st.st_ino or before.mtime != st.st_mtime_ns or before.size != st.st_size:
            return True
    return False


@dataclass
class Scan:
    """The result of one look at ``refs/``.

    Attributes:
        dirs: the new observation of ``packed-refs`` and every directory.
        files: for each directory that was listed, its loose ref files' stamps (name ->
            stamp); ``None`` for a directory that is gone.
        candidates: full ref names that may have moved (read their values).
        full: ``packed-refs`` changed (or nothing was observed before): any packed ref
            may have moved (compare its lines, or list every ref).
    """

    dirs: dict[str, Stamp] = field(default_factory=dict)
    files: dict[str, dict[str, Stamp] | None] = field(default_factory=dict)
    candidates: set[str] = field(default_factory=set)
    full: bool = False


def _children(seen: Iterable[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for rel in seen:
        parent, sep, _name = rel.rpartition("/")
        if sep:
            out.setdefault(parent, []).append(rel)
    return out


def scan(
    gitdir: Path,
    seen: Mapping[str, Stamp],
    loose: Callable[[str], Mapping[str, Stamp]],
    pending: Iterable[str] = (),
    clock: int | None = None,
    watch: RefWatch | None = None,
) -> Scan:
    """Look at ``refs/`` again and say which refs may have moved (see the module doc).

    Stamps are taken before any ref value is read, so a ref moving while the caller
    reads values shows up at the next look.

    Args:
        gitdir: the git directory.
        seen: the previous observation (``{}``: none).
        loose: the previous stamps of a directory's loose ref files (``{}`` when unknown;
            then every file in it is a candidate).
        pending: ref names this process moved since the last look.
        clock: the file system's time taken before this look (:func:`fs_clock`);
            default the wall clock minus a margin.
        watch: inotify watches on the ref directories (:mod:`got_core.storage.refwatch`),
            kept by the caller from one look to the next: a directory watched since
            before the look that took ``seen`` is not listed when its stamp moved; only
            the entries its events name are looked at.

    Returns:
        A :class:`Scan`.
    """
    now = clock if clock is not None else time.time_ns() - _FALLBACK_RACY_NS
    root = os.fspath(gitdir)
    out = Scan(candidates=set(pending))
    pst = _lstat(gitdir / PACKED)
    packed = _stamp(pst, now) if pst is not None else ABSENT
    before = seen.get(PACKED)
    out.full = before is None or before.racy or not before.same(packed) or "refs" not in seen
    out.dirs[PACKED] = packed
    children = _children(k for k in seen if k != PACKED)
    early = watch.changes() if watch is not None else None  # names changed before these stamps
    trusted = {rel for rel in seen if watch.watching(rel)} if watch is not None and early is not None else set()
    deferred: list[str] = []
    stack = ["refs"]
    while stack:
        rel = stack.pop()
        if watch is not None:
            watch.watch(rel)  # before the stamp: no later change escapes its events
        try:
            st: os.stat_result | None = os.lstat(f"{root}/{rel}")
        except (FileNotFoundError, NotADirectoryError):
            st = None
        if st is None or not _stat.S_ISDIR(st.st_mode):
            continue  # gone (or not a directory any more): its files are candidates below
        here = _stamp(st, now)
        prev = seen.get(rel)
        if prev is not None and not prev.racy and prev.same(here):
            out.dirs[rel] = prev
            stack.extend(children.get(rel, ()))
            continue
        out.dirs[rel] = here
        if rel in trusted and prev is not None:
            deferred.append(rel)  # its events, read once every stamp is taken, say what changed
            stack.extend(children.get(rel, ()))
            continue
        out.files[rel] = _list(root, rel, loose(rel) if prev is not None else {}, now, out.candidates, stack)
    if deferred and watch is not None:
        late = watch.changes()  # after the stamps: every change they show has its event queued
        for rel in deferred:
            names = (early or {}).get(rel, set()) | (late or {}).get(rel, set()) if late is not None else set()
            if names:
                out.files[rel] = _entries(root, rel, loose(rel), names, now, out.candidates, stack)
            else:  # no event to say what changed (or the watches broke): list it
                out.files[rel] = _list(root, rel, loose(rel), now, out.candidates, stack)
        while stack:  # directories that appeared under a watched one: new, so listed in full
            rel = stack.pop()
            watch.watch(rel)
            sub = _lstat_str(f"{root}/{rel}")
            if sub is None or not _stat.S_ISDIR(sub.st_mode):
                continue
            out.dirs[rel] = _stamp(sub, now)
            out.files[rel] = _list(root, rel, loose(rel) if rel in seen else {}, now, out.candidates, stack)
    for rel in seen.keys() - out.dirs.keys():
        out.candidates.update(f"{rel}/{name}" for name in loose(rel))
        out.files[rel] = None
        if watch is not None:
            watch.forget([rel])
    return out


def _list(
    root: str, rel: str, old: Mapping[str, Stamp], now: int, changed: set[str], stack: list[str]
) -> dict[str, Stamp]:
    """List directory ``rel``: its loose refs' stamps; the ones that differ from ``old``
    (or are new, racy, or gone) join ``changed``; subdirectories join ``stack``."""
    new: dict[str, Stamp] = {}
    try:
        with os.scandir(f"{root}/{rel}") as it:
            entries = list(it)
    except OSError:
        entries = []  # removed between lstat and scandir: seen as gone next time
    for entry in entries:
        name = entry.name
        if not name.isascii() and not _is_utf8(name):
            continue  # a name that is not text: no ref under it is indexed
        try:
            if entry.is_dir(follow_symlinks=False):
                stack.append(f"{rel}/{name}")
                continue
            if name.endswith(".lock"):
                continue  # a writer's lock, not a ref
            fst = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # vanished while listed: a candidate below (not in `new`)
        was = old.get(name)
        if (
            was is not None
            and not was[3]
            and was[0] == fst.st_ino
            and was[1] == fst.st_mtime_ns
            and was[2] == fst.st_size
        ):
            # unchanged, and not racy then, so not now (its mtime is older than an older clock):
            # the stamp is kept as it was, and nothing is allocated for the many unchanged files
            new[name] = was
            continue
        new[name] = _stamp(fst, now)  # new, racy, or another inode, mtime or size: it may have moved
        changed.add(f"{rel}/{name}")
    changed.update(f"{rel}/{name}" for name in old.keys() - new.keys())
    return new


def _entries(
    root: str, rel: str, old: Mapping[str, Stamp], names: Set[str], now: int, changed: set[str], stack: list[str]
) -> dict[str, Stamp]:
    """Directory ``rel``'s loose refs when only ``names`` changed (its watch's events):
    the other stamps are kept; racy ones are candidates again, as a listing makes them."""
    new = dict(old)
    for name, was in old.items():
        if was.racy and name not in names:
            st = _lstat_str(f"{root}/{rel}/{name}")
            if st is None:
                del new[name]
            else:
                new[name] = _stamp(st, now)
            changed.add(f"{rel}/{name}")
    for name in names:
        if "/" in name or (not name.isascii() and not _is_utf8(name)):
            continue
        path = f"{rel}/{name}"
        st = _lstat_str(f"{root}/{path}")
        if st is None:
            if new.pop(name, None) is not None:
                changed.add(path)
            continue
        if _stat.S_ISDIR(st.st_mode):
            stack.append(path)
            continue
        if name.endswith(".lock"):
            continue
        stamp = _stamp(st, now)
        known = new.get(name)
        if known is None or known.racy or not known.same(stamp):
            changed.add(path)
        new[name] = stamp
    return new
