"""Input cleaning shared by the writers: text must be real Unicode, content bytes or text."""

from __future__ import annotations

from typing import Any

from got_core.errors import InvalidInputError

__all__ = ["to_bytes", "clean_text"]


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
