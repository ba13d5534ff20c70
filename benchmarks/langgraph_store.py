"""LangGraph store benchmark: GitStore vs SqliteStore (and PostgresStore) at 1k, 10k, 100k items.

Each size gets fresh stores filled with the same items: ``("memories", "user<u>")``
namespaces of 100 items each, values ``{"text", "kind", "n", "user"}``, written in batches
of 1,000 puts (for git one commit per batch, its blobs and trees in one pack; one
transaction for the others); ``bulk put, per item`` is that fill's cost per item. Then every
operation runs ``--ops`` times, interleaved call by call across the stores (the order
rotates each round, so disk and CPU noise from other processes hits them alike):

* ``put``: a new key in a random namespace (one commit / one transaction each);
* ``get``: a random existing key, in steady state (no write in the last 150 ms);
* ``get after put``: a get of the key just written (a read right after a write);
* ``put then search``: a put and a filtered search in its namespace, timed together (GitStore's
  index holds the rows of its latest small commits in memory and writes them at the first read
  that needs its file, so this is where that write is paid);
* ``list_namespaces``: the first 100 namespaces; and with ``prefix`` + ``max_depth=2``;
* ``search in a namespace`` / ``cross-namespace search``: filtered on value fields, limit 10;
* ``TTL sweep``: 1% of the store written with a 0.6 s TTL, expired, then swept (5 rounds);
* ``cold open`` (15 rounds): a new store object on the existing files, then one get and one search
  (for git the derived index is on disk; ``cold open, index rebuilt`` deletes it first).

Disk: git objects and refs after ``repo.maintenance()`` (repack), the derived index file
apart, against the SQLite file (with its WAL) and PostgreSQL's store tables. A last table
gives each size's scale row: write, read after write, steady read, cold read and disk, as
git ÷ each peer.

SqliteStore runs as ``SqliteStore.from_conn_string`` builds it (journal and fsync as SQLite
defaults them); GitStore writes without fsync (``fsync=False``, the default: a killed
process loses nothing acknowledged, a power cut may). PostgresStore runs against a local
server this script starts in a temporary directory on 127.0.0.1 (as the ``postgres`` user
when run as root) and stops; it is skipped with one line when ``langgraph-checkpoint-postgres``
or the PostgreSQL binaries are missing.

    python benchmarks/langgraph_store.py                        # 1k, 10k, 100k; output under the temp dir
    python benchmarks/langgraph_store.py --sizes 1000,10000 --ops 100 --out runs/store
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _fsprobe import describe, probe
from _pg import LocalPostgres
from _pg import start as start_postgres
from _plot import default_out, log_lines
from langgraph.store.base import PutOp
from rich.console import Console
from rich.table import Table

console = Console()
PER_NAMESPACE = 100
BATCH = 1000
SWEEPS = 5  # each waits for its items to expire (about 2 s)
COLD_OPENS = 15  # a few ms each: enough rounds for a median on a busy machine
RACY_WAIT = 0.15  # past the window in which a just-written ref is re-read
KINDS = ("fact", "pref", "event")
OPS = [
    "put",
    "get",
    "get after put",
    "put then search",
    "list_namespaces",
    "list_namespaces prefix+depth",
    "search in a namespace",
    "cross-namespace search",
    "TTL sweep",
    "cold open",
]


def _value(i: int, user: int) -> dict[str, Any]:
    return {
        "text": f"memory {i} of user {user}: " + "likes tea, " * (1 + i % 5),
        "kind": KINDS[i % 3],
        "n": i % 10,
        "user": user,
    }


# ---------------------------------------------------------------------------- the peers
class Peer:
    """One store under test: how to open it (again), and what it holds on disk."""

    def __init__(self, name: str, opener: Callable[[], tuple[Any, Callable[[], None]]], disk: Callable[[], dict]):
        self.name = name
        self._opener = opener
        self.disk = disk
        self.store: Any = None
        self._close: Callable[[], None] | None = None
        self.open()

    def open(self) -> Any:
        """Open the store (closing it first when open); returns it."""
        self.close()
        self.store, self._close = self._opener()
        return self.store

    def close(self) -> None:
        """Close the store (nothing when it is closed)."""
        if self._close is not None:
            self._close()
        self.store, self._close = None, None


def _dir_bytes(path: Path, skip: str | None = None) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and (skip is None or skip not in f.parts))


def git_peer(workdir: Path) -> Peer:
    from got_integrations.langgraph import GitStore

    path = workdir / "store.git"

    def opener() -> tuple[Any, Callable[[], None]]:
        store = GitStore(path)
        return store, store.close

    def disk() -> dict:
        store = GitStore(path)
        store.repo.maintenance()
        index = sum(p.stat().st_size for p in (path / "got").glob("store-*.sqlite3*"))
        store.close()
        return {"store": _dir_bytes(path, skip="got"), "derived index": index}

    return Peer("git", opener, disk)


def sqlite_peer(workdir: Path) -> Peer:
    from langgraph.store.sqlite import SqliteStore

    path = workdir / "store.sqlite"

    def opener() -> tuple[Any, Callable[[], None]]:
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)  # as from_conn_string
        store = SqliteStore(conn)
        store.setup()
        return store, conn.close

    def disk() -> dict:
        return {"store": sum(p.stat().st_size for p in workdir.glob("store.sqlite*"))}

    return Peer("sqlite", opener, disk)


def postgres_peer(server: LocalPostgres, size: int) -> Peer:
    from langgraph.store.postgres import PostgresStore

    target = server.create_database(f"store_{size}")

    def opener() -> tuple[Any, Callable[[], None]]:
        manager = PostgresStore.from_conn_string(target)
        store = manager.__enter__()
        store.setup()
        return store, lambda: manager.__exit__(None, None, None)

    def disk() -> dict:
        return {"store": server.tables_bytes(target)}  # after VACUUM FULL, indexes included

    return Peer("postgres", opener, disk)


# ---------------------------------------------------------------------------- measuring
def interleaved(peers: list[Peer], rounds: int, op: Callable[[Any, int], Callable[[], Any]]) -> dict[str, list[float]]:
    """Time ``op(store, i)()`` ``rounds`` times per store, alternating stores each call.

    ``op`` does the untimed preparation and returns the callable that is timed.
    """
    out: dict[str, list[float]] = {p.name: [] for p in peers}
    for i in range(rounds):
        order = peers[i % len(peers) :] + peers[: i % len(peers)]
        for peer in order:
            timed = op(peer.store, i)
            t0 = time.perf_counter()
            timed()
            out[peer.name].append(time.perf_counter() - t0)
    return out


def _fill(peers: list[Peer], size: int) -> dict[str, float]:
    users = max(1, size // PER_NAMESPACE)
    ops = [PutOp(("memories", f"user{i % users}"), f"m{i}", _value(i, i % users)) for i in range(size)]
    spent = {p.name: 0.0 for p in peers}
    for start in range(0, size, BATCH):
        chunk = ops[start : start + BATCH]
        for peer in peers:
            t0 = time.perf_counter()
            peer.store.batch(chunk)
            spent[peer.name] += time.perf_counter() - t0
    return {name: s / size for name, s in spent.items()}


def run_size(size: int, workdir: Path, rounds: int, pg: LocalPostgres | None) -> dict[str, Any]:
    """All measurements at one size; returns {op: {peer: stats}} plus disk and fill."""
    workdir.mkdir(parents=True, exist_ok=True)
    peers = [git_peer(workdir), sqlite_peer(workdir)]
    if pg is not None:
        peers.append(postgres_peer(pg, size))
    users = max(1, size // PER_NAMESPACE)
    rng = random.Random(size)
    console.print(f"[bold]{size:,} items[/bold]: filling {', '.join(p.name for p in peers)} ...")
    fill = _fill(peers, size)
    git_store = peers[0].store
    git_store.repo.maintenance()  # what `got gc` does; loose objects would otherwise pile up
    results: dict[str, dict[str, list[float]]] = {}

    def step(name: str, n: int, op: Callable[[Any, int], Callable[[], Any]], *, steady: bool = True) -> None:
        if steady:
            time.sleep(RACY_WAIT)
        console.print(f"  {name} ({n} rounds)")
        results[name] = interleaved(peers, n, op)

    keys = [(rng.randrange(size)) for _ in range(rounds)]

    def put(store: Any, i: int) -> Callable[[], Any]:
        u = (i * 7919) % users
        return lambda: store.put(("memories", f"user{u}"), f"new{i}", _value(i, u))

    def get(store: Any, i: int) -> Callable[[], Any]:
        k = keys[i]
        return lambda: store.get(("memories", f"user{k % users}"), f"m{k}")

    def get_after_put(store: Any, i: int) -> Callable[[], Any]:
        u = i % users
        store.put(("memories", f"user{u}"), f"raw{i}", _value(i, u))
        return lambda: store.get(("memories", f"user{u}"), f"raw{i}")

    def put_then_search(store: Any, i: int) -> Callable[[], Any]:
        u = (i * 104729) % users

        def both() -> Any:
            store.put(("memories", f"user{u}"), f"ps{i}", _value(i, u))
            return store.search(("memories", f"user{u}"), filter={"kind": "pref"}, limit=10)

        return both

    step("put", rounds, put, steady=False)
    step("get", rounds, get)
    step("get after put", rounds, get_after_put, steady=False)
    step("put then search", rounds, put_then_search, steady=False)
    step("list_namespaces", rounds, lambda s, i: lambda: s.list_namespaces(limit=100))
    step(
        "list_namespaces prefix+depth",
        rounds,
        lambda s, i: lambda: s.list_namespaces(prefix=("memories",), max_depth=2, limit=100),
    )
    step(
        "search in a namespace",
        rounds,
        lambda s, i: lambda: s.search(("memories", f"user{keys[i] % users}"), filter={"kind": "pref"}, limit=10),
    )
    step(
        "cross-namespace search",
        rounds,
        lambda s, i: lambda: s.search(("memories",), filter={"kind": "pref", "n": {"$gte": 5}}, limit=10),
    )
    expiring = max(10, size // 100)
    console.print(f"  TTL sweep ({SWEEPS} rounds of {expiring} expiring items)")
    sweeps: dict[str, list[float]] = {p.name: [] for p in peers}
    for r in range(SWEEPS):
        for peer in peers:
            peer.store.batch([PutOp(("ttl", f"t{j % 10}"), f"e{r}-{j}", {"v": j}, ttl=0.01) for j in range(expiring)])
        time.sleep(0.01 * 60 + 1.2)  # SQLite compares with CURRENT_TIMESTAMP, to the second
        for peer in peers[r % len(peers) :] + peers[: r % len(peers)]:
            t0 = time.perf_counter()
            removed = peer.store.sweep_ttl()
            sweeps[peer.name].append(time.perf_counter() - t0)
            if removed < expiring:
                console.print(f"    [yellow]{peer.name} swept {removed} of {expiring}[/yellow]")
    results["TTL sweep"] = sweeps
    console.print("  cold open")
    colds: dict[str, list[float]] = {p.name: [] for p in peers}
    for r in range(COLD_OPENS):
        for peer in peers[r % len(peers) :] + peers[: r % len(peers)]:
            peer.close()
            t0 = time.perf_counter()
            store = peer.open()
            store.get(("memories", "user0"), "m0")
            store.search(("memories", f"user{r % users}"), filter={"kind": "pref"}, limit=10)
            colds[peer.name].append(time.perf_counter() - t0)
    results["cold open"] = colds
    peers[0].close()
    for f in (workdir / "store.git" / "got").glob("store-*.sqlite3*"):
        f.unlink()
    t0 = time.perf_counter()
    peers[0].open().get(("memories", "user0"), "m0")
    rebuilt = time.perf_counter() - t0
    console.print("  disk after gc")
    for peer in peers:
        peer.close()
    disk = {p.name: p.disk() for p in peers}
    return {
        "size": size,
        "namespaces": users,
        "fill_ms_per_item": {k: v * 1000 for k, v in fill.items()},
        "ms": {op: {name: _stats(v) for name, v in by_peer.items()} for op, by_peer in results.items()},
        "cold_open_index_rebuilt_ms": rebuilt * 1000,
        "disk_bytes": disk,
    }


def _stats(values: list[float]) -> dict[str, float]:
    ms = sorted(v * 1000 for v in values)
    return {"median": statistics.median(ms), "mean": statistics.fmean(ms), "p90": ms[int(0.9 * (len(ms) - 1))]}


# ---------------------------------------------------------------------------- reporting
def report(runs: list[dict[str, Any]]) -> None:
    """Print one table per size: medians and the git/peer ratios."""
    for run in runs:
        peers = list(run["ms"]["get"])
        table = Table(
            title=f"{run['size']:,} items in {run['namespaces']:,} namespaces (median ms; ratio = git / peer)"
        )
        table.add_column("operation")
        for name in peers:
            table.add_column(name, justify="right")
        for name in peers[1:]:
            table.add_column(f"git/{name}", justify="right")
        for op in OPS:
            row = run["ms"][op]
            cells = [f"{row[n]['median']:.3f}" for n in peers]
            ratios = [f"{row['git']['median'] / row[n]['median']:.2f}x" for n in peers[1:]]
            table.add_row(op, *cells, *ratios)
        fill = run["fill_ms_per_item"]
        table.add_row(
            "bulk put, per item",
            *[f"{fill[n]:.3f}" for n in peers],
            *[f"{fill['git'] / fill[n]:.2f}x" for n in peers[1:]],
        )
        console.print(table)
        disk = run["disk_bytes"]
        parts = [
            f"git {disk['git']['store'] / 1e6:.2f} MB (+ derived index {disk['git']['derived index'] / 1e6:.2f} MB)"
        ]
        parts += [f"{n} {disk[n]['store'] / 1e6:.2f} MB" for n in peers[1:]]
        console.print(
            "disk after gc: "
            + ", ".join(parts)
            + f"; cold open with the index rebuilt: {run['cold_open_index_rebuilt_ms']:.0f} ms"
        )


SCALE = [("write", "put"), ("read after write", "get after put"), ("steady read", "get"), ("cold read", "cold open")]


def scale(runs: list[dict[str, Any]]) -> None:
    """One row per size and peer: write, read after write, steady read, cold read and disk
    after gc, each as git / that peer (the issue's scale rows; the tables above hold the medians)."""
    table = Table(title="scale: git / peer (medians; disk: git objects and refs after gc)")
    for column in ("items", "peer", *(label for label, _ in SCALE), "disk"):
        table.add_column(column, justify="right")
    for run in runs:
        ms, disk = run["ms"], run["disk_bytes"]
        for name in (n for n in ms["get"] if n != "git"):
            cells = [f"{ms[op]['git']['median'] / ms[op][name]['median']:.2f}x" for _, op in SCALE]
            table.add_row(f"{run['size']:,}", name, *cells, f"{disk['git']['store'] / disk[name]['store']:.2f}x")
    console.print(table)


def targets(runs: list[dict[str, Any]]) -> list[str]:
    """The issue's target lines (list_namespaces, get, put, filtered search <= 1.0x SqliteStore)."""
    lines = []
    for run in runs:
        if run["size"] < 10_000:
            continue
        for op in ("list_namespaces", "get", "put", "search in a namespace", "cross-namespace search"):
            r = run["ms"][op]["git"]["median"] / run["ms"][op]["sqlite"]["median"]
            lines.append(f"{run['size']:,} items, {op}: {r:.2f}x sqlite ({'met' if r <= 1.0 else 'NOT met'})")
    return lines


def plot(runs: list[dict[str, Any]], path: Path) -> Path | None:
    """Median ms of each operation against the number of items, one line per store."""
    rows = []
    for run in runs:
        for name in run["ms"]["get"]:
            row: dict[str, Any] = {"size": run["size"], "store": name}
            for op in ("put", "get", "list_namespaces", "search in a namespace", "cross-namespace search", "TTL sweep"):
                row[op.replace(" ", "_") + "_ms"] = run["ms"][op][name]["median"]
            rows.append(row)
    metrics = [k for k in rows[0] if k.endswith("_ms")]
    return log_lines(rows, metrics, "size", "store", path, xlabel="items in the store", log_x=True)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; writes ``langgraph_store.json`` and ``langgraph_store.png`` under ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated item counts")
    parser.add_argument("--ops", type=int, default=200, help="rounds per operation and size")
    parser.add_argument("--out", type=Path, default=default_out("langgraph_store"), help="output directory")
    parser.add_argument("--no-postgres", action="store_true", help="leave PostgresStore out")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    server = None
    if args.no_postgres:
        console.print("PostgresStore skipped: not requested (--no-postgres)")
    else:
        server, line = start_postgres()
        console.print(line)
    runs = []
    try:
        with tempfile.TemporaryDirectory(prefix="got-store-bench-") as tmp:
            for size in sizes:
                before = probe(Path(tmp))
                runs.append(run_size(size, Path(tmp) / str(size), args.ops, server))
                runs[-1]["file_system"] = {"before": before, "after": probe(Path(tmp))}
    finally:
        if server is not None:
            server.stop()
    report(runs)
    scale(runs)
    for line in targets(runs):
        console.print(line)
    for size, run in zip(sizes, runs):
        console.print(f"{size:,} items: " + describe(run["file_system"]["before"], run["file_system"]["after"]))
    (args.out / "langgraph_store.json").write_text(json.dumps(runs, indent=1))
    png = plot(runs, args.out / "langgraph_store.png")
    console.print(f"results: {args.out / 'langgraph_store.json'}" + (f", plot: {png}" if png else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
