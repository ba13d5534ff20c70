"""Shared file helpers for the file-based memory backends: a process+thread lock and atomic replace."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from got_core.errors import RepositoryNotFoundError, StorageError

__all__ = ["atomic_write_bytes", "file_stamp", "locked", "prepare_store_dir"]


# Seconds between tries while another process holds a store's lock (filelock polls a
# non-blocking lock; a write holds it for about a millisecond).
_POLL_S = 0.002


@contextmanager
def locked(lock_path: Path, thread_lock: threading.Lock) -> Iterator[None]:
    """Hold ``thread_lock`` and an exclusive process lock on ``lock_path``.

    The process lock is filelock's descriptor lock (``flock`` on POSIX, ``LockFileEx`` on
    Windows: the primitive its ``FileLock`` uses, without that class's per-acquire
    bookkeeping, which would cost more than a graph-memory write). Such locks belong to
    the open file, so a fresh ``open`` per critical section excludes other threads'
    sections as well as other processes'; ``thread_lock`` keeps threads from polling.

    Raises:
        StorageError: the lock file cannot be created, or the file system cannot lock it.
    """
    from filelock import lock_descriptor, unlock_descriptor  # first use only: keeps imports light

    with thread_lock:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(
                f"cannot create lock file {lock_path}: {exc}; check the directory exists and is writable"
            ) from None
        try:
            try:
                lock_descriptor(fd, poll_interval=_POLL_S)
            except OSError as exc:
                raise StorageError(
                    f"cannot lock {lock_path}: {exc}; keep the store on a local file system that supports file locks"
                ) from None
            try:
                yield
            finally:
                unlock_descriptor(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(target: Path, data: bytes, *, fsync: bool = False) -> None:
    """Replace ``target`` with ``data`` atomically (temp file in the same directory + ``os.replace``).

    Readers see the old or the new content, never a mix; a crash leaves the
    old file intact.

    Raises:
        StorageError: the disk refused the write.
    """
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise StorageError(f"cannot write {target}: {exc}; check free space and permissions") from None


def file_stamp(path: Path) -> tuple[int, int, int] | None:
    """(inode, mtime ns, size) of ``path``, or None when absent: a cheap "did it change" key.

    Atomic replaces give the file a new inode, so a rewrite is seen even within one clock tick.

    Raises:
        StorageError: the file exists but cannot be read.
    """
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc}") from None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def prepare_store_dir(
    path: Path,
    lock_path: Path,
    what: str,
    holds: str,
    *,
    read_only: bool,
    create: bool = True,
    markers: tuple[Path, ...] = (),
) -> None:
    """Check a file-based backend's directory and, unless read-only, create it and its lock file.

    Args:
        create: when false the store must already exist (its lock file or one of ``markers``
            is there); nothing is created for a path that holds none.

    Raises:
        StorageError: ``path`` is a file, cannot be read, or the directory cannot be created.
        RepositoryNotFoundError: ``create`` is false and there is no store at ``path``.
    """
    try:
        if path.exists() and not path.is_dir():
            raise StorageError(
                f"{what} path {path} is a file, not a directory; pass the directory that should hold {holds}"
            )
        found = any(p.exists() for p in (lock_path, *markers))
    except PermissionError as exc:
        raise StorageError(
            f"permission denied: cannot read {what} at {path} ({exc}); fix its permissions or choose another path"
        ) from None
    if not create and not found:
        raise RepositoryNotFoundError(
            f"no {what} at {path} (no {holds} there); check the path, or store a lesson there first to create one"
        )
    if read_only:
        return
    try:
        path.mkdir(parents=True, exist_ok=True)
        os.close(os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644))
    except OSError as exc:
        raise StorageError(f"cannot create {what} at {path}: {exc}; pick a writable directory") from None
