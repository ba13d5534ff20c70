"""Cookbook: which lesson broke it? ``got bisect`` over the memory branch.

An agent's memory branch gathers lessons, one commit each. Somewhere among them one
bad lesson ("when items come in boxes, add the numbers") makes the agent fail a fixed
problem set it used to pass. ``got bisect`` finds that commit the way ``git bisect run``
would, testing ⌈log2 n⌉ restored memories instead of n, each in a scratch directory.

1. ``--lessons`` lessons are written to ``OUT/memory.git`` (branch ``memory``), the bad
   one at position ``--planted``.
2. The problem set is this file's ``check`` subcommand: it opens the memory that
   ``got bisect`` restored (``$GOT_BISECT_MEMORY``), solves three word problems with the
   solver (greedy arm, lessons retrieved from that memory into the prompt), prints
   ``accuracy: X`` and exits 0 only when every answer is right.
3. ``got bisect --run "python bisect_memory.py check"`` names the first bad commit and
   records it as a note on ``refs/notes/got-bisect``; then the same search by a printed
   number (``--metric``).

The model is :class:`~got_core.solver.scripted.ScriptedChatModel` — a **stand-in model**,
scripted to follow the lessons it is shown (it adds when a lesson says to add) — so the
run is deterministic and needs no server; point ``check`` at any chat model for real use.

Run::

    python cookbooks/bisect_memory.py                        # into <temp dir>/got-cookbooks/bisect_memory
    python cookbooks/bisect_memory.py --lessons 33 --planted 20 --out runs/bisect
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["build_memory", "check", "main"]

PLANTED = "When items come in boxes, add the number of boxes to the number per box to get the total."
GOOD_LESSONS = [
    "Read the question twice and underline the quantity it asks for.",
    "Check that the units of the answer match the units the question asks for.",
    "For fractions, bring both sides to a common denominator before comparing.",
    "Estimate the size of the answer first, then compare it with the exact result.",
    "When a rate is given per hour, convert minutes to hours before multiplying.",
    "Write each intermediate result down instead of keeping it in your head.",
    "For percentages, say out loud what the whole is before taking a part of it.",
    "Re-read the final sentence: it often changes what must be reported.",
]
PROBLEMS = [
    ("A shop has 6 boxes with 7 lanterns in each box. How many lanterns are there?", 6 * 7),
    ("There are 4 boxes of pencils and each box holds 9 pencils. How many pencils in total?", 4 * 9),
    ("A crate holds 5 boxes and every box has 8 apples. How many apples does the crate hold?", 5 * 8),
]


def build_memory(path: Path, lessons: int, planted: int) -> list[str]:
    """Write ``lessons`` lessons on the ``memory`` branch of ``path`` (the bad one at ``planted``, 1-based).

    Returns the lesson commits, oldest first (the branch starts with one seed commit before them).
    """
    from got_core.memory.git import GitMemory
    from got_core.repo import ReasoningRepo
    from got_core.types import DeterministicClock

    repo = ReasoningRepo(path, clock=DeterministicClock(1_700_000_000))
    memory = GitMemory(repo=repo)
    memory.add_insight("Start every problem by restating it in your own words.", topic_key="seed")
    commits = []
    for i in range(1, lessons + 1):
        text = PLANTED if i == planted else f"{GOOD_LESSONS[i % len(GOOD_LESSONS)]} (lesson {i})"
        memory.add_insight(text, topic_key=f"lesson-{i:03d}")
        commits.append(repo.tip(repo.ref("memory")))
    repo.close()
    return [c for c in commits if c]


def _stand_in_reply(messages: list[dict]) -> str:
    """The stand-in model: multiplies boxes by items per box, unless a lesson it sees says to add."""
    system = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    question = str(messages[-1].get("content", ""))
    a, b = (int(x) for x in re.findall(r"\b(\d+)\b", question)[:2])
    if "add the number of boxes" in system:
        return f"Thought: the lesson says to add: {a} + {b}.\nConfidence: 0.9\nFinal Answer: {a + b}"
    return f"Thought: {a} boxes of {b} is {a} times {b}.\nConfidence: 0.9\nFinal Answer: {a * b}"


def check() -> int:
    """The problem set, run by ``got bisect`` in its scratch directory: exit 0 when all are right."""
    from got_core.memory.git import GitMemory
    from got_core.solver import solve
    from got_core.solver.scripted import ScriptedChatModel

    memory = GitMemory(os.environ["GOT_BISECT_MEMORY"], read_only=True, create=False)
    model = ScriptedChatModel(default=_stand_in_reply, model_name="stand-in (scripted)")
    trees = Path(os.environ["GOT_BISECT_DIR"]) / "trees"
    right = 0
    for question, gold in PROBLEMS:
        result = solve(question, model=model, memory=memory, repo_root=trees, arm="greedy", tools=(), k_lessons=3)
        right += result.answer == str(gold)
    memory.close()
    print(f"accuracy: {right / len(PROBLEMS):.3f}")
    return 0 if right == len(PROBLEMS) else 1


def _got(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "got_core.cli", *args]
    print("$ got " + shlex.join(args), flush=True)
    proc = subprocess.run(cmd, text=True, capture_output=True, check=False)
    print(proc.stdout + proc.stderr, end="", flush=True)
    return proc


def main(argv: list[str] | None = None) -> int:
    """Build the memory, bisect it twice (exit status, then a metric); returns an exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", nargs="?", choices=["run", "check"], default="run")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "got-cookbooks" / "bisect_memory")
    parser.add_argument("--lessons", type=int, default=16, help="lessons on the memory branch (default 16)")
    parser.add_argument("--planted", type=int, default=11, help="position of the bad lesson, 1-based (default 11)")
    args = parser.parse_args(argv)
    if args.mode == "check":
        return check()
    if not 1 <= args.planted <= args.lessons:
        parser.error("--planted must be between 1 and --lessons")
    out = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    repo = out / "memory.git"
    commits = build_memory(repo, args.lessons, args.planted)
    print(f"stand-in model (scripted); {args.lessons} lessons on the memory branch of {repo}")
    print(f"the bad lesson is commit {commits[args.planted - 1][:10]} (lesson {args.planted})\n")
    good = f"memory~{args.lessons}"  # the seed commit, before any lesson
    run = f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).resolve()))} check"
    first = _got("bisect", "-r", str(repo), "--good", good, "--run", run)
    if first.returncode != 0 or commits[args.planted - 1] not in first.stdout:
        print("bisect did not find the planted lesson", file=sys.stderr)
        return 1
    print()
    second = _got(
        "bisect", "-r", str(repo), "--good", good, "--run", run, "--metric", r"accuracy: ([0-9.]+)", "--threshold", "1"
    )
    if second.returncode != 0 or commits[args.planted - 1] not in second.stdout:
        print("bisect by metric did not find the planted lesson", file=sys.stderr)
        return 1
    print(f"\ndone: {out} (git --git-dir={repo} notes --ref=got-bisect list)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
