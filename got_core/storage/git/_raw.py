"""Raw objects for the inbound checks (a mixin of ``GitRepo``): type and bytes, or type and size."""

from __future__ import annotations

from pygit2 import GitError

from got_core.errors import CorruptRepositoryError
from got_core.storage.git._handle import _TYPE_NAMES
from got_core.storage.git._staging import _Staging


class _Raw(_Staging):
    """Raw objects, unparsed."""

    def read_raw(self, oid: str) -> tuple[str, bytes]:
        """(type name, raw bytes) of any object, without parsing it (``tree``, ``blob``, ...).

        Raises:
            CorruptRepositoryError: missing or unreadable.
        """
        found = self._in_memory(oid)
        if found is not None:
            return found
        try:
            kind, data = self._r.odb.read(oid)
        except (GitError, ValueError, KeyError) as exc:
            raise CorruptRepositoryError(f"object {oid} cannot be read from {self.gitdir}: {exc}") from None
        return _TYPE_NAMES.get(int(kind), "unknown"), data

    def object_header(self, oid: str) -> tuple[str, int] | None:
        """(type name, size in bytes) of an object, or None when the store lacks it."""
        found = self._in_memory(oid)
        if found is not None:
            return found[0], len(found[1])
        try:
            kind, size = self._r.odb.read_header(oid)
        except (GitError, ValueError, KeyError):
            return None
        return _TYPE_NAMES.get(int(kind), "unknown"), int(size)
