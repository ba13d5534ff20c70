"""Input cleaning shared by the writers: text must be real Unicode, content bytes or text, counts whole numbers."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from got_core.errors import InvalidInputError, InvalidNameError

__all__ = ["clean_count", "clean_fs_path", "clean_name", "clean_revs", "clean_text", "to_bytes"]


def to_bytes(value: bytes | str, path: str) -> bytes:
    """File content as bytes (``str`` is UTF-8 encoded).

    Raises:
        InvalidInputError: not bytes/str, or not valid Unicode.
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInputError(f"content of {path} is not valid Unicode text") from None
    raise InvalidInputError(f"content of {path} must be bytes or str, not {type(value).__name__}")


def clean_text(text: Any, what: str) -> str:
    """``text`` as ``str`` with no NUL and valid Unicode.

    Raises:
        InvalidInputError: bytes that are not UTF-8, a non-string, lone surrogates or NUL.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInputError(f"{what} is not valid UTF-8") from None
    if not isinstance(text, str):
        raise InvalidInputError(f"{what} must be text, not {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(f"{what} holds characters that are not valid Unicode") from None
    if "\x00" in text:
        raise InvalidInputError(f"{what} contains a NUL character")
    return text


def clean_count(value: Any, what: str, *, optional: bool = False) -> Any:
    """``value`` as a non-negative ``int`` (``None`` passes when ``optional``).

    Raises:
        InvalidInputError: not an integer (``bool`` included), or negative.
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{what} must be a whole number, not {type(value).__name__}")
    if value < 0:
        raise InvalidInputError(f"{what} must not be negative (got {value})")
    return value


def clean_revs(parents: Any) -> list[Any] | None:
    """Explicit parents as a list of revisions (one given on its own is a list of one).

    Raises:
        InvalidInputError: not a revision nor a list of them.
    """
    if parents is None:
        return None
    if isinstance(parents, (str, bytes)):
        return [parents]
    if not isinstance(parents, Iterable) or isinstance(parents, Mapping):
        raise InvalidInputError(f"parents must be a list of revisions, not {type(parents).__name__}")
    return list(parents)


def clean_name(value: Any, what: str, optional: bool = False) -> Any:
    """A name argument as text: ``str`` passes, UTF-8 ``bytes`` are decoded (``None`` passes when ``optional``).

    Raises:
        InvalidNameError: bytes that are not UTF-8, or not text at all.
    """
    if value is None and optional:
        return None
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidNameError(f"{what} is not valid UTF-8; pass text") from None
    if not isinstance(value, str):
        raise InvalidNameError(f"{what} must be text, not {type(value).__name__}")
    return value


def clean_fs_path(value: Any, what: str, *, text: bool = False) -> str:
    """A filesystem path argument (str, bytes or path-like) as ``str``; NUL and non-paths refused.

    With ``text``, the path must also be valid UTF-8 (it is handed to libgit2 as a URL).

    Raises:
        InvalidInputError: not a path, empty, NUL, or characters no file name can hold.
    """
    try:
        path = os.fsdecode(value)
    except TypeError:
        raise InvalidInputError(f"{what} must be a path, not {type(value).__name__}") from None
    if not path or "\x00" in path:
        raise InvalidInputError(f"{what} {path[:80]!r} is empty or contains a NUL character")
    try:
        os.fsencode(path)
    except UnicodeEncodeError:
        raise InvalidInputError(f"{what} {path[:80]!r} holds characters no file name can") from None
    if text:
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInputError(f"{what} {path[:80]!r} is not valid UTF-8") from None
    return path
