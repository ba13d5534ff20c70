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
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from got_core.errors import CorruptRepositoryError, InvalidInputError, PayloadTooLargeError
from got_core.repo.base import Publish
from got_core.storage.git import BlobId
from got_core.storage.refnames import check_ref_name
from got_core.types import canonical_json
from got_core.validate import to_bytes

if TYPE_CHECKING:
    from got_core.repo.base import RepoBase as ReasoningRepo

__all__ = [
    "all_notes",
    "get_note",
    "note_json",
    "notes_commit",
    "notes_ref_name",
    "publish_notes",
    "set_note",
    "set_notes",
]

_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


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

    Returns:
        The commit and its changes to ``tip``'s tree (fan-out path -> blob, None removed),
        which the caller hands to the index once the notes ref moved there.
    """
    git = repo.git
    base = git.commit_tree(tip) if tip else None
    changes: dict[str, BlobId | None] = {}
    bodies: dict[str, bytes] = {}
    for oid, data in payload.items():
        if isinstance(data, BlobId):
            changes[f"{oid[:2]}/{oid[2:]}"] = data
        else:
            written = BlobId(git.write_blob(data))
            changes[f"{oid[:2]}/{oid[2:]}"] = written
            bodies[written] = data
    repo._blobs_written(bodies)  # the index reads these notes from here once the ref moves
    if base is not None:  # notes stock git wrote flat or at another fan-out depth
        others = [p for oid in payload for p in (oid, f"{oid[:2]}/{oid[2:4]}/{oid[4:]}")]
        for path, blob in git.tree_entries(base, others).items():
            if blob is not None:
                changes[path] = None
    tree = git.build_tree(base, changes)
    # notes commits are bookkeeping, never signed: a signature vouches for reasoning
    commit = git.write_commit(
        tree, [tip] if tip else [], "Notes added by 'got'\n", repo.identity, repo.identity, repo.clock.now()
    )
    return commit, dict(changes)


def _note_blob(repo: ReasoningRepo, target: str, ref: str | None) -> tuple[str, str, str] | None:
    """(notes ref, annotated commit, note blob) for ``target``, or None when it has no note."""
    name = notes_ref_name(repo, ref)
    tip = repo.git.ref_target(name)
    if tip is None:
        return None
    oid = repo.resolve(target)
    tree = repo.git.read_commit(tip).tree
    for path in (f"{oid[:2]}/{oid[2:]}", oid, f"{oid[:2]}/{oid[2:4]}/{oid[4:]}"):
        blob = repo.git.tree_entry(tree, path)
        if blob is not None:
            return name, oid, blob
    return None


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
        target = path.replace("/", "")
        if _SHA.fullmatch(target):
            out[target] = repo.git.read_blob(blob)
    return out
