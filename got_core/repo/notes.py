"""Score notes on our own notes ref, in git's fan-out layout (ARCHITECTURE §6).

libgit2's ``create_note`` rewrites one flat tree of every note (O(n) per note,
~40 ms at 10k) and loses updates under concurrent writers. Here a note lives at
``ab/cdef…`` and is written as an ordinary commit on the notes ref through the
same compare-and-swap as every other write, so a note costs two small trees at any
scale, concurrent scorers retry instead of colliding, and ``git notes --ref=…``
reads the result. :class:`~got_core.repo.reasoning.ReasoningRepo` exposes these as methods.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from got_core.errors import CorruptRepositoryError, InvalidInputError, PayloadTooLargeError
from got_core.repo.base import Publish
from got_core.storage.git import BlobId, GitRepo
from got_core.storage.objects import note_target
from got_core.storage.refnames import check_ref_name
from got_core.types import canonical_json
from got_core.validate import to_bytes

if TYPE_CHECKING:
    from got_core.repo.base import RepoBase as ReasoningRepo

__all__ = [
    "all_notes",
    "fanout_changes",
    "get_note",
    "note_json",
    "note_paths",
    "notes_commit",
    "notes_ref_name",
    "publish_notes",
    "set_note",
    "set_notes",
]


def notes_ref_name(repo: ReasoningRepo, ref: str | None) -> str:
    """Full notes ref: the repository's own, or ``refs/notes/<ref>``."""
    if ref is None:
        return repo.notes_ref
    return check_ref_name(ref if ref.startswith("refs/") else "refs/notes/" + ref)


def set_note(
    repo: ReasoningRepo, target: str, content: Mapping[str, Any] | str | bytes, *, ref: str | None = None
) -> str:
    """Attach (or replace) the note on ``target``; returns the notes commit.

    Notes use git's fan-out layout (``ab/cdef…``), so a write rewrites two small
    trees, not a tree of every note; ``git notes --ref=… show`` reads them.
    """
    return set_notes(repo, {target: content}, ref=ref)


def set_notes(
    repo: ReasoningRepo, notes: Mapping[str, Mapping[str, Any] | str | bytes], *, ref: str | None = None
) -> str:
    """Attach (or replace) several notes in ONE notes commit; returns it.

    A note written earlier at another fan-out depth (e.g. by stock ``git notes``)
    for the same commit is removed, so each commit keeps exactly one note.
    """
    name = notes_ref_name(repo, ref)
    payload: dict[str, bytes | BlobId] = {}
    for target, content in notes.items():
        oid = repo.resolve(target)
        if isinstance(content, Mapping):
            content = canonical_json(dict(content))
        data = to_bytes(content, "note")
        if len(data) > repo.max_file_bytes:
            raise PayloadTooLargeError("note", len(data), repo.max_file_bytes)
        payload[oid] = data
    if not payload:
        raise InvalidInputError("no notes to write")
    return publish_notes(repo, name, payload)


def publish_notes(repo: ReasoningRepo, name: str, payload: Mapping[str, bytes | BlobId]) -> str:
    """One notes commit on the notes ref ``name`` for validated notes: commit SHA -> content,
    or an existing blob's id (the write path reuses the node's ``scores.json``); returns it.

    Nothing is re-validated here: :func:`set_notes` checks what callers hand it.
    """

    def build(tip: str | None) -> Publish:
        commit, changes = notes_commit(repo, tip, payload)
        # a fact about the commit's content, true before it is published: the index applies
        # these changes without a tree diff, in the sync of this very move
        repo._notes_written(name, commit, tip, changes)
        return Publish(commit, commit)

    return repo.update_ref(name, build)


def notes_commit(
    repo: ReasoningRepo, tip: str | None, payload: Mapping[str, bytes | BlobId]
) -> tuple[str, dict[str, str | None]]:
    """Write the notes commit that adds ``payload`` on top of the notes commit ``tip`` (no ref moves).

    Each note goes where git's own ``git notes add`` would put it (:func:`fanout_changes`):
    ``ab/cdef…`` until its directory holds enough notes, then ``ab/cd/ef…``.

    Returns:
        The commit and its changes to ``tip``'s tree (fan-out path -> blob, None removed),
        which the caller hands to the index once the notes ref moved there.
    """
    git = repo.git
    base = git.commit_tree(tip) if tip else None
    blobs: dict[str, str] = {}
    bodies: dict[str, bytes] = {}
    for oid, data in payload.items():
        if isinstance(data, BlobId):
            blobs[oid] = data
        else:
            written = BlobId(git.write_blob(data))
            blobs[oid] = written
            bodies[written] = data
    repo._blobs_written(bodies)  # the index reads these notes from here once the ref moves
    changes = fanout_changes(git, base, blobs)
    tree = git.build_tree(base, {path: None if blob is None else BlobId(blob) for path, blob in changes.items()})
    # notes commits are bookkeeping, never signed: a signature vouches for reasoning
    commit = git.write_commit(
        tree, [tip] if tip else [], "Notes added by 'got'\n", repo.identity, repo.identity, repo.clock.now()
    )
    return commit, changes


# ---------------------------------------------------------------- git's fan-out rule
_HEX = frozenset("0123456789abcdef")
_DIR_MODE = 0o040000


class _Item:
    """One thing in a notes directory as git's ``notes.c`` sees it: a note (``key`` is the
    annotated id, ``oid`` its blob) or a subtree it did not open (``key`` is the prefix its
    path spells, ``oid`` the tree), and where it is now (``path``; None: a new note)."""

    __slots__ = ("key", "oid", "path", "tree")

    def __init__(self, key: str, tree: bool, path: str | None, oid: str) -> None:
        self.key, self.tree, self.path, self.oid = key, tree, path, oid


def fanout_changes(git: GitRepo, base: str | None, notes: Mapping[str, str]) -> dict[str, str | None]:
    """The tree changes (path -> blob, None removed) that put ``notes`` (annotated id -> blob)
    into the notes tree ``base`` where stock git puts them.

    git's rule (``notes.c``: ``determine_fanout``, ``for_each_note_helper``): a directory at
    depth d holds its notes flat (``rest``) unless, for each of the 16 values of the ids'
    next hex digit, it holds two or more notes or subtrees starting with it, or one
    subtree it does not open; then each note goes one level down (``xy/rest``), and the
    rule applies again in each subdirectory of two or more. git opens only the subtrees on
    the way to the notes it writes, so a directory it does not touch keeps its layout,
    and one that fails the rule is written flat again. So a directory splits when every
    next digit has two notes (about 80 notes: ~20,000 in all; fast-import splits them
    all at 65,536), and a write costs the trees on its path: at 100k notes a root of
    256 directories, ``ab/`` of ~256, and ``ab/cd/`` of one or two notes.

    Unlike git, the root is never flat (git writes fewer than ~40 notes flat): our notes
    stay at ``ab/cdef…`` or below, which git reads, and a root git wrote flat is fanned
    out at our next write. Entries that are not notes stay where they are; of a note held
    twice (two spellings) that is not being written, the second is left as it is.
    """
    items: list[_Item] = []
    seen: set[str] = set()
    removed: list[str] = []
    for item in _explore(git, base, "", "", set(notes)) if base is not None else ():
        if item.tree:
            items.append(item)
        elif item.key in notes:  # the new note replaces every spelling of its target
            assert item.path is not None
            removed.append(item.path)
        elif item.key not in seen:
            seen.add(item.key)
            items.append(item)
    items.extend(_Item(oid, False, None, blob) for oid, blob in notes.items())
    changes: dict[str, str | None] = dict.fromkeys(removed)
    moved = [(item, path) for item, path in _place(git, "", "", items, True) if item.path != path]
    for item, _path in moved:
        if item.path is not None:
            changes[item.path] = None
    for item, path in moved:  # an addition wins over a removal at the same path
        changes[path] = item.oid
    return changes


def _explore(git: GitRepo, tree: str, path: str, prefix: str, keys: set[str] | None) -> list[_Item]:
    """The notes and subtrees of directory ``path`` (tree ``tree``; its notes' ids start with
    ``prefix``), the subtrees on the way to ``keys`` opened as git opens them (None: all)."""
    out: list[_Item] = []
    for name, mode, oid in git.tree_listing(tree):
        if not _HEX.issuperset(name):
            continue  # not a note, nor a fan-out directory: left where it is
        at, key, kind = f"{path}/{name}" if path else name, prefix + name, mode & 0o170000
        if kind == _DIR_MODE and len(name) == 2:
            inside = None if keys is None else {k for k in keys if k.startswith(key)}
            if inside is None or inside:
                out.extend(_explore(git, oid, at, key, inside))
            else:
                out.append(_Item(key, True, at, oid))
        elif kind == 0o100000 and len(key) in (40, 64):
            out.append(_Item(key, False, at, oid))
    return out


def _splits(items: list[_Item], depth: int) -> bool:
    """git's ``determine_fanout`` for a directory at ``depth`` holding ``items``."""
    nibble = 2 * depth
    counts: dict[str, int] = {}
    trees: set[str] = set()
    for item in items:
        if not item.tree and len(item.key) <= nibble + 2:
            return False  # no level below the last two digits (git asserts fanout < 20)
        digit = item.key[nibble]
        counts[digit] = counts.get(digit, 0) + 1
        if item.tree:
            trees.add(digit)
    return len(counts) == 16 and all(n >= 2 or d in trees for d, n in counts.items())


def _place(git: GitRepo, path: str, prefix: str, items: list[_Item], root: bool) -> list[tuple[_Item, str]]:
    """(note, the path git gives it) for every note of ``items``, the things in directory
    ``path`` (its notes' ids start with ``prefix``); subtrees that keep their place are
    left out."""
    width = len(prefix)
    if any(i.tree and len(i.key) == width for i in items):
        # the directory itself, met as a subtree beside notes spelled flat above it: git
        # opens it when those notes go in, and the subtrees in it on their way
        keys = {i.key for i in items if not i.tree}
        opened: list[_Item] = []
        for item in items:
            if item.tree and len(item.key) == width:
                assert item.path is not None
                opened.extend(_explore(git, item.oid, item.path, item.key, keys))
            else:
                opened.append(item)
        items = opened
    if not (root or _splits(items, width // 2)):
        # flat: git opens every subtree below and writes all their notes here
        while any(i.tree for i in items):
            items = [
                found
                for item in items
                for found in (_explore(git, item.oid, item.path or "", item.key, None) if item.tree else [item])
            ]
        return [(i, f"{path}/{i.key[width:]}" if path else i.key[width:]) for i in items]
    groups: dict[str, list[_Item]] = {}
    for item in items:
        groups.setdefault(item.key[width : width + 2], []).append(item)
    out: list[tuple[_Item, str]] = []
    for name, group in groups.items():
        sub = f"{path}/{name}" if path else name
        if len(group) > 1:
            out.extend(_place(git, sub, prefix + name, group, False))
        elif not group[0].tree:  # git builds no node below one entry: it goes one level down
            out.append((group[0], f"{sub}/{group[0].key[width + 2 :]}"))
        # a subtree alone keeps its place
    return out


def note_paths(oid: str) -> list[str]:
    """Every path git reads the note on ``oid`` from, ours first: ``ab/cdef…``, ``abcdef…``
    (stock git's small trees), ``ab/cd/ef…`` (git's second fan-out level) and deeper."""
    spelled = [oid[i : i + 2] for i in range(0, len(oid) - 2, 2)]
    paths = ["/".join([*spelled[:depth], oid[2 * depth :]]) for depth in range(len(spelled) + 1)]
    return [paths[1], paths[0], *paths[2:]]


def _note_blob(repo: ReasoningRepo, target: str, ref: str | None) -> tuple[str, str, str] | None:
    """(notes ref, annotated commit, note blob) for ``target``, or None when it has no note."""
    name = notes_ref_name(repo, ref)
    tip = repo.git.ref_target(name)
    if tip is None:
        return None
    oid = repo.resolve(target)
    found = repo.git.tree_entries(repo.git.read_commit(tip).tree, note_paths(oid))
    blob = next((b for b in found.values() if b is not None), None)
    return None if blob is None else (name, oid, blob)


def get_note(repo: ReasoningRepo, target: str, *, ref: str | None = None) -> bytes | None:
    """The note bytes on ``target``, or None.

    Raises:
        CorruptRepositoryError: the note's blob is missing or damaged.
    """
    found = _note_blob(repo, target, ref)
    return None if found is None else repo.git.read_blob(found[2])


def note_json(repo: ReasoningRepo, target: str, *, ref: str | None = None) -> dict[str, Any] | None:
    """The note on ``target`` parsed as a JSON object, or None when it has no note.

    Raises:
        CorruptRepositoryError: the note is not UTF-8 JSON holding an object (the message
            names the commit, the notes ref and the note's blob).
    """
    found = _note_blob(repo, target, ref)
    if found is None:
        return None
    name, oid, blob = found
    raw = repo.git.read_blob(blob)
    try:
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"it holds a JSON {type(data).__name__}, not an object")
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        short = name[len("refs/notes/") :] if name.startswith("refs/notes/") else name
        raise CorruptRepositoryError(
            f"the note on commit {oid} in {name} (blob {blob[:12]}) is not a JSON object "
            f"({str(exc)[:120]}); rewrite it with set_note, or remove it with "
            f"`git notes --ref={short} remove {oid}`"
        ) from None
    return data


def all_notes(repo: ReasoningRepo, *, ref: str | None = None) -> dict[str, bytes]:
    """Every note on the notes ref: annotated commit SHA -> note bytes.

    Entries whose path is not a commit SHA are not notes and are left out, as git does.

    Raises:
        CorruptRepositoryError: the notes commit, a tree or a note blob is missing or damaged.
    """
    tip = repo.git.ref_target(notes_ref_name(repo, ref))
    if tip is None:
        return {}
    files = repo.git.tree_files(repo.git.read_commit(tip).tree)
    out = {}
    for path, blob in files.items():
        target = note_target(path)  # directories of two hex digits at any depth, as git reads them
        if target is not None and target not in out:
            out[target] = repo.git.read_blob(blob)
    return out
