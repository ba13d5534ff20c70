"""The notes fan-out of main before the notes directories were kept raw (frozen: the reference
the randomised comparison in ``test_notes_fanout_raw.py`` checks the current module against)."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Mapping

from got_core.errors import CorruptRepositoryError
from got_core.storage.packs import read_tree_entries, uniform_tree_names

__all__ = ["fanout_changes"]

_HEX = frozenset("0123456789abcdef")
_HEX_BYTES = frozenset(b"0123456789abcdef")
_KINDS = 0o170000
_DIR = 0o040000
_FILE = 0o100000

ReadRaw = Callable[[str], tuple[str, bytes]]


class _Dir:
    """A notes directory as git holds it after opening the subtrees on the way to the notes
    written: its notes (id -> (path, blob); path None for a new note), the subtrees it did
    not open (name -> tree, or the raw entries of a directory of directories) and those it
    opened."""

    __slots__ = ("notes", "opened", "path", "prefix", "raw", "trees")

    def __init__(self, path: str, prefix: str) -> None:
        self.path, self.prefix = path, prefix
        self.notes: dict[str, tuple[str | None, str]] = {}
        self.trees: dict[str, str] = {}
        self.raw: tuple[bytes, list[bytes], int] | None = None  # (tree, names, stride) of unopened dirs
        self.opened: dict[str, _Dir] = {}

    def unopened(self) -> dict[str, str]:
        """Every subtree not opened: name -> tree id."""
        out = dict(self.trees)
        if self.raw is not None:
            data, names, stride = self.raw
            for i, name in enumerate(names):
                text = name.decode("ascii")
                if text not in self.opened:
                    out[text] = data[(i + 1) * stride - 20 : (i + 1) * stride].hex()
        return out

    def unopened_tree(self, name: str) -> str | None:
        """The unopened subtree ``name``, or None."""
        if name in self.opened:
            return None
        if self.raw is None:
            return self.trees.get(name)
        data, names, stride = self.raw
        at = bisect.bisect_left(names, name.encode("ascii"))
        if at < len(names) and names[at] == name.encode("ascii"):
            return data[(at + 1) * stride - 20 : (at + 1) * stride].hex()
        return None

    def unopened_digits(self) -> Counter[str]:
        """How many unopened subtrees start with each hex digit."""
        counts: Counter[str] = Counter(name[0] for name in self.trees)
        if self.raw is not None:
            data, _names, stride = self.raw
            counts.update(data[len(b"40000 ") :: stride].decode("ascii"))  # each name's first digit
            for name in self.opened:
                counts[name[0]] -= 1
        return counts

    def size(self) -> int:
        """How many things git holds below this directory (notes and unopened subtrees)."""
        unopened = len(self.trees)
        if self.raw is not None:
            unopened += len(self.raw[1]) - len(self.opened)
        return len(self.notes) + unopened + sum(d.size() for d in self.opened.values())


def _open(read_raw: ReadRaw, tree: str, path: str, prefix: str, keys: set[str] | None, width: int) -> _Dir:
    """Directory ``path`` (tree ``tree``) with the subtrees on the way to ``keys`` opened as
    git opens them (None: every one). ``width``: hex digits of a full id."""
    kind, data = read_raw(tree)
    if kind != "tree":
        raise CorruptRepositoryError(f"object {tree} (notes directory {path or '/'}) is a {kind}, not a tree")
    found = uniform_tree_names(data)
    out = _Dir(path, prefix)
    rest = width - len(prefix)
    if found is not None and found[0] == b"40000" and found[1] == 2 and _HEX_BYTES.issuperset(b"".join(found[2])):
        # a directory of fan-out directories (the root, or ``ab/`` two levels down): only the
        # ones on the way are looked at
        _mode, _width, names = found
        stride = len(b"40000 ") + 2 + 21
        out.raw = (data, names, stride)
        wanted = {k[len(prefix) : len(prefix) + 2] for k in keys} if keys is not None else None
        for name in sorted(wanted) if wanted is not None else [n.decode("ascii") for n in names]:
            at = bisect.bisect_left(names, name.encode("ascii"))
            if at < len(names) and names[at] == name.encode("ascii"):
                sub = data[(at + 1) * stride - 20 : (at + 1) * stride].hex()
                inside = None if keys is None else {k for k in keys if k.startswith(prefix + name)}
                out.opened[name] = _open(read_raw, sub, _join(path, name), prefix + name, inside, width)
        return out
    if found is not None and found[0] == b"100644" and found[1] == rest:
        _mode, _width, names = found
        stride = len(b"100644 ") + rest + 21
        every = _HEX_BYTES.issuperset(b"".join(names))
        for i, raw_name in enumerate(names):
            if every or _HEX_BYTES.issuperset(raw_name):
                text = raw_name.decode("ascii")
                out.notes[prefix + text] = (_join(path, text), data[(i + 1) * stride - 20 : (i + 1) * stride].hex())
        return out
    for raw_name, (_key, entry) in read_tree_entries(read_raw, tree).items():
        if not _HEX_BYTES.issuperset(raw_name):
            continue  # not a note, nor a fan-out directory: left where it is
        name = raw_name.decode("ascii")
        mode = int(entry[: entry.index(b" ")], 8) & _KINDS
        oid = entry[-20:].hex()
        if mode == _DIR and len(name) == 2:
            inside = None if keys is None else {k for k in keys if k.startswith(prefix + name)}
            if inside is None or inside:
                out.opened[name] = _open(read_raw, oid, _join(path, name), prefix + name, inside, width)
            else:
                out.trees[name] = oid
        elif mode == _FILE and len(name) == rest:
            out.notes.setdefault(prefix + name, (_join(path, name), oid))
    return out


def _join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


def _insert(top: _Dir, key: str, blob: str, removed: list[str]) -> None:
    """Put a new note into the deepest opened directory on its way (git's insert)."""
    d = top
    while True:
        old = d.notes.pop(key, None)
        if old is not None and old[0] is not None:
            removed.append(old[0])  # an older spelling of this note: the new one replaces it
        nxt = d.opened.get(key[len(d.prefix) : len(d.prefix) + 2])
        if nxt is None:
            break
        d = nxt
    d.notes[key] = (None, blob)


def _splits(d: _Dir, width: int) -> bool:
    """git's ``determine_fanout`` for directory ``d``."""
    nibble = len(d.prefix)
    if nibble + 2 >= width:
        return False  # no level below the last two digits (git asserts fanout < 20)
    counts: Counter[str] = Counter(k[nibble] for k in d.notes)
    trees = d.unopened_digits()
    for name, sub in d.opened.items():
        counts[name[0]] += sub.size()
    return all(counts[c] + trees[c] >= 2 or trees[c] == 1 for c in "0123456789abcdef")


def _flatten(read_raw: ReadRaw, d: _Dir, width: int) -> dict[str, tuple[str | None, str]]:
    """Every note below ``d``, opening every subtree (git writes a directory flat so)."""
    notes = dict(d.notes)
    for name, tree in d.unopened().items():
        sub = _open(read_raw, tree, _join(d.path, name), d.prefix + name, None, width)
        d.opened[name] = sub
    for sub in d.opened.values():
        for key, where in _flatten(read_raw, sub, width).items():
            notes.setdefault(key, where)
    return notes


def _place(read_raw: ReadRaw, d: _Dir, width: int, root: bool, out: list[tuple[str | None, str, str]]) -> None:
    """(old path, new path, blob) for every note below ``d`` whose path git would change."""
    if not (root or _splits(d, width)):
        for key, (old, blob) in _flatten(read_raw, d, width).items():
            new = _join(d.path, key[len(d.prefix) :])
            if old != new:
                out.append((old, new, blob))
        return
    nibble = len(d.prefix)
    groups: dict[str, list[str]] = {}
    for key in d.notes:
        groups.setdefault(key[nibble : nibble + 2], []).append(key)
    for name in set(groups) | set(d.opened):
        keys = groups.get(name, [])
        sub = d.opened.get(name)
        if sub is None:
            tree = d.unopened_tree(name)
            if tree is not None:  # notes spelled flat beside the subtree of their digits: git opens it
                sub = d.opened[name] = _open(read_raw, tree, _join(d.path, name), d.prefix + name, set(keys), width)
            else:
                sub = _Dir(_join(d.path, name), d.prefix + name)
        for key in keys:
            sub.notes.setdefault(key, d.notes[key])
        if sub.size() == 1 and sub.notes:
            # git builds no node below one entry: the note goes one level down, no further
            ((key, (old, blob)),) = sub.notes.items()
            new = _join(sub.path, key[len(sub.prefix) :])
            if old != new:
                out.append((old, new, blob))
            continue
        _place(read_raw, sub, width, False, out)


def fanout_changes(read_raw: ReadRaw, base: str | None, notes: Mapping[str, str]) -> dict[str, str | None]:
    """The tree changes (path -> blob, None removed) that put ``notes`` (annotated id ->
    blob) into the notes tree ``base`` (None: none yet) where ``git notes add`` puts them.

    Raises:
        CorruptRepositoryError: a notes directory on the way is missing or damaged.
    """
    if not notes:
        return {}
    width = len(next(iter(notes)))
    keys = set(notes)
    top = _open(read_raw, base, "", "", keys, width) if base is not None else _Dir("", "")
    removed: list[str] = []
    for key, blob in notes.items():
        _insert(top, key, blob, removed)
    moved: list[tuple[str | None, str, str]] = []
    _place(read_raw, top, width, True, moved)
    changes: dict[str, str | None] = dict.fromkeys(removed)
    for old, _new, _blob in moved:
        if old is not None:
            changes[old] = None
    for _old, new, blob in moved:  # an addition wins over a removal at the same path
        changes[new] = blob
    return changes
