"""What merging small packs and writing the multi-pack-index cost, counted (storage/git/_packing.py,
storage/packs.py, storage/midx.py, ARCHITECTURE §6): CRCs computed, objects inflated or deflated,
system calls of the try-lock, ``struct.pack`` calls of a multi-pack-index; and that a damaged
source pack stops a merge with our typed error and loses nothing. Counted through spies on the
real functions, never timed; stock git checks every repository written here."""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import struct
import subprocess
import sys
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from gitcli import fsck_clean, git

from got_core import Node, ReasoningRepo
from got_core.errors import CorruptRepositoryError
from got_core.storage import midx, packs
from got_core.storage.git import GitRepo, _packing
from got_core.storage.packs import write_pack_named
from got_core.storage.refs import Publish, update_ref
from got_core.types import Identity


def _spied(module: Any, names: set[str], calls: Counter[str]) -> SimpleNamespace:
    """``module``'s attributes, the callables in ``names`` counted into ``calls`` (the real functions run)."""

    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def spy(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)

        return spy

    attrs = {n: getattr(module, n) for n in dir(module) if not n.startswith("__")}
    return SimpleNamespace(**{n: counted(n, v) if n in names else v for n, v in attrs.items()})


@contextmanager
def merge_work(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Counts, from here on: CRC-32s computed in ``packs``, objects deflated or stored there, and
    objects read whole through the object database (``_raw_read``)."""
    calls: Counter[str] = Counter()
    monkeypatch.setattr(packs, "zlib", _spied(zlib, {"crc32"}, calls))
    for name in ("_deflate", "_store"):
        real = getattr(packs, name)

        def spy(data: bytes, _real: Callable[[bytes], bytes] = real, _name: str = name) -> bytes:
            calls[_name] += 1
            return _real(data)

        monkeypatch.setattr(packs, name, spy)
    real_read = GitRepo._raw_read

    def reading(self: GitRepo, oid: str) -> tuple[str, bytes]:
        calls["raw_read"] += 1
        return real_read(self, oid)

    monkeypatch.setattr(GitRepo, "_raw_read", reading)
    yield calls
    monkeypatch.undo()


def _move(g: GitRepo, ref: str, n: int, size: int = 1500) -> None:
    """One ref move of this handle: one pack of a blob (deflated: over 1 KiB), a tree and a commit."""

    def build(tip: str | None) -> Publish:
        tree = g.build_tree(None, {"f.txt": (b"line %d of move %d\n" % (n, n)) * (size // 20)})
        commit = g.write_commit(tree, [tip] if tip else [], f"move {n}", Identity(), Identity(), (n, 0))
        return Publish(commit, commit)

    update_ref(g, ref, build)


def _pack_files(gitdir: Path) -> set[str]:
    return {p.name for p in (gitdir / "objects" / "pack").glob("pack-*")}


def _verify_packs(gitdir: Path) -> None:
    for idx in (gitdir / "objects" / "pack").glob("pack-*.idx"):
        git(gitdir, "verify-pack", str(idx))
    assert fsck_clean(gitdir)[0]


def _disk_packs(gitdir: Path, n: int, seed: int = 0) -> list[list[str]]:
    """``n`` packs written outside any handle (as another process would): each a deflated blob
    and two stored ones; their ids."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = b" ".join(rng.choice([b"alpha", b"beta", b"gamma", b"delta"]) for _ in range(400))
        objects = [("blob", b"pack %d: " % i + words), ("blob", b"small %d" % i), ("blob", b"tiny %d\n" % i * 3)]
        out.append(write_pack_named(gitdir, objects)[1])
    return out


def test_a_merge_of_this_handle_s_packs_computes_no_crc_and_packs_nothing_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = GitRepo(tmp_path / "r.git")
    for n in range(10):  # under MAX_PACKS: no merge yet
        _move(g, "refs/heads/main", n)
    before = _pack_files(g.gitdir)
    with merge_work(monkeypatch) as work:
        merged = g.consolidate_packs()
    assert merged == 10
    # the entries and their CRCs were kept when the packs were written: copied as they are
    assert work == Counter(), work
    assert len(_pack_files(g.gitdir) - before) == 2  # one merged pack, its index
    _verify_packs(g.gitdir)
    assert git(g.gitdir, "rev-list", "--count", "main").strip() == "10"
    assert git(g.gitdir, "show", "main~3:f.txt").startswith("line 6 of move 6")


def test_a_merge_of_another_writer_s_packs_checks_each_crc_once_and_inflates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = GitRepo(tmp_path / "r.git")
    ids = _disk_packs(g.gitdir, 9)
    reader = GitRepo(g.gitdir)  # a handle that wrote none of them
    with merge_work(monkeypatch) as work:
        merged = reader.consolidate_packs()
    assert merged == 9
    objects = sum(map(len, ids))
    # each entry copied is checked once against its index's CRC, which the merged index reuses;
    # nothing is read through libgit2, inflated, deflated or stored again
    assert work == Counter({"crc32": objects}), work
    _verify_packs(g.gitdir)
    for group in ids:
        assert git(g.gitdir, "cat-file", "-p", group[1]).startswith("small")


def test_a_pack_git_wrote_with_deltas_is_merged_reading_only_its_deltas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = GitRepo(tmp_path / "r.git")
    base = "".join(f"shared line {i} of a long file\n" for i in range(300))
    blobs = []
    for k in range(6):  # similar blobs, loose, then packed by git with deltas
        text = base.replace(f"line {k * 40} ", f"line {k * 40} changed ") + f"version {k}\n"
        blobs.append(git(g.gitdir, "hash-object", "-w", "--stdin", input=text.encode()).strip())
    git(g.gitdir, "pack-objects", "-q", str(g.gitdir / "objects" / "pack" / "pack"), input="\n".join(blobs).encode())
    git(g.gitdir, "prune-packed")  # the loose copies go: the pack is the only one
    listing = git(g.gitdir, "verify-pack", "-v", *map(str, (g.gitdir / "objects" / "pack").glob("pack-*.idx")))
    deltas = sum(1 for line in listing.splitlines() if line[:40] in blobs and len(line.split()) >= 7)
    assert 0 < deltas < len(blobs)
    for n in range(9):  # a merge needs more than MAX_PACKS // 2 packs
        _move(g, "refs/heads/main", n)
    with merge_work(monkeypatch) as work:
        merged = g.consolidate_packs()
    assert merged == 10
    # the whole blobs are copied as they are; only the deltas are resolved and packed again
    assert work["raw_read"] == deltas and work["_deflate"] == deltas, work
    _verify_packs(g.gitdir)
    for k, oid in enumerate(blobs):
        assert git(g.gitdir, "cat-file", "-p", oid).endswith(f"version {k}\n")


def _damage(path: Path, at: int, mask: int = 0x55) -> None:
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[at] ^= mask
    path.write_bytes(bytes(data))
    os.chmod(path, 0o444)


def _entry_offsets(idx: Path) -> dict[str, tuple[int, int]]:
    """hex id -> (its row in the index, its offset in the pack)."""
    ids, offsets = midx.index_entries(idx)
    return {ids[20 * k : 20 * k + 20].hex(): (k, off) for k, off in enumerate(offsets)}


def test_a_damaged_object_in_a_pack_to_merge_is_a_typed_error_and_loses_nothing(tmp_path: Path) -> None:
    g = GitRepo(tmp_path / "r.git")
    ids = _disk_packs(g.gitdir, 9)
    victim = ids[4][0]  # the deflated blob of the fifth pack
    folder = g.gitdir / "objects" / "pack"
    idx = next(p for p in folder.glob("pack-*.idx") if victim in _entry_offsets(p))
    _damage(idx.with_suffix(".pack"), _entry_offsets(idx)[victim][1] + 40)  # inside its deflated bytes
    before = _pack_files(g.gitdir)
    with pytest.raises(CorruptRepositoryError, match=victim):
        GitRepo(g.gitdir).consolidate_packs()
    assert _pack_files(g.gitdir) == before  # nothing written, nothing removed
    assert not list(folder.glob("tmp_*"))
    for group in ids:
        for oid in group:
            if oid != victim:
                assert git(g.gitdir, "cat-file", "-t", oid).strip() == "blob"
    # a write that finds too many packs still succeeds: its merge gives up, the pack stays for `got fsck`
    repo = ReasoningRepo(g.gitdir)
    for i in range(_packing.MAX_PACKS):
        repo.commit_node(Node(f"after the damage {i}"))
    assert idx.exists() and idx.with_suffix(".pack").exists()
    assert git(g.gitdir, "cat-file", "-t", ids[8][0]).strip() == "blob"


def test_a_wrong_crc_in_an_index_falls_back_to_reading_the_object_and_the_merge_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = GitRepo(tmp_path / "r.git")
    ids = _disk_packs(g.gitdir, 9)
    victim = ids[2][0]
    idx = next(p for p in (g.gitdir / "objects" / "pack").glob("pack-*.idx") if victim in _entry_offsets(p))
    row = _entry_offsets(idx)[victim][0]
    count = struct.unpack_from(">I", idx.read_bytes(), 8 + 1020)[0]
    _damage(idx, 8 + 1024 + 20 * count + 4 * row + 1)  # its CRC; the object's bytes are whole
    with merge_work(monkeypatch) as work:
        merged = GitRepo(g.gitdir).consolidate_packs()
    assert merged == 9
    assert work["raw_read"] == 1 and work["_deflate"] == 1  # that one object, read whole and packed again
    assert not idx.exists()
    _verify_packs(g.gitdir)
    assert git(g.gitdir, "cat-file", "-p", victim).startswith("pack 2: ")


def _lock_calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    calls: Counter[str] = Counter()
    monkeypatch.setattr(_packing, "os", _spied(os, {"open", "close", "makedirs"}, calls))
    if _packing.fcntl is not None:
        monkeypatch.setattr(_packing, "fcntl", _spied(_packing.fcntl, {"flock"}, calls))
    return calls


def _filelocks_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the ``filelock.FileLock`` objects made from now on (a spy; they still lock)."""
    import filelock

    made: list[str] = []
    real = filelock.FileLock

    def making(*args: Any, **kwargs: Any) -> Any:
        made.append(str(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(filelock, "FileLock", making)
    return made


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX: the lock is a flock")
def test_the_merge_try_lock_is_one_open_two_flocks_and_a_close_and_no_filelock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _filelocks_made(monkeypatch)
    g = GitRepo(tmp_path / "r.git")
    for n in range(3):
        _move(g, "refs/heads/main", n)
    (g.gitdir / "got").mkdir(exist_ok=True)
    calls = _lock_calls(monkeypatch)
    for _ in range(2):  # three packs: nothing to merge, the lock taken and released each time
        calls.clear()
        assert g.consolidate_packs() == 0
        assert calls == Counter({"open": 1, "flock": 2, "close": 1})
    assert not made
    assert (g.gitdir / "got" / "packs.lock").exists()


_HOLD = """
import sys, filelock
lock = filelock.FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
sys.stdin.readline()
lock.release()
"""


def test_a_merge_lock_held_by_another_process_s_filelock_makes_the_merge_wait_its_turn(tmp_path: Path) -> None:
    g = GitRepo(tmp_path / "r.git")
    for n in range(10):
        _move(g, "refs/heads/main", n)
    (g.gitdir / "got").mkdir(exist_ok=True)
    # a process of an older version takes filelock's lock: the same flock on the same file
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(g.gitdir / "got" / "packs.lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        before = _pack_files(g.gitdir)
        assert g.consolidate_packs() == 0 and _pack_files(g.gitdir) == before
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=30)
    assert g.consolidate_packs() == 10
    _verify_packs(g.gitdir)


def _reference_midx(gitdir: Path, packs_: list[str]) -> bytes:
    """The multi-pack-index the entry-by-entry writer wrote (before it was built in one pass)."""
    folder = Path(gitdir) / "objects" / "pack"
    names = sorted(set(packs_))
    where: dict[bytes, tuple[int, int]] = {}
    for number, name in enumerate(names):
        ids, offsets = midx.index_entries(folder / f"pack-{name}.idx")
        for k, off in enumerate(offsets):
            where.setdefault(ids[20 * k : 20 * k + 20], (number, off))
    oids = sorted(where)
    pnam = b"".join(f"pack-{n}.idx".encode() + b"\0" for n in names)
    pnam += b"\0" * (-len(pnam) % 4)
    fanout = [0] * 256
    for oid in oids:
        fanout[oid[0]] += 1
    for i in range(1, 256):
        fanout[i] += fanout[i - 1]
    ooff = bytearray()
    loff = bytearray()
    for oid in oids:
        number, off = where[oid]
        if off >= 0x80000000:
            ooff += struct.pack(">II", number, 0x80000000 | (len(loff) // 8))
            loff += struct.pack(">Q", off)
        else:
            ooff += struct.pack(">II", number, off)
    chunks = [(b"PNAM", pnam), (b"OIDF", struct.pack(">256I", *fanout)), (b"OIDL", b"".join(oids)), (b"OOFF", ooff)]
    if loff:
        chunks.append((b"LOFF", bytes(loff)))
    head = b"MIDX" + bytes([1, 1, len(chunks), 0]) + struct.pack(">I", len(names))
    at = len(head) + 12 * (len(chunks) + 1)
    table = b""
    for label, body in chunks:
        table += label + struct.pack(">Q", at)
        at += len(body)
    table += b"\0\0\0\0" + struct.pack(">Q", at)
    body = head + table + b"".join(bytes(b) for _, b in chunks)
    return body + hashlib.sha1(body).digest()


def _packs_with_shared_objects(gitdir: Path, n: int, per: int) -> list[str]:
    """``n`` packs of ``per`` blobs each, every third blob also in the next pack."""
    names = []
    for i in range(n):
        objects = [("blob", b"blob %d of pack %d" % (k, i)) for k in range(per)]
        objects += [("blob", b"blob %d of pack %d" % (k, i - 1)) for k in range(0, per, 3)] if i else []
        name, _ = write_pack_named(gitdir, objects)
        assert name is not None
        names.append(name)
    return names


def test_the_multi_pack_index_is_the_reference_writer_s_bytes_and_git_verifies_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = GitRepo(tmp_path / "r.git")
    names = _packs_with_shared_objects(g.gitdir, 6, 120)
    calls: Counter[str] = Counter()
    monkeypatch.setattr(midx, "struct", _spied(struct, {"pack"}, calls))
    midx.write_midx(g.gitdir, names[:5], fsync=False)
    monkeypatch.undo()
    written = (g.gitdir / "objects" / "pack" / midx.MIDX_NAME).read_bytes()
    assert written == _reference_midx(g.gitdir, names[:5])
    # the tables are built in one pass each: a handful of struct calls for 700 entries, not one per entry
    assert calls["pack"] <= 12, calls
    git(g.gitdir, "multi-pack-index", "verify")
    assert sorted(midx.midx_packs(g.gitdir)) == sorted(names[:5])
    for few in ([names[5]], names[1:3]):  # one pack, and a pair: the same bytes too
        midx.write_midx(g.gitdir, few, fsync=False)
        assert (g.gitdir / "objects" / "pack" / midx.MIDX_NAME).read_bytes() == _reference_midx(g.gitdir, few)
        git(g.gitdir, "multi-pack-index", "verify")
    assert fsck_clean(g.gitdir)[0]


def test_a_multi_pack_index_with_offsets_past_2_gib_is_the_reference_writer_s_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = GitRepo(tmp_path / "r.git")
    names = _packs_with_shared_objects(g.gitdir, 3, 40)
    real_columns = midx._index_columns

    def far(idx: Path) -> tuple[bytes, list[int]]:  # the last pack as if it were over 2 GiB
        ids, words, _ = real_columns(idx)
        offsets = struct.unpack(f">{len(words) // 4}I", words)
        return ids, [
            o + (0x80000000 if idx.name == f"pack-{max(names)}.idx" and k % 2 else 0) for k, o in enumerate(offsets)
        ]

    def far_columns(idx: Path) -> tuple[bytes, bytes, bytes]:  # its offset words name the 64-bit table
        ids, words, large = real_columns(idx)
        if idx.name == f"pack-{max(names)}.idx":
            words = bytes(b | 0x80 if k % 8 == 4 else b for k, b in enumerate(words))
        return ids, words, large

    monkeypatch.setattr(midx, "index_entries", far)
    monkeypatch.setattr(midx, "_index_columns", far_columns)
    midx.write_midx(g.gitdir, names, fsync=False)
    written = (g.gitdir / "objects" / "pack" / midx.MIDX_NAME).read_bytes()
    assert b"LOFF" in written and written == _reference_midx(g.gitdir, names)


def test_the_fan_out_table_is_the_slot_by_slot_table() -> None:
    from got_core.storage.packs import fanout_table

    rng = random.Random(7)
    for n in [*range(0, 40), 300, 511, 512, 513, 2000]:
        ids = sorted(rng.randbytes(20) for _ in range(n))
        if n % 3 == 0:
            ids = sorted([*ids, b"\0" * 20, b"\xff" * 20, b"\x80" + b"\0" * 19])
        counts = [0] * 256
        for digest in ids:
            counts[digest[0]] += 1
        assert fanout_table(ids) == struct.pack(">256I", *itertools.accumulate(counts)), n


@pytest.mark.parametrize("lines", [5, 12, 25, 40])
def test_commits_of_every_size_below_a_kilobyte_are_read_back_by_git(tmp_path: Path, lines: int) -> None:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    thought = "\n".join(f"step {i}: the model weighs option {i} against the last one" for i in range(lines))
    for i in range(3):
        repo.commit_node(Node(f"{thought}\nround {i}", scores={"s": i / 10}))
    raw = git(repo.gitdir, "cat-file", "commit", "HEAD")
    assert 300 < len(raw) < 3000 and "round 2" in raw
    _verify_packs(repo.gitdir)


def test_many_writes_through_merges_leave_packs_stock_git_verifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_packing, "SETTLE_MIN_OBJECTS", 48)  # settled packs and a multi-pack-index too
    repo = ReasoningRepo.init(tmp_path / "r.git")
    merges: list[int] = []
    real = _packing._Packing._consolidate

    def merge(self: Any, folder: Path, max_packs: int) -> int:
        merges.append(real(self, folder, max_packs))
        return merges[-1]

    monkeypatch.setattr(_packing._Packing, "_consolidate", merge)
    writes = 6 * _packing.MAX_PACKS
    for i in range(writes):  # commits of 300 bytes to over a kilobyte
        thought = "\n".join(f"step {k} of thought {i}: weigh the last option again" for k in range(i % 20))
        repo.commit_node(Node(thought or f"thought {i}", scores={"s": i / 100}))
    assert sum(1 for m in merges if m) >= 4  # merged packs merged again
    _verify_packs(repo.gitdir)
    git(repo.gitdir, "multi-pack-index", "verify")
    assert git(repo.gitdir, "rev-list", "--count", "HEAD").strip() == str(writes)
    sizes = {int(git(repo.gitdir, "cat-file", "-s", f"HEAD~{k}")) for k in range(20)}
    assert min(sizes) < 512 <= max(sizes)  # both sides of the memLevel boundary


def test_without_fcntl_the_merge_lock_is_filelock_s_made_once_per_handle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _filelocks_made(monkeypatch)
    monkeypatch.setattr(_packing, "fcntl", None)  # as on Windows
    g = GitRepo(tmp_path / "r.git")
    for n in range(10):
        _move(g, "refs/heads/main", n)
    assert g.consolidate_packs() == 10
    for n in range(10, 20):
        _move(g, "refs/heads/main", n)
    assert g.consolidate_packs() > 0
    assert made == [str(g.gitdir / "got" / "packs.lock")]
    _verify_packs(g.gitdir)


@pytest.mark.skipif(not hasattr(os, "O_NOFOLLOW"), reason="no O_NOFOLLOW here")
def test_a_symbolic_link_in_place_of_the_merge_lock_is_never_followed(tmp_path: Path) -> None:
    g = GitRepo(tmp_path / "r.git")
    for n in range(10):
        _move(g, "refs/heads/main", n)
    (g.gitdir / "got").mkdir(exist_ok=True)
    target = tmp_path / "elsewhere.lock"
    (g.gitdir / "got" / "packs.lock").symlink_to(target)
    before = _pack_files(g.gitdir)
    assert g.consolidate_packs() == 0  # no lock, no merge: and nothing made at the link's target
    assert not target.exists() and _pack_files(g.gitdir) == before
    assert fsck_clean(g.gitdir)[0]


def _python_steps(run: Callable[[], Any]) -> int:
    """The Python lines (and calls) ``run`` executes, every frame counted (C code is not: a
    ``map`` or a slice copy over a whole table is one step)."""
    steps = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal steps
        steps += 1
        return trace

    sys.settrace(trace)
    try:
        run()
    finally:
        sys.settrace(None)
    return steps


def test_a_multi_pack_index_is_written_without_a_python_step_per_entry(tmp_path: Path) -> None:
    # a settle right after `got gc` covers every object of the repository with one pack: 400k
    # objects at 100k store items, 0.5-0.8 s when each entry took Python steps; now the steps
    # are per pack and column, the same for 200 or 4,000 entries, over one pack or several
    steps: dict[tuple[int, int], int] = {}
    for per in (200, 4000):
        g = GitRepo(tmp_path / f"r{per}.git")
        names = _packs_with_shared_objects(g.gitdir, 3, per)  # objects shared between packs
        for few in (names[:1], names):
            steps[len(few), per] = _python_steps(lambda: midx.write_midx(g.gitdir, few, fsync=False))
            written = (g.gitdir / "objects" / "pack" / midx.MIDX_NAME).read_bytes()
            assert written == _reference_midx(g.gitdir, few)
            git(g.gitdir, "multi-pack-index", "verify")
    for packs_ in (1, 3):
        assert steps[packs_, 4000] - steps[packs_, 200] <= 4, steps
    assert steps[1, 4000] < 800, steps
