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

import bisect
import functools
import hashlib
import itertools
import operator
import os
import struct
from pathlib import Path

from got_core.errors import CorruptRepositoryError, StorageError
from got_core.storage.packs import write_read_only

__all__ = ["MIDX_NAME", "index_entries", "midx_packs", "write_midx"]

#: The file's name in ``objects/pack``.
MIDX_NAME = "multi-pack-index"
_IDX_MAGIC = b"\xfftOc" + struct.pack(">I", 2)


def _index_columns(idx: Path) -> tuple[bytes, bytes, bytes]:
    """The raw tables of a version-2 pack index: its sorted 20-byte ids, joined; its 4-byte
    big-endian offset words (a word with the high bit set names an entry of the 64-bit table);
    and that 64-bit table.

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
    words = data[base + 24 * count : base + 28 * count]
    return data[base : base + 20 * count], words, data[base + 28 * count : len(data) - 40]


def index_entries(idx: Path) -> tuple[bytes, list[int]]:
    """The sorted binary ids (20 bytes each, joined) and the pack offsets a version-2 index lists.

    Raises:
        CorruptRepositoryError: not a version-2 index, or cut short.
        OSError: the index cannot be read.
    """
    ids, words, large = _index_columns(idx)
    small = struct.unpack(f">{len(words) // 4}I", words)
    if not _has_large(words):  # every pack under 2 GiB: in C
        return ids, list(small)
    offsets = []
    for o in small:
        if o & 0x80000000:  # an index into the table of 64-bit offsets
            at = 8 * (o & 0x7FFFFFFF)
            if at + 8 > len(large):
                raise CorruptRepositoryError(f"{idx} is cut short; run `got gc`")
            o = struct.unpack_from(">Q", large, at)[0]
        offsets.append(o)
    return ids, offsets


def _has_large(words: bytes) -> bool:
    """Whether some offset word names the 64-bit table (its high bit set): the words' first bytes
    with every byte under 0x80 deleted leave something; one C pass, no comparison per entry."""
    return bool(words[0::4].translate(None, _LOW))


_LOW = bytes(range(0x80))


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

    The chunks are built with a C call per column and pack, never a Python step per entry (a
    settle right after ``got gc`` covers every object of the repository, 400k at 100k store
    items: 0.5-0.8 s entry by entry, a put's worth of time for every store write that pays it).
    Over one pack, the index's own id table is the OIDL chunk and OOFF is its offset words
    interleaved with pack number 0: no object per entry at all. Its order is not checked (a
    check per entry would cost more than the whole write): libgit2 searches that pack with the
    same order, so this file is no worse than the index it is built from, and a repository that
    can damage one can as well put a damaged multi-pack-index there (``git fsck`` names both).
    Over several, see :func:`_merged_columns`. Offsets past 2 GiB (packs git wrote) go entry
    by entry to the 64-bit table.

    Raises:
        CorruptRepositoryError: a pack's index is damaged (nothing was written).
        OSError: an index is gone (another process repacked; nothing was written).
        StorageError: the file cannot be written.
    """
    folder = Path(gitdir) / "objects" / "pack"
    names = sorted(set(packs))
    columns = [_index_columns(folder / f"pack-{name}.idx") for name in names]
    pnam = b"".join(f"pack-{n}.idx".encode() + b"\0" for n in names)
    pnam += b"\0" * (-len(pnam) % 4)
    if not any(_has_large(words) for _, words, _ in columns):
        oidl, ooff = _merged_columns([(ids, words) for ids, words, _ in columns])
        loff = b""
    else:
        oidl, ooff, loff = _merged_entries([index_entries(folder / f"pack-{name}.idx") for name in names])
    chunks = [(b"PNAM", pnam), (b"OIDF", _fanout(oidl)), (b"OIDL", oidl), (b"OOFF", ooff)]
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


def _fanout(oidl: bytes) -> bytes:
    """The OIDF chunk of the sorted ids ``oidl`` (joined): slot ``b`` counts the ids whose first
    byte is at most ``b``; a binary search per slot over the first bytes' column, in C."""
    firsts = oidl[0::20]
    return struct.pack(">256I", *map(functools.partial(bisect.bisect_right, firsts), range(256)))


def _merged_columns(tables: list[tuple[bytes, bytes]]) -> tuple[bytes, bytes]:
    """The OIDL and OOFF chunks of packs given as (ids joined, offset words), no word past 2 GiB.

    One pack: its ids as they are, its words interleaved with pack number 0. Several: each
    pack's entries become 28-byte records (id, pack number, offset word: big-endian, so records
    sort by id, then by pack), laid out column by column with extended-slice copies; one sort
    merges the packs' runs (sorted already: timsort merges runs, and a damaged index's order
    cannot reach the file); an id several packs hold keeps its first record, the one of the
    first pack by name, as git's own writer does. A C call per column, pack or whole list.
    """
    if len(tables) == 1:
        ids, words = tables[0]
        ooff = bytearray(2 * len(words))
        for j in range(4):
            ooff[4 + j :: 8] = words[j::4]
        return ids, bytes(ooff)
    count = sum(len(words) // 4 for _, words in tables)
    rows = bytearray(28 * count)
    at = 0
    for number, (ids, words) in enumerate(tables):
        n = len(words) // 4
        end = at + 28 * n
        for j in range(20):
            rows[at + j : end : 28] = ids[j::20]
        for j, byte in enumerate(number.to_bytes(4, "big")):
            if byte:
                rows[at + 20 + j : end : 28] = bytes([byte]) * n
        for j in range(4):
            rows[at + 24 + j : end : 28] = words[j::4]
        at = end
    data = bytes(rows)
    records = sorted(map(data.__getitem__, map(slice, range(0, 28 * count, 28), range(28, 28 * count + 28, 28))))
    oids = list(map(operator.itemgetter(slice(0, 20)), records))
    # a record stays when its id differs from the one before: of an object in several packs, the first
    keep = list(itertools.chain((True,), map(operator.ne, itertools.islice(oids, 1, None), oids)))
    if not all(keep):
        records = list(itertools.compress(records, keep))
        oids = list(itertools.compress(oids, keep))
    joined = b"".join(records)
    ooff = bytearray(8 * len(records))
    for j in range(8):
        ooff[j::8] = joined[20 + j :: 28]
    return b"".join(oids), bytes(ooff)


def _merged_entries(tables: list[tuple[bytes, list[int]]]) -> tuple[bytes, bytes, bytes]:
    """The OIDL, OOFF and LOFF chunks, entry by entry (an offset past 2 GiB goes to LOFF, its
    entry naming its place there)."""
    where: dict[bytes, tuple[int, int]] = {}
    for number in range(len(tables) - 1, -1, -1):  # the last pack first: the first one holding an id wins
        ids, offsets = tables[number]
        where.update(zip([ids[k : k + 20] for k in range(0, len(ids), 20)], zip(itertools.repeat(number), offsets)))
    oids = sorted(where)
    large = bytearray()
    parts = []
    for oid in oids:
        number, off = where[oid]
        if off >= 0x80000000:
            parts.append(struct.pack(">II", number, 0x80000000 | (len(large) // 8)))
            large += struct.pack(">Q", off)
        else:
            parts.append(struct.pack(">II", number, off))
    return b"".join(oids), b"".join(parts), bytes(large)
