"""Online memory: a memory that accumulates over the test stream (Table 6's online arm; ``--memory-mode online``).

A *stream* is one arm's test questions in a fixed order and one memory (any backend) under
``RUN_DIR/memory/online/<arm>``. Question ``i`` runs against the memory exactly as question
``i - 1`` left it, opened read-only; what the agent offers the memory (the answer-free
lessons the solver wanted to write, or its own worked solution) comes back in the result
record, and the driver appends it when the answer is verified (by the gold answer, or by
the solver's own gold-free validation), then records the new state.

The record of every step is a commit on ``refs/got/online/<arm>`` in ``central.git``
(``steps.jsonl``: position, problem, verified, lessons appended, the memory's fingerprint
and git tip after the step; position ``-1`` is the starting memory). Each question's result
records the state it saw (``memory.before`` = ``{n, sha}``, ``memory.tips.before``,
``memory.position``, ``memory.stream``), so :func:`check_online_stream` can prove from git
alone that the memory at question ``i`` is exactly the memory after question ``i - 1``.

Streams of different arms run side by side (one question of each at a time); a killed run
resumes where it stopped, and a lesson appended just before a kill is not appended twice.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from got_core.bench.protocols.common import ExperimentOptions, ExperimentResult, model_label, write_jsonl
from got_core.bench.report import quartile_summary
from got_core.bench.runner import (
    CLOCK_START,
    ModelSpec,
    Task,
    execute_task,
    memory_fingerprint,
    open_central,
    read_result,
)
from got_core.names import encode_component

__all__ = [
    "ONLINE_PREFIX",
    "Stream",
    "check_online_stream",
    "online_files",
    "online_memory",
    "online_notes",
    "online_path",
    "position_branch",
    "run_streams",
    "writable_backend",
]

#: One ref per stream in ``central.git``: the log of what the memory held after each question.
ONLINE_PREFIX = "refs/got/online/"


def online_path(stream: str) -> str:
    """The memory folder of a stream, relative to the run directory."""
    return f"memory/online/{encode_component(stream, 'arm')}"


def position_branch(position: int) -> str:
    """The branch of a git stream's memory that holds the state question ``position`` reads."""
    return f"at/{position}"


def online_memory(stream: str, backend: str, position: int, *, offer: str = "lessons") -> dict[str, Any]:
    """The ``memory`` spec of the question at ``position`` of ``stream`` (a task's field).

    ``offer="lessons"`` holds the solver's lesson writes back for the driver; ``"solution"``
    hands the driver the agent's final text instead (and the solver writes no lesson). A git
    stream's question reads the branch :func:`position_branch` (the state before it, kept
    for ever, so a seeded re-run of any question sees what it saw).
    """
    spec: dict[str, Any] = {
        "mode": "online",
        "backend": backend,
        "path": online_path(stream),
        "stream": stream,
        "position": position,
        "offer": offer,
        "capture": offer == "lessons",
    }
    if backend == "git":
        spec["branch"] = position_branch(position)
    return spec


def writable_backend(name: str, path: Path) -> Any:
    """A writable memory of backend ``name`` at ``path`` (git: on the runs' deterministic clock)."""
    from got_core.memory import get_backend
    from got_core.memory.git import GitMemory
    from got_core.repo import ReasoningRepo
    from got_core.types import DeterministicClock

    if name == "git":
        return GitMemory(repo=ReasoningRepo.open(path, clock=DeterministicClock(CLOCK_START)))
    return get_backend(name, path=path)


@dataclass
class Stream:
    """One arm's online stream.

    Attributes:
        arm: the arm (and the stream's name).
        backend: the memory backend.
        tasks: the questions, in stream order (their ``memory`` specs say ``mode: online``).
        verify: ``gold`` (the checker says correct) or ``self`` (the solver's validation passed).
        offer: ``lessons`` (the solver's answer-free lessons) or ``solution`` (its worked solution).
        start: lessons the memory holds before the first question.
    """

    arm: str
    backend: str
    tasks: list[Task]
    verify: str = "gold"
    offer: str = "lessons"
    start: list[Any] = field(default_factory=list)

    @property
    def ref(self) -> str:
        """The stream's log ref in ``central.git``."""
        return ONLINE_PREFIX + encode_component(self.arm, "arm")

    @property
    def path(self) -> str:
        """The stream's memory, relative to the run directory."""
        return online_path(self.arm)

    def describe(self) -> dict[str, Any]:
        """What ``config.json`` records about the stream (the audit reads it)."""
        return {
            "arm": self.arm,
            "backend": self.backend,
            "ref": self.ref,
            "path": self.path,
            "verify": self.verify,
            "offer": self.offer,
            "n_start": len(self.start),
            "tasks": [t.key for t in self.tasks],
        }


def _steps(central: Any, ref: str) -> list[dict[str, Any]]:
    tip = central.tip(ref)
    if tip is None:
        return []
    return [json.loads(line) for line in central.read_file(tip, "steps.jsonl").decode().splitlines() if line]


def _log(central: Any, stream: Stream, steps: list[dict[str, Any]], step: dict[str, Any]) -> None:
    body = "".join(json.dumps(s, sort_keys=True, ensure_ascii=False) + "\n" for s in [*steps, step])
    central.commit_files(
        stream.ref,
        {"steps.jsonl": body},
        f"online {stream.arm}: after position {step['position']} ({step['problem_id'] or 'start'}), "
        f"{step['after']['n']} lessons\n",
    )
    steps.append(step)


def _state(mem: Any, position: int | None = None) -> tuple[dict[str, Any], str | None]:
    """The memory's fingerprint and git tip; with ``position``, pin the tip on its branch first."""
    fp = memory_fingerprint(mem) or {"n": 0, "sha": ""}
    tip = fp.pop("tip", None)
    if position is not None and tip is not None and getattr(mem, "repo", None) is not None:
        mem.repo.set_ref("refs/heads/" + position_branch(position), tip)
    return fp, tip


def _start(run_dir: Path, central: Any, stream: Stream, steps: list[dict[str, Any]]) -> None:
    import shutil

    path = run_dir / stream.path
    shutil.rmtree(path, ignore_errors=True)  # no log yet: nothing in it counts
    path.parent.mkdir(parents=True, exist_ok=True)
    with writable_backend(stream.backend, path) as mem:
        if stream.start:
            mem.add_lessons(stream.start)
            if stream.backend == "git":
                mem.repo.reindex()
        fp, tip = _state(mem, 0)
    _log(
        central,
        stream,
        steps,
        {"position": -1, "problem_id": None, "verified": None, "appended": 0, "after": fp, "tip": tip},
    )


def _offered(stream: Stream, task: Task, record: dict[str, Any], position: int) -> list[Any]:
    from got_core.memory import Lesson

    mem = record.get("memory") or {}
    if stream.offer == "solution":
        from got_core.bench.protocols.copyability import worked_example

        text = (mem.get("solution") or "").strip()
        if not text or not record.get("answer"):
            return []
        example = worked_example(task.problem["question"], str(record["answer"]), text)
        return [
            Lesson(
                example,
                topic_key=f"online-{encode_component(task.problem_id, 'problem id')}",
                source_problem=task.problem_id,
                outcome="success",
                score=1.0,
                meta={"online_position": position, "stream": stream.arm},
            )
        ]
    return [
        Lesson.from_dict({**d, "meta": {**(d.get("meta") or {}), "online_position": position, "stream": stream.arm}})
        for d in mem.get("proposed") or []
    ]


def _append(
    run_dir: Path, central: Any, stream: Stream, steps: list[dict[str, Any]], position: int, record: dict[str, Any]
) -> None:
    task = stream.tasks[position]
    verified = bool(record.get("correct")) if stream.verify == "gold" else record.get("outcome") == "success"
    lessons = _offered(stream, task, record, position) if verified else []
    with writable_backend(stream.backend, run_dir / stream.path) as mem:
        # A kill after the write and before the log commit left them in: do not add them twice.
        done = any((l.meta or {}).get("online_position") == position for l in mem.all_lessons())
        if lessons and not done:
            mem.add_lessons(lessons)
        if stream.backend == "git":
            mem.repo.reindex()
        fp, tip = _state(mem, position + 1)
    step = {
        "position": position,
        "problem_id": task.problem_id,
        "verified": verified,
        "appended": len(lessons),
        "after": fp,
        "tip": tip,
    }
    _log(central, stream, steps, step)


def _solve_all(todo: Sequence[Task], spec: ModelSpec, run_dir: Path, pool: Any) -> list[dict[str, Any]]:
    if pool is None:
        return [execute_task(t, spec, run_dir) for t in todo]
    futures = [pool.submit(execute_task, t, spec, str(run_dir)) for t in todo]
    return [f.result() for f in futures]


def run_streams(
    streams: Sequence[Stream],
    run_dir: str | Path,
    spec: ModelSpec,
    *,
    workers: int = 1,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Run every stream to its end (one question of each stream at a time); return all records.

    Records come back in stream order, stream after stream. A resumed run skips finished
    questions and appends what a finished question offered if the kill came before its log.

    Raises:
        BenchRunError: a task failed (see :func:`~got_core.bench.runner.execute_task`).
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from got_core.bench.progress import LogProgress

    run_dir = Path(run_dir).resolve()
    total = sum(len(s.tasks) for s in streams)
    longest = max((len(s.tasks) for s in streams), default=0)
    records: dict[str, dict[str, Any]] = {}
    pool = None
    # chromadb does not follow a store another process wrote after it opened it: a pool worker
    # would read a vector stream's memory as it was. Vector streams run in the driver, which writes them.
    if workers > 1 and len(streams) > 1 and not any(s.backend == "vector" for s in streams):
        pool = ProcessPoolExecutor(max_workers=min(workers, len(streams)), mp_context=get_context("spawn"))
    bar = LogProgress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not progress,
    )
    try:
        with bar, open_central(run_dir) as central:
            handle = bar.add_task("online", total=total)
            logs = {s.arm: _steps(central, s.ref) for s in streams}
            for s in streams:
                if not logs[s.arm]:
                    _start(run_dir, central, s, logs[s.arm])
            for i in range(longest):
                active = [s for s in streams if i < len(s.tasks)]
                todo = []
                for s in active:
                    done = read_result(central, s.tasks[i])
                    if done is not None:
                        records[s.tasks[i].key] = done
                    else:
                        todo.append(s.tasks[i])
                for rec in _solve_all(todo, spec, run_dir, pool):
                    records[f"{rec['arm']}/{rec['problem_id']}"] = rec
                for s in active:
                    if len(logs[s.arm]) <= i + 1:  # position i not logged yet (steps[0] is the start)
                        _append(run_dir, central, s, logs[s.arm], i, records[s.tasks[i].key])
                bar.advance(handle, len(active))
            # Read every record back from central (what the audit sees), in stream order.
            out: list[dict[str, Any]] = []
            for s in streams:
                for t in s.tasks:
                    found = read_result(central, t)
                    if found is not None:
                        out.append(found)
    finally:
        if pool is not None:
            pool.shutdown()
    return out


def check_online_stream(run_dir: str | Path, config: dict[str, Any] | None = None) -> tuple[str, str]:
    """The audit check "memory at question i is exactly memory after question i − 1".

    For every online stream in ``config["online"]``: the log on ``refs/got/online/<arm>``
    has one step per question after the start; every question's recorded memory state
    (``memory.before`` lesson count and content hash, and for git the branch tip) equals the
    state logged after the question before it; each step grew the memory by what it says
    it appended (never more, never shrinking); and the memory on disk, re-read from its
    files now, equals the last logged state.

    Returns:
        ``(status, detail)`` with status ``PASS``, ``FAIL`` or ``SKIP`` (no online stream).
    """
    run_dir = Path(run_dir)
    if config is None:
        config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    streams = (config.get("online") or {}).get("streams") or []
    if not streams:
        return "SKIP", "no online memory in this run"
    bad: list[str] = []
    n_questions = 0
    from got_core.repo import ReasoningRepo

    with ReasoningRepo(run_dir / "central.git", create=False) as central:
        refs = {t["key"]: t["ref"] for t in config.get("tasks", [])}
        for s in streams:
            steps = _steps(central, s["ref"])
            if not steps or steps[0].get("position") != -1:
                bad.append(f"{s['arm']}: no start state on {s['ref']}")
                continue
            for i, key in enumerate(s["tasks"]):
                sha = central.tip(refs.get(key, ""))
                if sha is None:
                    bad.append(f"{key}: no result")
                    continue
                mem = json.loads(central.read_file(sha, "result.json")).get("memory") or {}
                n_questions += 1
                prev = steps[i] if i < len(steps) else None
                if prev is None:
                    bad.append(f"{key}: the log stops before position {i}")
                    continue
                saw = (mem.get("before") or {}, (mem.get("tips") or {}).get("before"))
                if mem.get("mode") != "online" or mem.get("position") != i or mem.get("stream") != s["arm"]:
                    bad.append(
                        f"{key}: recorded as {mem.get('mode')} position {mem.get('position')}, expected online {i}"
                    )
                elif saw != (prev["after"], prev["tip"]):
                    bad.append(
                        f"{key}: saw {saw[0].get('n')} lessons ({str(saw[0].get('sha'))[:10]}), but after position {i - 1} the memory held {prev['after']['n']} ({prev['after']['sha'][:10]})"
                    )
            for a, b in itertools.pairwise(steps):
                grew = b["after"]["n"] - a["after"]["n"]
                if grew < 0 or grew > b["appended"] or (b["appended"] == 0 and b["after"] != a["after"]):
                    bad.append(
                        f"{s['arm']} position {b['position']}: {a['after']['n']} -> {b['after']['n']} lessons with {b['appended']} appended"
                    )
            from got_core.memory import get_backend

            if s["backend"] == "git":  # every question's state is pinned on its branch: still there?
                with ReasoningRepo(run_dir / s["path"], create=False) as mem_repo:
                    pinned = mem_repo.refs("refs/heads/at/")
                for i, step in enumerate(steps):
                    if step["tip"] and pinned.get("refs/heads/" + position_branch(i)) != step["tip"]:
                        bad.append(
                            f"{s['arm']}: branch {position_branch(i)} is not the state logged before position {i}"
                        )
            opened = {"create": False} if s["backend"] == "git" else {}
            with get_backend(s["backend"], path=run_dir / s["path"], read_only=True, **opened) as now_mem:
                now = _state(now_mem)
            if steps and now != (steps[-1]["after"], steps[-1]["tip"]):
                bad.append(
                    f"{s['arm']}: the memory on disk ({now[0]['n']} lessons) is not the last logged state ({steps[-1]['after']['n']})"
                )
    if bad:
        return "FAIL", f"{len(bad)} problems: {'; '.join(bad[:3])}"
    return "PASS", (
        f"{len(streams)} online stream(s), {n_questions} questions: each saw exactly the memory "
        "left by the question before it (lesson count, content hash, git tip), and the memory on disk is the last state"
    )


def online_notes(
    records: Sequence[dict[str, Any]], arms: Sequence[str], baseline: str, opts: ExperimentOptions
) -> tuple[list[str], list[dict[str, Any]]]:
    """The accuracy-by-quartile table of online arms (markdown lines) and its rows."""
    lines = [
        "",
        f"Online memory, accuracy by quartile of the test stream ({model_label(opts)}; "
        f"memory accumulates answers verified by {opts.online_verify}):",
        "",
        "| arm | quartile | positions | n | accuracy | baseline | Δ pp vs baseline [95% CI] | lessons held (mean) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    for arm in arms:
        for q in quartile_summary(records, arm, baseline, seed=opts.seed, n_resamples=opts.bootstrap):
            d = q.delta
            cell = f"{100 * d.delta:+.1f} [{100 * d.low:+.1f}, {100 * d.high:+.1f}]" if d else "—"
            base = f"{100 * q.baseline_accuracy:.1f}%" if q.baseline_accuracy is not None else "—"
            lines.append(
                f"| {arm} | Q{q.quartile} | {q.positions[0]}–{q.positions[1]} | {q.n} | "
                f"{100 * q.accuracy:.1f}% | {base} | {cell} | {q.memory_size:g} |"
            )
            rows.append({"arm": arm, **q.to_dict()})
    return lines, rows


def online_files(
    result: ExperimentResult,
    records: Sequence[dict[str, Any]],
    arms: Sequence[str],
    baseline: str,
    quartile_rows: list[dict[str, Any]],
    opts: ExperimentOptions,
) -> None:
    """Write ``quartiles.jsonl`` and ``online.png`` (running accuracy of the online arms and the baseline)."""
    from got_core.bench.plots import plot_online

    result.files["quartiles"] = write_jsonl(result.run_dir / "quartiles.jsonl", quartile_rows)
    curves = {}
    for a in [baseline, *arms]:
        mine = sorted(
            (r for r in records if r["arm"] == a and r.get("phase") == "test"),
            key=lambda r: (r.get("memory") or {}).get("position") or r.get("order", 0),
        )
        curves[a] = [bool(r["correct"]) for r in mine]
    result.files["online_png"] = plot_online(
        curves, result.run_dir / "online.png", f"Online memory: running accuracy ({model_label(opts)})"
    )
