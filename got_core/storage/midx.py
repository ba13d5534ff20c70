"""A multi-pack-index (git's ``objects/pack/multi-pack-index``, version 1) over settled packs.

libgit2 (1.2 and later) and git look an object up in the multi-pack-index first, with one
binary search, and only then in the packs it does not cover, newest first, opening each
pack's ``.idx`` on the way. Without one, a new process's first read of an object in the
oldest (largest) pack opens every index in the directory. ``_packing`` covers the large
packs it will not merge again with one, so a cold read opens a handful of files.

Written in pure Python, the format as git documents it (``gitformat-pack``): the chunks
PNAM, OIDF, OIDL, OOFF and, for offsets past 2 GiB, LOFF; ``git multi-pack-index verify``
(run by ``git fsck``) checks every entry against the packs' own indexes.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import struct
from pathlib import Path

from got_core.errors import CorruptRepositoryError, StorageError
from got_core.storage.packs import fanout_table, write_read_only

__all__ = ["MIDX_NAME", "index_entries", "midx_packs", "write_midx"]

#: The file's name in ``objects/pack``.
MIDX_NAME = "multi-pack-index"
_IDX_MAGIC = b"\xfftOc" + struct.pack(">I", 2)


def index_entries(idx: Path) -> tuple[bytes, list[int]]:
    """The sorted binary ids (20 bytes each, joined) and the pack offsets a version-2 index lists.

    Raises:
        CorruptRepositoryError: not a version-2 index, or cut short.
        OSError: the index cannot be read.
    """
    data = Path(idx).read_bytes()
    if len(data) < 8 + 1024 + 40 or data[:8] != _IDX_MAGIC:
        raise CorruptRepositoryError(f"{idx} is not a version-2 pack index; run `got gc`")
    count = struct.unpack_from(">I", data, 8 + 1020)[0]
    base = 8 + 1024
    if len(data) < base + 28 * count + 40:
        raise CorruptRepositoryError(f"{idx} is cut short; run `got gc`")
    small = struct.unpack_from(f">{count}I", data, base + 24 * count)
    large_at = base + 28 * count
    offsets = []
    for o in small:
        if o & 0x80000000:  # an index into the table of 64-bit offsets
            at = large_at + 8 * (o & 0x7FFFFFFF)
            if at + 8 > len(data) - 40:
                raise CorruptRepositoryError(f"{idx} is cut short; run `got gc`")
            o = struct.unpack_from(">Q", data, at)[0]
        offsets.append(o)
    return data[base : base + 20 * count], offsets


def midx_packs(gitdir: Path) -> list[str]:
    """The pack names (hex, no ``pack-`` prefix) the repository's multi-pack-index covers;
    empty when there is none or it cannot be read (then nothing counts as covered)."""
    # only the header, the chunk table and the names are read: the rest is 28 bytes per object
    try:
        with open(Path(gitdir) / "objects" / "pack" / MIDX_NAME, "rb") as f:
            head = f.read(12)
            if len(head) < 12 or head[:4] != b"MIDX" or head[4] != 1 or head[5] != 1:
                return []
            chunks, count = head[6], struct.unpack_from(">I", head, 8)[0]
            raw = f.read(12 * (chunks + 1))
            if len(raw) < 12 * (chunks + 1):
                return []
            table = {raw[12 * i : 12 * i + 4]: struct.unpack_from(">Q", raw, 12 * i + 4)[0] for i in range(chunks + 1)}
            start = table.get(b"PNAM")
            if start is None:
                return []
            stop = min((e for e in table.values() if e > start), default=start)
            if stop - start > 64 * (count + 1):  # names of 50 characters: a damaged table
                return []
            f.seek(start)
            pnam = f.read(stop - start)
    except OSError:
        return []
    names = [n.decode("ascii", "replace") for n in pnam.split(b"\0") if n]
    if len(names) != count or not all(n.startswith("pack-") and n.endswith(".idx") for n in names):
        return []
    return [n[5:-4] for n in names]


def write_midx(gitdir: Path, packs: list[str], *, fsync: bool = True) -> None:
    """Write ``objects/pack/multi-pack-index`` over ``packs`` (hex names, each with its ``.idx``),
    in place of any there (a temporary file renamed over it: a reader sees the old or the new).

    An object several packs hold is listed once, in the first pack by name.

    Raises:
        CorruptRepositoryError: a pack's index is damaged (nothing was written).
        OSError: an index is gone (another process repacked; nothing was written).
        StorageError: the file cannot be written.
    """
    folder = Path(gitdir) / "objects" / "pack"
    names = sorted(set(packs))
    tables = [index_entries(folder / f"pack-{name}.idx") for name in names]
    # one pass per table, each in C (no Python step per entry and table): the packs' entries by
    # id, the last pack by name first so that the first one holding an id wins; then sorted
    where: dict[bytes, tuple[int, int]] = {}
    for number in range(len(tables) - 1, -1, -1):
        ids, offsets = tables[number]
        where.update(zip([ids[k : k + 20] for k in range(0, len(ids), 20)], zip(itertools.repeat(number), offsets)))
    oids = sorted(where)
    pnam = b"".join(f"pack-{n}.idx".encode() + b"\0" for n in names)
    pnam += b"\0" * (-len(pnam) % 4)
    if all(not offsets or max(offsets) < 0x80000000 for _, offsets in tables):
        ooff = struct.pack(f">{2 * len(oids)}I", *itertools.chain.from_iterable(map(where.__getitem__, oids)))
        loff = b""
    else:  # an offset past 2 GiB: it goes to the 64-bit table, the entry names its place there
        large = bytearray()
        parts = []
        for oid in oids:
            number, off = where[oid]
            if off >= 0x80000000:
                parts.append(struct.pack(">II", number, 0x80000000 | (len(large) // 8)))
                large += struct.pack(">Q", off)
            else:
                parts.append(struct.pack(">II", number, off))
        ooff, loff = b"".join(parts), bytes(large)
    chunks = [(b"PNAM", pnam), (b"OIDF", fanout_table(oids)), (b"OIDL", b"".join(oids)), (b"OOFF", ooff)]
    if loff:
        chunks.append((b"LOFF", loff))
    head = b"MIDX" + bytes([1, 1, len(chunks), 0]) + struct.pack(">I", len(names))
    at = len(head) + 12 * (len(chunks) + 1)
    table = []
    for label, body in chunks:
        table.append(label + struct.pack(">Q", at))
        at += len(body)
    table.append(b"\0\0\0\0" + struct.pack(">Q", at))
    body = b"".join([head, *table, *(b for _, b in chunks)])
    body += hashlib.sha1(body).digest()
    try:
        write_read_only(os.fspath(folder), "midx", os.fspath(folder / MIDX_NAME), body, fsync=fsync)
    except OSError as exc:
        raise StorageError(f"cannot write {folder / MIDX_NAME}: {exc}") from None
