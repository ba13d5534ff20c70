"""``got demo``: record a small tree of thoughts and show log, diff and replay.

Runs on embedded defaults (a local bare repository, no model server): the
thoughts are scripted, the storage is real git.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import typer
from rich.markup import escape
from rich.syntax import Syntax

from got_core.cli.plugin import Abbrev, app, check_target, console, created_on_failure_removed, replace_demo
from got_core.cli.render import listing
from got_core.repo import ReasoningRepo
from got_core.types import Node

__all__ = ["DEMO_MARKER", "record_demo_tree"]

#: A ref only the demo writes: how `got demo` recognises (and replaces) its own earlier repository.
DEMO_MARKER = "refs/heads/train-speed/child0"

_PROBLEM = "A train travels 120 km in 1.5 hours. What is its average speed in km/h?"
_CHILDREN = [
    ("Speed is distance over time: 120 / 1.5 = 80 km/h.", 0.92, 0.85),
    ("Multiply distance by time: 120 * 1.5 = 180 km/h.", 0.35, 0.20),
    ("Convert to minutes first: 120 km / 90 min = 1.33 km/min = 80 km/h.", 0.80, 0.75),
    ("Guess from typical train speeds: about 100 km/h.", 0.30, 0.25),
]


def record_demo_tree(repo: ReasoningRepo, problem_id: str = "train-speed") -> dict[str, Node]:
    """Record a depth-1, branching-4 tree with scores, notes, outcome tags and a lesson.

    Returns the recorded nodes by role: ``root``, ``best``, ``worst`` and ``child<i>``.
    """
    root = repo.commit_node(
        Node(f"Problem: {_PROBLEM}\nPlan: try four approaches.", scores={"s_comb": 0.5}, problem_id=problem_id, depth=0)
    )
    nodes: dict[str, Node] = {"root": root}
    for i, (thought, s_local, s_cross) in enumerate(_CHILDREN):
        s_comb = round(0.6 * s_local + 0.4 * s_cross, 4)  # §3.2 combined score
        child = repo.commit_node(
            Node(
                thought,
                scores={"s_local": s_local, "s_cross": s_cross, "s_comb": s_comb},
                trace=[{"step": 1, "action": "calculator", "input": thought.split(":")[-1].strip()}],
                problem_id=problem_id,
                depth=1,
            ),
            ref=f"{problem_id}/child{i}",
            parents=[root.committed_oid()],
            tag=False,
        )
        nodes[f"child{i}"] = child
    ranked = sorted((nodes[f"child{i}"] for i in range(len(_CHILDREN))), key=lambda n: -(n.score or 0))
    best, worst = ranked[0], ranked[-1]
    repo.tag_outcome(best.committed_oid(), "success", best.node_id)
    repo.tag_outcome(worst.committed_oid(), "failed", worst.node_id)
    repo.mark_best(best.committed_oid())
    repo.set_ref("master", best.committed_oid())  # the winning path becomes the session branch
    repo.commit_files(
        "memory",
        {"lessons/speed-distance-time.md": "For average speed, divide total distance by total time; check units.\n"},
        "lesson: speed-distance-time\n\nFor average speed, divide distance by time.\n",
    )
    nodes["best"], nodes["worst"] = best, worst
    return nodes


@app.command()
def demo(
    path: Path | None = typer.Option(
        None, "--repo", "-r", help="Where to write the demo repository (an earlier demo's is replaced)."
    ),
    keep: bool = typer.Option(True, help="Keep the repository afterwards."),
) -> None:
    """Record a scored tree of thoughts into a fresh git repository and show log, diff, replay."""
    target = path or Path("got-demo.git")
    replace_demo(target, DEMO_MARKER)
    check_target(target, "the demo repository", directory=True)
    with created_on_failure_removed(target):
        repo = ReasoningRepo.init(target)
        nodes = record_demo_tree(repo)
    best, worst = nodes["best"], nodes["worst"]
    console.rule("[bold]1. every scored thought is a commit")
    abbrev = Abbrev(repo)
    table = listing("commit", "branch", "score", "tags", "thought", wrap=("tags",))
    for branch, tip in sorted(repo.branches().items()):
        info = repo.commit_info(tip)
        table.add_row(
            abbrev(tip), escape(branch), f"{info.score or 0:.3f}", escape(", ".join(info.tags)), escape(info.summary)
        )
    console.print(table)
    console.rule("[bold]2. diff of two sibling thoughts (failed vs success)")
    console.print(
        Syntax(
            repo.diff(f"failed_{worst.node_id}", f"success_{best.node_id}", "thought.md"),
            "diff",
            theme="ansi_dark",
            word_wrap=True,
        )
    )
    console.rule("[bold]3. replay: the best node rebuilt from its SHA")
    out = Path(tempfile.mkdtemp(prefix="got-replay-"))
    repo.materialize("best", out)
    for f in sorted(out.iterdir()):
        first = " ".join(f.read_text().split())
        console.print(f"[cyan]{f.name}[/]: {escape(first)}", soft_wrap=False, no_wrap=True, overflow="ellipsis")
    console.rule("[bold]4. retrieval: git's own search")
    for hit in repo.search("average speed distance time", k=3):
        line = f"rho={hit.rho:.3f} {abbrev(hit.oid)} {escape(hit.summary)}"
        console.print(line, soft_wrap=False, no_wrap=True, overflow="ellipsis")  # one line each, cut to fit
    where = escape(str(target))
    console.print(f"\nrepository: [bold]{where}[/]; try:")
    console.print(f"  git --git-dir={where} log --all --oneline")
    console.print(f"  git --git-dir={where} notes --ref=got show best")
    shutil.rmtree(out, ignore_errors=True)
    if not keep:
        shutil.rmtree(target, ignore_errors=True)
