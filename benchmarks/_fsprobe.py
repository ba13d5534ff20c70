"""What the file system under a benchmark costs right now, printed beside its tables.

Every git write creates files (a pack, its index, a ref's lock) and, sooner or later, removes
others (a ref file replaced by its lock, small packs merged away); SQLite's commits write into
files that already exist. So the price of creating a file decides much of a write's ratio, and
on some file systems it swings by 20x within minutes. The case measured on this project's VM:
ext4 without a journal. There the kernel will not reuse an inode freed within the last 60 s
(300 s more while its inode table block is not yet written back), and each new inode is found by
walking past every such inode of its block group (``find_inode_bit`` / ``recently_deleted`` in
``fs/ext4/ialloc.c``): after a burst of removals, by this process or any other, creating a file
costs ~1 ms instead of ~0.05 ms. A journaled ext4, xfs, btrfs or tmpfs has no such walk.

:func:`probe` times creating ``files`` new files in a fresh directory under the benchmark's
own work directory (the median, in ms) and names the file system and whether ext4 has a
journal; benchmarks call it before and after their runs and print :func:`describe`.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def _mount_of(path: Path) -> tuple[str, str, str]:
    """``(device, mount point, type)`` of the mount holding ``path`` (from /proc/mounts)."""
    best = ("?", "/", "?")
    target = os.path.realpath(path)
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return best
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[1]):
            best = (parts[0], point, parts[2])
    return best


def _ext4_journal(device: str) -> bool | None:
    """Whether an ext4 device has a journal (None: cannot tell)."""
    task = Path("/sys/fs/ext4") / os.path.basename(device) / "journal_task"
    try:
        return task.read_text().strip() not in ("", "<none>")
    except OSError:
        return None


def probe(where: Path, files: int = 64, *, inside: bool = False) -> dict[str, Any]:
    """Median ms to create one new file under ``where`` now, and what file system that is.

    The files go into a new directory under ``where``; with ``inside`` into ``where`` itself
    (e.g. a repository's ``objects/pack``: a new directory's inodes may come from another block
    group than the ones a repository's own directories use, and so miss what its writes meet).
    """
    device, point, kind = _mount_of(where)
    where.mkdir(parents=True, exist_ok=True)
    scratch = where if inside else Path(tempfile.mkdtemp(prefix="fsprobe-", dir=where))
    made: list[Path] = []
    took = []
    try:
        for i in range(files):
            path = scratch / f".fsprobe-{os.getpid()}-{i}"
            t0 = time.perf_counter()
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            took.append(time.perf_counter() - t0)
            made.append(path)
            os.close(fd)
    finally:
        for path in made:
            path.unlink(missing_ok=True)
        if not inside:
            shutil.rmtree(scratch, ignore_errors=True)
    return {
        "device": device,
        "mount": point,
        "fs": kind,
        "journal": _ext4_journal(device) if kind == "ext4" else None,
        "create_ms": statistics.median(took) * 1000,
    }


def describe(before: dict[str, Any], after: dict[str, Any] | None = None) -> str:
    """One line for a benchmark's output: the file system and its file-creation cost."""
    kind = before["fs"]
    if kind == "ext4" and before["journal"] is False:
        kind = "ext4 without a journal (freed inodes are walked past for 1-6 min)"
    elif kind == "ext4" and before["journal"]:
        kind = "ext4 with a journal"
    cost = f"{before['create_ms']:.3f} ms before the run"
    if after is not None:
        cost += f", {after['create_ms']:.3f} ms after it"
    return f"file system: {kind} at {before['mount']}; creating a file took {cost} (median of 64)"
