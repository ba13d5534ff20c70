"""Raw objects for the inbound checks (a mixin of ``GitRepo``): type and bytes, or type and size."""

from __future__ import annotations

from got_core.storage.git._staging import _Staging


class _Raw(_Staging):
    """Raw objects, unparsed (the reads are the staging area's: memory first, then the object database)."""

    def read_raw(self, oid: str) -> tuple[str, bytes]:
        """(type name, raw bytes) of any object, without parsing it (``tree``, ``blob``, ...).

        Raises:
            CorruptRepositoryError: missing or unreadable.
        """
        return self._raw_read(oid)

    def object_header(self, oid: str) -> tuple[str, int] | None:
        """(type name, size in bytes) of an object, or None when the store lacks it."""
        return self._raw_header(oid)
