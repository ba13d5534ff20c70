"""LangGraph checkpointer benchmark: GitCheckpointSaver vs SqliteSaver vs InMemorySaver.

The workload is a real graph: an agent with a tool loop (scripted model) runs ``--steps``
super-steps in one thread, so the message list grows by one message per step. The
saver calls that run makes (``put`` + ``put_writes`` per step) are recorded once, then
replayed call by call against the three savers, interleaved round-robin so that disk
noise from other processes hits them alike. After every ``put`` each saver also serves
``get_tuple`` of the latest checkpoint (the read a resumed invoke or ``get_state`` does).

Reported, in one run: median and mean ms of a step's writes (``put`` + its
``put_writes``) and of ``get_tuple``, ratios to SqliteSaver (file on the same disk),
and bytes on disk (git loose, git after ``repo.maintenance()`` = repack, sqlite file
with its WAL). Targets: within 1.5x of SqliteSaver on writes and reads; smaller on disk.

    python benchmarks/langgraph_saver.py                 # 1000 steps; JSON + PNG in $TMPDIR/got-bench/langgraph_saver/
    python benchmarks/langgraph_saver.py --steps 200 --out /tmp/bench
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console()
_FILLER = (
    "The tool result was checked against the question, the units agree and the arithmetic "
    "was redone once more to be sure; next the agent decides whether another call is needed. "
)


def record_calls(steps: int) -> list[tuple[str, tuple]]:
    """Run the tool-loop graph for ``steps`` super-steps on a recording InMemorySaver."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    calls: list[tuple[str, tuple]] = []

    def clean(config: dict) -> dict:
        return {"configurable": {k: v for k, v in config["configurable"].items() if not k.startswith("__")}}

    class Recorder(InMemorySaver):
        def put(self, config, checkpoint, metadata, new_versions):
            calls.append(("put", (clean(config), checkpoint, metadata, new_versions)))
            return super().put(config, checkpoint, metadata, new_versions)

        def put_writes(self, config, writes, task_id, task_path=""):
            calls.append(("put_writes", (clean(config), list(writes), task_id, task_path)))
            return super().put_writes(config, writes, task_id, task_path)

    @tool
    def lookup(step: int) -> str:
        """Return a note for a step."""
        return f"note {step}: " + _FILLER[: 60 + step % 40]

    def agent(state: MessagesState) -> dict:
        n = len(state["messages"])
        if n >= steps:
            return {"messages": [AIMessage(content="Done. " + _FILLER)]}
        call = {"name": "lookup", "args": {"step": n}, "id": f"call-{n}"}
        return {"messages": [AIMessage(content=f"Step {n}: " + _FILLER[: 120 + n % 80], tool_calls=[call])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([lookup]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    graph = builder.compile(checkpointer=Recorder())
    graph.invoke(
        {"messages": [HumanMessage("Work through the steps.")]},
        {"configurable": {"thread_id": "bench"}, "recursion_limit": steps + 10},
        durability="sync",
    )
    return calls


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run(steps: int, workdir: Path) -> dict[str, Any]:
    """Replay one recorded run against every saver; returns the measurements."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    from got_integrations.langgraph import GitCheckpointSaver

    calls = record_calls(steps)
    sqlite_path = workdir / "checkpoints.sqlite"
    git_path = workdir / "checkpoints.git"
    conn = sqlite3.connect(str(sqlite_path), check_same_thread=False)
    savers = {"git": GitCheckpointSaver.from_path(git_path), "sqlite": SqliteSaver(conn), "memory": InMemorySaver()}
    writes: dict[str, list[float]] = {n: [] for n in savers}
    reads: dict[str, list[float]] = {n: [] for n in savers}
    current: dict[str, float] = dict.fromkeys(savers, 0.0)
    names = list(savers)
    latest = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    for i, (method, args) in enumerate(calls):
        order = names[i % len(names) :] + names[: i % len(names)]  # rotate who goes first
        for name in order:
            saver = savers[name]
            t0 = time.perf_counter()
            getattr(saver, method)(*args)
            elapsed = time.perf_counter() - t0
            if method == "put":
                if i:
                    writes[name].append(current[name])
                current[name] = elapsed
            else:
                current[name] += elapsed
        if method == "put":
            for name in order:
                t0 = time.perf_counter()
                tup = savers[name].get_tuple(latest)
                reads[name].append(time.perf_counter() - t0)
                assert tup is not None and tup.checkpoint["id"] == args[1]["id"]
    for name in names:
        writes[name].append(current[name])
    git_loose = _dir_bytes(git_path)
    packed = savers["git"].repo.maintenance()
    conn.commit()
    sqlite_bytes = sum(p.stat().st_size for p in workdir.glob("checkpoints.sqlite*"))
    final = savers["git"].get_tuple(latest)
    assert final.checkpoint == savers["sqlite"].get_tuple(latest).checkpoint  # same state, both ways
    conn.close()
    return {
        "steps": sum(1 for m, _ in calls if m == "put"),
        "calls": len(calls),
        "messages": len(final.checkpoint["channel_values"]["messages"]),
        "write_ms": {n: _stats(v) for n, v in writes.items()},
        "read_ms": {n: _stats(v) for n, v in reads.items()},
        "bytes": {"git_loose": git_loose, "git_packed": packed["bytes_after"], "sqlite": sqlite_bytes},
    }


def _stats(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {"median": statistics.median(ms), "mean": statistics.fmean(ms), "p90": sorted(ms)[int(0.9 * (len(ms) - 1))]}


def report(result: dict[str, Any]) -> None:
    """Print the rich table of one run."""
    table = Table(title=f"LangGraph savers: {result['steps']} checkpoints, {result['messages']} messages at the end")
    for col in (
        "saver",
        "write median ms",
        "write mean",
        "read median ms",
        "read mean",
        "write / sqlite",
        "read / sqlite",
    ):
        table.add_column(col, justify="right")
    base_w, base_r = result["write_ms"]["sqlite"]["median"], result["read_ms"]["sqlite"]["median"]
    for name in ("git", "sqlite", "memory"):
        w, r = result["write_ms"][name], result["read_ms"][name]
        table.add_row(
            name,
            f"{w['median']:.3f}",
            f"{w['mean']:.3f}",
            f"{r['median']:.3f}",
            f"{r['mean']:.3f}",
            f"{w['median'] / base_w:.2f}x",
            f"{r['median'] / base_r:.2f}x",
        )
    console.print(table)
    b = result["bytes"]
    console.print(
        f"on disk: git loose {b['git_loose'] / 1e6:.2f} MB, git after repack {b['git_packed'] / 1e6:.2f} MB, "
        f"sqlite {b['sqlite'] / 1e6:.2f} MB ({b['sqlite'] / max(b['git_packed'], 1):.1f}x git)"
    )
    w = result["write_ms"]["git"]["median"] / base_w
    r = result["read_ms"]["git"]["median"] / base_r
    console.print(
        f"targets: writes within 1.5x of sqlite: {'met' if w <= 1.5 else 'NOT met'} ({w:.2f}x); "
        f"reads within 1.5x: {'met' if r <= 1.5 else 'NOT met'} ({r:.2f}x); "
        f"smaller on disk after gc: {'met' if b['git_packed'] < b['sqlite'] else 'NOT met'}"
    )


def plot(result: dict[str, Any], path: Path) -> bool:
    """A bar chart (medians and bytes) as PNG; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = ["git", "sqlite", "memory"]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, key, title in (
        (axes[0], "write_ms", "put + put_writes per step (median ms)"),
        (axes[1], "read_ms", "get_tuple latest (median ms)"),
    ):
        ax.bar(names, [result[key][n]["median"] for n in names], color=["#f05033", "#4c78a8", "#9d9d9d"])
        ax.set_title(title, fontsize=9)
    b = result["bytes"]
    axes[2].bar(
        ["git loose", "git packed", "sqlite"],
        [b["git_loose"] / 1e6, b["git_packed"] / 1e6, b["sqlite"] / 1e6],
        color=["#f7a08f", "#f05033", "#4c78a8"],
    )
    axes[2].set_title("bytes on disk (MB)", fontsize=9)
    fig.suptitle(f"{result['steps']} checkpoints, growing message list", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="Super-steps of the graph (default 1000).")
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="Where to put the savers' files (default: a temp dir "
        "under the current directory, so both savers use the same disk).",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(tempfile.gettempdir()) / "got-bench" / "langgraph_saver",
        help="Where to write langgraph_saver.json and .png (the chart needs matplotlib).",
    )
    args = parser.parse_args(argv)
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="lg-saver-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        result = run(args.steps, workdir)
    finally:
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    report(result)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "langgraph_saver.json").write_text(json.dumps(result, indent=2))
    png = args.out / "langgraph_saver.png"
    console.print(
        f"results: {args.out / 'langgraph_saver.json'}; "
        + (f"chart: {png}" if plot(result, png) else "matplotlib is not installed: no chart")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
