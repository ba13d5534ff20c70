"""Many new objects as one pack file, in pure Python (ARCHITECTURE §6: cost is per file created).

A loose object is a file of its own: creating it costs 0.1-1 ms on a busy ext4, so a
batch of a thousand items written loose costs a second, most of it in the file system.
:func:`write_pack` writes the same objects as one ``.pack`` and its ``.idx`` (git's
version 2 formats, no deltas), which git, libgit2 and JGit read like any fetched pack:
libgit2 rescans ``objects/pack`` when it misses an object, so an open handle sees the
new objects at once. ``git repack -a -d`` (``repo.maintenance()``) folds the packs into
one later.

:func:`build_tree_objects` is the tree half: a tree with changes applied, built from the
raw base trees, returning the new tree objects (for the same pack) instead of writing
them loose. It writes the same bytes libgit2's tree builder writes, so the ids agree.

Only SHA-1 repositories: a caller falls back to loose writes elsewhere.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import operator
import os
import re
import struct
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from got_core.errors import CorruptRepositoryError, StorageError
from got_core.names import MAX_PATH_BYTES, CheckedFiles, check_path, path_component_problem
from got_core.storage.git._settings import fsync_enabled
from got_core.storage.objects import TREE_MODE

__all__ = [
    "SMALL_TREES",
    "SMALL_TREE_BYTES",
    "STORED_BLOB_BYTES",
    "STORED_ID_TREE_BYTES",
    "STORED_TREE_ENTRY_BYTES",
    "TYPE_CODES",
    "PackCopy",
    "TreeCache",
    "assemble_pack",
    "build_tree_objects",
    "commit_object",
    "fanout_table",
    "install_pack",
    "object_id",
    "pack_bytes",
    "pack_entry",
    "pack_index_ids",
    "pack_records",
    "read_tree_entries",
    "records_of",
    "sha1_repository",
    "signed_commit",
    "tree_entries_of",
    "tree_object",
    "uniform_tree_names",
    "write_pack",
    "write_pack_named",
]

#: Numbers for the temporary files of packs being written (with :data:`_TMP_PREFIX`: unique on this host).
_TMP_NAMES = itertools.count()

#: Pack type codes of the objects a pack here may hold.
TYPE_CODES = {"commit": 1, "tree": 2, "blob": 3}


def sha1_repository(gitdir: Path) -> bool:
    """Whether ``gitdir`` names its objects by SHA-1 (no ``objectformat`` extension)."""
    try:  # os.open and bytes: a repository open runs this, and Path.read_text costs 3x as much
        fd = os.open(os.path.join(os.fspath(gitdir), "config"), os.O_RDONLY | getattr(os, "O_BINARY", 0))
    except OSError:
        return False
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        return False
    finally:
        os.close(fd)
    return b"objectformat" not in b"".join(chunks).lower()


def _deflate(data: bytes) -> bytes:
    """The zlib stream of one packed object.

    ``zlib.compress`` sets up a 256 KiB hash table and a 32 KiB window per call, which
    costs ten times the compression of a small file; a window just large enough for the
    data and a hash table sized to it (:func:`_mem_level`) make it cheap. Too small a table
    costs more than it saves (a 40 KB tree of a thousand entries: 3.3 ms with the smallest
    against 0.36 ms with the default one). (Storing every tree uncompressed would be cheaper still, but
    ``git repack`` keeps such objects as they are: 30% more disk after gc at 100k store items,
    10% at 10k; only trees under 1 KiB, trees of ids with short names and notes fan-out
    directories are stored, see :data:`STORED_BLOB_BYTES`, :data:`STORED_TREE_ENTRY_BYTES` and
    :data:`STORED_ID_TREE_BYTES`: 2% more at 10k.)
    """
    size = len(data)
    window = max(9, min(15, size.bit_length()))
    stream = zlib.compressobj(1, zlib.DEFLATED, window, _mem_level(size))
    return stream.compress(data) + stream.flush()


def _mem_level(size: int) -> int:
    """zlib's ``memLevel`` for deflating ``size`` bytes (its hash table and block buffer grow
    with it): the cheapest measured here (instructions under callgrind, level 1, 2026-12; below
    1 KiB only commits and objects under 64 bytes are deflated, see :func:`_stored`): 2 below
    512 bytes (a 323-byte node commit: 75k instructions against 76k at 3), 3 below a kilobyte
    (its 512-symbol block buffer holds a whole commit of 512-1023 bytes, which at 2 is split
    into blocks that each build Huffman trees: 800 bytes 119k against 139k, 1000 bytes 124k
    against 147k; the same stream format, a few bytes smaller), 6 below 8 KB (a directory of
    100 files: 88 us against 103 us at 8), 7 below 32 KB, then 8."""
    return 2 if size < 512 else 3 if size < 1024 else 6 if size < 8192 else 7 if size < 32768 else 8


#: A tree whose entries average fewer bytes than this is mostly object ids (a 20-byte id, a
#: mode, a name of a few letters: the store's hash buckets, 28-31 bytes an entry), which do
#: not compress: deflating it saves under 10% for ~40 us a tree, so it is stored as it is.
STORED_TREE_ENTRY_BYTES = 34


#: An object this small never shrinks when deflated (zlib's own framing is 6 bytes): stored.
STORED_BYTES = 64

#: A blob or a tree below this many bytes (a store item: ~370 bytes of JSON; a checkpoint's or a
#: node's tree) is stored as it is. Deflating a small object costs a fixed ~100k instructions
#: (7-15 us), almost all of it zlib building its Huffman trees at the final flush, whatever the
#: strategy (fixed codes and Huffman-only measured within 5%), against ~1 us to copy it: with
#: the trees, 40% fewer deflated objects in a checkpoint super-step or a node write. It costs disk
#: mostly until ``git repack -a -d -f`` (``repo.maintenance()``), which deltifies most such blobs
#: and trees (their deltas deflated) and keeps the rest as they are: 1.508 -> 1.518 MB after gc
#: for 10k store items (the packs before gc: 3.7 -> 5.5 MB); storing small trees too (2026-12):
#: after gc +1.2% for 500 node writes (808 -> 818 KB), +2% for 30 ten-step checkpoint threads
#: (122 -> 124 KB), +0-1.7% for 2,000 store puts over 50-500 namespaces. Commits stay deflated:
#: git rarely deltifies a commit, so ``repack -f`` keeps a stored one as it is (27% more disk
#: after gc for 500 node writes when they were stored too).
STORED_BLOB_BYTES = 1024


def _stored(kind: str, data: bytes) -> bool:
    """Whether an object goes into a pack uncompressed (a tiny one, a blob or tree under 1 KiB,
    a tree of ids with short names, or a notes fan-out directory: :func:`_id_named_blobs`)."""
    size = len(data)
    if size < STORED_BYTES:
        return True
    if kind == "commit":
        return False
    if size < STORED_BLOB_BYTES:
        return True
    if kind != "tree":
        return False
    layout = _uniform_layout(data)
    if layout is not None:  # a notes root or fan-out directory: judged without counting its NULs
        blob, width, stride = layout
        if stride < STORED_TREE_ENTRY_BYTES or _id_named_blobs(size, blob, width):
            return True
    # entries average under STORED_TREE_ENTRY_BYTES (each holds a NUL; ids may hold more)
    return size < STORED_TREE_ENTRY_BYTES * data.count(b"\0")


#: A tree of blobs named by object ids (a notes fan-out directory: ``100644`` entries named by
#: the 38 hex digits left of a commit id, or 36 or 40) is stored up to this size (256 such entries).
STORED_ID_TREE_BYTES = 17 << 10
#: The shortest entry name :func:`_id_named_blobs` takes for an id's hex digits.
_ID_NAME_MIN = 32


def _uniform_layout(data: bytes) -> tuple[bool, int, int] | None:
    """(blobs, name width, entry size) of a tree laid out as entries of one mode (``100644``
    blobs or ``40000`` directories) and one name width, else None. The layout is checked (each
    entry's first mode byte, space and NUL at the stride), not each name: a few C-level slices,
    where counting a tree's NULs reads every byte (~5 instructions a byte: ~37k for the notes
    root of 256 directories)."""
    if data.startswith(b"100644 "):
        head, blob = 7, True
    elif data.startswith(b"40000 "):
        head, blob = 6, False
    else:
        return None
    width = data.find(b"\0", head) - head
    stride = head + width + 21
    if width <= 0 or len(data) % stride:
        return None
    count = len(data) // stride
    first = data[0]
    if (
        data[::stride].count(first) != count
        or data[head - 1 :: stride].count(32) != count
        or data[head + width :: stride].count(0) != count
    ):
        return None
    return blob, width, stride


def _id_named_blobs(size: int, blob: bool, width: int) -> bool:
    """Whether a uniform tree (:func:`_uniform_layout`) of ``size`` bytes is stored as a notes
    fan-out directory, rewritten at every note: ``100644`` entries named by at least
    :data:`_ID_NAME_MIN` characters, at most :data:`STORED_ID_TREE_BYTES`. Hex names and ids
    shrink by a fifth when deflated (2.6 KB to 2.0 KB for the 40 notes of a directory at 10k
    notes), for ~440k instructions a write against ~10k to store it; ``git repack`` deltifies
    the old versions (each differs from the next by one entry), so gc leaves almost none of
    them stored. A tree that merely looks so is stored too, which is always valid, just larger."""
    return blob and width >= _ID_NAME_MIN and size <= STORED_ID_TREE_BYTES


#: The largest stored deflate block (RFC 1951 3.2.4: a 16-bit length).
_STORED_BLOCK = 0xFFFF


def _store(data: bytes) -> bytes:
    """A zlib stream of stored (uncompressed) blocks (RFC 1950/1951): the bytes
    ``zlib.compress(data, 0)`` writes for data under 16 KB, built directly. zlib sets up its
    window and hash tables for level 0 too (~300 KB per call): 1-15 us against 0.3 us here,
    for each of the thousand item files of a bulk put."""
    size = len(data)
    if size <= _STORED_BLOCK:  # one final block
        return b"\x78\x01\x01" + struct.pack("<HH", size, size ^ 0xFFFF) + data + struct.pack(">I", zlib.adler32(data))
    parts = [b"\x78\x01"]
    for at in range(0, size, _STORED_BLOCK):
        block = data[at : at + _STORED_BLOCK]
        last = at + _STORED_BLOCK >= size
        parts.append(struct.pack("<BHH", last, len(block), len(block) ^ 0xFFFF) + block)
    parts.append(struct.pack(">I", zlib.adler32(data)))
    return b"".join(parts)


def _header(kind: str, size: int) -> bytes:
    """A pack entry's type-and-size varint."""
    out = bytearray()
    byte = (TYPE_CODES[kind] << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def pack_bytes(objects: Sequence[tuple[str, bytes]]) -> tuple[bytes, bytes, list[str]]:
    """A version-2 pack of ``objects`` (kind, content), its version-2 index, and the ids.

    Duplicates are packed once. Raises:
        StorageError: an object kind a pack here does not hold.
    """
    ids: list[str] = []
    records = records_of(objects, ids)
    pack, index = assemble_pack(records)
    return pack, index, ids


def pack_entry(kind: str, data: bytes) -> bytes:
    """One whole pack entry: the type-and-size header and the deflated content (stored
    blocks for a blob or tree under 1 KiB, a tree of ids with short names or a notes fan-out
    directory, see :data:`STORED_BLOB_BYTES`, :data:`STORED_TREE_ENTRY_BYTES` and :data:`STORED_ID_TREE_BYTES`).

    Raises:
        StorageError: an object kind a pack here does not hold.
    """
    if kind not in TYPE_CODES:
        raise StorageError(f"cannot pack an object of kind {kind!r}")
    return _header(kind, len(data)) + (_store(data) if _stored(kind, data) else _deflate(data))


def records_of(objects: Sequence[tuple[str, bytes]], ids: list[str] | None = None) -> dict[bytes, bytes]:
    """The pack entries of ``objects`` (kind, content): binary id -> header and deflated content.

    ``ids`` (when given) receives each object's hex id, in order, duplicates included.

    Raises:
        StorageError: an object kind a pack here does not hold.
    """
    records: dict[bytes, bytes] = {}
    for kind, data in objects:
        if kind not in TYPE_CODES:
            raise StorageError(f"cannot pack an object of kind {kind!r}")
        digest = hashlib.sha1(f"{kind} {len(data)}\0".encode() + data).digest()
        if ids is not None:
            ids.append(digest.hex())
        if digest not in records:
            records[digest] = _header(kind, len(data)) + (_store(data) if _stored(kind, data) else _deflate(data))
    return records


def assemble_pack(records: Mapping[bytes, bytes], crcs: dict[bytes, int] | None = None) -> tuple[bytes, bytes]:
    """A version-2 pack of whole entries (binary id -> header and deflated content, no deltas)
    and its version-2 index.

    ``crcs`` (binary id -> the CRC-32 of its entry), when given, supplies the CRCs already
    known (a merge copies entries whose CRCs it checked against their pack's index, or that
    this handle packed before): only the missing ones are computed, and they are added to it.
    A CRC given must be the entry's own; the caller checked it.

    Each table is built by one C-level pass (``map``, ``struct``, one bytes join), not a
    Python loop per fan-out slot: most packs here hold about ten objects, and the 256 fan-out
    slots cost more than they do when counted one by one (the fan-out is written as runs of
    repeated counts, one per first byte present, see :func:`fanout_table`).
    """
    digests = list(records)
    values = list(records.values())
    count = len(values)
    pack = b"".join([b"PACK" + struct.pack(">II", 2, count), *values])
    checksum = hashlib.sha1(pack).digest()
    pack += checksum
    starts = list(itertools.accumulate(map(len, values), initial=12))
    order = sorted(range(count), key=digests.__getitem__)
    ids = [digests[i] for i in order]
    if crcs is None:
        crc_list = [zlib.crc32(values[i]) for i in order]
    else:
        if not crcs.keys() >= records.keys():  # one set comparison in C when every CRC is known (a merge)
            for digest in records.keys() - crcs.keys():
                crcs[digest] = zlib.crc32(records[digest])
        crc_list = list(map(crcs.__getitem__, ids))
    if starts[count - 1 if count else 0] < 0x80000000:  # every entry starts below 2 GiB (the last one last)
        offsets = [starts[i] for i in order]
        large: list[int] = []
    else:  # an entry starts beyond 2 GiB: its offset goes to the 64-bit table
        offsets, large = [], []
        for i in order:
            at = starts[i]
            if at >= 0x80000000:
                offsets.append(0x80000000 | len(large))
                large.append(at)
            else:
                offsets.append(at)
    index = b"".join(
        (
            b"\xfftOc" + struct.pack(">I", 2),
            fanout_table(ids),
            b"".join(ids),
            struct.pack(f">{count}I", *crc_list),
            struct.pack(f">{count}I", *offsets),
            struct.pack(f">{len(large)}Q", *large),
            checksum,
        )
    )
    index += hashlib.sha1(index).digest()
    return pack, index


def fanout_table(ids: Sequence[bytes]) -> bytes:
    """The 256-slot fan-out table (big-endian 32-bit counts) of sorted binary ``ids``: slot ``b``
    holds how many ids start with a byte up to ``b``.

    A few ids (a move's pack) are written as runs: the slots below an id's first byte, not yet
    written, hold the count of ids before it, so each distinct first byte costs one repeated
    4-byte count, about ten steps for a pack of ten objects instead of 256 additions and a
    256-argument ``struct.pack``. Many ids (a merge, a multi-pack-index) take one binary search
    per slot, in C. The same bytes either way (the tests compare them with the slot-by-slot table).
    """
    if len(ids) > _FANOUT_RUNS_MAX:
        return struct.pack(">256I", *map(functools.partial(bisect.bisect_left, ids), _SLOT_KEYS), len(ids))
    parts = []
    slot = 0  # the first slot not written yet
    for n, digest in enumerate(ids):
        first = digest[0]
        if first > slot:
            parts.append(n.to_bytes(4, "big") * (first - slot))
            slot = first
    parts.append(len(ids).to_bytes(4, "big") * (256 - slot))
    return b"".join(parts)


#: Up to this many ids a fan-out table is written as runs, above it by a search per slot.
_FANOUT_RUNS_MAX = 512
#: The least id of each first byte from 1 up: slot ``b`` counts the ids below ``_SLOT_KEYS[b]``.
_SLOT_KEYS = [bytes([b]) for b in range(1, 256)]


class PackCopy(NamedTuple):
    """What :func:`pack_records` can copy from a pack as it is, and what must be read whole."""

    #: binary id -> whole entry (header and deflated content), each checked against the index's CRC
    records: dict[bytes, bytes]
    #: binary id -> the index's CRC-32 of that entry (the copy's own, checked)
    crcs: dict[bytes, int]
    #: binary ids to read whole (resolved and packed again): deltas, annotated tags, and entries
    #: whose bytes do not match the index's CRC
    whole: list[bytes]


def pack_records(idx: Path) -> PackCopy:
    """The entries of the pack beside ``idx`` that can be copied into another pack as they are
    (no inflating, no deflating, no CRC computed for the new index but the one that checks the
    copy against this index's), and the ids of those that cannot.

    An entry is copied when it is a whole commit, tree or blob (not a delta, as packs git wrote
    may hold) and the CRC-32 of its bytes is the one the index lists; any other entry is listed
    in ``whole``, for the caller to read through the object database (which resolves deltas and
    checks each object's id) and pack again: a damaged entry is then a typed error there, or is
    repaired from another copy of the same object.

    Raises:
        CorruptRepositoryError: the index or the pack is cut short or damaged.
        OSError: the files cannot be read (gone: another process repacked).
    """
    index = Path(idx).read_bytes()
    data = Path(idx).with_suffix(".pack").read_bytes()
    if len(index) < 8 + 1024 + 40 or index[:8] != b"\xfftOc" + struct.pack(">I", 2):
        raise CorruptRepositoryError(f"{idx} is not a version-2 pack index; run `got gc`")
    count = struct.unpack_from(">I", index, 8 + 1020)[0]
    base = 8 + 1024
    if len(index) < base + 28 * count + 40 or data[:4] != b"PACK" or len(data) < 32:
        raise CorruptRepositoryError(f"{idx} or its pack is cut short; run `got gc`")
    ids = [index[base + 20 * i : base + 20 * i + 20] for i in range(count)]
    crcs = struct.unpack_from(f">{count}I", index, base + 20 * count)
    offsets = struct.unpack_from(f">{count}I", index, base + 24 * count)
    if any(o & 0x80000000 for o in offsets):
        return PackCopy({}, {}, ids)  # over 2 GiB: never one of ours
    order = sorted(range(count), key=offsets.__getitem__)
    end = len(data) - 20
    records: dict[bytes, bytes] = {}
    known: dict[bytes, int] = {}
    whole: list[bytes] = []
    for k, i in enumerate(order):
        start = offsets[i]
        stop = offsets[order[k + 1]] if k + 1 < count else end
        record = data[start:stop]
        if not record or (record[0] >> 4) & 7 not in (1, 2, 3) or zlib.crc32(record) != crcs[i]:
            whole.append(ids[i])  # a delta, a tag, or damaged bytes: read through the object database
            continue
        records[ids[i]] = record
        known[ids[i]] = crcs[i]
    return PackCopy(records, known, whole)


class _Joined(threading.local):
    """The ref move being built in this thread (set by ``storage/git/_staging``): gitdir and stager."""

    gitdir: Path | None = None
    stage: Callable[[str, bytes], str | None] | None = None


#: While a builder of a ref move runs, a pack written here for the same repository joins
#: that move's pack (one pack per move): ``storage/git/_staging`` sets and clears it.
JOINED = _Joined()


def write_pack(gitdir: Path, objects: Sequence[tuple[str, bytes]], *, fsync: bool | None = None) -> list[str]:
    """Store ``objects`` (kind, content) as one pack in ``gitdir``; returns their ids in order.

    Inside the builder of a ref move on the same repository the objects join that move's
    pack instead (written, with the move's own objects, before any ref moves).

    ``fsync`` (default: as libgit2 does in this process, :func:`~got_core.storage.git.fsync_enabled`)
    flushes the pack, its index and the directory to disk before returning.

    The pack is written under a temporary name and renamed into place before its index
    (a reader finds packs by their index), so a killed writer leaves at most a temporary
    file and never a half pack.

    Raises:
        StorageError: the pack directory cannot be written.
    """
    stage = JOINED.stage
    if stage is not None and JOINED.gitdir == Path(gitdir):
        ids = [stage(kind, data) for kind, data in objects]
        if all(i is not None for i in ids):
            return [i for i in ids if i is not None]
    return write_pack_named(gitdir, objects, fsync=fsync)[1]


def write_pack_named(
    gitdir: Path, objects: Sequence[tuple[str, bytes]], *, fsync: bool | None = None
) -> tuple[str | None, list[str]]:
    """:func:`write_pack`, also returning the pack's name (its checksum; None: no objects)."""
    if not objects:
        return None, []
    pack, index, ids = pack_bytes(objects)
    return install_pack(gitdir, pack, index, fsync=fsync), ids


def _fresh_prefix() -> None:
    """The part of temporary names unique to this process: its pid and a random tag (a stale
    file of a dead process with the same pid is never reused), taken once per process (again
    in a forked child) instead of a ``getpid`` and a ``getrandom`` per file."""
    global _TMP_PREFIX, _TMP_NAMES
    _TMP_PREFIX = f"{os.getpid()}_{os.urandom(4).hex()}"
    _TMP_NAMES = itertools.count()


_TMP_PREFIX = ""
_fresh_prefix()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_prefix)

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


def write_read_only(folder: str, kind: str, final: str, data: bytes, *, fsync: bool, same: bool = False) -> None:
    """Write ``data`` to ``final`` in ``folder`` through a temporary file created read-only (as git
    leaves its packs; no chmod afterwards) and renamed over it: a reader sees the old file or the
    whole new one. The temporary name is unique to this process and call, and ``O_EXCL`` refuses
    anything already there; it is removed when the write fails. Four system calls (open, write,
    close, rename) when nothing fails: no ``fstat``/``lseek``/``ioctl`` of a Python file object,
    no ``getpid`` or ``getrandom`` (the name's prefix is taken once per process).

    ``same``: ``final`` is named by its content (a pack or its index), so a file already there
    that cannot be replaced (Windows: open in another process) holds these very bytes: kept.

    Raises:
        OSError: the file cannot be written.
    """
    tmp = f"{folder}/tmp_{kind}_{_TMP_PREFIX}_{next(_TMP_NAMES)}"
    fd = os.open(tmp, _CREATE, 0o444)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.replace(tmp, final)
        except OSError:
            if not (same and os.path.exists(final)):
                raise
            os.unlink(tmp)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def install_pack(gitdir: Path, pack: bytes, index: bytes, *, fsync: bool | None = None) -> str:
    """Put a pack and its index in ``gitdir`` (the pack first, each under a temporary name in
    ``objects/pack``, as git writes its ``tmp_pack_*``); returns the pack's name.

    A pack already there under the same name holds the same bytes (its name is their checksum):
    it is replaced by its copy, not looked up first. ``objects/pack`` is created only when the
    first write finds it missing. Eight system calls in all without fsync (see :func:`write_read_only`).

    Raises:
        StorageError: the pack directory cannot be written.
    """
    if fsync is None:
        fsync = fsync_enabled()
    name = pack[-20:].hex()
    folder = f"{os.fspath(gitdir)}/objects/pack"
    try:
        for suffix, data in (("pack", pack), ("idx", index)):
            final = f"{folder}/pack-{name}.{suffix}"
            try:
                write_read_only(folder, suffix, final, data, fsync=fsync, same=True)
            except FileNotFoundError:  # no objects/pack (or objects/) yet
                os.makedirs(folder, exist_ok=True)
                write_read_only(folder, suffix, final, data, fsync=fsync, same=True)
        if fsync:
            dir_fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    except OSError as exc:
        raise StorageError(f"cannot write a pack in {folder}: {exc}") from None
    return name


def tree_object(entries: Mapping[bytes, tuple[bytes, bytes]]) -> bytes:
    """The raw tree of ``entries``: name -> (sort key, raw entry ``<mode> <name>\\0<20-byte id>``),
    in git's entry order (the sort key of a tree's name is the name and ``/``)."""
    return b"".join([entry for _, entry in sorted(entries.values())])


def build_tree_objects(
    read_raw: Callable[[str], tuple[str, bytes]],
    base_tree: str | None,
    changes: Mapping[str, str | None],
    parsed: dict[bytes, dict[bytes, tuple[bytes, bytes]]] | None = None,
    ids: list[str] | None = None,
    checked: CheckedFiles[Any] | None = None,
) -> tuple[str | None, list[tuple[str, bytes]]]:
    """``base_tree`` with ``changes`` (path -> blob id, or None to delete) applied.

    Returns the new root tree's id (None: the tree became empty) and the new tree objects
    to store (kind, content); unchanged subtrees are reused by id, directories left empty
    disappear, as with libgit2's tree builder.

    ``parsed`` (binary tree id -> its entries) keeps the trees read and built, for the
    next call of one writer: a long thread's next checkpoint starts from the trees of the
    last one (a directory of a thousand messages is not parsed again). Give each
    repository its own: an entry stands for "this tree is in this repository". A
    :class:`TreeCache` also keeps small trees (:data:`SMALL_TREE_BYTES`) by id, raw and
    parsed, so the directories a writer rewrites at every commit (a checkpoint's root and
    channel directories, a store's hash buckets) are neither read nor parsed again.

    ``checked`` (the :class:`~got_core.names.CheckedFiles` the changes' paths came from)
    gives the components of the paths it checked; any other path is checked here.

    ``ids`` (when given) receives the hex id of each returned object, in order: the build
    hashed each tree once already, so a caller staging them need not hash them again.

    Raises:
        InvalidNameError: an unsafe path (``names.check_path``).
        CorruptRepositoryError: a base tree that is missing or not well formed.
    """
    out: list[tuple[str, bytes, bytes]] = []
    root = _build(read_raw, base_tree, _checked_paths(changes, checked), out, parsed, getattr(parsed, "small", None))
    if ids is not None:
        ids.extend([digest.hex() for _kind, _data, digest in out])
    return root.hex() if root is not None else None, [(kind, data) for kind, data, _digest in out]


#: Trees of at most this many raw bytes are kept by id in a :class:`TreeCache`'s ``small``
#: (a checkpoint's root, channel and bucket directories, a store's hash buckets: 0.1-1 KiB).
SMALL_TREE_BYTES = 2048
#: How many small trees a :class:`TreeCache` keeps (1 MiB of raw trees at most, and their parses).
SMALL_TREES = 512


class _Small:
    """One small tree a :class:`TreeCache` keeps: its raw bytes as read or built (its id is
    the key: content never changes), and, once known, what :func:`uniform_tree_names` says
    of it and its parsed entries (handed out as copies only: nobody changes them in place)."""

    __slots__ = ("data", "entries", "uniform", "uniform_known")

    def __init__(
        self,
        data: bytes,
        entries: dict[bytes, tuple[bytes, bytes]] | None = None,
        uniform: tuple[bytes, int, tuple[bytes, ...]] | None = None,
        uniform_known: bool = False,
    ) -> None:
        self.data = data
        self.entries = entries
        self.uniform = uniform
        self.uniform_known = uniform_known

    def read(self, _oid: str) -> tuple[str, bytes]:
        """A ``read_raw`` answering this tree's bytes (so a parse of them goes through ``_read_tree``)."""
        return "tree", self.data


class TreeCache(OrderedDict[bytes, dict[bytes, tuple[bytes, bytes]]]):
    """A ``parsed`` cache for :func:`build_tree_objects` that keeps up to ``limit`` trees
    (instead of 64) of at least ``min_entries`` entries, evicting the oldest first, and up to
    :data:`SMALL_TREES` small trees (``small``: hex id -> raw bytes and parse).

    For a writer that rewrites many directories a commit (a store batch touching a thousand
    namespaces): the next commit starts from the trees of the last one and parses none of
    them. Give each repository its own (an entry stands for "this tree is in this repository").
    Every entry is keyed by the tree's id, which names its content: an entry never goes stale.
    """

    def __init__(self, limit: int, min_entries: int = 32) -> None:
        super().__init__()
        self.limit = limit
        self.min_entries = min_entries
        self.small: OrderedDict[str, _Small] = OrderedDict()


def _keep_small(small: OrderedDict[str, _Small], oid: str, tree: _Small) -> None:
    if len(small) >= SMALL_TREES:
        try:
            small.popitem(last=False)
        except KeyError:  # another thread's trim came first
            pass
    small[oid] = tree


def _raw_base(
    read_raw: Callable[[str], tuple[str, bytes]], base: str, small: OrderedDict[str, _Small] | None
) -> tuple[str, bytes, _Small | None]:
    """(kind, content, its ``small`` entry or None) of the base tree ``base``: a small tree is
    read once and then kept."""
    if small is not None:
        kept = small.get(base)
        if kept is not None:
            return "tree", kept.data, kept
    kind, data = read_raw(base)
    if small is None or kind != "tree" or len(data) > SMALL_TREE_BYTES:
        return kind, data, None
    kept = _Small(data)
    _keep_small(small, base, kept)
    return kind, data, kept


def _base_entries(
    read_raw: Callable[[str], tuple[str, bytes]], base: str, small: OrderedDict[str, _Small] | None
) -> dict[bytes, tuple[bytes, bytes]]:
    """The entries of the base tree ``base`` (a copy: the caller changes it), parsed by
    ``_read_tree`` (which refuses a damaged tree, every time: a failed parse is not kept)."""
    if small is None:
        return _read_tree(read_raw, base)
    kind, data, kept = _raw_base(read_raw, base, small)
    if kept is None:  # a large tree (or not a tree: refused there), already read once
        return _read_tree(lambda _oid: (kind, data), base)
    if kept.entries is None:
        kept.entries = _read_tree(kept.read, base)
    return dict(kept.entries)


class _Dir(NamedTuple):
    """The changes below one directory: its files (name -> blob id, None deletes) and its
    subdirectories (name -> their changes)."""

    files: dict[str, str | None]
    dirs: dict[str, _Dir]


def _descend(root: _Dir, parts: tuple[str, ...]) -> _Dir:
    """The changes of directory ``parts`` below ``root`` (made, empty, where missing)."""
    node = root
    for part in parts:
        sub = node.dirs.get(part)
        if sub is None:
            sub = node.dirs[part] = _Dir({}, {})
        node = sub
    return node


def _checked_paths(changes: Mapping[str, str | None], checked: CheckedFiles[Any] | None = None) -> _Dir:
    """``changes`` as a tree of directories, every path checked as ``names.check_path``
    checks it; a directory shared by many paths is checked (and walked) once, so building
    costs a step per changed file plus a step per directory level, not one per file and level.
    A path ``checked`` holds the components of passed that check already: they are used as they are.

    Raises:
        InvalidNameError: an unsafe path (the error ``check_path`` gives).
    """
    root = _Dir({}, {})
    known: dict[str, _Dir] = {}  # directory path -> its node (already checked)
    walked: dict[tuple[str, ...], _Dir] = {}  # checked directory components -> its node
    for path, value in changes.items():
        split = checked.parts(path) if checked is not None else None
        if split is not None:
            if len(split) == 1:
                root.files[split[0]] = value
                continue
            node = walked.get(split[:-1])
            if node is None:
                node = walked[split[:-1]] = _descend(root, split[:-1])
            node.files[split[-1]] = value
            continue
        head, sep, name = path.rpartition("/") if isinstance(path, str) else ("", "", path)
        node = known.get(head) if sep else None
        if (
            node is None
            or path_component_problem(name) is not None
            or (len(path) > MAX_PATH_BYTES // 4 and len(path.encode("utf-8")) > MAX_PATH_BYTES)
        ):
            parts = check_path(path)  # raises for an unsafe path; else the first of its directory
            node = _descend(root, parts[:-1])
            if sep:
                known[head] = node
            name = parts[-1]
        node.files[name] = value
    return root


# One raw tree entry: the whole entry, its mode and its name.
_ENTRY = re.compile(rb"(([0-7]{1,7}) ([^\x00]+)\x00.{20})", re.DOTALL)
_TREE_MODES = (b"40000", b"040000")  # what git writes, and the zero-padded spelling of old tools


def _is_tree(entry: bytes) -> bool:
    """Whether a raw entry names a tree."""
    mode = entry[: entry.index(b" ")]
    return mode in _TREE_MODES or int(mode, 8) == TREE_MODE


def _read_tree(read_raw: Callable[[str], tuple[str, bytes]], oid: str) -> dict[bytes, tuple[bytes, bytes]]:
    kind, data = read_raw(oid)
    if kind != "tree":
        raise CorruptRepositoryError(f"object {oid} is a {kind}, expected a tree; run `got fsck`")
    found = _ENTRY.findall(data)
    if sum(len(entry) for entry, _, _ in found) != len(data):  # the matches cover it exactly, or it is damaged
        raise CorruptRepositoryError(f"tree {oid} is not a well-formed tree; run `got fsck`")
    out: dict[bytes, tuple[bytes, bytes]] = {}
    for entry, mode, name in found:
        if mode[:1] == b"0":  # libgit2 rewrites a mode as plain octal ("040000" -> "40000"): so do we
            entry = b"%o " % int(mode, 8) + entry[len(mode) + 1 :]
        # sorted as libgit2 sorts (a name ends in "/" when its mode's type bits say directory)
        out[name] = (name + b"/" if mode in _TREE_MODES or int(mode, 8) & 0o170000 == TREE_MODE else name, entry)
    return out


def read_tree_entries(read_raw: Callable[[str], tuple[str, bytes]], oid: str) -> dict[bytes, tuple[bytes, bytes]]:
    """The entries of tree ``oid`` as :func:`build_tree_objects` keeps them in ``parsed``:
    name -> (sort key, raw entry ``<mode> <name>\\0<20-byte id>``, the mode as libgit2 writes it).

    Raises:
        CorruptRepositoryError: missing, not a tree, or not well formed.
    """
    return _read_tree(read_raw, oid)


#: The modes of the trees spliced rather than parsed: a notes fan-out directory (blobs named by
#: the rest of a commit id) and the notes root (directories named by its first two digits).
_UNIFORM_MODES = (b"100644", b"40000")


def uniform_tree_names(data: bytes) -> tuple[bytes, int, list[bytes]] | None:
    """(mode, width, names in order) of a raw tree whose entries all have one mode of
    :data:`_UNIFORM_MODES` and names of one width: a notes fan-out directory (``100644``
    blobs named by 38 hex digits) or a notes root (``40000`` directories named by two).

    None for any other tree, or one whose names are not strictly sorted (names of one
    width sort as git sorts them, ``/`` appended to directories or not): such a tree is
    parsed entry by entry instead.
    """
    if _SEEN_MIN_BYTES <= len(data) <= _SEEN_MAX_BYTES:
        if data in _SEEN:  # keyed by the content itself: never a stale answer
            seen = _SEEN.get(data)
            return None if seen is None else (seen[0], seen[1], list(seen[2]))
        found = _uniform_tree_names(data)
        _remember_uniform(data, found)
        return found
    return _uniform_tree_names(data)


#: The answers of :func:`uniform_tree_names` for the last few large trees, by their bytes: a
#: write looks at the notes root and the note's directory, then builds them, and the next
#: write starts from the root this one built (remembered when it was spliced).
_SEEN: dict[bytes, tuple[bytes, int, tuple[bytes, ...]] | None] = {}
_SEEN_MIN_BYTES = 1024
_SEEN_MAX_BYTES = 256 * 1024  # at most 32 such trees kept: 8 MiB
_SEEN_MAX = 32


def _remember_uniform(data: bytes, found: tuple[bytes, int, list[bytes]] | None) -> None:
    if not _SEEN_MIN_BYTES <= len(data) <= _SEEN_MAX_BYTES:
        return
    if len(_SEEN) >= _SEEN_MAX:
        try:
            del _SEEN[next(iter(_SEEN))]
        except (KeyError, RuntimeError, StopIteration):  # another thread's trim came first
            pass
    _SEEN[data] = None if found is None else (found[0], found[1], tuple(found[2]))


def _uniform_tree_names(data: bytes) -> tuple[bytes, int, list[bytes]] | None:
    mode = b"100644" if data.startswith(b"100644 ") else b"40000" if data.startswith(b"40000 ") else None
    if mode is None:
        return None
    head = len(mode) + 1
    width = data.find(b"\0", head) - head
    stride = head + width + 21
    if width <= 0 or len(data) % stride:
        return None
    count = len(data) // stride
    # every entry is ``<mode> <name>\0<20 bytes>`` at a multiple of the stride: the mode, the space
    # and the NUL checked column by column, the names cut out by struct (no per-entry Python step)
    for at, byte in enumerate(mode + b" "):
        if data[at::stride].count(byte) != count:
            return None
    if data[head + width :: stride].count(0) != count:
        return None
    if count <= _UNPACK_MAX:
        names = list(struct.unpack(f"<{f'{head}x{width}s21x' * count}", data))
    else:
        names = [name for (name,) in struct.iter_unpack(f"<{head}x{width}s21x", data)]
    joined = b"".join(names)
    if joined.find(b"\0") >= 0 or joined.find(b"/") >= 0 or not all(map(operator.lt, names, names[1:])):
        return None  # a name git refuses, or names not strictly sorted
    return mode, width, names


#: Entries of a uniform tree cut out by one ``struct`` format (compiled once per count and
#: kept by ``struct``'s own cache); a larger tree is cut entry by entry.
_UNPACK_MAX = 1024


def _splice(data: bytes, mode: bytes, names: list[bytes], changes: Mapping[bytes, bytes | None]) -> bytes:
    """A uniform tree (:func:`uniform_tree_names`) with ``changes`` (name of its width -> binary
    id of the same mode, None deletes) applied by splicing its entries: no entry is parsed."""
    stride = len(mode) + len(names[0] if names else next(iter(changes))) + 22
    parts = bytearray(data)
    for name in sorted(changes):
        value = changes[name]
        at = bisect.bisect_left(names, name)
        present = at < len(names) and names[at] == name
        entry = b"" if value is None else mode + b" " + name + b"\0" + value
        if present:
            parts[at * stride : (at + 1) * stride] = entry
            if value is None:
                del names[at]
        elif value is not None:
            parts[at * stride : at * stride] = entry
            names.insert(at, name)
    return bytes(parts)


def _build_uniform(
    read_raw: Callable[[str], tuple[str, bytes]],
    base: str,
    changes: _Dir,
    out: list[tuple[str, bytes, bytes]],
    parsed: dict[bytes, dict[bytes, tuple[bytes, bytes]]] | None,
    small: OrderedDict[str, _Small] | None = None,
) -> tuple[bytes | None, tuple[bytes, int, list[bytes]]] | None:
    """(the new tree's bytes, None when empty; its mode, width and names) when ``base`` is
    uniform and the changes keep it so (blobs of its width in a blob directory,
    subdirectories of its width in a directory of directories); else None, and nothing was built."""
    kind, data, kept = _raw_base(read_raw, base, small)
    if kept is not None and kept.uniform_known:
        seen = kept.uniform
        found = None if seen is None else (seen[0], seen[1], list(seen[2]))
    else:
        found = uniform_tree_names(data) if kind == "tree" else None
        if kept is not None:
            kept.uniform = None if found is None else (found[0], found[1], tuple(found[2]))
            kept.uniform_known = True
    if found is None:
        return None
    mode, width, names = found
    stride = len(mode) + width + 22
    named: dict[bytes, bytes | None] = {}
    if mode == b"100644":
        if changes.dirs:
            return None
        for file, value in changes.files.items():
            name = file.encode("utf-8")
            if len(name) != width:
                return None
            named[name] = None if value is None else bytes.fromhex(value)
    else:
        if changes.files:
            return None
        groups = [(name.encode("utf-8"), sub) for name, sub in changes.dirs.items()]
        if any(len(name) != width for name, _ in groups):
            return None
        for name, sub in groups:  # everything checked: from here on nothing falls back
            at = bisect.bisect_left(names, name)
            present = at < len(names) and names[at] == name
            sub_base = data[(at + 1) * stride - 20 : (at + 1) * stride].hex() if present else None
            named[name] = _build(read_raw, sub_base, sub, out, parsed, small)
    spliced = _splice(data, mode, names, named)
    _remember_uniform(spliced, (mode, width, names))  # the next write starts from this tree
    return spliced or None, (mode, width, names)


def _looks_uniform(entries: dict[bytes, tuple[bytes, bytes]]) -> bool:
    """Whether a kept tree may be uniform (its first and last entries agree on mode and
    width): then its raw bytes are looked at, which decide."""
    if len(entries) < 32:
        return False
    first, last = next(iter(entries.values()))[1], entries[next(reversed(entries))][1]
    return first.index(b"\0") == last.index(b"\0") and first[:6] == last[:6]


def _build(
    read_raw: Callable[[str], tuple[str, bytes]],
    base: str | None,
    changes: _Dir,
    out: list[tuple[str, bytes, bytes]],
    parsed: dict[bytes, dict[bytes, tuple[bytes, bytes]]] | None = None,
    small: OrderedDict[str, _Small] | None = None,
) -> bytes | None:
    """The new tree's binary id (None: empty); new trees are appended to ``out`` (kind, content, binary id).

    ``small`` (a :class:`TreeCache`'s) keeps the small trees read and built, by hex id."""
    known = parsed.get(bytes.fromhex(base)) if parsed is not None and base else None
    if known is None and small is not None and base:
        kept = small.get(base)
        if kept is not None:
            known = kept.entries  # parsed or built here: not parsed again (nor spliced, under 32 entries)
    if base and (known is None or _looks_uniform(known)):
        # a notes fan-out directory (n/256 entries at n notes) and the notes root take the note
        # by splicing: the cost of a memmove, not of parsing, sorting and joining every entry
        spliced = _build_uniform(read_raw, base, changes, out, parsed, small)
        if spliced is not None:
            data, (mode, width, names) = spliced
            if data is None:
                return None
            digest = hashlib.sha1(b"tree %d\0" % len(data) + data).digest()
            out.append(("tree", data, digest))
            if small is not None and len(data) <= SMALL_TREE_BYTES:
                _keep_small(small, digest.hex(), _Small(data, None, (mode, width, tuple(names)), True))
            return digest
    if known is not None:
        entries = dict(known)
    else:
        entries = _base_entries(read_raw, base, small) if base else {}
    for file, value in changes.files.items():
        name = file.encode("utf-8")
        if value is None:
            entries.pop(name, None)
        else:
            entries[name] = (name, b"100644 " + name + b"\0" + bytes.fromhex(value))
    for folder, sub in changes.dirs.items():
        name = folder.encode("utf-8")
        existing = entries.get(name)
        sub_base = existing[1][-20:].hex() if existing is not None and _is_tree(existing[1]) else None
        new = _build(read_raw, sub_base, sub, out, parsed, small)
        if new is None:
            entries.pop(name, None)
        else:
            entries[name] = (name + b"/", b"40000 " + name + b"\0" + new)
    if not entries:
        return None
    data = tree_object(entries)
    digest = hashlib.sha1(b"tree %d\0" % len(data) + data).digest()
    out.append(("tree", data, digest))
    if parsed is not None and len(entries) >= getattr(parsed, "min_entries", 32):  # small trees parse cheaply
        if len(parsed) >= getattr(parsed, "limit", 64):
            parsed.pop(next(iter(parsed)))
        parsed[digest] = entries
    elif small is not None and len(data) <= SMALL_TREE_BYTES:
        # the next commit of this writer starts from this tree: it is neither read nor parsed
        _keep_small(small, digest.hex(), _Small(data, entries))
    return digest


def object_id(kind: str, data: bytes) -> str:
    """The SHA-1 id git gives an object of ``kind`` holding ``data``."""
    return hashlib.sha1(b"%s %d\0" % (kind.encode("ascii"), len(data)) + data).hexdigest()


def _person(raw_name: bytes, raw_email: bytes, time: int, offset: int) -> bytes:
    """``name <email> time +hhmm``, as libgit2's ``git_signature__writebuf`` writes it."""
    sign = b"-" if offset < 0 else b"+"
    offset = abs(offset)
    return b"%s <%s> %d %s%02d%02d" % (raw_name, raw_email, time, sign, offset // 60, offset % 60)


def commit_object(
    tree: str,
    parents: Sequence[str],
    author: tuple[bytes, bytes, int, int],
    committer: tuple[bytes, bytes, int, int],
    message: bytes,
) -> bytes:
    """The raw commit libgit2's ``git_commit_create`` writes (no encoding header).

    ``author`` and ``committer`` are (raw name, raw email, time, offset in minutes), the
    name and email already trimmed and checked by ``git_signature_new``.
    """
    lines = [b"tree " + tree.encode("ascii")]
    lines += [b"parent " + p.encode("ascii") for p in parents]
    lines.append(b"author " + _person(*author))
    lines.append(b"committer " + _person(*committer))
    return b"\n".join(lines) + b"\n\n" + message


def signed_commit(payload: bytes, signature: bytes, field: bytes = b"gpgsig") -> bytes:
    """``payload`` with ``signature`` as a header, as ``git_commit_create_with_signature`` writes it.

    Raises:
        StorageError: the payload has no header (not a commit).
    """
    end = payload.find(b"\n\n")
    if end < 0:
        raise StorageError("cannot sign a commit without a header")
    return payload[: end + 1] + field + b" " + signature.replace(b"\n", b"\n ") + b"\n" + payload[end + 1 :]


def pack_index_ids(idx: Path) -> list[str]:
    """The object ids a version-2 pack index lists, in its (sorted) order.

    Raises:
        CorruptRepositoryError: not a version-2 index, or cut short.
    """
    with open(idx, "rb") as f:
        head = f.read(8 + 1024)
        if len(head) < 8 + 1024 or head[:8] != b"\xfftOc" + struct.pack(">I", 2):
            raise CorruptRepositoryError(f"{idx} is not a version-2 pack index; run `got gc`")
        count = struct.unpack(">I", head[-4:])[0]
        raw = f.read(20 * count)
    if len(raw) != 20 * count:
        raise CorruptRepositoryError(f"{idx} is cut short; run `got gc`")
    return [raw[i : i + 20].hex() for i in range(0, len(raw), 20)]


def tree_entries_of(kind: str, data: bytes, oid: str = "") -> dict[bytes, tuple[int, str]]:
    """The entries of a raw tree: name -> (mode, hex id).

    Raises:
        CorruptRepositoryError: not a tree, or not well formed.
    """
    if kind != "tree":
        raise CorruptRepositoryError(f"object {oid} is a {kind}, expected a tree; run `got fsck`")
    found = _ENTRY.findall(data)
    if sum(len(entry) for entry, _, _ in found) != len(data):
        raise CorruptRepositoryError(f"tree {oid} is not a well-formed tree; run `got fsck`")
    return {name: (int(mode, 8), entry[-20:].hex()) for entry, mode, name in found}
