"""Blobs and trees: writing, reading and listing them (a mixin of ``GitRepo``)."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator, Mapping

import pygit2
from pygit2 import GitError

from got_core.errors import CorruptRepositoryError, InvalidInputError, StorageError
from got_core.names import (
    MAX_PATH_BYTES,
    MAX_PATH_COMPONENT_BYTES,
    PLAIN_NAME,
    CheckedFiles,
    check_path,
    path_component_problem,
)
from got_core.storage.git._handle import EMPTY_TREE, BlobId
from got_core.storage.git._settings import _trusted_writes
from got_core.storage.git._staging import _Staging
from got_core.storage.notes_fanout import fanout_changes, keep_written_dirs, written_dirs
from got_core.storage.packs import build_tree_objects, read_tree_entries, uniform_tree_names

_BLOB = pygit2.GIT_FILEMODE_BLOB
_TREE = pygit2.GIT_FILEMODE_TREE
_EXEC = pygit2.GIT_FILEMODE_BLOB_EXECUTABLE
_LINK = pygit2.GIT_FILEMODE_LINK
_BLOB_MODES = frozenset((_BLOB, _EXEC, _LINK))  # entries whose object is a blob
_T_BLOB, _T_TREE = pygit2.GIT_OBJECT_BLOB, pygit2.GIT_OBJECT_TREE
_SHORT_PATH = MAX_PATH_BYTES // 4  # a str this long is within MAX_PATH_BYTES in any encoding

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


_HEX40 = re.compile(r"[0-9a-f]{40}")


class _Objects(_Staging):
    """Blobs and trees."""

    def write_blob(self, data: bytes) -> str:
        """Store bytes; returns the blob SHA (existing content costs a hash, not a write).

        Inside a ref move the blob is staged and lands in that move's pack (``_staging``).
        """
        staged = self._stage("blob", bytes(data))
        if staged is not None:
            return staged
        try:
            return str(self._r.create_blob(data))
        except (GitError, OSError) as exc:
            raise StorageError(f"cannot write to {self.gitdir}: {exc}") from None

    def read_blob(self, oid: str) -> bytes:
        """Bytes of a blob.

        Raises:
            CorruptRepositoryError: missing, damaged, or not a blob.
        """
        found = self._in_memory(oid)
        if found is not None and found[0] == "blob":
            return found[1]
        obj = self._get(oid)
        if not isinstance(obj, pygit2.Blob):
            raise CorruptRepositoryError(f"object {oid} is a {obj.type_str}, expected a blob")
        try:
            # the content the lookup read (and hash-checked), through the buffer protocol: ``obj.data``
            # would read the object from the object database again (libgit2's read_prefix, which
            # asks every backend, inflates and hashes it a second time)
            return memoryview(obj).tobytes()
        except GitError as exc:
            raise CorruptRepositoryError(f"object {oid} cannot be read: {exc}; run `got fsck`") from None

    def has_object(self, oid: str) -> bool:
        """Whether the object database holds ``oid`` (staged objects count: they are written before any ref moves)."""
        if oid in self._staged:
            return True
        try:
            return oid in self._r or oid in self._r  # asked twice: see _Handle._lookup
        except (GitError, ValueError):
            return False

    def is_tree(self, oid: str) -> bool:
        """Whether ``oid`` is a tree in the object database (or staged)."""
        found = self._in_memory(oid) if isinstance(oid, str) else None
        if found is not None:
            return found[0] == "tree"
        try:
            obj = self._lookup(oid)
        except (GitError, ValueError, TypeError):
            return False
        return obj is not None and obj.type == pygit2.GIT_OBJECT_TREE

    def build_tree(self, base_tree: str | None, changes: Mapping[str, bytes | BlobId | None]) -> str:
        """A new tree: ``base_tree`` with ``changes`` applied (path -> bytes, existing blob, or None to delete).

        Unchanged subtrees and blobs are reused by SHA, so a change costs only the
        objects on its path (ARCHITECTURE §6). Every path is checked (``names.check_path``),
        except those of a :class:`~got_core.names.CheckedFiles`, which were on its construction.
        """
        if self._staging:
            return self._build_staged(base_tree, changes)
        checked = changes if isinstance(changes, CheckedFiles) else None
        nested: dict[tuple[str, ...], bytes | BlobId | None] = {}
        for path, value in changes.items():
            parts = checked.parts(path) if checked is not None else None
            nested[parts if parts is not None else check_path(path)] = value
        base = self._tree(base_tree, "base tree") if base_tree else None
        try:
            with _trusted_writes():
                new = self._build(base, nested)
        except (GitError, OSError) as exc:
            raise StorageError(f"cannot write a tree in {self.gitdir}: {exc}") from None
        return new or self._empty_tree()

    def _build_staged(self, base_tree: str | None, changes: Mapping[str, bytes | BlobId | None]) -> str:
        """:meth:`build_tree` inside a ref move: the same tree bytes, built in Python and staged."""
        ids: dict[str, str | None] = {}
        for path, value in changes.items():
            if value is None:
                ids[path] = None
            elif isinstance(value, BlobId):
                if not _HEX40.fullmatch(value):
                    raise InvalidInputError(f"{str(value)[:80]!r} is not a blob id of {self.gitdir}")
                ids[path] = str(value)
            else:
                ids[path] = self.write_blob(value)
        tree_ids: list[str] = []
        checked = changes if isinstance(changes, CheckedFiles) else None
        root, trees = build_tree_objects(self._raw_read, base_tree or None, ids, self._built, tree_ids, checked)
        for (kind, data), oid in zip(trees, tree_ids, strict=True):
            self._stage_known(oid, kind, data)  # hashed once, by the build
        if root is None:
            self._stage("tree", b"")
            return EMPTY_TREE
        return root

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
        header = self._raw_header(oid)
        if header is None:
            raise CorruptRepositoryError(f"object {oid} cannot be read from {self.gitdir}; run `got fsck`")
        if header[0] != "blob":
            raise CorruptRepositoryError(f"object {oid} is not a blob; run `got fsck`")
        return header[1]

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
        if self._in_memory(tree) is not None:
            return {path: self._entry_in_memory(tree, path) for path in paths}
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

    def _entry_in_memory(self, tree: str, path: str) -> str | None:
        """:meth:`tree_entry` answered from raw trees (a tree this handle wrote lately)."""
        node = tree
        parts = check_path(path)
        for i, part in enumerate(parts):
            if bytes.fromhex(node) not in self._built:
                kind, data = self._raw_read(node)
                uniform = uniform_tree_names(data) if kind == "tree" else None
                if uniform is not None:  # a notes fan-out directory or root: bisected, not parsed
                    kind_mode, width, names = uniform
                    name = part.encode("utf-8")
                    at = bisect.bisect_left(names, name)
                    if at == len(names) or names[at] != name:
                        return None
                    start = (at + 1) * (len(kind_mode) + width + 22) - 20
                    node = data[start : start + 20].hex()
                    last = i == len(parts) - 1
                    if kind_mode == b"100644":
                        return node if last else None
                    if last:
                        return None  # a directory, not a file
                    continue
            found = self._parsed_tree(node).get(part.encode("utf-8"))
            if found is None:
                return None
            entry = found[1]
            mode = int(entry[: entry.index(b" ")], 8)
            node = entry[-20:].hex()
            if i == len(parts) - 1:
                return node if mode & 0o170000 in (0o100000, 0o120000) else None
            if mode & 0o170000 != 0o040000:
                return None
        return None

    def _parsed_tree(self, oid: str) -> dict[bytes, tuple[bytes, bytes]]:
        """The entries of tree ``oid``, parsed once: a tree this handle built or read lately is
        not parsed again, and is kept where :meth:`build_tree` starts from, so a note's lookups
        of its other spellings and the build of its notes tree share one parse of the fan-out
        directory (n/256 entries at n notes)."""
        key = bytes.fromhex(oid)
        entries = self._built.get(key)
        if entries is None:
            entries = read_tree_entries(self._raw_read, oid)
            if len(self._built) >= 64:
                self._built.pop(next(iter(self._built)))
            self._built[key] = entries
        return entries

    def notes_fanout_changes(self, base: str | None, notes: Mapping[str, str]) -> dict[str, str | None]:
        """The changes (path -> blob, None removed) that put ``notes`` (annotated id -> blob)
        into the notes tree ``base`` where stock git's ``git notes add`` puts them
        (:func:`got_core.storage.notes_fanout.fanout_changes`).

        Raises:
            CorruptRepositoryError: a notes directory on the way is missing or damaged.
        """
        if not notes:
            return {}
        trees = self._read_trees
        if base is not None and trees.written:
            # the root's directories the last notes write built are among the objects of the last
            # flushes (written, on disk): kept by id, so the write that comes back to one reads it
            # from there (ARCHITECTURE §6); nothing only staged is kept
            keep_written_dirs(self._recent.get, base, trees.written, len(next(iter(notes))), trees.keep_notes)
        changes = fanout_changes(self._raw_read, base, notes)
        trees.written = written_dirs(changes)
        return changes

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
