"""Safe names: every id that reaches a ref or a tree path passes through here.

Two kinds of names meet git:

* **ids** (thread ids, session ids, node ids, topic keys, namespace labels) are
  arbitrary user strings. :func:`encode_component` turns one into a single ref or
  path component that git accepts and that can never escape its directory
  (``/``, ``..``, NUL, control characters, leading ``-`` or ``.`` are
  percent-encoded); :func:`decode_component` reverses it exactly.
* **branch names** given by people (``memory``, ``alice/draft``) must already be
  valid git names: :mod:`got_core.storage.refnames` checks them (libgit2's rule), since
  that check needs the storage layer.
"""

from __future__ import annotations

import functools
import re
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import TypeVar

from got_core.errors import InvalidNameError

_V = TypeVar("_V")

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "MAX_PATH_COMPONENT_BYTES",
    "PLAIN_NAME",
    "CheckedFiles",
    "check_path",
    "decode_component",
    "encode_component",
    "is_dotgit",
    "name_text",
    "path_component_problem",
    "printable_path",
    "short_ref",
]

#: Longest encoded component; git allows more, filesystems (255 bytes) do not.
MAX_NAME_BYTES = 200

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.")
_HEX = "0123456789ABCDEF"


def name_text(value: object, what: str) -> str:
    """``value`` as a non-empty, valid-Unicode string (UTF-8 bytes are decoded).

    Raises:
        InvalidNameError: empty, neither text nor bytes, or not valid Unicode / UTF-8.
    """
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidNameError(f"{what} is not valid UTF-8; pass text") from None
    if not isinstance(value, str):
        raise InvalidNameError(f"{what} must be a string, not {type(value).__name__}")
    if value == "":
        raise InvalidNameError(f"{what} is empty; give it a name")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidNameError(f"{what} holds characters that are not valid Unicode") from None
    return value


def encode_component(value: str | bytes, what: str = "name") -> str:
    """Encode an arbitrary id as one safe ref/path component (reversible).

    Letters, digits, ``_``, ``-`` and ``.`` pass through; everything else is
    percent-encoded byte by byte (UTF-8). A leading ``-`` or ``.``, a ``..``
    sequence, a trailing ``.`` and a ``.lock`` suffix are encoded too, so the
    result is always a valid git ref component and a harmless file name.

    Args:
        value: the id.
        what: how to call it in error messages.

    Returns:
        The encoded component.

    Raises:
        InvalidNameError: empty, not valid Unicode, or longer than
            :data:`MAX_NAME_BYTES` once encoded.
    """
    text = name_text(value, what)
    out: list[str] = []
    for ch in text:
        if ch in _SAFE:
            out.append(ch)
        else:
            for byte in ch.encode("utf-8"):
                out.append("%" + _HEX[byte >> 4] + _HEX[byte & 15])
    encoded = "".join(out)
    # Dots are only dangerous in some positions; encode exactly those.
    if encoded.startswith((".", "-")):
        encoded = ("%2E" if encoded[0] == "." else "%2D") + encoded[1:]
    while ".." in encoded:
        encoded = encoded.replace("..", ".%2E")
    if encoded.endswith("."):
        encoded = encoded[:-1] + "%2E"
    if encoded.endswith(".lock"):
        encoded = encoded[:-5] + "%2Elock"
    if len(encoded) > MAX_NAME_BYTES:
        raise InvalidNameError(
            f"{what} is too long ({len(encoded)} bytes encoded, limit {MAX_NAME_BYTES}); "
            "use a shorter id or a hash of it"
        )
    return encoded


_PCT = re.compile(r"(?:%[0-9A-Fa-f]{2})+")


def decode_component(encoded: str) -> str:
    """Reverse :func:`encode_component`.

    Raises:
        InvalidNameError: ``encoded`` is not something :func:`encode_component` produced.
    """

    def _unquote(match: re.Match[str]) -> str:
        raw = bytes(int(match.group(0)[i + 1 : i + 3], 16) for i in range(0, len(match.group(0)), 3))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidNameError(f"{encoded!r} is not an encoded name") from None

    return _PCT.sub(_unquote, encoded)


def short_ref(ref: str) -> str:
    """``refs/heads/x`` -> ``x``, ``refs/tags/t`` -> ``t``; other refs unchanged."""
    for prefix in ("refs/heads/", "refs/tags/"):
        if ref.startswith(prefix):
            return ref[len(prefix) :]
    return ref


# ---------------------------------------------------------------------------- tree paths
#: Longest file or directory name we write or accept from a tree (NAME_MAX on Linux,
#: macOS and Windows filesystems; libgit2 keeps name lengths in 16 bits).
MAX_PATH_COMPONENT_BYTES = 255
#: Longest path (all components) we write or accept from a tree (PATH_MAX).
MAX_PATH_BYTES = 4096

# Code points HFS+ ignores when comparing names, so ".g\u200cit" is ".git" on a Mac
# (git's is_hfs_dotgit); stripped before comparing.
_HFS_IGNORABLE = frozenset(
    [chr(c) for c in (*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF)]
)
# NTFS: trailing dots and spaces vanish, "::$INDEX_ALLOCATION"-style streams follow a colon,
# and "git~1" is the 8.3 short name of ".git" (git's is_ntfs_dotgit).
_NTFS_DOTGIT = re.compile(r"^(?:\.git|git~1)[ .]*(?::.*)?$", re.IGNORECASE | re.DOTALL)


def is_dotgit(name: str) -> bool:
    """True when a path component names git's own directory on some filesystem.

    Covers ``.git`` in any case, with HFS+-ignorable code points inside it, with NTFS
    trailing dots/spaces or an alternate data stream, and NTFS's short name ``git~1``:
    the spellings ``git fsck`` and ``git checkout`` themselves refuse.
    """
    folded = "".join(ch for ch in name if ch not in _HFS_IGNORABLE)
    return folded.lower() == ".git" or bool(_NTFS_DOTGIT.match(folded))


def path_component_problem(name: str) -> str | None:
    """Why ``name`` must not be a file or directory name in a tree, or None when it is safe.

    The rules are those of ``git fsck`` (no empty name, ``.``, ``..``, any spelling of
    ``.git``, no ``/``), plus NUL, backslash (a separator on Windows), lone surrogates
    (not valid Unicode) and a length limit of :data:`MAX_PATH_COMPONENT_BYTES` bytes.
    """
    if not isinstance(name, str):
        return f"a name must be text, not {type(name).__name__}"
    if len(name) <= MAX_PATH_COMPONENT_BYTES and PLAIN_NAME.match(name):
        return None
    return _component_problem(name)


#: Plain ASCII names that cannot be any spelling of ".git" (every such spelling starts
#: with "." or holds "~" or a non-ASCII code point): safe up to the length limit without
#: further checks. The fast path for listing large trees.
PLAIN_NAME = re.compile(r"[A-Za-z0-9_%+,=@-][A-Za-z0-9_.%+,=@-]*\Z")


# Every tree listing checks each name it returns; the same few names recur endlessly.
@functools.lru_cache(maxsize=8192)
def _component_problem(name: str) -> str | None:
    if name in ("", ".", ".."):
        return "an empty, '.' or '..' component"
    if "/" in name or "\\" in name:
        return "a '/' or '\\' inside a name"
    if "\x00" in name:
        return "a NUL character"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "characters that are not valid Unicode"
    if size > MAX_PATH_COMPONENT_BYTES:
        return f"a name of {size} bytes (limit {MAX_PATH_COMPONENT_BYTES})"
    if is_dotgit(name):
        return "a spelling of '.git'"
    return None


def printable_path(raw: bytes | str) -> str:
    """A path read from a tree, safe to print and to put in an error message.

    Bytes that are not UTF-8 (and lone surrogates) become ``\\xNN`` escapes; control
    characters are escaped as :func:`repr` would; long paths are cut at 200 characters.
    """
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape") if _encodable(raw) else raw.encode("utf-8", "backslashreplace")
    text = raw.decode("utf-8", "backslashreplace")
    text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
    return text if len(text) <= 200 else text[:200] + "…"


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8", "surrogateescape")
        return True
    except UnicodeEncodeError:
        return False


#: Paths that passed :func:`check_path` lately -> their components (a tuple: nobody can change
#: an answer in place). Only exact ``str`` keys up to :data:`_CHECKED_KEY_MAX` characters: a
#: subclass could answer ``split`` or ``==`` differently, and the bound keeps the memory small
#: (16k paths of at most 256 characters). The same paths are checked at every write of a
#: repository (a checkpoint's files, a store item's directories); a path that passed keeps its
#: directory too (a prefix of a path that passed passes), so a new file in a known directory
#: costs the check of its name. A path that fails is never kept, so it fails again, with the
#: same error, every time.
_CHECKED: dict[str, tuple[str, ...]] = {}
_CHECKED_MAX = 1 << 14
_CHECKED_KEY_MAX = 256


def check_path(path: str, what: str = "path") -> tuple[str, ...]:
    """Validate a ``/``-separated tree path and return its components.

    Used for every path written into a tree and every path read back from one before
    it reaches the filesystem, so a hostile tree can never name a file outside its
    target or plant a ``.git`` directory.

    Raises:
        InvalidNameError: an absolute path, an unsafe component (see
            :func:`path_component_problem`) or a path over :data:`MAX_PATH_BYTES` bytes.
    """
    exact = type(path) is str
    if exact:
        known = _CHECKED.get(path)
        if known is not None:
            return known
        head, sep, name = path.rpartition("/")
        above = _CHECKED.get(head) if sep else None
        if above is not None and len(path) <= _CHECKED_KEY_MAX and path_component_problem(name) is None:
            # a new file in a directory that passed: only its name is new (and 256 characters
            # are within MAX_PATH_BYTES in any encoding)
            parts = (*above, name)
            _keep_checked(path, parts)
            return parts
    elif not isinstance(path, str):
        raise InvalidNameError(f"{what} must be text, not {type(path).__name__}")
    parts = tuple(path.split("/"))
    for part in parts:
        problem = path_component_problem(part)
        if problem is not None:
            shown = path[:120] + ("…" if len(path) > 120 else "")
            raise InvalidNameError(f"{what} {shown!r} has {problem}; encode ids in paths with names.encode_component")
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise InvalidNameError(f"{what} is over {MAX_PATH_BYTES} bytes; use shorter names")
    if exact and len(path) <= _CHECKED_KEY_MAX:
        _keep_checked(path, parts)
        if len(parts) > 1:  # its directory passed too (every component, and shorter)
            _keep_checked(path[: -len(parts[-1]) - 1], parts[:-1])
    return parts


def _keep_checked(path: str, parts: tuple[str, ...]) -> None:
    if len(_CHECKED) >= _CHECKED_MAX:
        _CHECKED.clear()
    _CHECKED[path] = parts


class CheckedFiles(Mapping[str, _V]):
    """Files (tree path -> content) whose every path passed :func:`check_path`, with the
    components the check split each into: read-only, so no path can join after the check.

    ``RepoBase.file_payload`` answers one; ``GitRepo.build_tree`` given one takes the
    components from it (:meth:`parts`) instead of checking each path a second time. A path
    it has no components for (none: the mapping cannot change) is checked as any other.

    Raises:
        InvalidNameError: (on construction) a path :func:`check_path` refuses.
    """

    __slots__ = ("_files", "_parts")

    def __init__(self, files: Mapping[str, _V], what: str = "path") -> None:
        parts: dict[str, tuple[str, ...]] = {}
        own = dict(files)
        for path in own:
            split = check_path(path, what)
            if type(path) is str:  # a subclass could compare equal to a path it does not spell
                parts[path] = split
        self._files = own
        self._parts = parts

    def parts(self, path: str) -> tuple[str, ...] | None:
        """The components of ``path`` as :func:`check_path` gave them, or None (not one of these files)."""
        return self._parts.get(path) if type(path) is str else None

    def __getitem__(self, path: str) -> _V:
        return self._files[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def __contains__(self, path: object) -> bool:
        return path in self._files

    def keys(self) -> KeysView[str]:
        return self._files.keys()

    def items(self) -> ItemsView[str, _V]:
        return self._files.items()

    def values(self) -> ValuesView[_V]:
        return self._files.values()

    def __repr__(self) -> str:
        return f"CheckedFiles({self._files!r})"


_MOVED_TO_REFNAMES = ("check_ref_name", "branch_ref", "tag_ref")


def __getattr__(name: str) -> object:
    # Deprecated aliases (one release): the ref-name checks moved to the storage layer, where
    # libgit2 decides. Looked up by name at first use, so this bottom-layer module imports
    # nothing above it.
    if name in _MOVED_TO_REFNAMES:
        import importlib
        import warnings

        warnings.warn(
            f"got_core.names.{name} moved to got_core.storage.refnames.{name}; import it from "
            "there (this alias goes away in 0.3)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("got_core.storage.refnames"), name)
    raise AttributeError(f"module 'got_core.names' has no attribute {name!r}")
