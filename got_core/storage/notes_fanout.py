"""Where stock git puts a note: the notes fan-out rule of ``notes.c``, over raw trees.

git's rule (``determine_fanout``, ``for_each_note_helper``, ``load_subtree``): a notes
directory at depth d (its notes' ids start with the 2d hex digits its path spells) holds
its notes flat, named by the rest of the id, unless, for each of the 16 values of the next
hex digit, it holds two or more things (notes, or subtrees) starting with it, or one
subtree git did not open; then every note in it goes one level down (``xy/rest``), and the
rule applies again in each subdirectory of two or more things. git opens only the
subtrees on the way to the notes it writes (and, when a directory is written flat, every
subtree below it), so a directory it does not touch keeps its layout. A directory thus
splits once every next digit has two notes (about 80 notes, ~20,000 notes in all), and
a write costs the trees on its path: at 100k notes a root of 256 directories, ``ab/`` of
up to 256 and ``ab/cd/`` of one or two notes, where one level had ``ab/`` of ~390 notes.

Unlike git, the root is never flat (git writes fewer than ~40 notes flat at the root):
our notes stay at ``ab/cdef…`` or below, which git reads; a root git wrote flat is fanned
out at our next write. Entries that are not notes (names that are not lowercase hex of
the right length, other modes) stay where they are, as git keeps them; of a note held
twice (two spellings) that is not being written, the second is left as it is.

:func:`fanout_changes` returns the changes to hand :func:`~got_core.storage.packs.build_tree_objects`;
large directories are read through :func:`~got_core.storage.packs.uniform_tree_names`
(no entry parsed, the answer kept for the build that follows), and a directory of notes
only stays raw: a write that leaves it flat moves none of its notes, so none is decoded.
:func:`written_dirs` and :func:`keep_written_dirs` let a handle keep the notes directories
its last write built (by id), for the next write into them.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from got_core.errors import CorruptRepositoryError
from got_core.storage.packs import read_tree_entries, uniform_tree_names

__all__ = ["fanout_changes", "keep_written_dirs", "written_dirs"]

_HEX_BYTES = frozenset(b"0123456789abcdef")
_HEX_DIGITS = b"0123456789abcdef"  # ``not s.translate(None, _HEX_DIGITS)``: every byte of s is one
_DIR_HEAD = len(b"40000 ")
_NOTE_HEAD = len(b"100644 ")
_KINDS = 0o170000
_DIR = 0o040000
_FILE = 0o100000

ReadRaw = Callable[[str], tuple[str, bytes]]
#: Told of each tree that passed the checks of a notes directory, by id (a cache of raw trees).
Keep = Callable[[str, bytes], None]


class _Dir:
    """A notes directory as git holds it after opening the subtrees on the way to the notes
    written: its notes (id -> (path, blob); path None for a new note), the subtrees it did
    not open (name -> tree, or the raw entries of a directory of directories) and those it
    opened.

    A directory of notes only (every entry a note: the ``ab/`` of a notes tree below ~20k
    notes) keeps them raw (``flat``: its tree, names and stride) minus those ``taken`` (a
    new note replaced them): a write that leaves it flat moves none of them, so none is
    decoded; they are made entries of ``notes`` only when it splits or is flattened
    (:meth:`spread`)."""

    __slots__ = ("flat", "notes", "opened", "path", "prefix", "raw", "taken", "trees")

    def __init__(self, path: str, prefix: str) -> None:
        self.path, self.prefix = path, prefix
        self.notes: dict[str, tuple[str | None, str]] = {}
        self.trees: dict[str, str] = {}
        self.raw: tuple[bytes, list[bytes], int] | None = None  # (tree, names, stride) of unopened dirs
        self.flat: tuple[bytes, list[bytes], int] | None = None  # (tree, names, stride) of notes kept raw
        self.taken: set[bytes] = set()  # names of ``flat`` a new note replaced
        self.opened: dict[str, _Dir] = {}

    def flat_notes(self) -> dict[str, tuple[str | None, str]]:
        """The notes kept raw (not taken), as entries of :attr:`notes`: id -> (path, blob)."""
        out: dict[str, tuple[str | None, str]] = {}
        if self.flat is None:
            return out
        data, names, stride = self.flat
        for i, raw_name in enumerate(names):
            if raw_name not in self.taken:
                text = raw_name.decode("ascii")
                out[self.prefix + text] = (_join(self.path, text), data[(i + 1) * stride - 20 : (i + 1) * stride].hex())
        return out

    def spread(self) -> None:
        """Make the notes kept raw entries of :attr:`notes` (before it splits or gets subtrees)."""
        if self.flat is not None:
            self.notes = {**self.flat_notes(), **self.notes}
            self.flat, self.taken = None, set()

    def take(self, key: str) -> str | None:
        """Take note ``key`` out of the notes kept raw: its path, or None when it is not one of them."""
        if self.flat is None:
            return None
        _data, names, _stride = self.flat
        name = key[len(self.prefix) :].encode("ascii")
        at = bisect.bisect_left(names, name)
        if at == len(names) or names[at] != name or name in self.taken:
            return None
        self.taken.add(name)
        return _join(self.path, key[len(self.prefix) :])

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
            counts.update(data[_DIR_HEAD::stride].decode("ascii"))  # each name's first digit
            for name in self.opened:
                counts[name[0]] -= 1
        return counts

    def note_digits(self) -> Counter[str]:
        """How many notes start with each next hex digit (those kept raw included)."""
        nibble = len(self.prefix)
        counts: Counter[str] = Counter(k[nibble] for k in self.notes)
        if self.flat is not None:
            data, _names, stride = self.flat
            counts.update(data[_NOTE_HEAD::stride].decode("ascii"))  # each name's first digit
            for name in self.taken:
                counts[chr(name[0])] -= 1
        return counts

    def size(self) -> int:
        """How many things git holds below this directory (notes and unopened subtrees)."""
        unopened = len(self.trees)
        if self.raw is not None:
            unopened += len(self.raw[1]) - len(self.opened)
        if self.flat is not None:
            unopened += len(self.flat[1]) - len(self.taken)
        return len(self.notes) + unopened + sum(d.size() for d in self.opened.values())


def _all_hex(names: list[bytes]) -> bool:
    return not b"".join(names).translate(None, _HEX_DIGITS)


def _notes_shape(data: bytes, prefix: int, width: int) -> tuple[bytes, int, list[bytes]] | None:
    """:func:`uniform_tree_names` of a tree that is a notes directory ``prefix`` hex digits down
    which our fast paths take as a whole: a directory of fan-out directories (two hex digits
    each), or a directory of notes only (the rest of the id, ``width`` digits in all); else None."""
    found = uniform_tree_names(data)
    if found is None:
        return None
    mode, size, names = found
    if (mode == b"40000" and size == 2) or (mode == b"100644" and size == width - prefix):
        return found if _all_hex(names) else None
    return None


def _open(read_raw: ReadRaw, tree: str, path: str, prefix: str, keys: set[str] | None, width: int) -> _Dir:
    """Directory ``path`` (tree ``tree``) with the subtrees on the way to ``keys`` opened as
    git opens them (None: every one). ``width``: hex digits of a full id."""
    kind, data = read_raw(tree)
    if kind != "tree":
        raise CorruptRepositoryError(f"object {tree} (notes directory {path or '/'}) is a {kind}, not a tree")
    found = _notes_shape(data, len(prefix), width)
    out = _Dir(path, prefix)
    if found is not None and found[0] == b"40000":
        # a directory of fan-out directories (the root, or ``ab/`` two levels down): only the
        # ones on the way are looked at
        _mode, _width, names = found
        stride = _DIR_HEAD + 2 + 21
        out.raw = (data, names, stride)
        wanted = {k[len(prefix) : len(prefix) + 2] for k in keys} if keys is not None else None
        for name in sorted(wanted) if wanted is not None else [n.decode("ascii") for n in names]:
            at = bisect.bisect_left(names, name.encode("ascii"))
            if at < len(names) and names[at] == name.encode("ascii"):
                sub = data[(at + 1) * stride - 20 : (at + 1) * stride].hex()
                inside = None if keys is None else {k for k in keys if k.startswith(prefix + name)}
                out.opened[name] = _open(read_raw, sub, _join(path, name), prefix + name, inside, width)
        return out
    if found is not None:
        # notes only: kept raw, decoded only if the directory splits or is flattened
        _mode, rest, names = found
        out.flat = (data, names, _NOTE_HEAD + rest + 21)
        return out
    rest = width - len(prefix)
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
        elif old is None:
            taken = d.take(key)
            if taken is not None:
                removed.append(taken)
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
    counts = d.note_digits()
    trees = d.unopened_digits()
    for name, sub in d.opened.items():
        counts[name[0]] += sub.size()
    return all(counts[c] + trees[c] >= 2 or trees[c] == 1 for c in "0123456789abcdef")


def _flatten(read_raw: ReadRaw, d: _Dir, width: int, raw: bool = True) -> dict[str, tuple[str | None, str]]:
    """Every note below ``d``, opening every subtree (git writes a directory flat so); the
    notes ``d`` keeps raw only when ``raw`` (they stay where they are when ``d`` is written flat)."""
    if d.flat is not None and (raw or d.trees or d.raw is not None or d.opened):
        d.spread()  # its notes shadow those below: made entries first
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
        for key, (old, blob) in _flatten(read_raw, d, width, raw=False).items():
            new = _join(d.path, key[len(d.prefix) :])
            if old != new:
                out.append((old, new, blob))
        return
    d.spread()
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
        if keys:
            sub.spread()
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


#: A notes directory smaller than this is not kept for the next write into it: libgit2 reads
#: it cheaply (a root this small means a few notes, in directories smaller still).
KEEP_MIN_BYTES = 1024


def written_dirs(changes: Iterable[str]) -> set[str]:
    """The directories of the notes root (``ab``) a notes write with these changed paths
    rewrote: a write comes back to one every ~256 writes (to ``ab/cd/`` every ~65,536)."""
    return {path[: path.index("/")] for path in changes if "/" in path}


def keep_written_dirs(
    in_memory: Callable[[str], tuple[str, bytes] | None], base: str, dirs: Iterable[str], width: int, keep: Keep
) -> None:
    """Tell ``keep`` of the directories ``dirs`` (names in the root) of the notes tree ``base``
    that ``in_memory`` holds (the trees the last write built): the next write into one of them
    then reads it from that cache, not from the object database. Only trees of at least
    :data:`KEEP_MIN_BYTES` that pass :func:`_notes_shape` (a notes directory taken whole) are
    kept; one not in memory, smaller, or of another shape is skipped."""
    found = in_memory(base)
    if found is None or found[0] != "tree" or len(found[1]) < KEEP_MIN_BYTES:
        return
    root = found[1]
    shape = _notes_shape(root, 0, width)
    if shape is None or shape[0] != b"40000":
        return
    names = shape[2]
    stride = _DIR_HEAD + 2 + 21
    for name in dirs:
        raw_name = name.encode("ascii")
        at = bisect.bisect_left(names, raw_name)
        if at == len(names) or names[at] != raw_name:
            continue
        oid = root[(at + 1) * stride - 20 : (at + 1) * stride].hex()
        held = in_memory(oid)
        if (
            held is not None
            and held[0] == "tree"
            and len(held[1]) >= KEEP_MIN_BYTES
            and _notes_shape(held[1], 2, width) is not None
        ):
            keep(oid, held[1])
