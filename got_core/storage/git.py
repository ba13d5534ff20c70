"""The one module that talks to pygit2 (ARCHITECTURE §5, invariant 4).

Everything above speaks hex SHAs, bytes and our own types. Objects are written
straight into the object database (blob → tree → commit) and refs are moved with
compare-and-swap; there is no working tree, no index file and no repository-wide
lock on the hot path (ARCHITECTURE §3, §5).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pygit2
from pygit2 import GitError
from pygit2.enums import MergeFavor, SortMode

from got_core.errors import (
    CorruptRepositoryError,
    CredentialsRequiredError,
    GotError,
    PushRejectedError,
    RemoteError,
    StorageError,
    UnknownRefError,
    UntrustedContentError,
)
from got_core.names import (
    MAX_PATH_BYTES,
    MAX_PATH_COMPONENT_BYTES,
    PLAIN_NAME,
    check_path,
    path_component_problem,
)
from got_core.storage._access import check_readable, refuse_unopenable
from got_core.storage.objects import check_object, damaged_under
from got_core.storage.refscan import packed_has_prefix
from got_core.types import Identity

__all__ = [
    "EMPTY_TREE",
    "READ_ERRORS",
    "BlobId",
    "CommitData",
    "GitRepo",
    "RefRace",
    "enable_fsync",
    "fsync_enabled",
    "init_bare",
    "is_valid_ref_name",
]

_BLOB = pygit2.GIT_FILEMODE_BLOB
_TREE = pygit2.GIT_FILEMODE_TREE
_EXEC = pygit2.GIT_FILEMODE_BLOB_EXECUTABLE
_LINK = pygit2.GIT_FILEMODE_LINK
_BLOB_MODES = frozenset((_BLOB, _EXEC, _LINK))  # entries whose object is a blob
_T_BLOB, _T_TREE = pygit2.GIT_OBJECT_BLOB, pygit2.GIT_OBJECT_TREE
_SHORT_PATH = MAX_PATH_BYTES // 4  # a str this long is within MAX_PATH_BYTES in any encoding
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_FULL_SHA = re.compile(r"[0-9a-f]{40}")
# One entry of a raw (SHA-1) tree object: "<octal mode> <name>\0<20-byte id>".
_RAW_ENTRY = re.compile(rb"[0-7]{1,7} [^\x00]+\x00.{20}", re.DOTALL)
_RAW_TREE = 0o040000
_RAW_BLOBS = frozenset((0o100000, 0o120000))  # regular files (any permission bits) and symbolic links
#: What reading a damaged or partial history can raise, for callers that index as far as they can.
READ_ERRORS: tuple[type[Exception], ...] = (CorruptRepositoryError, GitError)


_strict_lock = threading.Lock()
_strict_depth = 0


@contextmanager
def _trusted_writes() -> Iterator[None]:
    """Skip libgit2's per-object existence checks while we write trees and commits.

    Every entry we insert is an object we just wrote or one already in the base tree,
    so the checks (an odb lookup per inserted entry, per parent, per tree) only cost
    time (~10% of a write). The option is process-wide in libgit2, so it is switched off
    for the duration of our own writes only, and back on when the last one finishes.
    """
    global _strict_depth
    with _strict_lock:
        _strict_depth += 1
        if _strict_depth == 1:
            pygit2.settings.enable_strict_object_creation(False)
    try:
        yield
    finally:
        with _strict_lock:
            _strict_depth -= 1
            if _strict_depth == 0:
                pygit2.settings.enable_strict_object_creation(True)


# libgit2 caches only objects under 4 KiB it has read; a notes root tree (256 fan-out
# entries, ~7 KiB) is read by every note write, so let trees up to 256 KiB be cached too.
pygit2.settings.cache_object_limit(pygit2.enums.ObjectType.TREE, 256 * 1024)


_FSYNC = [False]  # libgit2 has no getter for its process-wide switch: remember what we set


def enable_fsync() -> None:
    """fsync objects and refs from now on (libgit2 keeps this setting per process)."""
    pygit2.settings.enable_fsync_gitdir(True)
    _FSYNC[0] = True


def fsync_enabled() -> bool:
    """Whether :func:`enable_fsync` was called in this process (packs written here follow it)."""
    return _FSYNC[0]


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


class RefRace(Exception):
    """Internal: a compare-and-swap on a ref lost (moved, created, or locked by another writer)."""


class BlobId(str):
    """A change value meaning "this existing blob", so unchanged content is reused, not rewritten."""


@dataclass(frozen=True, slots=True)
class CommitData:
    """A commit as plain data."""

    oid: str
    tree: str
    parents: tuple[str, ...]
    message: str
    author_name: str
    author_email: str
    time: int


def _parse_entry(entry: bytes) -> tuple[bytes, tuple[int, str]]:
    """A raw tree entry -> (name, (file-mode class, hex SHA))."""
    head, _nul, oid = entry[:-20], b"", entry[-20:]
    mode, _sp, name = head[:-1].partition(b" ")
    return name, (int(mode, 8) & 0o170000, oid.hex())


def _commit_data(c: pygit2.Commit) -> CommitData:
    return CommitData(
        str(c.id),
        str(c.tree_id),
        tuple(str(p) for p in c.parent_ids),
        c.message,
        c.author.name,
        c.author.email,
        c.commit_time,
    )


# Names already judged usable (bounded): listing a tree checks every name, and the
# same names recur in every commit of a repository.
_USABLE_NAMES: set[str] = set()
_USABLE_NAMES_MAX = 1 << 15


def _usable_name(name: str) -> bool:
    if (len(name) <= MAX_PATH_COMPONENT_BYTES and PLAIN_NAME.match(name)) or path_component_problem(name) is None:
        if len(_USABLE_NAMES) >= _USABLE_NAMES_MAX:
            _USABLE_NAMES.clear()
        _USABLE_NAMES.add(name)
        return True
    return False


class GitRepo:
    """A bare (or existing) git repository, driven through libgit2.

    Args:
        path: the repository (a bare ``*.git`` directory, or a work tree / its ``.git``).
        create: initialise a bare repository when none exists.
        initial_branch: HEAD's branch for a new repository.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True, initial_branch: str = "master") -> None:
        path = Path(path)
        try:
            self._r = pygit2.Repository(str(path), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
        except (GitError, KeyError) as exc:
            refuse_unopenable(path, str(exc), create)
            try:
                self._r = pygit2.init_repository(str(path), bare=True, initial_head=initial_branch)
            except (GitError, OSError) as exc2:
                raise StorageError(f"cannot create a repository at {path}: {exc2}") from None
        else:
            check_readable(Path(self._r.path))
        self.gitdir = Path(self._r.path)
        self.workdir = Path(self._r.workdir) if self._r.workdir else None
        # tree of each commit this handle wrote lately: the next write on top of it needs
        # that tree, and libgit2 caches objects it read, not ones it wrote
        self._trees: dict[str, str] = {}
        self._entries: dict[str, frozenset[bytes]] = {}  # raw entries of trees compared lately

    # ------------------------------------------------------------------ objects
    def write_blob(self, data: bytes) -> str:
        """Store bytes; returns the blob SHA (existing content costs a hash, not a write)."""
        try:
            return str(self._r.create_blob(data))
        except (GitError, OSError) as exc:
            raise StorageError(f"cannot write to {self.gitdir}: {exc}") from None

    def read_blob(self, oid: str) -> bytes:
        """Bytes of a blob.

        Raises:
            CorruptRepositoryError: missing, damaged, or not a blob.
        """
        obj = self._get(oid)
        if not isinstance(obj, pygit2.Blob):
            raise CorruptRepositoryError(f"object {oid} is a {obj.type_str}, expected a blob")
        return obj.data

    def has_object(self, oid: str) -> bool:
        """Whether the object database holds ``oid``."""
        try:
            return oid in self._r
        except (GitError, ValueError):
            return False

    def is_tree(self, oid: str) -> bool:
        """Whether ``oid`` is a tree in the object database."""
        try:
            obj = self._r.get(oid)
        except (GitError, ValueError, TypeError):
            return False
        return obj is not None and obj.type == pygit2.GIT_OBJECT_TREE

    def _get(self, oid: str) -> pygit2.Object:
        try:
            obj = self._r.get(oid)
        except (GitError, ValueError) as exc:
            raise CorruptRepositoryError(f"object {oid} cannot be read: {exc}; run `got fsck`") from None
        if obj is None:
            raise CorruptRepositoryError(f"object {oid} is missing from {self.gitdir}; run `got fsck`")
        return obj

    def build_tree(self, base_tree: str | None, changes: Mapping[str, bytes | BlobId | None]) -> str:
        """A new tree: ``base_tree`` with ``changes`` applied (path -> bytes, existing blob, or None to delete).

        Unchanged subtrees and blobs are reused by SHA, so a change costs only the
        objects on its path (ARCHITECTURE §6).
        """
        nested: dict[tuple[str, ...], bytes | BlobId | None] = {}
        for path, value in changes.items():
            nested[check_path(path)] = value
        base = self._tree(base_tree, "base tree") if base_tree else None
        try:
            with _trusted_writes():
                new = self._build(base, nested)
        except (GitError, OSError) as exc:
            raise StorageError(f"cannot write a tree in {self.gitdir}: {exc}") from None
        return new or self._empty_tree()

    def _empty_tree(self) -> str:
        return str(self._r.TreeBuilder().write())

    def _build(self, base: pygit2.Tree | None, changes: dict[tuple[str, ...], bytes | BlobId | None]) -> str | None:
        tb = self._r.TreeBuilder(base) if base is not None else self._r.TreeBuilder()
        groups: dict[str, dict[tuple[str, ...], bytes | BlobId | None]] = {}
        for parts, value in changes.items():
            if len(parts) == 1:
                name = parts[0]
                if value is None:
                    if tb.get(name) is not None:
                        tb.remove(name)
                elif isinstance(value, BlobId):
                    tb.insert(name, value, _BLOB)
                else:
                    tb.insert(name, self._r.create_blob(value), _BLOB)
            else:
                groups.setdefault(parts[0], {})[parts[1:]] = value
        for name, sub in groups.items():
            existing = tb.get(name)
            sub_base = existing if isinstance(existing, pygit2.Tree) else None
            new_sub = self._build(sub_base, sub)
            if new_sub is None:
                if existing is not None:
                    tb.remove(name)
            else:
                tb.insert(name, new_sub, _TREE)
        if len(tb) == 0:
            return None
        return str(tb.write())

    def _tree(self, oid: str, what: str = "tree") -> pygit2.Tree:
        obj = self._get(oid)
        if not isinstance(obj, pygit2.Tree):
            raise CorruptRepositoryError(f"{what} {oid} is a {obj.type_str}, expected a tree; run `got fsck`")
        return obj

    def _commit(self, oid: str) -> pygit2.Commit:
        obj = self._get(oid)
        if not isinstance(obj, pygit2.Commit):
            raise CorruptRepositoryError(f"object {oid} is a {obj.type_str}, expected a commit")
        return obj

    def _commit_tree(self, oid: str) -> pygit2.Tree:
        return self._tree(str(self._commit(oid).tree_id), f"tree of commit {oid}")

    def _subtree(self, root: pygit2.Tree, path: str) -> pygit2.Tree | None:
        """The tree at ``path`` under ``root`` (``""``: root itself), or None."""
        path = path.strip("/") if isinstance(path, str) else path
        if not path:
            return root
        check_path(path)
        try:
            entry = root[path]
        except KeyError:
            return None
        if entry.filemode != _TREE:
            return None
        return self._tree(str(entry.id), f"tree {path!r}")

    def tree_files(self, tree: str, prefix: str = "") -> dict[str, str]:
        """Every file under ``tree`` (or under ``prefix`` inside it): path -> blob SHA.

        Only paths this API could also write are listed: every component passes
        :func:`got_core.names.check_path`. Entries whose names are reserved, escaping or
        not UTF-8 (possible only in trees written by other tools) and gitlinks are left
        out; a symbolic link is a blob holding its target's name and is listed as such
        (as ``git show rev:path`` prints it), never followed. :meth:`walk_tree` sees
        everything, raw.

        Raises:
            InvalidNameError: ``prefix`` is not a valid path.
            CorruptRepositoryError: a tree is missing or is not a tree.
        """
        prefix = prefix.strip("/") if isinstance(prefix, str) else prefix
        root = self._subtree(self._tree(tree), prefix)
        if root is None:
            return {}
        out: dict[str, str] = {}
        stack: list[tuple[str, pygit2.Tree]] = [(prefix or "", root)]
        known = _USABLE_NAMES
        while stack:
            base, t = stack.pop()
            for entry in t:
                # entry.type, not entry.filemode: the latter builds an enum per entry (3x slower)
                kind = entry.type
                if kind != _T_BLOB and kind != _T_TREE:
                    continue  # a gitlink: another repository's commit
                name = entry.name
                if name is None:  # only objects looked up by id lack a name, never a tree's entries
                    continue
                if name not in known and not _usable_name(name):
                    continue
                path = f"{base}/{name}" if base else name
                if len(path) > _SHORT_PATH and len(path.encode("utf-8")) > MAX_PATH_BYTES:
                    continue
                if kind == _T_TREE:
                    stack.append((path, self._tree(str(entry.id), f"tree {path!r}")))
                else:
                    out[path] = str(entry.id)
        return out

    def walk_tree(self, tree: str) -> Iterator[tuple[tuple[bytes, ...], int, str]]:
        """Every non-tree entry under ``tree`` as (raw name components, file mode, SHA).

        Names are the bytes the tree holds, unchecked: this is the view for code that
        must judge a tree written by someone else (replay). Subtrees are descended
        (never through a gitlink); entries come depth first, each directory in tree order.

        Raises:
            CorruptRepositoryError: a tree is missing or an entry marked as a tree is not one.
        """
        stack: list[tuple[tuple[bytes, ...], pygit2.Tree]] = [((), self._tree(tree))]
        while stack:
            base, t = stack.pop()
            subtrees: list[tuple[tuple[bytes, ...], pygit2.Tree]] = []
            for entry in t:
                raw_name = entry.raw_name
                if raw_name is None:  # only objects looked up by id lack a name, never a tree's entries
                    raise CorruptRepositoryError(f"an entry of tree {t.id} has no name; run `got fsck`")
                parts = (*base, raw_name)
                if entry.filemode == _TREE:
                    subtrees.append((parts, self._tree(str(entry.id), "tree entry")))
                else:
                    yield parts, entry.filemode, str(entry.id)
            stack.extend(reversed(subtrees))

    def blob_size(self, oid: str) -> int:
        """Size in bytes of a blob, read from its header (the content is not loaded).

        Raises:
            CorruptRepositoryError: missing, or not a blob.
        """
        try:
            kind, size = self._r.odb.read_header(oid)
        except (GitError, ValueError, KeyError) as exc:
            raise CorruptRepositoryError(f"object {oid} cannot be read: {exc}; run `got fsck`") from None
        if kind != pygit2.GIT_OBJECT_BLOB:
            raise CorruptRepositoryError(f"object {oid} is not a blob; run `got fsck`")
        return size

    def tree_entry(self, tree: str, path: str) -> str | None:
        """Blob SHA of the file at ``path`` in ``tree``, or None (a directory, a gitlink, or absent).

        Raises:
            InvalidNameError: ``path`` is not a valid path (see :func:`got_core.names.check_path`).
        """
        return self.tree_entries(tree, [path])[path]

    def tree_entries(self, tree: str, paths: Iterable[str]) -> dict[str, str | None]:
        """Blob SHA (or None) of the file at each of ``paths`` in ``tree``, reading the tree once.

        Raises:
            InvalidNameError: a path that is not valid (see :func:`got_core.names.check_path`).
        """
        root = self._tree(tree)
        out: dict[str, str | None] = {}
        for path in paths:
            check_path(path)
            try:
                entry = root[path]
            except KeyError:
                out[path] = None
                continue
            out[path] = str(entry.id) if entry.type == _T_BLOB else None
        return out

    def tree_names(self, tree: str, path: str = "") -> list[tuple[str, bool]]:
        """Entries directly under ``path``: (name, is_tree); the same entries :meth:`tree_files` lists."""
        t = self._subtree(self._tree(tree), path)
        if t is None:
            return []
        return [
            (e.name, e.type == _T_TREE)
            for e in t
            if e.type in (_T_BLOB, _T_TREE)
            and e.name is not None  # a tree's entries always have one
            and (e.name in _USABLE_NAMES or _usable_name(e.name))
        ]

    # ------------------------------------------------------------------ commits
    def write_commit(
        self,
        tree: str,
        parents: Iterable[str],
        message: str,
        author: Identity,
        committer: Identity,
        when: tuple[int, int],
        sign: Callable[[str], str] | None = None,
    ) -> str:
        """Create a commit object (no ref moves); ``sign(payload) -> armored signature``."""
        a = pygit2.Signature(author.name, author.email, when[0], when[1])
        c = pygit2.Signature(committer.name, committer.email, when[0], when[1])
        parent_ids: list[str | pygit2.Oid] = list(parents)
        try:
            if sign is None:
                with _trusted_writes():
                    oid = str(self._r.create_commit(None, a, c, message, tree, parent_ids))
            else:
                # pygit2's stubs say Oid; create_commit_string returns the commit's text (a str)
                payload = cast(str, self._r.create_commit_string(a, c, message, tree, parent_ids))
                oid = str(self._r.create_commit_with_signature(payload, sign(payload)))
        except (GitError, OSError) as exc:
            raise StorageError(f"cannot write a commit in {self.gitdir}: {exc}") from None
        if len(self._trees) >= 64:
            self._trees.clear()
        self._trees[oid] = tree
        return oid

    def commit_tree(self, oid: str) -> str:
        """The tree SHA of a commit (remembered for commits this handle wrote).

        Raises:
            CorruptRepositoryError: missing or not a commit.
        """
        tree = self._trees.get(oid)
        return tree if tree is not None else str(self._commit(oid).tree_id)

    def read_commit(self, oid: str) -> CommitData:
        """A commit as :class:`CommitData`.

        Raises:
            CorruptRepositoryError: missing or not a commit.
        """
        return _commit_data(self._commit(oid))

    def commit_signature(self, oid: str) -> tuple[bytes | None, bytes | None]:
        """(armored signature, signed payload) of a commit; (None, None) when unsigned."""
        sig, payload = self._commit(oid).gpg_signature  # (None, None) when unsigned (the stubs say bytes)
        return sig, payload

    def object_problem(self, oid: str, expected: str | None = None) -> tuple[str | None, bytes | None]:
        """Check one stored object byte for byte: ``(problem or None, raw content)``.

        The object is read raw from the object database and hashed here (``"<type>
        <size>\\0" + content``), so a flipped byte is caught even when libgit2's own
        hash check is switched off. ``expected`` is the type the referrer says it has
        (``commit``, ``tree``, ``blob``). Open a fresh :class:`GitRepo` to check what is
        on disk now: libgit2 caches objects it has read.
        """
        try:
            kind, data = self._r.odb.read(oid)
        except KeyError:
            return "is missing", None
        except (GitError, ValueError, OSError) as exc:
            text = str(exc)
            if "hash mismatch" in text:
                return "does not hash to its id (its content was altered)", None
            return f"cannot be read ({text[:120]})", None
        return check_object(oid, _TYPE_NAMES.get(int(kind), str(kind)), data, expected)

    def damaged_under(
        self, tree: str, seen: dict[str, str | None] | None = None, prefix: str = ""
    ) -> list[tuple[str, str, str]]:
        """Every tree and blob reachable from ``tree`` that is missing or does not hash to its id
        (see :func:`got_core.storage.objects.damaged_under`)."""
        return damaged_under(self.object_problem, tree, seen, prefix)

    def resolve(self, rev: str) -> str:
        """A commit SHA for any revision (SHA or prefix, branch, tag, ``refs/...``, ``x~1``).

        Raises:
            UnknownRefError: nothing by that name.
        """
        if not isinstance(rev, str) or not rev or "\x00" in rev or len(rev) > 1024:
            raise UnknownRefError(f"{str(rev)[:80]!r} is not a revision; give a SHA, branch or tag")
        if len(rev) == 40 and _FULL_SHA.fullmatch(rev):  # the hot path: a full SHA we wrote
            try:
                obj = self._r.get(rev)
            except (GitError, ValueError):
                obj = None
            if obj is not None and obj.type == pygit2.GIT_OBJECT_COMMIT:
                return rev
        try:
            obj = self._r.revparse_single(rev)
            return str(obj.peel(pygit2.Commit).id)
        except (KeyError, GitError, ValueError, pygit2.InvalidSpecError):
            raise UnknownRefError(
                f"no commit, branch or tag named {rev[:80]!r}; `got log` and `got tags` list them"
            ) from None

    def walk(self, tips: Iterable[str], hide: Iterable[str] = (), topo: bool = False) -> Iterator[CommitData]:
        """Commits reachable from ``tips`` but not from ``hide``, newest first."""
        tips = list(tips)
        if not tips:
            return
        mode = SortMode.TOPOLOGICAL | SortMode.TIME if topo else SortMode.TIME
        try:
            walker = self._r.walk(tips[0], mode)
            for t in tips[1:]:
                walker.push(t)
            for h in hide:
                walker.hide(h)
            for c in walker:
                yield _commit_data(c)
        except GitError as exc:
            raise CorruptRepositoryError(f"history walk failed in {self.gitdir}: {exc}; run `got fsck`") from None

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """True when ``ancestor`` is reachable from ``descendant`` (or equal).

        Raises:
            CorruptRepositoryError: the history between them cannot be read.
        """
        try:
            return ancestor == descendant or self._r.descendant_of(descendant, ancestor)
        except (GitError, ValueError, KeyError) as exc:
            raise CorruptRepositoryError(
                f"cannot walk the history between {ancestor} and {descendant}: {exc}; run `got fsck`"
            ) from None

    def merge_base(self, a: str, b: str) -> str | None:
        """Best common ancestor of two commits, or None for unrelated histories.

        Raises:
            CorruptRepositoryError: the history of either cannot be read.
        """
        try:
            base = self._r.merge_base(a, b)
        except (GitError, ValueError, KeyError) as exc:
            raise CorruptRepositoryError(f"cannot find where {a} and {b} meet: {exc}; run `got fsck`") from None
        return str(base) if base else None

    def changed_paths(self, commit: CommitData) -> list[tuple[str, str | None, str | None]]:
        """(path, old blob, new blob) for every file the commit changed vs its first parent."""
        old_tree = self.read_commit(commit.parents[0]).tree if commit.parents else None
        return self.changed_tree_paths(old_tree, commit.tree)

    def changed_tree_paths(self, old_tree: str | None, new_tree: str) -> list[tuple[str, str | None, str | None]]:
        """(path, old blob, new blob) for every blob that differs between two trees (None: empty).

        Blobs are regular files and symbolic links (whose content is the link target);
        gitlinks name commits of another repository and are left out. Paths are the
        tree's names as text, bytes that are not UTF-8 shown as ``\\xNN``. Subtrees with
        the same id on both sides are not read, so a change costs the trees on its path
        (a note in a fan-out notes tree: two small trees), not a walk of everything.

        Raises:
            CorruptRepositoryError: a tree is missing, or is not a well-formed tree.
        """
        out: list[tuple[str, str | None, str | None]] = []
        stack: list[tuple[bytes, str | None, str | None]] = [(b"", old_tree, new_tree)]
        while stack:
            base, a, b = stack.pop()
            before = self._raw_entries(a) if a else frozenset()
            after = self._raw_entries(b) if b else frozenset()
            # entries are compared as raw bytes: only the ones that differ are parsed
            old = dict(_parse_entry(e) for e in before - after)
            new = dict(_parse_entry(e) for e in after - before)
            for name in old.keys() | new.keys():
                was, now = old.get(name), new.get(name)
                path = base + name
                was_tree = was is not None and was[0] == _RAW_TREE
                now_tree = now is not None and now[0] == _RAW_TREE
                if was_tree or now_tree:  # a tree on either side: compare what is under it
                    stack.append(
                        (path + b"/", was[1] if was and was_tree else None, now[1] if now and now_tree else None)
                    )
                old_blob = was[1] if was is not None and was[0] in _RAW_BLOBS else None
                new_blob = now[1] if now is not None and now[0] in _RAW_BLOBS else None
                if old_blob != new_blob:
                    out.append((path.decode("utf-8", "backslashreplace"), old_blob, new_blob))
        return out

    def _raw_entries(self, tree: str) -> frozenset[bytes]:
        """A tree's entries as the raw bytes of each (``<mode> <name>\\0<id>``).

        The last few trees are remembered (a tree never changes): the index compares each
        new notes tree, and each new node's tree, with the one it compared last time.

        Raises:
            CorruptRepositoryError: missing, not a tree, or not well formed.
        """
        known = self._entries.get(tree)
        if known is not None:
            return known
        try:
            kind, data = self._r.odb.read(tree)
        except (GitError, ValueError, KeyError) as exc:
            raise CorruptRepositoryError(f"tree {tree} cannot be read: {exc}; run `got fsck`") from None
        if kind != pygit2.GIT_OBJECT_TREE:
            raise CorruptRepositoryError(f"object {tree} is not a tree; run `got fsck`")
        entries = _RAW_ENTRY.findall(data) if len(tree) == 40 else []
        if sum(map(len, entries)) != len(data):  # matches cover the object exactly, or it is malformed
            raise CorruptRepositoryError(f"tree {tree} is not a well-formed tree; run `got fsck`")
        found = frozenset(entries)
        if len(self._entries) >= 16:
            self._entries.pop(next(iter(self._entries)))
        self._entries[tree] = found
        return found

    def diff_trees(self, a_tree: str, b_tree: str, paths: Iterable[str] | None = None, context: int = 3) -> str:
        """Unified, git-style patch text between two trees (optionally only some paths).

        Text that is not UTF-8 (in names or content) is shown with U+FFFD replacements,
        so the result always prints.
        """
        ta, tb = self._tree(a_tree), self._tree(b_tree)
        wanted = set(paths) if paths is not None else None
        try:
            diff = ta.diff_to_tree(tb, context_lines=context)
            parts = []
            for patch in diff:
                if patch is None:  # libgit2 gives no patch for an unchanged delta
                    continue
                delta = patch.delta
                path = (delta.new_file.raw_path or delta.old_file.raw_path).decode("utf-8", "surrogateescape")
                if wanted is None or path in wanted:
                    parts.append(patch.data.decode("utf-8", "replace"))
        except GitError as exc:
            raise CorruptRepositoryError(f"cannot diff trees {a_tree} and {b_tree}: {exc}; run `got fsck`") from None
        return "".join(parts)

    # ------------------------------------------------------------------ refs
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
        try:
            obj = self._r.get(oid)
            return None if obj is None else str(obj.peel(pygit2.Commit).id)
        except (GitError, ValueError, AttributeError, pygit2.InvalidSpecError):
            return None

    def list_refs(self, prefix: str = "refs/") -> dict[str, str]:
        """All direct refs under ``prefix``: name -> target SHA (tags not peeled)."""
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
            ref.delete()
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
        except RefRace:
            raise
        except (GitError, OSError, ValueError) as exc:
            if any(self._lost_race(n, e) for n, (e, _new) in updates.items()):
                raise RefRace(next(iter(updates))) from None
            raise StorageError(f"cannot update {', '.join(sorted(updates))} in {self.gitdir}: {exc}") from None

    def _lock_ref(self, txn: pygit2.transaction.ReferenceTransaction, name: str, expected: str | None) -> None:
        """Lock one ref of a transaction; a lock another writer holds (or just held) is a lost race.

        A writer that held the lock and then gave up (its own transaction lost) leaves
        the ref as it was and the lock gone by the time we look, which the state cannot
        tell apart from a disk error: the lock is tried once more before it is one.
        """
        for attempt in (0, 1):
            try:
                txn.lock_ref(name)
                return
            except (GitError, OSError, ValueError):
                if self._lost_race(name, expected):
                    raise RefRace(name) from None
                if attempt:
                    raise

    def _check_ref_path_free(self, name: str) -> None:
        """Refuse to create ``name`` where a ref already lives at a parent or child path."""
        parts = name.split("/")
        parent = next((p for k in range(2, len(parts)) if self.ref_target(p := "/".join(parts[:k]))), None)
        clash = f"the ref {parent} exists" if parent is not None else None
        if clash is None:
            loose = self.gitdir / name
            if packed_has_prefix(self.gitdir, name + "/") or (
                loose.is_dir() and any(files for _root, _dirs, files in os.walk(loose))
            ):
                clash = f"refs exist under {name}/"
        if clash is not None:
            raise StorageError(
                f"cannot create {name} in {self.gitdir}: {clash} (git keeps a ref and the refs under "
                "its name apart); choose another name or delete that ref"
            )

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

    # ------------------------------------------------------------------ merge
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

    # ------------------------------------------------------------------ remotes
    def fetch(self, url: str, refspecs: list[str], progress: Callable[[int, int, int], None] | None = None) -> None:
        """Fetch ``refspecs`` from ``url`` (a path or URL); never prompts for credentials.

        libgit2 does the transfer in-process: nothing of the peer is executed (no
        upload-pack, hooks or config-defined commands), and a local peer's
        ``objects/info/alternates`` are followed no further than git itself would.

        Args:
            progress: called while the pack streams in with (objects announced, objects
                received, bytes received); raising aborts the fetch with that error.
        """
        self._remote("fetch", url, refspecs, progress)

    def push(self, url: str, refspecs: list[str]) -> None:
        """Push ``refspecs`` to ``url``; never prompts for credentials (nor runs the peer's hooks)."""
        self._remote("push", url, refspecs)

    def ls_remote(self, url: str) -> dict[str, str]:
        """The refs ``url`` advertises -> the SHAs they point at (no objects travel).

        Raises:
            RemoteError: cannot be reached, not a repository, or it asked for credentials.
        """
        heads: dict[str, str] = {}
        try:
            remote = self._r.remotes.create_anonymous(url)
            for head in remote.list_heads(callbacks=_NoPrompt(url)):
                name = str(head.name)
                if name.startswith("refs/") and not name.endswith("^{}"):
                    heads[name] = str(head.oid)
        except GotError:
            raise
        except (GitError, OSError, KeyError) as exc:
            raise RemoteError(f"listing the refs of {url} failed: {exc}") from None
        return heads

    def _remote(
        self, verb: str, url: str, refspecs: list[str], progress: Callable[[int, int, int], None] | None = None
    ) -> None:
        try:
            remote = self._r.remotes.create_anonymous(url)
            getattr(remote, verb)(refspecs, callbacks=_NoPrompt(url, progress))
        except GotError:
            raise
        except (GitError, OSError, KeyError) as exc:
            where = "from" if verb == "fetch" else "to"
            raise RemoteError(f"{verb} {where} {url} failed: {exc}") from None

    # ------------------------------------------------------------------ raw objects (inbound checks)
    def read_raw(self, oid: str) -> tuple[str, bytes]:
        """(type name, raw bytes) of any object, without parsing it (``tree``, ``blob``, ...).

        Raises:
            CorruptRepositoryError: missing or unreadable.
        """
        try:
            kind, data = self._r.odb.read(oid)
        except (GitError, ValueError, KeyError) as exc:
            raise CorruptRepositoryError(f"object {oid} cannot be read from {self.gitdir}: {exc}") from None
        return _TYPE_NAMES.get(int(kind), "unknown"), data

    def object_header(self, oid: str) -> tuple[str, int] | None:
        """(type name, size in bytes) of an object, or None when the store lacks it."""
        try:
            kind, size = self._r.odb.read_header(oid)
        except (GitError, ValueError, KeyError):
            return None
        return _TYPE_NAMES.get(int(kind), "unknown"), int(size)


def init_bare(path: Path) -> None:
    """Create an empty bare repository at ``path`` (an existing empty directory), in-process.

    Raises:
        StorageError: the directory cannot be written.
    """
    try:
        pygit2.init_repository(str(path), bare=True)
    except (GitError, OSError) as exc:
        raise StorageError(f"cannot create a repository at {path}: {exc}") from None


_TYPE_NAMES = {
    int(pygit2.GIT_OBJECT_COMMIT): "commit",
    int(pygit2.GIT_OBJECT_TREE): "tree",
    int(pygit2.GIT_OBJECT_BLOB): "blob",
    int(pygit2.GIT_OBJECT_TAG): "tag",
}


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


#: Credentials for remotes come only from these environment variables, set outside the agent
#: (never a prompt): an HTTPS token (with an optional user name) and an SSH private key, offered
#: only to the hosts listed in ``GOT_REMOTE_HOSTS`` (so a peer elsewhere never sees them).
TOKEN_ENV, USER_ENV, SSH_KEY_ENV, HOSTS_ENV = "GOT_REMOTE_TOKEN", "GOT_REMOTE_USER", "GOT_SSH_KEY", "GOT_REMOTE_HOSTS"


def _trusted_host(url: str) -> bool:
    from urllib.parse import urlsplit

    hosts = {h.strip().lower() for h in os.environ.get(HOSTS_ENV, "").split(",") if h.strip()}
    if "://" not in url and "@" in url:  # scp-style user@host:path
        host = url.partition("@")[2].partition(":")[0]
    else:
        host = urlsplit(url).hostname or ""
    return bool(host) and host.lower() in hosts


def _is_ssh(url: str) -> bool:
    return url.startswith(("ssh://", "ssh+git://", "git+ssh://")) or ("://" not in url and "@" in url)


class _NoPrompt(pygit2.RemoteCallbacks):
    """Remote callbacks that never prompt, reject failed ref updates, and hand transfer
    progress to an optional limit check.

    When a server asks for credentials, the only answer is what the environment holds
    (``GOT_REMOTE_TOKEN`` [+ ``GOT_REMOTE_USER``] for HTTP(S), ``GOT_SSH_KEY`` or a running
    ``ssh-agent`` for SSH), offered once and only to a host named in ``GOT_REMOTE_HOSTS``:
    asked again (refused), or with nothing configured for that host, the transfer fails at
    once with :class:`CredentialsRequiredError`. An SSH host key that ``~/.ssh/known_hosts``
    does not list for the host, or a TLS certificate that does not verify, fails with
    :class:`RemoteError` before anything is sent.
    """

    def __init__(self, url: str, progress: Callable[[int, int, int], None] | None = None) -> None:
        super().__init__()
        self._url = url
        self._progress = progress
        self._offered = False

    def credentials(self, url, username_from_url, allowed_types):
        kinds = pygit2.enums.CredentialType
        answer: object | None = None
        if not self._offered and _trusted_host(url or self._url):
            user = username_from_url or os.environ.get(USER_ENV) or "git"
            token, key = os.environ.get(TOKEN_ENV), os.environ.get(SSH_KEY_ENV)
            if allowed_types & kinds.USERPASS_PLAINTEXT and token:
                answer = pygit2.UserPass(user, token)
            elif allowed_types & kinds.SSH_KEY and key:
                pub = key + ".pub"
                answer = pygit2.Keypair(user, pub if os.path.exists(pub) else None, key, "")
            elif allowed_types & kinds.SSH_KEY and os.environ.get("SSH_AUTH_SOCK"):
                answer = pygit2.KeypairFromAgent(user)
        if answer is None:
            again = " refused the credentials configured for it" if self._offered else " asks for credentials"
            raise CredentialsRequiredError(
                f"{self._url}{again}; GitOfThoughts never prompts. Configure access outside the agent: "
                f"{TOKEN_ENV} (and {USER_ENV}) for HTTPS, {SSH_KEY_ENV} or ssh-agent for SSH, "
                f"with the host in {HOSTS_ENV}"
            )
        self._offered = True
        return answer

    def certificate_check(self, certificate, valid, host):
        # pygit2 lets every SSH host key through, whatever libgit2 found in ~/.ssh/known_hosts
        # (its pass-through): a server whose key is unknown or changed could be anyone.
        if valid:
            return True
        name = host.decode("utf-8", "replace") if isinstance(host, bytes) else str(host)
        if _is_ssh(self._url):
            raise RemoteError(
                f"{self._url}: the SSH host key of {name} is not the one ~/.ssh/known_hosts lists for it, "
                "or it is not listed; check the key and add it (ssh-keyscan), then try again"
            )
        raise RemoteError(f"{self._url}: the TLS certificate of {name} is not valid; nothing was sent")

    def transfer_progress(self, stats):
        if self._progress is not None:
            self._progress(stats.total_objects, stats.received_objects, stats.received_bytes)

    def push_update_reference(self, refname, message):
        if message:
            raise PushRejectedError(f"push of {refname} to {self._url} was rejected: {message}")
