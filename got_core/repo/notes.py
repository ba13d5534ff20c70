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
from got_core.storage.git import BlobId
from got_core.storage.objects import note_target
from got_core.storage.refnames import check_ref_name
from got_core.types import canonical_json
from got_core.validate import to_bytes

if TYPE_CHECKING:
    from got_core.repo.base import RepoBase as ReasoningRepo

__all__ = [
    "all_notes",
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

    Each note goes where git's own ``git notes add`` would put it
    (:mod:`got_core.storage.notes_fanout`): ``ab/cdef…`` until its directory holds two
    notes for each next hex digit, then ``ab/cd/ef…``.

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
    if bodies:
        repo._blobs_written(bodies)  # the index reads these notes from here once the ref moves
    changes = git.notes_fanout_changes(base, blobs)  # where `git notes add` would put them
    tree = git.build_tree(base, {path: None if blob is None else BlobId(blob) for path, blob in changes.items()})
    # notes commits are bookkeeping, never signed: a signature vouches for reasoning
    commit = git.write_commit(
        tree, [tip] if tip else [], "Notes added by 'got'\n", repo.identity, repo.identity, repo.clock.now()
    )
    return commit, changes


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
