"""Substrate benchmark: node write / replay / retrieval at 0, 1k and 10k nodes of history.

Three implementations of the same job, measured in the same run:

* ``got``   — ReasoningRepo: pygit2 object writes + compare-and-swap refs; a write is
  commit (4 files) + score note + outcome tag; retrieval through the derived index.
* ``naive`` — the paper's path: ``git add && git commit`` subprocesses in a work tree,
  ``git notes add`` and ``git tag``; replay with ``git show``; retrieval ``git log --grep``.
* ``sqlite`` — the same payload as rows in SQLite (WAL, synchronous=NORMAL), the usual
  production peer; retrieval with ``LIKE``.

History is pre-filled (got through its own API; naive with ``git fast-import``; sqlite
with bulk inserts), then each level measures medians over fresh operations.

    python benchmarks/substrate.py                 # levels 0,1000,10000
    python benchmarks/substrate.py --levels 0,1000 --ops 100
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _plot import default_out, log_lines
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from got_core import Node, ReasoningRepo

console = Console(width=None if sys.stdout.isatty() else 120)
ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
}
_SYL = ["ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "ze", "bra", "cli", "dro", "fen", "gal"]
#: A 3,375-word synthetic vocabulary; thoughts draw words Zipf-like, as real text does.
VOCAB = [a + b + c for a in _SYL for b in _SYL for c in _SYL]
_WEIGHTS = [1.0 / (rank + 1) for rank in range(len(VOCAB))]
WORDS = VOCAB[:400]  # query words: the common end of the vocabulary


def payload(i: int, rng: random.Random) -> dict:
    words = " ".join(rng.choices(VOCAB, weights=_WEIGHTS, k=40))
    return {
        "thought": f"Step {i}: consider {words}. Therefore the candidate answer is {rng.randint(0, 999)}.",
        "scores": {"s_local": rng.random(), "s_cross": rng.random(), "s_comb": rng.random()},
        "trace": [{"step": 1, "action": "calculator", "input": f"{i}*{i}", "observation": str(i * i)}],
        "outcome": "success" if i % 3 == 0 else "failed",
    }


_QRNG = random.Random(99)


def rng_word() -> str:
    """Another query word, from the whole vocabulary."""
    return _QRNG.choices(VOCAB, weights=_WEIGHTS, k=1)[0]


def med_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000 if xs else float("nan")


# ---------------------------------------------------------------- got
class Got:
    name = "got"

    def __init__(self, root: Path) -> None:
        self.repo = ReasoningRepo.init(root / "got.git")
        self.oids: list[str] = []
        self.n = 0

    def write(self, i: int, p: dict) -> None:
        node = self.repo.commit_node(
            Node(p["thought"], scores=p["scores"], trace=p["trace"], problem_id="bench", depth=1, outcome=p["outcome"])
        )
        self.oids.append(node.oid)

    def replay(self, rng: random.Random) -> None:
        self.repo.read_node(rng.choice(self.oids))

    def retrieve(self, word: str) -> int:
        return len(self.repo.search(f"{word} {rng_word()} {rng_word()}", k=5))

    def settle(self) -> None:
        self.repo.search("warm up the derived index", k=1)


# ---------------------------------------------------------------- naive git subprocess
class Naive:
    name = "naive"

    def __init__(self, root: Path) -> None:
        self.dir = root / "naive"
        self.dir.mkdir()
        self.git("init", "-q")
        self.oids: list[str] = []

    def git(self, *args: str, input: bytes | None = None) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.dir, env=ENV, input=input, check=True, capture_output=True
        ).stdout.decode()

    def fill(self, start: int, count: int, rng: random.Random) -> None:
        """Bulk history through git fast-import (the write path's cost is what we time)."""
        lines = []
        parent = self.oids[-1] if self.oids else None
        for i in range(start, start + count):
            p = payload(i, rng)
            lines.append("commit refs/heads/master\n")
            lines.append(f"mark :{i + 1}\n")
            lines.append(f"committer bench <bench@localhost> {1_700_000_000 + i} +0000\n")
            msg = f"node {i}\n\n{p['thought']}\n".encode()
            lines.append(f"data {len(msg)}\n{msg.decode()}\n")
            if i == start and parent:
                lines.append(f"from {parent}\n")
            for fname, content in (
                ("thought.md", p["thought"]),
                ("scores.json", json.dumps(p["scores"])),
                ("trace.jsonl", json.dumps(p["trace"][0]) + "\n"),
                ("metadata.json", json.dumps({"i": i})),
            ):
                data = content.encode()
                lines.append(f"M 100644 inline {fname}\ndata {len(data)}\n{content}\n")
        self.git("fast-import", "--quiet", "--force", input="".join(lines).encode())
        self.git("reset", "-q", "--hard", "master")
        self.oids = self.git("rev-list", "--max-count=2000", "master").split()

    def write(self, i: int, p: dict) -> None:
        for fname, content in (
            ("thought.md", p["thought"]),
            ("scores.json", json.dumps(p["scores"])),
            ("trace.jsonl", json.dumps(p["trace"][0]) + "\n"),
            ("metadata.json", json.dumps({"i": i})),
        ):
            (self.dir / fname).write_text(content)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", f"node {i}\n\n{p['thought']}")
        sha = self.git("rev-parse", "HEAD").strip()
        self.git("notes", "--ref=got", "add", "-f", "-m", json.dumps(p["scores"]), sha)
        self.git("tag", f"{p['outcome']}_{i}", sha)
        self.oids.append(sha)

    def replay(self, rng: random.Random) -> None:
        sha = rng.choice(self.oids)
        self.git("show", "--format=%B", "--name-only", sha)
        for f in ("thought.md", "scores.json", "trace.jsonl", "metadata.json"):
            self.git("show", f"{sha}:{f}")

    def retrieve(self, word: str) -> int:
        return len(self.git("log", "--format=%H", "-n", "5", f"--grep={word}").split())

    def settle(self) -> None:
        pass


# ---------------------------------------------------------------- sqlite
class Sqlite:
    name = "sqlite"

    def __init__(self, root: Path) -> None:
        self.db = sqlite3.connect(str(root / "nodes.sqlite"), isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(
            "CREATE TABLE nodes(id INTEGER PRIMARY KEY, thought TEXT, scores TEXT, trace TEXT, "
            "metadata TEXT, outcome TEXT, created REAL)"
        )
        self.n = 0

    def write(self, i: int, p: dict) -> None:
        self.db.execute(
            "INSERT INTO nodes(thought, scores, trace, metadata, outcome, created) VALUES(?,?,?,?,?,?)",
            (
                p["thought"],
                json.dumps(p["scores"]),
                json.dumps(p["trace"]),
                json.dumps({"i": i}),
                p["outcome"],
                time.time(),
            ),
        )
        self.n += 1

    def fill(self, start: int, count: int, rng: random.Random) -> None:
        self.db.execute("BEGIN")
        for i in range(start, start + count):
            self.write(i, payload(i, rng))
        self.db.execute("COMMIT")

    def replay(self, rng: random.Random) -> None:
        self.db.execute("SELECT * FROM nodes WHERE id=?", (rng.randint(1, max(self.n, 1)),)).fetchone()

    def retrieve(self, word: str) -> int:
        return len(
            self.db.execute(
                "SELECT id FROM nodes WHERE thought LIKE ? ORDER BY id DESC LIMIT 5", (f"%{word}%",)
            ).fetchall()
        )

    def settle(self) -> None:
        pass


def run(levels: list[int], ops: int, reads: int, seed: int, workdir: Path) -> list[dict]:
    rng = random.Random(seed)
    systems = [Got(workdir), Naive(workdir), Sqlite(workdir)]
    results = []
    filled = 0
    with Progress(console=console, transient=True) as progress:
        for level in levels:
            grow = level - filled
            if grow > 0:
                task = progress.add_task(f"filling history to {level:,} nodes", total=grow)
                got = systems[0]
                for i in range(filled, level):
                    got.write(i, payload(i, rng))
                    progress.advance(task)
                systems[1].fill(filled, grow, rng)
                systems[2].fill(filled, grow, rng)
                filled = level
            for system in systems:
                system.settle()
                task = progress.add_task(f"{system.name} @ {level:,}", total=ops + 2 * reads)
                n_ops = ops if system.name != "naive" else max(ops // 10, 10)
                writes, replays, queries = [], [], []
                for j in range(n_ops):
                    p = payload(level + j, rng)
                    t0 = time.perf_counter()
                    system.write(10_000_000 + level + j, p)
                    writes.append(time.perf_counter() - t0)
                    progress.advance(task)
                system.settle()
                n_reads = reads if system.name != "naive" else max(reads // 10, 10)
                for _ in range(n_reads):
                    t0 = time.perf_counter()
                    system.replay(rng)
                    replays.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    system.retrieve(rng.choice(WORDS))
                    queries.append(time.perf_counter() - t0)
                    progress.advance(task, 2)
                results.append(
                    {
                        "system": system.name,
                        "history": level,
                        "write_ms": med_ms(writes),
                        "replay_ms": med_ms(replays),
                        "retrieve_ms": med_ms(queries),
                        "write_p90_ms": sorted(writes)[int(0.9 * len(writes))] * 1000,
                    }
                )
            filled += ops  # every system wrote `ops` more nodes (naive fewer; history is approximate)
    return results


def render(results: list[dict]) -> None:
    table = Table(title="Substrate: median ms per operation (lower is better)")
    for col in ("history", "system", "write (commit+note+tag)", "replay", "retrieval", "write vs got", "retr. vs got"):
        table.add_column(col, justify="right")
    for level in sorted({r["history"] for r in results}):
        rows = [r for r in results if r["history"] == level]
        got = next(r for r in rows if r["system"] == "got")
        for r in rows:
            table.add_row(
                f"{level:,}",
                r["system"],
                f"{r['write_ms']:.2f}",
                f"{r['replay_ms']:.3f}",
                f"{r['retrieve_ms']:.3f}",
                f"{r['write_ms'] / got['write_ms']:.1f}×",
                f"{r['retrieve_ms'] / got['retrieve_ms']:.1f}×",
            )
    console.print(table)
    got_rows = [r for r in results if r["system"] == "got"]
    ok_write = all(r["write_ms"] <= 2.0 for r in got_rows)
    ok_read = all(r["retrieve_ms"] <= 5.0 for r in got_rows)
    console.print(
        f"targets: write ≤ 2 ms at every level: {'met' if ok_write else 'MISSED'}; "
        f"retrieval ≤ 5 ms: {'met' if ok_read else 'MISSED'} (paper: 15.4 ms write, 48 ms read)"
    )


def plot(results: list[dict], out: Path) -> None:
    if log_lines(
        results,
        ("write_ms", "replay_ms", "retrieve_ms"),
        "history",
        "system",
        out,
        xlabel="nodes of history",
        log_x=False,
    ):
        console.print(f"plot: {out}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="0,1000,10000", help="history sizes to measure at")
    ap.add_argument("--ops", type=int, default=200, help="writes measured per level (naive: a tenth)")
    ap.add_argument("--reads", type=int, default=200, help="replays and queries per level (naive: a tenth)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=default_out("substrate"), help="where to write JSON and PNG")
    ap.add_argument("--workdir", type=Path, default=None, help="scratch directory (default: the system temp dir)")
    args = ap.parse_args(argv)
    levels = sorted(int(x) for x in args.levels.split(","))
    work = Path(tempfile.mkdtemp(prefix="got-bench-", dir=args.workdir))
    console.print(f"scratch: {work} (every system on the same disk)")
    try:
        results = run(levels, args.ops, args.reads, args.seed, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    render(results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "substrate.json").write_text(json.dumps(results, indent=2))
    plot(results, args.out / "substrate.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
