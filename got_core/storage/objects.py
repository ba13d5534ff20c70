"""The git object format, in pure Python: raw trees, object ids, integrity walks.

Nothing here opens a repository; callers hand in raw bytes, or a function that reads an
object (:meth:`got_core.storage.git.GitRepo.object_problem`). Verification
(:mod:`got_core.repo.verify`) and the inbound checks (:mod:`got_core.storage.inbound`)
parse trees with the same code.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator

__all__ = [
    "GITLINK_MODE",
    "TREE_MODE",
    "TreeFormatError",
    "check_object",
    "damaged_under",
    "note_target",
    "object_id",
    "parse_tree",
    "tree_entries",
]

GITLINK_MODE = 0o160000
TREE_MODE = 0o040000


#: A path in a notes tree that git reads as a note: directories of two hex digits, then the rest.
_NOTE_PATH = re.compile(r"(?:[0-9a-f]{2}/)*[0-9a-f]+")


def note_target(path: str) -> str | None:
    """The object a notes-tree path annotates, or None when git reads the path as no note.

    git's notes fan-out (``notes.c``, ``load_subtree``): every directory on the way is named
    by the next two hex digits of the annotated object's id, and the file by the rest, at
    any depth and mixed (``ab/cdef…``, ``ab/cd/ef…``, ``abcdef…``). Anything else in a notes
    tree (``abc/def…``, a longer directory name) is not a note, for git and for us.
    """
    if not _NOTE_PATH.fullmatch(path):
        return None
    target = path.replace("/", "")
    return target if len(target) in (40, 64) else None


class TreeFormatError(ValueError):
    """Raw tree bytes that do not parse (an entry cut short)."""


def tree_entries(data: bytes) -> Iterator[tuple[bytes, bytes, str]]:
    """(mode bytes, name bytes, child SHA) of each entry of a raw tree object.

    Raises:
        TreeFormatError: an entry is cut short.
    """
    i, end = 0, len(data)
    while i < end:
        sp = data.find(b" ", i)
        nul = data.find(b"\x00", sp + 1) if sp >= 0 else -1
        if sp < 0 or nul < 0 or nul + 21 > end:
            raise TreeFormatError("an entry is cut short")
        yield data[i:sp], data[sp + 1 : nul], data[nul + 1 : nul + 21].hex()
        i = nul + 21


def parse_tree(data: bytes) -> list[tuple[int, str, str]] | None:
    """Raw tree content as (mode, name, SHA) entries; None when it is not a well-formed tree.

    Names are decoded for reports only (undecodable bytes as escapes), never used as paths.
    """
    try:
        return [(int(mode, 8), name.decode("utf-8", "backslashreplace"), sha) for mode, name, sha in tree_entries(data)]
    except (TreeFormatError, ValueError):
        return None


def object_id(kind: str, data: bytes, sha256: bool = False) -> str:
    """The id git gives an object: the hash of ``"<type> <size>\\0" + content``."""
    algo = hashlib.sha256 if sha256 else hashlib.sha1
    return algo(f"{kind} {len(data)}\0".encode() + data).hexdigest()


def check_object(oid: str, kind: str, data: bytes, expected: str | None = None) -> tuple[str | None, bytes | None]:
    """``(problem or None, data)`` for an object read raw: does it hash to ``oid``, is it ``expected``?"""
    if object_id(kind, data, sha256=len(oid) == 64) != oid:
        return "does not hash to its id (its content was altered)", None
    if expected is not None and kind != expected:
        return f"is a {kind}, not the {expected} its parent names", None
    return None, data


Reader = Callable[[str, str], "tuple[str | None, bytes | None]"]


def damaged_under(
    read: Reader, tree: str, seen: dict[str, str | None] | None = None, prefix: str = ""
) -> list[tuple[str, str, str]]:
    """Every tree and blob reachable from ``tree`` that is missing or does not hash to its id.

    Args:
        read: ``read(oid, expected type) -> (problem or None, raw bytes)``.
        tree: the root tree SHA.
        seen: object SHA -> problem (or None when sound), shared between calls so an
            object reached from many commits is hashed once.
        prefix: path of ``tree`` itself, for the report.

    Returns:
        ``(path, object SHA, problem)`` for each damaged object (the root is ``""``);
        gitlinks (submodule commits) are not followed, as ``git fsck`` does not.
    """
    seen = {} if seen is None else seen
    out: list[tuple[str, str, str]] = []
    stack: list[tuple[str, str, str]] = [(prefix, tree, "tree")]
    while stack:
        path, oid, kind = stack.pop()
        if oid in seen:
            problem = seen[oid]
            if problem is not None:
                out.append((path, oid, problem))
            continue
        problem, data = read(oid, kind)
        if problem is None and kind == "tree":
            entries = parse_tree(data or b"")
            if entries is None:
                problem = "is not a well-formed tree"
            else:
                for mode, name, child in entries:
                    if mode == GITLINK_MODE:
                        continue  # a gitlink names a commit of another repository
                    child_path = f"{path}/{name}" if path else name
                    stack.append((child_path, child, "tree" if mode == TREE_MODE else "blob"))
        seen[oid] = problem
        if problem is not None:
            out.append((path, oid, problem))
    return out
