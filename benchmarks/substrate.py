"""Substrate benchmark: write, read right after a write, steady and cold reads, disk; 0 to 100k nodes.

Measured in one run, op by op interleaved (so a busy machine slows every system alike),
at each history size:

* ``got`` — ReasoningRepo's public API: ``commit_node`` (a commit of 4 files + the score
  note + the outcome tag), ``grep``, ``search``, ``read_node``;
* ``floor`` — pygit2 alone doing the least a commit needs: 4 blobs + tree + commit + one
  ref move (one libgit2 ref transaction, the cheapest ref write at any number of refs),
  its objects written loose as libgit2 writes them (got writes a move's objects as one
  pack), in a copy of the same repository (same packs, same history);
* ``fresh`` — got's write again, on another copy made with the floor's: the copy's
  directories are new, so it shows what the file system's state costs the measured
  repository (on ext4 with online discard, creating files in directories where many were
  just deleted, as writing and packing the history did, costs up to ~1 ms a file for a while);
* ``sqlite`` — the same payload as one row per node in SQLite (WAL, synchronous=NORMAL)
  with an FTS5 index on the thought updated in the same transaction; the score and the
  tag are columns of that row. ``grep`` is an FTS5 match returning every hit, ``search``
  the FTS5 top 5 by bm25 (SQLite has no history, notes or tags to keep: it is the peer
  for cost, not for function).

Metrics: write (got vs the floor; flat means the ratio does not grow with history);
grep / search right after a ``commit_node`` vs the same kind of query in steady state
(nothing moved; query words drawn afresh from the same distribution for both); pickaxe
after a few writes (it indexes the files of the commits written since it last ran: a
sync after a write indexes messages, trailers, refs, tags and notes, not files); a new
process's first query (cold); replay; disk after ``got gc`` (git objects and refs, and the
derived index, apart) vs the SQLite file after VACUUM.

History up to ``--api-fill`` nodes (default 10,000) is written through the public API;
beyond that it is bulk-imported with ``git fast-import`` — the same commits (files,
message, ``Got-*`` trailers), fan-out score notes and outcome tags that ``commit_node``
writes, in one pack — and the index catches up at the next query. fast-import lays the notes
out by their count (``ab/cdef…`` from 256 notes, ``ab/cd/ef…`` everywhere from 65,536), which at
100k is the layout git's ``notes.c`` rule, and so ``commit_node``, gives every directory; below
65,536 a directory the rule would split moves down at its first measured write. That is setup only:
every measured operation goes through the public API. After each fill the repository is
packed as ``got gc`` packs it. Query words are drawn Zipf-like, from ranks 100-1000 of the
vocabulary (each word is in ~0.1-1 % of the thoughts).

    python benchmarks/substrate.py                            # 0, 1k, 10k, 100k nodes
    python benchmarks/substrate.py --levels 0,1000 --ops 100 --out /tmp/bench
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
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pygit2
from _fsprobe import describe, probe
from _plot import default_out
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from got_core import Node, ReasoningRepo
from got_core.bench.progress import LogProgress
from got_core.names import encode_component
from got_core.repo.nodes import node_message
from got_core.types import canonical_json

console = Console(width=None if sys.stdout.isatty() else 150)

_SYL = ["ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "ze", "bra", "cli", "dro", "fen", "gal"]
#: A 3,375-word synthetic vocabulary; thoughts draw words Zipf-like, as real text does.
VOCAB = [a + b + c for a in _SYL for b in _SYL for c in _SYL]
_WEIGHTS = [1.0 / (rank + 1) for rank in range(len(VOCAB))]
QUERY_WORDS = VOCAB[100:1000]  # each in roughly 0.1-1 % of the thoughts
IDENTITY = ("GitOfThoughts", "got@localhost")


def payload(i: int, rng: random.Random) -> dict[str, Any]:
    """Node ``i``'s content: a 40-word thought, three scores, a one-step trace, an outcome."""
    words = " ".join(rng.choices(VOCAB, weights=_WEIGHTS, k=40))
    return {
        "thought": f"Step {i}: consider {words}. Therefore the candidate answer is {rng.randint(0, 999)}.",
        "scores": {"s_local": rng.random(), "s_cross": rng.random(), "s_comb": rng.random()},
        "trace": [{"step": 1, "action": "calculator", "input": f"{i}*{i}", "observation": str(i * i)}],
        "outcome": "success" if i % 3 == 0 else "failed",
    }


def med_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000 if xs else float("nan")


def timed(fn: Callable[..., Any], *args: Any) -> float:
    """Seconds ``fn(*args)`` took (arguments are prepared before the clock starts)."""
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def tree_bytes(path: Path, skip: str | None = None) -> int:
    total = 0
    for p in path.rglob("*"):
        if p.is_file() and not (skip and skip in p.parts):
            total += p.stat().st_size
    return total


# ---------------------------------------------------------------- got (the public API)
class Got:
    name = "got"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.repo = ReasoningRepo.init(path)
        self.oids: list[str] = []

    def write(self, i: int, p: dict[str, Any]) -> None:
        node = Node(
            p["thought"], scores=p["scores"], trace=p["trace"], problem_id="bench", depth=1, outcome=p["outcome"]
        )
        self.oids.append(self.repo.commit_node(node).oid)

    def grep(self, word: str) -> int:
        return len(self.repo.grep(word))

    def search(self, words: str) -> int:
        return len(self.repo.search(words, k=5))

    def pickaxe(self, word: str) -> int:
        return len(self.repo.pickaxe(word))

    def replay(self, rng: random.Random) -> None:
        self.repo.read_node(rng.choice(self.oids))

    def bulk(self, start: int, count: int, rng: random.Random, progress: Progress) -> None:
        """Append ``count`` nodes with ``git fast-import`` (setup only; see the module doc)."""
        task = progress.add_task(f"bulk import {count:,} nodes", total=count)
        tip = self.repo.git.ref_target("refs/heads/master")
        notes_tip = self.repo.git.ref_target("refs/notes/got")
        name, email = IDENTITY
        when = int(time.time())
        proc = subprocess.Popen(
            ["git", f"--git-dir={self.path}", "fast-import", "--quiet", "--done"],
            stdin=subprocess.PIPE,
            env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"},
        )
        assert proc.stdin is not None
        out = proc.stdin

        def data(raw: bytes) -> None:
            out.write(b"data %d\n" % len(raw) + raw + b"\n")

        pending: list[tuple[int, bytes]] = []
        for k in range(count):
            i = start + k
            p = payload(i, rng)
            node = Node(
                p["thought"], scores=p["scores"], trace=p["trace"], problem_id="bench", depth=1, outcome=p["outcome"]
            )
            node_id = encode_component(f"bulk{i:07d}", "node id")
            meta = {"node_id": node_id, "problem_id": "bench", "depth": 1, "outcome": node.outcome}
            scores = canonical_json(dict(node.scores)).encode()
            trace = "".join(json.dumps(s, sort_keys=True) + "\n" for s in node.trace).encode()
            out.write(b"commit refs/heads/master\nmark :%d\n" % (i + 1))
            out.write(f"author {name} <{email}> {when} +0000\ncommitter {name} <{email}> {when} +0000\n".encode())
            data(node_message(node, node_id, node.thought).encode())
            if k == 0 and tip:
                out.write(f"from {tip}\n".encode())
            for fname, content in (
                ("metadata.json", canonical_json(meta).encode()),
                ("scores.json", scores),
                ("thought.md", node.thought.encode()),
                ("trace.jsonl", trace),
            ):
                out.write(f"M 100644 inline {fname}\n".encode())
                data(content)
            prefix = "success_" if node.outcome == "success" else "failed_"
            out.write(f"reset refs/tags/{prefix}{node_id}\nfrom :{i + 1}\n\n".encode())
            pending.append((i + 1, scores))
            if len(pending) == 1000 or k == count - 1:  # one notes commit per thousand nodes
                out.write(b"commit refs/notes/got\n")
                out.write(f"committer {name} <{email}> {when} +0000\n".encode())
                data(b"Notes added by 'got'\n")
                if notes_tip:
                    out.write(f"from {notes_tip}\n".encode())
                    notes_tip = None
                for mark, note in pending:
                    out.write(b"N inline :%d\n" % mark)
                    data(note)
                pending.clear()
            if k % 500 == 0:
                progress.update(task, completed=k)
        out.write(b"done\n")
        out.close()
        if proc.wait() != 0:
            raise SystemExit("git fast-import failed")
        progress.update(task, completed=count)
        self.oids = [c.oid for c in self.repo.log(limit=5000, decorate=False)]


# ---------------------------------------------------------------- the pygit2 floor
class Floor:
    """4 blobs + tree + commit + one ref move: the least a node commit costs through libgit2."""

    name = "floor"

    def __init__(self, path: Path) -> None:
        self.r = pygit2.Repository(str(path))
        self.sig = pygit2.Signature(*IDENTITY)
        ref = self.r.references.get("refs/heads/master")
        self.tip = ref.target if ref is not None else None
        self.oids: list[Any] = []

    def write(self, i: int, p: dict[str, Any]) -> None:
        r = self.r
        tb = r.TreeBuilder()
        for fname, content in (
            ("metadata.json", json.dumps({"i": i, "outcome": p["outcome"]})),
            ("scores.json", json.dumps(p["scores"], sort_keys=True)),
            ("thought.md", p["thought"]),
            ("trace.jsonl", json.dumps(p["trace"][0]) + "\n"),
        ):
            tb.insert(fname, r.create_blob(content.encode()), pygit2.GIT_FILEMODE_BLOB)
        parents = [self.tip] if self.tip is not None else []
        commit = r.create_commit(None, self.sig, self.sig, f"node {i}\n\n{p['thought']}\n", tb.write(), parents)
        # one ref transaction, as commit_node moves its refs: libgit2's plain ref writes
        # walk every packed ref to check the new name's path, O(refs) per write
        with r.transaction() as txn:
            txn.lock_ref("refs/heads/master")
            txn.set_target("refs/heads/master", commit)
        self.tip = commit
        self.oids.append(commit)

    def read(self, rng: random.Random) -> None:
        """Replay at its rawest: the commit, its tree and the four blobs."""
        c = self.r[rng.choice(self.oids)]
        for entry in c.tree:
            self.r[entry.id].read_raw()


# ---------------------------------------------------------------- sqlite
class Sqlite:
    name = "sqlite"

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS nodes(id INTEGER PRIMARY KEY, node_id TEXT, thought TEXT, scores TEXT,
        trace TEXT, metadata TEXT, outcome TEXT, score REAL, tag TEXT, created REAL);
    CREATE INDEX IF NOT EXISTS nodes_tag ON nodes(tag);
    CREATE VIRTUAL TABLE IF NOT EXISTS nodes_fts USING fts5(thought, content='nodes', content_rowid='id');
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = self.connect(path)
        self.db.executescript(self.SCHEMA)
        self.n = 0

    @staticmethod
    def connect(path: Path) -> sqlite3.Connection:
        db = sqlite3.connect(str(path), isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def _insert(self, i: int, p: dict[str, Any]) -> None:
        cur = self.db.execute(
            "INSERT INTO nodes(node_id, thought, scores, trace, metadata, outcome, score, tag, created)"
            " VALUES(?,?,?,?,?,?,?,?,?)",
            (
                f"n{i}",
                p["thought"],
                json.dumps(p["scores"]),
                json.dumps(p["trace"]),
                json.dumps({"i": i}),
                p["outcome"],
                p["scores"]["s_comb"],
                f"{p['outcome']}_{i}",
                time.time(),
            ),
        )
        self.db.execute("INSERT INTO nodes_fts(rowid, thought) VALUES(?,?)", (cur.lastrowid, p["thought"]))
        self.n += 1

    def write(self, i: int, p: dict[str, Any]) -> None:
        self.db.execute("BEGIN")
        self._insert(i, p)
        self.db.execute("COMMIT")

    def fill(self, start: int, count: int, rng: random.Random) -> None:
        self.db.execute("BEGIN")
        for i in range(start, start + count):
            self._insert(i, payload(i, rng))
        self.db.execute("COMMIT")

    GREP = "SELECT id, thought FROM nodes WHERE id IN (SELECT rowid FROM nodes_fts WHERE nodes_fts MATCH ?) ORDER BY id DESC"
    SEARCH = (
        "SELECT n.id, n.thought, n.score FROM nodes_fts JOIN nodes n ON n.id = nodes_fts.rowid "
        "WHERE nodes_fts MATCH ? ORDER BY rank LIMIT 5"
    )

    def grep(self, word: str) -> int:
        return len(self.db.execute(self.GREP, (word,)).fetchall())

    def search(self, words: str) -> int:
        return len(self.db.execute(self.SEARCH, (" OR ".join(words.split()),)).fetchall())

    def replay(self, rng: random.Random) -> None:
        self.db.execute("SELECT * FROM nodes WHERE id=?", (rng.randint(1, max(self.n, 1)),)).fetchone()

    def disk_after_vacuum(self) -> int:
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.db.execute("VACUUM")
        return sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*"))


# ---------------------------------------------------------------- cold reads (a new process's first query)
COLD_GOT = textwrap.dedent("""
    import sys, time
    from got_core import ReasoningRepo
    t0 = time.perf_counter()
    repo = ReasoningRepo(sys.argv[1])
    (repo.grep if sys.argv[2] == "grep" else lambda q: repo.search(q, k=5))(sys.argv[3])
    print(time.perf_counter() - t0)
""")
COLD_SQLITE = textwrap.dedent("""
    import sqlite3, sys, time
    t0 = time.perf_counter()
    db = sqlite3.connect(sys.argv[1])
    db.execute(sys.argv[2], (sys.argv[3],)).fetchall()
    print(time.perf_counter() - t0)
""")


def cold(script: str, *args: str) -> float:
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def got_gc(path: Path) -> float:
    """The real ``got gc`` (pack objects and refs, rebuild the index), in its own process."""
    cli = "from got_core.cli import _console_main; _console_main()"
    return timed(
        lambda: subprocess.run([sys.executable, "-c", cli, "gc", "-r", str(path)], check=True, capture_output=True)
    )


# ---------------------------------------------------------------- one history size
class Bench:
    def __init__(self, work: Path, ops: int, reads: int, colds: int, seed: int) -> None:
        self.work = work
        self.ops, self.reads, self.colds = ops, reads, colds
        self.rng = random.Random(seed)
        self.qrng = random.Random(seed + 1)
        self.got = Got(work / "got.git")
        self.sqlite = Sqlite(work / "nodes.sqlite")
        self.count = 0  # nodes of history in every system

    def word(self) -> str:
        return self.qrng.choice(QUERY_WORDS)

    def words(self) -> str:
        return f"{self.word()} {self.word()} {self.word()}"

    def grow(self, level: int, api_fill: int, progress: Progress) -> dict[str, float]:
        """Bring every system to ``level`` nodes of history; returns setup timings."""
        setup: dict[str, float] = {}
        grow = level - self.count
        if grow <= 0:
            return setup
        by_api = max(0, min(grow, api_fill - self.count))
        t0 = time.perf_counter()
        if by_api:
            task = progress.add_task(f"history to {self.count + by_api:,} nodes (public API)", total=by_api)
            for i in range(self.count, self.count + by_api):
                self.got.write(i, payload(i, self.rng))
                progress.advance(task)
        if grow > by_api:
            self.got.bulk(self.count + by_api, grow - by_api, self.rng, progress)
        setup["fill_s"] = time.perf_counter() - t0
        self.sqlite.fill(self.count, grow, random.Random(self.count))
        setup["pack_s"] = timed(self.got.repo.maintenance)
        setup["index_catchup_s"] = timed(lambda: self.got.repo.grep("catch the index up"))
        self.count = level
        return setup

    def measure(self, level: int, progress: Progress) -> dict[str, Any]:
        got, sq = self.got, self.sqlite
        floor_dir = self.work / f"floor-{level}.git"
        shutil.copytree(got.path, floor_dir, ignore=shutil.ignore_patterns("got"))
        floor = Floor(floor_dir)
        # the same repository copied as the floor's is: new directories, so new inodes and
        # blocks; on ext4 (with online discard) creating files where many were just deleted,
        # as in the measured repository after its history was written and packed, costs far more
        fresh_dir = self.work / f"fresh-{level}.git"
        shutil.copytree(got.path, fresh_dir, ignore=shutil.ignore_patterns("got"))
        fresh = Got(fresh_dir)
        fresh.name = "fresh"
        row: dict[str, Any] = {"history": level}
        got.repo.grep("settle")
        fresh.repo.grep("settle")

        task = progress.add_task(f"writes @ {level:,}", total=self.ops)
        w: dict[str, list[float]] = {"got": [], "fresh": [], "floor": [], "sqlite": []}
        systems: list[Any] = [got, fresh, floor, sq]
        for j in range(self.ops):
            p = payload(10_000_000 + self.count + j, self.rng)
            k = j % len(systems)
            for s in systems[k:] + systems[:k]:  # rotate who goes first
                w[s.name].append(timed(s.write, self.count + j, p))
            progress.advance(task)
        self.count += self.ops
        pairs = [g / f for g, f in zip(w["got"], w["floor"])]
        row.update(
            got_write_ms=med_ms(w["got"]),
            floor_write_ms=med_ms(w["floor"]),
            sqlite_write_ms=med_ms(w["sqlite"]),
            write_vs_floor=med_ms(w["got"]) / med_ms(w["floor"]),
            write_vs_floor_pairs=statistics.median(pairs),
            write_p90_ms=sorted(w["got"])[int(0.9 * len(w["got"]))] * 1000,
            fresh_copy_write_ms=med_ms(w["fresh"]),
            fresh_copy_write_vs_floor=med_ms(w["fresh"]) / med_ms(w["floor"]),
        )
        fresh.repo.close()
        shutil.rmtree(fresh_dir, ignore_errors=True)

        task = progress.add_task(f"reads after writes @ {level:,}", total=self.reads)
        keys = (
            *("write_after_query", "grep_raw", "grep", "search_raw", "search", "pickaxe_raw", "pickaxe"),
            *("sq_write_after_query", "sq_grep", "sq_search"),
        )
        q: dict[str, list[float]] = {k: [] for k in keys}
        for j in range(self.reads):
            i = 20_000_000 + self.count + j
            p = payload(i, self.rng)
            # steady: a query with nothing moved; the query between looks again at stamps
            # the file system's clock had not passed yet (the racy-git rule), untimed
            # commit_node: the commit, the note and the outcome tag; after the last round's queries,
            # so it also applies itself to the derived index (what an agent's write-then-query pays)
            q["write_after_query"].append(timed(got.write, i, p))
            q["grep_raw"].append(timed(got.grep, self.word()))
            got.grep(self.word())
            q["grep"].append(timed(got.grep, self.word()))
            got.write(i, payload(i + 1, self.rng))
            q["search_raw"].append(timed(got.search, self.words()))
            got.search(self.words())
            q["search"].append(timed(got.search, self.words()))
            if j % 4 == 0:  # pickaxe indexes the files of the commits written since it last ran
                got.write(i, payload(i + 2, self.rng))
                q["pickaxe_raw"].append(timed(got.pickaxe, self.word()))
                got.pickaxe(self.word())
                q["pickaxe"].append(timed(got.pickaxe, self.word()))
            q["sq_write_after_query"].append(timed(sq.write, i, p))
            q["sq_grep"].append(timed(sq.grep, self.word()))
            q["sq_search"].append(timed(sq.search, self.words()))
            progress.advance(task)
        self.count += 2 * self.reads + len(q["pickaxe"])
        m = {k: med_ms(v) for k, v in q.items()}
        row.update(
            got_grep_after_write_ms=m["grep_raw"],
            got_grep_steady_ms=m["grep"],
            grep_after_write_vs_steady=m["grep_raw"] / m["grep"],
            got_pickaxe_after_writes_ms=m["pickaxe_raw"],
            got_pickaxe_steady_ms=m["pickaxe"],
            pickaxe_after_writes_vs_steady=m["pickaxe_raw"] / m["pickaxe"],
            got_search_after_write_ms=m["search_raw"],
            got_search_steady_ms=m["search"],
            search_after_write_vs_steady=m["search_raw"] / m["search"],
            sqlite_grep_ms=m["sq_grep"],
            sqlite_search_ms=m["sq_search"],
            grep_vs_sqlite=m["grep"] / m["sq_grep"],
            got_write_after_query_ms=m["write_after_query"],
            sqlite_write_after_query_ms=m["sq_write_after_query"],
            write_after_query_vs_floor=m["write_after_query"] / med_ms(w["floor"]),
            write_then_grep_vs_sqlite=(m["write_after_query"] + m["grep_raw"])
            / (m["sq_write_after_query"] + m["sq_grep"]),
            search_vs_sqlite=m["search"] / m["sq_search"],
        )

        task = progress.add_task(f"replays @ {level:,}", total=self.reads)
        r: dict[str, list[float]] = {"got": [], "floor": [], "sqlite": []}
        for _ in range(self.reads):
            r["got"].append(timed(got.replay, self.rng))
            r["floor"].append(timed(floor.read, self.rng))
            r["sqlite"].append(timed(sq.replay, self.rng))
            progress.advance(task)
        row.update(
            got_replay_ms=med_ms(r["got"]),
            floor_read_ms=med_ms(r["floor"]),
            sqlite_replay_ms=med_ms(r["sqlite"]),
            replay_vs_floor=med_ms(r["got"]) / med_ms(r["floor"]),
        )

        task = progress.add_task(f"cold reads @ {level:,}", total=self.colds)
        c: dict[str, list[float]] = {"grep": [], "search": [], "sqlite": []}
        for _ in range(self.colds):
            c["grep"].append(cold(COLD_GOT, str(got.path), "grep", self.word()))
            c["search"].append(cold(COLD_GOT, str(got.path), "search", self.words()))
            c["sqlite"].append(cold(COLD_SQLITE, str(sq.path), Sqlite.GREP, self.word()))
            progress.advance(task)
        row.update(
            got_cold_grep_ms=med_ms(c["grep"]),
            got_cold_search_ms=med_ms(c["search"]),
            sqlite_cold_grep_ms=med_ms(c["sqlite"]),
            cold_grep_vs_sqlite=med_ms(c["grep"]) / med_ms(c["sqlite"]),
        )

        gc_task = progress.add_task(f"got gc @ {level:,}", total=None)
        got.repo.close()
        row["gc_s"] = got_gc(got.path)
        got.repo = ReasoningRepo(got.path)
        progress.remove_task(gc_task)
        row["got_git_bytes"] = tree_bytes(got.path, skip="got")
        row["got_index_bytes"] = tree_bytes(got.path / "got")
        row["sqlite_bytes"] = sq.disk_after_vacuum()
        row["sqlite_vs_got_git_disk"] = row["sqlite_bytes"] / row["got_git_bytes"]
        shutil.rmtree(floor_dir, ignore_errors=True)
        return row


# ---------------------------------------------------------------- listing one thread's refs among many
def refs_listing(work: Path, total: int, reads: int) -> dict[str, float]:
    """``GitRepo.list_refs(prefix)`` for one thread's refs among ``total`` refs, against
    libgit2 iterating every ref and filtering (what it did before) and a SQLite range query.

    Setup: ``total`` refs of one checkpoint layout (ten per thread) written as a sorted
    ``packed-refs``, as ``got gc`` leaves them, and ten loose refs of the measured thread
    written through the public API (a thread still being written)."""
    path = work / "refs.git"
    repo = ReasoningRepo.init(path)
    oid = repo.commit_files("master", {"f.txt": "x\n"}, "refs benchmark")
    threads = max(total // 10, 1)
    names = sorted(f"refs/got/threads/t{t:06d}/ns/c{k}" for t in range(threads) for k in range(10))
    (path / "packed-refs").write_text(
        "# pack-refs with: peeled fully-peeled sorted \n" + "".join(f"{oid} {n}\n" for n in names)
    )
    mid = f"refs/got/threads/t{threads // 2:06d}/"
    for k in range(10):
        repo.set_ref(f"{mid}pending/p{k}", oid)
    repo.close()
    db = sqlite3.connect(str(work / "refs.sqlite"), isolation_level=None)
    db.execute("CREATE TABLE refs(name TEXT PRIMARY KEY, oid TEXT) WITHOUT ROWID")
    db.executemany("INSERT INTO refs VALUES(?, ?)", [(n, oid) for n in names])
    git = ReasoningRepo(path).git
    raw = pygit2.Repository(str(path))

    def full_walk() -> int:  # list_refs before: every ref, filtered by name
        return sum(1 for r in raw.references.iterator() if r.name.startswith(mid) and not isinstance(r.target, str))

    def sqlite_range() -> int:
        return len(
            db.execute("SELECT name, oid FROM refs WHERE name >= ? AND name < ?", (mid, mid[:-1] + "0")).fetchall()
        )

    assert len(git.list_refs(mid)) == full_walk() == 20, "both list the thread's 20 refs"
    t: dict[str, list[float]] = {"scoped": [], "full": [], "sqlite": []}
    for _ in range(reads):
        t["scoped"].append(timed(git.list_refs, mid))
        t["full"].append(timed(full_walk))
        t["sqlite"].append(timed(sqlite_range))
    db.close()
    m = {k: med_ms(v) for k, v in t.items()}
    return {
        "list_refs_total_refs": float(threads * 10 + 10),
        "list_refs_scoped_ms": m["scoped"],
        "list_refs_full_walk_ms": m["full"],
        "list_refs_sqlite_ms": m["sqlite"],
        "list_refs_scoped_vs_full_walk": m["scoped"] / m["full"],
        "list_refs_scoped_vs_sqlite": m["scoped"] / m["sqlite"],
    }


# ---------------------------------------------------------------- report
TARGETS = (
    ("grep after a write ≤ 1.5× steady (10k, 100k)", "grep_after_write_vs_steady", 1.5, (10_000, 100_000)),
    ("search after a write ≤ 1.5× steady (10k, 100k)", "search_after_write_vs_steady", 1.5, (10_000, 100_000)),
    ("write ≤ 1.5× the pygit2 floor (every size)", "write_vs_floor", 1.5, None),
)


def render(rows: list[dict[str, Any]]) -> str:
    """Print the tables; returns them as markdown too."""
    md: list[str] = []
    cols = [
        ("history", "history", "{:,}"),
        ("got write ms", "got_write_ms", "{:.2f}"),
        ("floor write ms", "floor_write_ms", "{:.2f}"),
        ("write vs floor", "write_vs_floor", "{:.2f}×"),
        ("write on a fresh copy ms", "fresh_copy_write_ms", "{:.2f}"),
        ("fresh copy vs floor", "fresh_copy_write_vs_floor", "{:.2f}×"),
        ("sqlite write ms", "sqlite_write_ms", "{:.3f}"),
        ("write after a query ms (vs floor)", None, None),
        ("write + grep after it vs sqlite", "write_then_grep_vs_sqlite", "{:.2f}×"),
        ("grep after write ms", "got_grep_after_write_ms", "{:.2f}"),
        ("grep steady ms", "got_grep_steady_ms", "{:.2f}"),
        ("after/steady", "grep_after_write_vs_steady", "{:.2f}×"),
        ("search after write ms", "got_search_after_write_ms", "{:.2f}"),
        ("search steady ms", "got_search_steady_ms", "{:.2f}"),
        ("after/steady ", "search_after_write_vs_steady", "{:.2f}×"),
        ("pickaxe after 3 writes / steady ms", None, None),
        ("sqlite grep / search ms", None, None),
        ("cold grep / search ms", None, None),
        ("sqlite cold ms", "sqlite_cold_grep_ms", "{:.1f}"),
        ("replay ms (vs floor)", None, None),
        ("git / index / sqlite MB", None, None),
    ]
    table = Table(title="Substrate: median ms per operation, ratios from this run (lower is better)")
    for title, _key, _fmt in cols:
        table.add_column(title, justify="right")
    md.append("| " + " | ".join(t for t, _k, _f in cols) + " |")
    md.append("|" + "---|" * len(cols))
    for r in rows:
        cells = []
        for title, key, fmt in cols:
            if key is not None and fmt is not None:
                cells.append(fmt.format(r[key]))
            elif title.startswith("write after a query"):
                cells.append(f"{r['got_write_after_query_ms']:.2f} ({r['write_after_query_vs_floor']:.2f}×)")
            elif title.startswith("pickaxe"):
                cells.append(f"{r['got_pickaxe_after_writes_ms']:.2f} / {r['got_pickaxe_steady_ms']:.2f}")
            elif title.startswith("sqlite grep"):
                cells.append(f"{r['sqlite_grep_ms']:.2f} / {r['sqlite_search_ms']:.2f}")
            elif title.startswith("cold"):
                cells.append(f"{r['got_cold_grep_ms']:.1f} / {r['got_cold_search_ms']:.1f}")
            elif title.startswith("replay"):
                cells.append(f"{r['got_replay_ms']:.2f} ({r['replay_vs_floor']:.1f}×)")
            else:
                mb = 1 << 20
                cells.append(
                    f"{r['got_git_bytes'] / mb:.1f} / {r['got_index_bytes'] / mb:.1f} / {r['sqlite_bytes'] / mb:.1f}"
                )
        table.add_row(*cells)
        md.append("| " + " | ".join(cells) + " |")
    console.print(table)
    lines = []
    for label, key, limit, where in TARGETS:
        picked = [r for r in rows if where is None or r["history"] in where]
        if not picked:
            continue
        worst = max(picked, key=lambda r: r[key])
        ok = worst[key] <= limit
        lines.append(
            f"- {label}: {'met' if ok else 'MISSED'} (worst {worst[key]:.2f}× at {worst['history']:,}; "
            + ", ".join(f"{r['history']:,}: {r[key]:.2f}×" for r in picked)
            + ")"
        )
    listing = next((r for r in rows if "list_refs_scoped_ms" in r), None)
    if listing is not None:
        lines.append(
            f"- list one thread's 20 refs among {int(listing['list_refs_total_refs']):,}: "
            f"{listing['list_refs_scoped_ms']:.3f} ms, libgit2 walking every ref {listing['list_refs_full_walk_ms']:.1f} ms "
            f"({listing['list_refs_scoped_vs_full_walk']:.4f}×), SQLite range query {listing['list_refs_sqlite_ms']:.3f} ms "
            f"({listing['list_refs_scoped_vs_sqlite']:.1f}×)"
        )
    writes = [r["got_write_ms"] for r in rows]
    if len(writes) > 1:
        lines.append(f"- write flatness: largest / smallest history {writes[-1] / writes[0]:.2f}×")
    for line in lines:
        console.print(line)
    return "\n".join([*md, "", *lines]) + "\n"


PLOTTED = (
    ("write", ("got_write_ms", "floor_write_ms", "sqlite_write_ms")),
    ("grep", ("got_grep_after_write_ms", "got_grep_steady_ms", "sqlite_grep_ms", "got_cold_grep_ms")),
    ("search", ("got_search_after_write_ms", "got_search_steady_ms", "sqlite_search_ms", "got_cold_search_ms")),
    ("pickaxe", ("got_pickaxe_after_writes_ms", "got_pickaxe_steady_ms")),
    ("replay", ("got_replay_ms", "floor_read_ms", "sqlite_replay_ms")),
)


def plot(rows: list[dict[str, Any]], out: Path) -> bool:
    """Cost against history size, one panel per operation (log y); False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    xs = list(range(len(rows)))
    fig, axes = plt.subplots(1, len(PLOTTED) + 1, figsize=(4.2 * (len(PLOTTED) + 1), 4))
    for ax, (title, keys) in zip(axes, PLOTTED):
        for key in keys:
            ax.plot(xs, [max(r[key], 1e-4) for r in rows], marker="o", label=key.replace("_ms", ""))
        ax.set_yscale("log")
        ax.set_title(f"{title} (ms, log)")
    ax = axes[-1]
    for key in ("got_git_bytes", "got_index_bytes", "sqlite_bytes"):
        ax.plot(xs, [max(r[key], 1) / (1 << 20) for r in rows], marker="o", label=key.replace("_bytes", ""))
    ax.set_yscale("log")
    ax.set_title("disk after gc / VACUUM (MB, log)")
    for ax in axes:
        ax.set_xticks(xs, [f"{r['history']:,}" for r in rows])
        ax.set_xlabel("nodes of history")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="0,1000,10000,100000", help="history sizes to measure at")
    ap.add_argument("--ops", type=int, default=200, help="writes measured per size (each system)")
    ap.add_argument("--reads", type=int, default=200, help="read-after-write rounds and replays per size")
    ap.add_argument("--colds", type=int, default=5, help="new processes per size for the cold first query")
    ap.add_argument("--api-fill", type=int, default=10_000, help="history written through the public API")
    ap.add_argument("--refs", type=int, default=100_000, help="refs among which one thread's are listed (0: skip)")
    ap.add_argument("--ref-reads", type=int, default=20, help="listings timed (each system)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--out", type=Path, default=default_out("substrate"), help="where to write JSON, the table and the plot"
    )
    ap.add_argument("--workdir", type=Path, default=None, help="scratch directory (default: the system temp dir)")
    args = ap.parse_args(argv)
    levels = sorted(int(x) for x in args.levels.split(","))
    work = Path(tempfile.mkdtemp(prefix="got-bench-", dir=args.workdir))
    console.print(f"scratch: {work} (every system on the same disk); results: {args.out}")
    rows: list[dict[str, Any]] = []
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    try:
        bench = Bench(work, args.ops, args.reads, args.colds, args.seed)
        with LogProgress(*columns, console=console, transient=True) as progress:
            for level in levels:
                setup = bench.grow(level, args.api_fill, progress)
                before = probe(work)
                packs = bench.got.path / "objects" / "pack"
                in_repo = probe(packs, inside=True)  # the measured repository's own pack directory
                row = bench.measure(level, progress)
                row.update(setup)
                row["file_system"] = {"before": before, "after": probe(work)}
                row["file_system_in_repo"] = {"before": in_repo, "after": probe(packs, inside=True)}
                rows.append(row)
                console.print(
                    f"{level:,} nodes: write {row['write_vs_floor']:.2f}× floor, grep after write "
                    f"{row['grep_after_write_vs_steady']:.2f}× steady, search {row['search_after_write_vs_steady']:.2f}×"
                )
                console.print(f"{level:,} nodes: " + describe(before, row["file_system"]["after"]))
                inner = row["file_system_in_repo"]
                console.print(
                    f"{level:,} nodes: creating a file in the measured repository's objects/pack took "
                    f"{inner['before']['create_ms']:.3f} ms before, {inner['after']['create_ms']:.3f} ms after"
                )
        if args.refs > 0 and rows:
            rows[-1].update(refs_listing(work, args.refs, args.ref_reads))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = render(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "substrate.json").write_text(json.dumps(rows, indent=2))
    (args.out / "substrate.md").write_text(text)
    if plot(rows, args.out / "substrate.png"):
        console.print(f"plot: {args.out / 'substrate.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
