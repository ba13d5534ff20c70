"""Which loose refs changed, as the kernel reports it (Linux inotify): no directory listing.

:func:`~got_core.storage.refscan.scan` lists a directory under ``refs/`` again whenever
its stamp moved, and ``lstat`` s every loose ref in it, because a stamp alone cannot say
*which* entry changed. A directory a write of ours touched is listed at every query after
it. A :class:`RefWatch` asks the kernel instead: an inotify watch on each ref directory
queues one event per entry created, renamed over, written or removed, at the moment the
change happens. A directory watched without a break since the observation a scan starts
from (and whose events were all read) changed exactly in the entries its events name, so
the scan stats only those.

What makes that safe:

* a watch is added *before* the directory's stamp is taken and before it is listed, so
  nothing that happens after the stamp escapes its events;
* events are read after the stamps of a scan are taken; the names read in one scan are
  candidates in the next one too (a change between the stamp and the read shows in the
  next stamp, and its event was read already);
* a queue overflow, a removed or renamed directory, or an event the watch cannot place
  drops every watch: the next scan lists every changed directory, as without a watch;
* the kernel sees only changes made through this machine's kernel: watches are used
  only on local file systems (not NFS, SMB, FUSE, ...), read from ``/proc/self/mountinfo``;
* the inotify descriptor belongs to the process that opened it: a forked child never
  reads it (that would steal the parent's events) and opens its own.

Anywhere this cannot hold (not Linux, no ``inotify_init1``, no watches left, a remote
file system, ``GOT_REF_WATCH=0``), :func:`open_watch` returns None and the scan lists
directories as before. The derived index opens its watch at the first sync after a write
of its own process (a process that only reads keeps the first query's cost low: loading
``ctypes`` takes milliseconds); ``GOT_REF_WATCH=always`` opens it at the first sync.
"""

from __future__ import annotations

import errno
import os
import struct
import sys
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ctypes

__all__ = ["RefWatch", "open_watch"]

_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_FROM = 0x040
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_UNMOUNT = 0x2000
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_IN_ONLYDIR = 0x01000000
_IN_DONT_FOLLOW = 0x02000000
_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
    | _IN_DONT_FOLLOW
)
_BROKEN = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_UNMOUNT | _IN_Q_OVERFLOW | _IN_IGNORED
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)
#: File systems whose changes all pass through this kernel (so inotify sees them).
_LOCAL_FS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs", "jfs", "reiserfs"})
#: Most directories one watch set holds (a repository with more ref directories lists them).
MAX_WATCHES = 4096


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # only where watches are used: not on `import got_core`

    try:
        try:
            lib = ctypes.CDLL("libc.so.6", use_errno=True)  # glibc; find_library runs ldconfig, slow
        except OSError:
            import ctypes.util

            lib = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        lib.inotify_init1.argtypes = [ctypes.c_int]
        lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        lib.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return lib


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _fs_type(path: Path) -> str | None:
    """The type of the file system ``path`` lives on (longest mount point prefix), or None."""
    try:
        real = os.path.realpath(path)
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    best, kind = -1, None
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right.split():
            continue
        mount = _unescape(fields[4])
        inside = real == mount or real.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) > best:
            best, kind = len(mount), right.split()[0]
    return kind


def open_watch(gitdir: Path) -> RefWatch | None:
    """A :class:`RefWatch` for ``gitdir``'s refs, or None where watches cannot be trusted."""
    if os.environ.get("GOT_REF_WATCH", "1") == "0":
        return None
    lib = _libc()
    if lib is None or _fs_type(gitdir) not in _LOCAL_FS:
        return None
    fd = lib.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
    if fd < 0:
        return None
    return RefWatch(gitdir, lib, fd)


def _close_fd(fd: int, pid: int) -> None:
    if os.getpid() == pid:
        try:
            os.close(fd)
        except OSError:
            pass  # closed already


class RefWatch:
    """inotify watches on the directories under ``refs/`` (see the module docstring).

    Not thread-safe: the derived index calls it under its own lock.
    """

    def __init__(self, gitdir: Path, lib: ctypes.CDLL, fd: int) -> None:
        self._root = os.fspath(gitdir)
        self._lib = lib
        self._fd = fd
        self._pid = os.getpid()
        self._wd: dict[int, str] = {}  # watch descriptor -> directory (relative to the git directory)
        self._dirs: dict[str, int] = {}
        self._last: dict[str, set[str]] = {}  # names the previous read reported, per directory
        self._dropped: set[int] = set()  # watches removed on purpose: their last events are expected
        self._held: list[tuple[int, int, bytes]] = []  # events :meth:`quiet` read, for the next :meth:`changes`
        # an index dropped without close() must not keep an inotify instance (128 per user by default)
        self._finalizer = weakref.finalize(self, _close_fd, fd, self._pid)

    def usable(self) -> bool:
        """False in a forked child (the descriptor is the parent's) or after :meth:`close`."""
        return self._fd >= 0 and os.getpid() == self._pid

    def watching(self, rel: str) -> bool:
        """Whether ``rel`` has been watched without a break since it was added."""
        return rel in self._dirs

    def watch(self, rel: str) -> bool:
        """Watch the directory ``rel`` (call before taking its stamp); False when it cannot be."""
        if rel in self._dirs:
            return True
        if not self.usable() or len(self._dirs) >= MAX_WATCHES:
            return False
        path = f"{self._root}/{rel}".encode("utf-8", "surrogateescape")
        wd = self._lib.inotify_add_watch(self._fd, path, _MASK)
        if wd < 0:
            return False
        if wd in self._wd:  # the same directory under another name (a symlink, a bind mount)
            self._lib.inotify_rm_watch(self._fd, wd)
            self.reset()
            return False
        self._wd[wd] = rel
        self._dirs[rel] = wd
        return True

    def reset(self) -> None:
        """Forget every watch (the next scan lists what changed); watches are added again."""
        if self.usable():
            for wd in self._wd:
                self._lib.inotify_rm_watch(self._fd, wd)
            self._drain()  # the IN_IGNORED events the removals queue
        self._wd.clear()
        self._dirs.clear()
        self._last.clear()
        self._dropped.clear()
        self._held.clear()

    def quiet(self) -> bool:
        """Whether nothing changed in a watched directory since the last :meth:`changes`.

        True only when no event is queued and the last read left no name to report again;
        the events it reads are kept for the next :meth:`changes` (nothing is lost).
        """
        if not self.usable() or self._last or self._held:
            return False
        events = self._drain()
        if events is None:
            self.reset()
            return False
        self._held = events
        return not events

    def _drain(self) -> list[tuple[int, int, bytes]] | None:
        """Every queued event as (wd, mask, name); None when the queue overflowed or broke."""
        out: list[tuple[int, int, bytes]] = []
        while True:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return out
            except OSError as exc:
                return None if exc.errno != errno.EINTR else out
            if not data:
                return out
            at = 0
            while at + _HEADER.size <= len(data):
                wd, mask, _cookie, size = _HEADER.unpack_from(data, at)
                name = data[at + _HEADER.size : at + _HEADER.size + size].split(b"\0", 1)[0]
                out.append((wd, mask, name))
                at += _HEADER.size + size

    def changes(self) -> dict[str, set[str]] | None:
        """Entry names changed per watched directory since the read before the last one.

        None when the watches cannot vouch for anything (overflow, a directory removed or
        moved, an unknown watch): every watch was dropped; list what changed.
        """
        if not self.usable():
            return None
        drained = self._drain()
        if drained is None:
            self.reset()
            return None
        events, self._held = self._held + drained, []
        now: dict[str, set[str]] = {}
        for wd, mask, raw in events:
            if wd in self._dropped:
                if mask & _IN_IGNORED:
                    self._dropped.discard(wd)
                continue
            rel = self._wd.get(wd)
            if rel is None or mask & _BROKEN:
                self.reset()
                return None
            if raw:
                now.setdefault(rel, set()).add(raw.decode("utf-8", "surrogateescape"))
        out = {rel: set(names) for rel, names in now.items()}
        for rel, names in self._last.items():
            out.setdefault(rel, set()).update(names)
        self._last = now
        return out

    def forget(self, rels: Iterable[str]) -> None:
        """Stop trusting these directories (gone, or replaced): they are listed next time."""
        for rel in rels:
            wd = self._dirs.pop(rel, None)
            if wd is not None:
                self._wd.pop(wd, None)
                if self.usable() and self._lib.inotify_rm_watch(self._fd, wd) == 0:
                    self._dropped.add(wd)
            self._last.pop(rel, None)

    def close(self) -> None:
        """Close the descriptor (in the process that opened it)."""
        self._finalizer()
        self._fd = -1
        self._wd.clear()
        self._dirs.clear()
