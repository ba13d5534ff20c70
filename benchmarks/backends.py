"""Memory-backend cost table (the paper's Table 3, extended): write ms, read ms, storage.

All five backends in one run, on the same synthetic lessons and queries:

* at 40 lessons (the paper's size) every write and a read per lesson are timed;
* at larger sizes the store is filled in bulk (``add_lessons``) and then a fixed
  number of single writes and reads are timed on top of it.

Medians are reported, with each backend's ratio to the ``git`` backend measured in
the same run, and the paper's numbers for reference (git 15.4 ms write / 48.0 ms read;
vector 20.3 ms read).

    python benchmarks/backends.py                      # sizes 40,1000,10000
    python benchmarks/backends.py --sizes 40,1000 --backends git,vector --out runs/backends

Results (``backends.json``, ``backends.png``) go to ``--out`` (default
``<system temp dir>/got-bench/backends``); nothing in the repository is written. Loading the
embedding model is done once before any timing and reported apart (``load_ms``). The plot's
axes are logarithmic: the ``none`` backend (0 bytes, ~0 ms) is left out of them and named
in a note; its values are in the table and the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from _plot import default_out, log_lines
from rich.console import Console
from rich.table import Table

from got_core.bench.progress import LogProgress
from got_core.memory import BACKENDS, Lesson, get_backend

console = Console(width=None if sys.stdout.isatty() else 120)

SUBJECTS = [
    "probability",
    "geometry",
    "algebra",
    "number theory",
    "kinematics",
    "thermodynamics",
    "organic chemistry",
    "genetics",
    "optics",
    "combinatorics",
    "calculus",
    "electrochemistry",
    "statistics",
    "enzymes",
    "circuits",
    "quantum",
    "stoichiometry",
    "ecology",
    "matrices",
    "series",
]
OBJECTS = [
    "discriminant",
    "sample space",
    "free-body diagram",
    "unit conversion",
    "symmetry",
    "invariant",
    "boundary case",
    "limiting reagent",
    "conservation law",
    "recurrence",
    "parity",
    "dimension check",
    "complementary count",
    "tangent line",
    "equilibrium constant",
    "eigenvalue",
    "half-life",
    "Punnett square",
    "Snell's law",
    "Kirchhoff's rule",
]
ADVICE = [
    "check the {o} before computing anything",
    "write down the {o} explicitly",
    "use the {o} to rule out options",
    "verify the {o} at the end",
    "start from the {o}",
]


def make_lessons(n: int, seed: int) -> list[Lesson]:
    """``n`` distinct synthetic lessons (subject × object × advice, numbered)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        s, o = rng.choice(SUBJECTS), rng.choice(OBJECTS)
        advice = rng.choice(ADVICE).format(o=o)
        out.append(
            Lesson(
                f"In {s} problems, {advice}; case {i} showed why it matters.",
                topic_key=f"{s.replace(' ', '-')}-{i}",
                source_problem=f"study-{i}",
                outcome=rng.choice(["insight", "success", "failure"]),
                score=round(rng.random(), 3),
            )
        )
    return out


def make_queries(n: int, seed: int) -> list[str]:
    """Questions that share words with some lessons."""
    rng = random.Random(seed + 1)
    return [f"A {rng.choice(SUBJECTS)} question where the {rng.choice(OBJECTS)} matters" for _ in range(n)]


def storage(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def measure(name: str, size: int, ops: int, seed: int, root: Path) -> dict:
    path = root / f"{name}-{size}"
    mem = get_backend(name, path)
    lessons = make_lessons(size + ops, seed)
    bulk, single = (lessons[:0], lessons[:size]) if size <= 40 else (lessons[:size], lessons[size : size + ops])
    t0 = time.perf_counter()
    if bulk:
        mem.add_lessons(bulk)
    fill_s = time.perf_counter() - t0
    writes, reads = [], []
    for lesson in single:
        t0 = time.perf_counter()
        mem.add_insight(
            lesson.text, topic_key=lesson.topic_key, source_problem=lesson.source_problem, score=lesson.score
        )
        writes.append(time.perf_counter() - t0)
    mem.get_relevant("warm up", 3)
    for q in make_queries(len(single), seed):
        t0 = time.perf_counter()
        mem.get_relevant(q, 3)
        reads.append(time.perf_counter() - t0)
    mem.close()
    raw = packed = storage(path)
    if name == "git":  # libgit2 never packs; what a `git gc` leaves is the fair size
        from got_core import ReasoningRepo

        ReasoningRepo(path, create=False).maintenance()
        packed = storage(path)
    return {
        "backend": name,
        "lessons": size,
        "write_ms": statistics.median(writes) * 1000,
        "read_ms": statistics.median(reads) * 1000,
        "storage_bytes": raw,
        "storage_packed": packed,
        "bulk_fill_s": round(fill_s, 3),
    }


def render(rows: list[dict]) -> None:
    table = Table(title="Memory backends: median ms per operation, bytes on disk")
    for col in ("lessons", "backend", "write ms", "read ms", "storage", "after gc", "write vs git", "read vs git"):
        table.add_column(col, justify="right")
    for size in sorted({r["lessons"] for r in rows}):
        group = [r for r in rows if r["lessons"] == size]
        ref = next((r for r in group if r["backend"] == "git"), None)
        for r in group:
            wr = f"{r['write_ms'] / ref['write_ms']:.1f}×" if ref and ref["write_ms"] else "-"
            rr = f"{r['read_ms'] / ref['read_ms']:.1f}×" if ref and ref["read_ms"] else "-"
            table.add_row(
                f"{size:,}",
                r["backend"],
                f"{r['write_ms']:.3f}",
                f"{r['read_ms']:.3f}",
                f"{r['storage_bytes']:,}",
                f"{r['storage_packed']:,}",
                wr,
                rr,
            )
    console.print(table)
    console.print("paper (Table 3, 40 lessons): git 15.4 ms write / 48.0 ms read; vector read 20.3 ms")
    for r in rows:
        if r["backend"] == "git" and r["lessons"] == 1000:
            ok = r["write_ms"] <= 2 and r["read_ms"] <= 5
            console.print(
                f"target git @1k: write ≤ 2 ms, read ≤ 5 ms: {'met' if ok else 'MISSED'} "
                f"({r['write_ms']:.2f} / {r['read_ms']:.2f} ms)"
            )
        if r["backend"] == "vector":
            console.print(
                f"target vector read ≤ 20 ms @{r['lessons']:,}: "
                f"{'met' if r['read_ms'] <= 20 else 'MISSED'} ({r['read_ms']:.1f} ms)"
            )


def plot(rows: list[dict], out: Path) -> None:
    if log_lines(
        rows,
        ("write_ms", "read_ms", "storage_bytes"),
        "lessons",
        "backend",
        out,
        xlabel="lessons",
        log_x=True,
        title="Memory backends: median ms per write / read, bytes on disk (model loading excluded)",
    ):
        console.print(f"plot: {out}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="40,1000,10000")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--ops", type=int, default=50, help="single writes/reads timed above 40 lessons")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=default_out("backends"), help="where to write JSON and PNG")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    names = [n.strip() for n in args.backends.split(",") if n.strip()]
    load_ms = 0.0
    if "vector" in names:  # load MiniLM once, outside the timings (reported apart, as stats()["load_ms"] does)
        from got_core.memory.embeddings import get_embedder

        t0 = time.perf_counter()
        get_embedder().embed(["warm up"])
        load_ms = (time.perf_counter() - t0) * 1000
        console.print(f"embedding model loaded in {load_ms:,.0f} ms (not part of any write or read below)")
    root = Path(tempfile.mkdtemp(prefix="got-backends-"))
    console.print(f"scratch: {root} (all backends on the same disk; removed when done)")
    rows = []
    try:
        with LogProgress(console=console, transient=True) as progress:
            task = progress.add_task("backends", total=len(sizes) * len(names))
            for size in sizes:
                for name in names:
                    progress.update(task, description=f"{name} @ {size:,} lessons")
                    rows.append(measure(name, size, args.ops, args.seed, root))
                    progress.advance(task)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    render(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "backends.json").write_text(json.dumps({"model_load_ms": load_ms, "rows": rows}, indent=2))
    console.print(f"results: {args.out / 'backends.json'}")
    plot(rows, args.out / "backends.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
