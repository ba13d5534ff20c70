"""Replay onto disk: a commit's files written into a directory, and nothing else, ever.

A tree may come from anyone (a fetched peer, a bundle, a tool that writes raw
objects), so replay judges the whole tree before it writes a byte
(:func:`plan_replay`) and then writes through directory handles that never follow a
symbolic link (:func:`write_replay`):

* every name passes :func:`got_core.names.path_component_problem` (git fsck's rules:
  no ``.git`` in any spelling git refuses, no ``..``, ``/`` or ``\\``, valid UTF-8,
  at most 255 bytes) and every path stays within :data:`~got_core.names.MAX_PATH_BYTES`;
* symbolic links and gitlinks are never created or followed: refused by default
  (:class:`~got_core.errors.UnsafePathError` naming the path), or skipped and
  reported with ``links="skip"``;
* file sizes (read from object headers), the number of files and the total size are
  bounded (``max_file_bytes``, ``max_files``, ``max_bytes``);
* in the target, an existing symbolic link where a directory or file would go is
  refused before anything is written; files are written to a temporary name and
  renamed into place, so an existing hard link is replaced, not written through;
  file modes are never restored (no executable bits).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, overload

from got_core.errors import InvalidInputError, PayloadTooLargeError, StorageError, UnsafePathError
from got_core.names import MAX_PATH_BYTES, path_component_problem, printable_path

if TYPE_CHECKING:
    from got_core.storage.git import GitRepo

__all__ = ["LINK_POLICIES", "MAX_REPLAY_BYTES", "MAX_REPLAY_FILES", "ReplayPlan", "plan_replay", "write_replay"]

#: Most files one replay writes (a tree can name the same subtree many times over).
MAX_REPLAY_FILES = 100_000
#: Most bytes one replay writes in all.
MAX_REPLAY_BYTES = 1 << 30
#: What to do with symbolic-link and gitlink entries.
LINK_POLICIES = ("refuse", "skip")

_REGULAR = (0o100644, 0o100755)
_KINDS = {0o120000: "a symbolic link", 0o160000: "a gitlink (submodule)"}


@dataclass(frozen=True)
class ReplayPlan:
    """What a replay will write, decided before anything is written.

    Attributes:
        files: (path, blob SHA) of every regular file, in tree order.
        skipped: (printable path, why) of every link entry left out (``links="skip"``).
        total_bytes: the size of all files together.
    """

    files: tuple[tuple[str, str], ...]
    skipped: tuple[tuple[str, str], ...] = ()
    total_bytes: int = 0
    dirs: frozenset[tuple[str, ...]] = field(default=frozenset(), repr=False)


def _refuse(raw_parts: tuple[bytes, ...], why: str) -> UnsafePathError:
    shown = printable_path(b"/".join(raw_parts))
    return UnsafePathError(
        f"tree entry {shown!r} is {why}; replay writes nothing from this tree "
        "(it holds entries git itself would refuse to check out)",
        shown,
    )


def plan_replay(
    git: GitRepo,
    tree: str,
    *,
    links: str = "refuse",
    max_file_bytes: int,
    max_files: int = MAX_REPLAY_FILES,
    max_bytes: int = MAX_REPLAY_BYTES,
) -> ReplayPlan:
    """Judge every entry of ``tree`` and list what replay may write.

    Args:
        git: the repository.
        tree: the tree SHA.
        links: ``"refuse"`` (default) or ``"skip"`` symbolic links and gitlinks.
        max_file_bytes: largest single file.
        max_files: most files.
        max_bytes: most bytes in all.

    Returns:
        The :class:`ReplayPlan`.

    Raises:
        UnsafePathError: an entry with an unsafe or non-UTF-8 name, a path twice or as
            both a file and a directory, or (``links="refuse"``) a link.
        PayloadTooLargeError: a file over ``max_file_bytes`` or all files over ``max_bytes``.
        InvalidInputError: more than ``max_files`` files, or an unknown ``links`` policy.
        CorruptRepositoryError: a missing or damaged object.
    """
    if links not in LINK_POLICIES:
        raise InvalidInputError(f"links must be one of {LINK_POLICIES}, not {links!r}")
    files: list[tuple[str, str]] = []
    skipped: list[tuple[str, str]] = []
    dirs: set[tuple[str, ...]] = set()
    seen: set[tuple[str, ...]] = set()
    total = 0
    for raw_parts, mode, oid in git.walk_tree(tree):
        parts = []
        for raw in raw_parts:
            try:
                name = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise _refuse(raw_parts, "named with bytes that are not UTF-8") from None
            problem = path_component_problem(name)
            if problem is not None:
                raise _refuse(raw_parts, f"named with {problem}")
            parts.append(name)
        path = "/".join(parts)
        if len(path.encode("utf-8")) > MAX_PATH_BYTES:
            raise _refuse(raw_parts, f"a path over {MAX_PATH_BYTES} bytes")
        if mode not in _REGULAR:
            kind = _KINDS.get(mode, f"an entry of unknown mode {mode:o}")
            if links == "skip" and mode in _KINDS:
                skipped.append((printable_path(path), kind))
                continue
            raise _refuse(
                raw_parts,
                f"{kind}; replay never creates or follows links (pass links='skip' to leave such entries out)",
            )
        key = tuple(parts)
        if key in seen or key in dirs:
            raise _refuse(raw_parts, "listed twice, or as both a file and a directory")
        prefixes = {key[:i] for i in range(1, len(key))}
        if prefixes & seen:
            raise _refuse(raw_parts, "inside a path that is also a file")
        seen.add(key)
        dirs |= prefixes
        if len(files) >= max_files:
            raise InvalidInputError(f"the tree holds more than {max_files} files; pass a larger max_files to replay it")
        size = git.blob_size(oid)
        if size > max_file_bytes:
            raise PayloadTooLargeError(f"file {printable_path(path)}", size, max_file_bytes)
        total += size
        if total > max_bytes:
            raise PayloadTooLargeError("the replayed tree", total, max_bytes)
        files.append((path, oid))
    return ReplayPlan(tuple(files), tuple(skipped), total, frozenset(dirs))


# ---------------------------------------------------------------------------- writing
_AT = (
    os.open in os.supports_dir_fd
    and os.mkdir in os.supports_dir_fd
    and os.rename in os.supports_dir_fd
    and os.stat in os.supports_dir_fd
    and hasattr(os, "O_NOFOLLOW")
    and hasattr(os, "O_DIRECTORY")
)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
# What open(O_NOFOLLOW | O_DIRECTORY) answers for a link or a file (EMLINK: FreeBSD, EFTYPE: BSDs).
_LINK_ERRNOS = {errno.ELOOP, errno.ENOTDIR, getattr(errno, "EMLINK", -1), getattr(errno, "EFTYPE", -1)}
_FILE_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def _link_in_target(root: Path, parts: tuple[str, ...], mode: int | None = None) -> UnsafePathError:
    shown = printable_path("/".join(parts))
    if mode is None:
        what = "a symbolic link or a file"
    elif stat.S_ISLNK(mode):
        what = "a symbolic link"
    else:
        what = "a directory" if stat.S_ISDIR(mode) else "a file" if stat.S_ISREG(mode) else "a special file"
    return UnsafePathError(
        f"{root / shown} is {what} where the replay needs to write; replay never writes "
        "through links or over directories. Replay into an empty directory",
        shown,
    )


class _Target:
    """Directory handles under the replay root, opened without following any link."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fds: dict[tuple[str, ...], int] = {(): os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))}

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def kind(self, parts: tuple[str, ...]) -> int | None:
        """``st_mode`` of an existing entry (never following a link), or None when absent."""
        parent = self.dir(parts[:-1], create=False)
        if parent is None:
            return None
        try:
            return os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return None

    @overload
    def dir(self, parts: tuple[str, ...], *, create: Literal[True]) -> int: ...
    @overload
    def dir(self, parts: tuple[str, ...], *, create: bool) -> int | None: ...

    def dir(self, parts: tuple[str, ...], *, create: bool) -> int | None:
        """A handle on the directory ``parts`` (made when ``create``), or None when absent."""
        if parts in self.fds:
            return self.fds[parts]
        parent = self.dir(parts[:-1], create=create)
        if parent is None:
            return None
        if create:
            try:
                os.mkdir(parts[-1], 0o777, dir_fd=parent)
            except FileExistsError:
                pass
        try:
            fd = os.open(parts[-1], _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if create:
                raise
            return None
        except OSError as exc:
            if exc.errno in _LINK_ERRNOS:
                raise _link_in_target(self.root, parts) from None
            raise
        self.fds[parts] = fd
        return fd


def _check_target(target: _Target, plan: ReplayPlan) -> None:
    # Refuse before writing anything: every directory on a file's path must be a real
    # directory (or absent), every file a regular file (or absent).
    for parts in sorted(plan.dirs, key=len):
        mode = target.kind(parts)
        if mode is not None and not stat.S_ISDIR(mode):
            raise _link_in_target(target.root, parts, mode)
    for path, _oid in plan.files:
        parts = tuple(path.split("/"))
        mode = target.kind(parts)
        if mode is not None and not stat.S_ISREG(mode):
            raise _link_in_target(target.root, parts, mode)


def _write_file(dirfd: int, name: str, data: bytes) -> None:
    for _ in range(100):
        tmp = f".got-replay-{secrets.token_hex(8)}"
        try:
            fd = os.open(tmp, _FILE_FLAGS, 0o666, dir_fd=dirfd)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - 100 collisions of 64 random bits
        raise FileExistsError(tmp)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dirfd)
        except OSError:
            pass
        raise


def write_replay(git: GitRepo, plan: ReplayPlan, directory: str | os.PathLike[str]) -> Path:
    """Write a :class:`ReplayPlan`'s files under ``directory`` (created when absent).

    ``directory`` itself is the caller's choice and may be a symbolic link; nothing
    below it is ever reached through one.

    Raises:
        UnsafePathError: a symbolic link (or a non-directory) in the target where a
            directory or file of the plan would go; nothing was written.
        StorageError: the filesystem refused a write.
    """
    root = Path(directory)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(f"cannot create {root}: {exc}") from None
    if not _AT:  # pragma: no cover - platforms without openat(): check paths, then write them
        return _write_by_path(git, plan, root)
    try:
        target = _Target(root)
    except OSError as exc:
        raise StorageError(f"cannot open {root}: {exc}") from None
    try:
        _check_target(target, plan)
        for path, oid in plan.files:
            parts = tuple(path.split("/"))
            _write_file(target.dir(parts[:-1], create=True), parts[-1], git.read_blob(oid))
    except OSError as exc:
        raise StorageError(f"cannot write into {root}: {exc}") from None
    finally:
        target.close()
    return root


def _write_by_path(git: GitRepo, plan: ReplayPlan, root: Path) -> Path:  # pragma: no cover
    for path, _oid in plan.files:
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            p = root.joinpath(*parts[:i])
            if p.is_symlink() or (i < len(parts) and p.exists() and not p.is_dir()):
                raise _link_in_target(root, tuple(parts[:i]))
    try:
        for path, oid in plan.files:
            target = root.joinpath(*path.split("/"))
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".got-replay-{secrets.token_hex(8)}")
            tmp.write_bytes(git.read_blob(oid))
            os.replace(tmp, target)
    except OSError as exc:
        raise StorageError(f"cannot write into {root}: {exc}") from None
    return root
