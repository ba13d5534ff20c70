#!/usr/bin/env python3
"""Durable execution on DBOS vs none (§6.4 of arXiv 2606.14470; Table 9 row 10).

The paper runs each reasoning node as a durable task on a hosted Hatchet queue and
reports identical results and ~249 ms/node of dispatch overhead. Hatchet's engine cannot
be started here; DBOS can (the ``dbos`` package, SQLite-backed). This benchmark runs the
same n tasks (default 12, the paper's n) of the tree-of-thoughts solver with K branches
(default 4: one child per option of a 4-option question) against a scripted model (the
stand-in server's ``bench`` script), once with ``--executor local`` and once with
``--executor dbos`` (each node a durable step), each in a fresh run directory, and checks:

* **identical results** — every task's result record (less its measured times) is equal;
* **identical nodes** — the same node count, and the same node commits (SHAs) per task;
* **every node a step** — DBOS recorded one ``node <label>`` step per child node;

then reports the overhead per node: (wall time with DBOS − without) / nodes, the median
over ``--repeats`` alternating pairs (engine start included: it is paid once per run).

    python benchmarks/durable_execution.py                         # compare: 12 runs, K = 4
    python benchmarks/durable_execution.py --executor dbos --out runs/durable/dbos   # one run
    python benchmarks/durable_execution.py --executor dbos --out runs/durable/dbos --resume

A single run (``--executor``) prints one line per task and, with ``--json``, its summary;
kill it (even with SIGKILL) and run it again with ``--resume``: under ``dbos`` the nodes
that had finished are replayed from DBOS's record, not run again.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from got_core.bench.datasets import Problem
from got_core.bench.executors import EXECUTORS, recorded_steps, system_database_path
from got_core.bench.runner import (
    ModelSpec,
    Task,
    model_endpoint,
    open_central,
    prepare_run_dir,
    run_tasks,
    stable_record,
    task_seed,
)

EXPERIMENT = "durable_execution"
_LETTERS = "ABCDEFGHIJ"


def build_tasks(n_runs: int, branches: int, seed: int = 0) -> list[Task]:
    """``n_runs`` multiple-choice products with ``branches`` options each (ToT: one child per option)."""
    if not 2 <= branches <= len(_LETTERS):
        raise SystemExit(f"--branches must be 2 to {len(_LETTERS)}")
    tasks = []
    for i in range(n_runs):
        a, b = 3 + (i * 7 + seed) % 17, 11 + (i * 5 + seed) % 13
        right = a * b
        options = [str(right + d) for d in (0, 1, -1, 2, -2, 3, -3, 4, -4, 5)[:branches]]
        shift = (i + seed) % branches  # the right answer is not always (A)
        options = options[-shift:] + options[:-shift] if shift else options
        problem = Problem(
            id=f"mul-{i:03d}",
            question=f"What is {a} multiplied by {b}?",
            answer=str(right),
            kind="mcq",
            choices=options,
            gold_letter=_LETTERS[options.index(str(right))],
            subject="arithmetic",
            domain="arithmetic",
        )
        tasks.append(
            Task(
                EXPERIMENT,
                "test",
                "tot",
                asdict(problem),
                method="tot",
                seed=task_seed(seed, problem.id),
                order=i,
                options={"tools": ["calculator"], "max_steps": 3, "budget_s": 600.0, "k_lessons": 0},
            )
        )
    return tasks


def node_commits(run_dir: Path, records: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per task, the node commits its result commit reaches (sorted SHAs, the result itself left out)."""
    out = {}
    with open_central(run_dir) as central:
        for r in records:
            sha = r["result_sha"]
            out[f"{r['arm']}/{r['problem_id']}"] = sorted(c.oid for c in central.log(sha) if c.oid != sha)
    return out


def run_once(
    out: Path, executor: str, spec: ModelSpec, tasks: list[Task], *, workers: int, resume: bool, progress: bool
) -> dict[str, Any]:
    """One run of ``tasks`` under ``executor`` in ``out``; returns its summary."""
    identity = {
        "experiment": EXPERIMENT,
        "tasks": [t.key for t in tasks],
        "seeds": [t.seed for t in tasks],
        "model": spec.model,
        "max_tokens": spec.max_tokens,
        "executor": executor,
    }
    prepare_run_dir(out, {"identity": identity, "runtime": {"model": spec.public(), "workers": workers}}, resume=resume)
    t0 = time.perf_counter()
    records = run_tasks(tasks, out, spec, workers=workers, progress=progress, label=executor, executor=executor)
    wall = time.perf_counter() - t0
    steps = {t.key: recorded_steps(out, t.key) for t in tasks} if executor == "dbos" else {}
    return {
        "executor": executor,
        "out": str(out),
        "wall_s": wall,
        "tasks": len(records),
        "nodes": sum(int(r["n_nodes"]) for r in records),
        "model_calls": sum(int(r["n_calls"]) for r in records),
        "correct": sum(bool(r["correct"]) for r in records),
        "node_steps": sum(1 for s in steps.values() for x in s if x["name"].startswith("node ")),
        "steps": sum(len(s) for s in steps.values()),
        "records": [stable_record(r) for r in records],
        "node_commits": node_commits(out, records),
        "system_database": str(system_database_path(out)) if executor == "dbos" else None,
    }


def compare(without: dict[str, Any], with_: dict[str, Any]) -> list[str]:
    """What differs between two runs of the same tasks (empty: identical results and nodes)."""
    problems = []
    if without["records"] != with_["records"]:
        diff = [a["problem_id"] for a, b in zip(without["records"], with_["records"]) if a != b]
        problems.append(f"result records differ for {', '.join(diff[:5]) or 'the task list'}")
    if without["nodes"] != with_["nodes"]:
        problems.append(f"node counts differ: {without['nodes']} vs {with_['nodes']}")
    if without["node_commits"] != with_["node_commits"]:
        diff = [k for k in without["node_commits"] if without["node_commits"][k] != with_["node_commits"].get(k)]
        problems.append(f"node commits differ for {', '.join(diff[:5])}")
    children = sum(int(r["n_nodes"]) - 1 for r in with_["records"])  # the root is recorded, not dispatched
    if with_["node_steps"] != children:
        problems.append(f"DBOS recorded {with_['node_steps']} node steps for {children} child nodes")
    return problems


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--n-runs", type=int, default=12, help="tasks (questions) per run [12, the paper's n]")
    p.add_argument("--branches", type=int, default=4, help="K: children of the tree's root [4]")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--executor", choices=EXECUTORS, default=None, help="one run under this executor (no comparison)")
    p.add_argument("--repeats", type=int, default=3, help="comparison: alternating pairs of runs [3]")
    p.add_argument("--workers", type=int, default=1, help="tasks in flight [1]")
    p.add_argument("--out", type=Path, default=None, help="run directory [a new folder under the system temp dir]")
    p.add_argument("--resume", action="store_true", help="continue the run in --out (single run)")
    p.add_argument("--base-url", default=None, help="an OpenAI-compatible endpoint [default: the stand-in, in-process]")
    p.add_argument("--model", default="got-standin", help="served model name [got-standin]")
    p.add_argument("--standin-latency-ms", type=float, default=0.0, help="stand-in delay per answer [0]")
    p.add_argument("--json", type=Path, default=None, help="also write the summary here")
    p.add_argument("--no-progress", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or one run); returns the exit status (1 when the runs differ)."""
    args = _parser().parse_args(argv)
    tasks = build_tasks(args.n_runs, args.branches, args.seed)
    out = args.out or Path(tempfile.mkdtemp(prefix="got-durable-"))
    if args.base_url:
        spec = ModelSpec(args.base_url, args.model, parallel_nodes=False)
    else:
        spec = ModelSpec(
            "http://127.0.0.1:0/v1",
            args.model,
            parallel_nodes=False,  # the same order with and without the engine: scripted replies
            standin={"responder": "bench", "latency_ms": args.standin_latency_ms},
        )
    progress = not args.no_progress
    with model_endpoint(spec) as live:
        if args.executor:
            summary = run_once(
                out, args.executor, live, tasks, workers=args.workers, resume=args.resume, progress=progress
            )
            for r in summary["records"]:
                print(f"{r['problem_id']}: {r['n_nodes']} nodes, {r['n_calls']} model calls, answer {r['answer']}")
            print(
                f"{args.executor}: {summary['tasks']} tasks, {summary['nodes']} nodes, "
                f"{summary['model_calls']} model calls, {summary['wall_s']:.2f} s"
                + (
                    f", {summary['steps']} DBOS steps in {summary['system_database']}"
                    if args.executor == "dbos"
                    else ""
                )
            )
            result: dict[str, Any] = {k: v for k, v in summary.items() if k != "records"}
        else:
            pairs = []
            for i in range(args.repeats):
                order = ("local", "dbos") if i % 2 == 0 else ("dbos", "local")  # alternate: drift cancels
                runs = {
                    ex: run_once(
                        out / f"{ex}-{i}", ex, live, tasks, workers=args.workers, resume=False, progress=progress
                    )
                    for ex in order
                }
                pairs.append(runs)
            problems = [p for runs in pairs for p in compare(runs["local"], runs["dbos"])]
            nodes = pairs[0]["dbos"]["nodes"]
            over = [(r["dbos"]["wall_s"] - r["local"]["wall_s"]) / max(1, r["dbos"]["nodes"]) * 1000 for r in pairs]
            result = {
                "n_runs": args.n_runs,
                "branches": args.branches,
                "repeats": args.repeats,
                "nodes": nodes,
                "identical": not problems,
                "problems": problems,
                "wall_s": {ex: [r[ex]["wall_s"] for r in pairs] for ex in ("local", "dbos")},
                "overhead_ms_per_node": over,
                "overhead_ms_per_node_median": statistics.median(over),
                "out": str(out),
            }
            print(f"| executor | tasks | nodes | model calls | correct | wall s (median of {args.repeats}) |")
            print("|---|---|---|---|---|---|")
            for ex in ("local", "dbos"):
                first = pairs[0][ex]
                wall = statistics.median(r[ex]["wall_s"] for r in pairs)
                print(
                    f"| {ex} | {first['tasks']} | {first['nodes']} | {first['model_calls']} | {first['correct']} | {wall:.2f} |"
                )
            print(
                f"\nidentical results and node commits: {'yes' if not problems else 'NO: ' + '; '.join(problems)}\n"
                f"DBOS overhead per node: {result['overhead_ms_per_node_median']:.1f} ms (median; runs: "
                + ", ".join(f"{x:.1f}" for x in over)
                + ") — the paper reports ~249 ms/node on hosted Hatchet"
            )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0 if result.get("identical", True) else 1


if __name__ == "__main__":
    sys.exit(main())
