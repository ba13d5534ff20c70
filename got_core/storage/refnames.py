"""Ref names given by people and peers: full names, branch and tag shorthands.

Whether a name is valid is libgit2's decision (:func:`got_core.storage.git.is_valid_ref_name`),
the rule the refs are then written with. On top of it three limits of ours: a full name
lives under ``refs/`` (libgit2 also accepts one-level names such as ``HEAD`` or ``@``,
which ``git check-ref-format`` refuses), is at most 1024 bytes, and each component at
most 255 bytes (a loose ref is a file). When a name is refused, a cheap diagnosis of
``git check-ref-format``'s rules says which one it breaks.

Under ``refs/`` libgit2 and ``git check-ref-format`` agree; ``tests/core/test_refnames.py``
compares them on a table of tricky names with the real git binary.
"""

from __future__ import annotations

import re

from got_core.errors import InvalidNameError
from got_core.names import name_text
from got_core.storage.git import is_valid_ref_name

__all__ = ["MAX_REF_BYTES", "MAX_REF_COMPONENT_BYTES", "branch_ref", "check_ref_name", "tag_ref"]

#: Longest full ref name accepted.
MAX_REF_BYTES = 1024
#: Longest ref component accepted (a loose ref is a file: NAME_MAX).
MAX_REF_COMPONENT_BYTES = 255

_BAD_REF_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


def _diagnose(name: str) -> list[str]:
    """The rules of ``git check-ref-format`` that ``name`` breaks, for the error message."""
    problems = []
    if _BAD_REF_CHARS.search(name):
        problems.append("control characters, spaces or one of ~^:?*[\\")
    if ".." in name or "@{" in name or name == "@" or "//" in name:
        problems.append("'..', '@{', '//' or a bare '@'")
    if name.startswith("/") or name.endswith(("/", ".")):
        problems.append("a leading '/' or a trailing '/' or '.'")
    for part in name.split("/"):
        if part.startswith(".") or part.endswith(".lock"):
            problems.append(f"component {part!r} starts with '.' or ends with '.lock'")
    return problems


def check_ref_name(name: str, what: str = "ref name") -> str:
    """Validate a full ref name (``refs/...``) with libgit2's rule and our length limits.

    Args:
        name: the full ref name.
        what: how to call it in error messages.

    Returns:
        ``name``, unchanged.

    Raises:
        InvalidNameError: not under ``refs/``, over a length limit, or refused by libgit2;
            the message says which rule the name breaks.
    """
    name = name_text(name, what)
    problems = []
    if not name.startswith("refs/"):
        problems.append("not under 'refs/' (give the full name, e.g. refs/heads/main)")
    if len(name.encode("utf-8")) > MAX_REF_BYTES:
        problems.append(f"longer than {MAX_REF_BYTES} bytes")
    if any(len(part.encode("utf-8")) > MAX_REF_COMPONENT_BYTES for part in name.split("/")):
        problems.append(f"a component longer than {MAX_REF_COMPONENT_BYTES} bytes")
    if not is_valid_ref_name(name):
        problems += _diagnose(name) or ["a name libgit2 refuses"]
    if problems:
        raise InvalidNameError(f"{what} {name[:80]!r} is not a valid git name: {'; '.join(problems)}")
    return name


def branch_ref(name: str) -> str:
    """Full ref for a branch given as ``memory``, ``heads/memory`` or ``refs/...``.

    A name already under ``refs/`` is validated and returned unchanged.

    Raises:
        InvalidNameError: not a valid branch name (git's rules, and no leading ``-``).
    """
    name = name_text(name, "branch name")
    if name.startswith("refs/"):
        return check_ref_name(name)
    if name.startswith("heads/"):
        name = name[len("heads/") :]
    if name.startswith("-") or name == "@" or name == "HEAD":
        raise InvalidNameError(f"branch name {name[:80]!r} is reserved or starts with '-' (git reads it as an option)")
    return check_ref_name("refs/heads/" + name, "branch name")


def tag_ref(name: str) -> str:
    """Full ref for a tag given as ``success_ab12`` or ``refs/tags/...``.

    Raises:
        InvalidNameError: not a valid tag name.
    """
    name = name_text(name, "tag name")
    if name.startswith("refs/"):
        return check_ref_name(name)
    if name.startswith("-"):
        raise InvalidNameError(f"tag name {name[:80]!r} starts with '-'")
    return check_ref_name("refs/tags/" + name, "tag name")
