"""Run machinery for the benchmark experiments: tasks, run directories, workers, resumption.

§4–§6 of arXiv 2606.14470 run every (arm, problem) pair through the same solver.
Here one pair is a :class:`Task`; :func:`execute_task` solves it in its own
repository and :func:`run_tasks` runs many of them — inline, in a local process
pool bounded by ``workers`` (what the model server takes), on a Ray cluster, or
durably on DBOS, each node a recorded step (:mod:`got_core.bench.executors`).

The repositories are the log. A run directory holds::

    RUN_DIR/config.json                  what was asked (problems, split, arms, seeds, model)
    RUN_DIR/repos/<arm>/<problem>.git    one repository per (arm, problem), written by a worker:
                                         master = the winning path, explore/... = every other node,
                                         success_/failed_ tags, refs/got/results/<arm>/<problem> =
                                         the finished result
    RUN_DIR/central.git                  every worker pushes its result ref (which reaches every
                                         node), its lesson ref and its notes ref here; the driver
                                         reads every result back from it (outcome tags stay in the
                                         per-problem repositories: their names are per problem).
                                         With ``--central URL`` (a repository on a git server) the
                                         tasks push there instead, knowing only the URL, and this is
                                         the driver's copy of its results, lessons and notes; the
                                         driver's records (ingest, online logs, paraphrases,
                                         pre-registration) are pushed there too
    RUN_DIR/memory/<backend>/...         the memory substrates (five-substrate protocol)
    RUN_DIR/results.jsonl, results.csv, arms.csv, table.md, *.png   (see :mod:`got_core.bench.report`)

A result is one commit on ``refs/got/results/<arm>/<problem>`` holding
``result.json``; its parents are the session tip and every exploration tip, so
pushing that one ref carries every node of the tree. A problem whose result ref
exists in ``central.git`` is never solved again: a killed run continues where it
stopped. A repository left half-written by a killed worker is deleted and the
problem solved from scratch, with the same seed and a :class:`DeterministicClock`,
so the results file of a resumed run equals an uninterrupted run's.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from got_core.bench.tasks import (
    CLOCK_START,
    INGEST_PREFIX,
    LESSON_PREFIX,
    RESULT_PREFIX,
    VOLATILE_KEYS,
    BenchRunError,
    ModelSpec,
    Task,
    load_config,
    model_endpoint,
    stable_record,
    task_seed,
)
from got_core.errors import (
    ConfigError,
    CorruptRepositoryError,
    RepositoryNotFoundError,
)
from got_core.names import encode_component
from got_core.repo import ReasoningRepo
from got_core.repo.sharing import is_url, mirror
from got_core.types import DeterministicClock, canonical_json

__all__ = [
    "CENTRAL_REFS",
    "CLOCK_START",
    "INGEST_PREFIX",
    "LESSON_PREFIX",
    "RESULT_PREFIX",
    "VOLATILE_KEYS",
    "BenchRunError",
    "ModelSpec",
    "Task",
    "execute_task",
    "follow_central",
    "load_config",
    "memory_fingerprint",
    "model_endpoint",
    "open_central",
    "open_memory",
    "prepare_run_dir",
    "read_result",
    "run_tasks",
    "stable_record",
    "task_seed",
]

# ----------------------------------------------------------------------------- memory


def open_memory(spec: dict[str, Any] | None, run_dir: Path, out_dir: Path, repo: ReasoningRepo, task: Task) -> Any:
    """Open the memory a task's solve sees (``None`` for no memory).

    Modes: ``study`` — a fresh, writable git memory on the task's lesson ref;
    ``shared`` — the post-ingest backend under ``run_dir`` opened read-only;
    ``online`` — the same, at the state the stream reached before this question; with
    ``spec["capture"]`` the solver's lesson writes are held back for the driver
    (:class:`~got_core.bench.memories.DeferredWrites`), which appends them once verified;
    ``static`` — exactly ``spec["lessons"]``, in order, for every question (fixed few-shot);
    ``injected`` — a fresh backend holding only ``spec["lessons"]``, then read-only.
    """
    from got_core.memory import Lesson, get_backend
    from got_core.memory.git import GitMemory

    if not spec:
        return None
    mode, backend = spec.get("mode"), spec.get("backend", "git")
    if mode == "study":
        return GitMemory(repo=repo, branch=task.lesson_ref)
    if mode == "static":
        from got_core.bench.memories import StaticMemory

        return StaticMemory([Lesson.from_dict(d) for d in spec.get("lessons", [])])
    if mode in ("shared", "online"):
        path = Path(run_dir) / spec["path"]
        mem: Any
        if backend == "git":  # an online question reads the branch holding the stream's state before it
            branch = spec.get("branch") or "memory"
            mem = GitMemory(repo=ReasoningRepo.open(path, create=False), read_only=True, branch=branch)
        else:
            mem = get_backend(backend, path=path, read_only=True)
        if mode == "online" and spec.get("capture"):
            from got_core.bench.memories import DeferredWrites

            return DeferredWrites(mem)
        return mem
    if mode == "injected":
        lessons = [Lesson.from_dict(d) for d in spec.get("lessons", [])]
        if backend == "git":
            GitMemory(repo=repo, branch=task.lesson_ref).add_lessons(lessons)
            return GitMemory(repo=repo, branch=task.lesson_ref, read_only=True)
        path = Path(out_dir) / "memory" / "injected" / encode_component(backend, "backend") / task.ref_key
        shutil.rmtree(path, ignore_errors=True)  # fresh per question, also after a killed attempt
        with get_backend(backend, path=path) as writer:
            writer.add_lessons(lessons)
        return get_backend(backend, path=path, read_only=True)
    raise ConfigError(f"unknown memory mode {mode!r}; expected study, shared, online, static or injected")


def memory_fingerprint(memory: Any) -> dict[str, Any] | None:
    """What a memory holds, comparable across processes: lesson count, content hash, git tip.

    Creation times are left out (they are wall-clock); the git backend adds its branch tip.
    """
    if memory is None:
        return None
    lessons = sorted((l.outcome, l.topic_key, l.text) for l in memory.all_lessons())
    out: dict[str, Any] = {
        "n": len(lessons),
        "sha": hashlib.sha256(canonical_json(lessons).encode("utf-8")).hexdigest(),
    }
    ref = getattr(memory, "ref", None)
    repo = getattr(memory, "repo", None)
    if ref is not None and repo is not None:
        out["tip"] = repo.tip(ref)
    return out


# ----------------------------------------------------------------------------- the worker

_MODELS: dict[str, Any] = {}


def _model(spec: ModelSpec) -> Any:
    from got_core.solver.openai_compat import OpenAICompatibleModel

    key = json.dumps(asdict(spec), sort_keys=True)
    if key not in _MODELS:
        _MODELS[key] = OpenAICompatibleModel(
            spec.base_url,
            spec.model,
            api_key=spec.api_key,
            max_tokens=spec.max_tokens,
            timeout=spec.timeout,
            max_retries=3,
        )
    return _MODELS[key]


def _server_answers(spec: ModelSpec) -> bool:
    from got_core.errors import ModelError
    from got_core.solver.openai_compat import check_endpoint

    try:
        check_endpoint(spec.base_url, api_key=spec.api_key)
    except ModelError:
        return False
    return True


def _push(repo: ReasoningRepo, task: Task, central: str) -> None:
    """Publish the task's result ref (which reaches every node), lesson ref and notes to central
    (a local path, created if missing, or a URL of a repository a git server holds).

    Outcome tags stay in the task's own repository: their names (``success_<node id>``)
    are unique per problem, not per run, and two arms that reach the same node id with
    different measured latencies would collide in one repository.
    """
    if not is_url(central) and not Path(central).exists():
        ReasoningRepo.init(central).close()
    branches = [task.result_ref] + ([task.lesson_ref] if repo.tip(task.lesson_ref) else [])
    # push() retries a lost race on the peer within the repository's RetryPolicy; every ref here
    # is this task's own, so a refusal is not a race and is reported as it is.
    repo.push(central, branches=branches, tag_prefixes=(), notes=(task.notes_ref,))


def read_result(repo: ReasoningRepo, task: Task) -> dict[str, Any] | None:
    """The result record of ``task`` in ``repo`` (central or the task's own), or ``None``."""
    sha = repo.tip(task.result_ref)
    if sha is None:
        return None
    record = json.loads(repo.read_file(sha, "result.json"))
    record["result_sha"] = sha
    return record


def execute_task(
    task: Task,
    spec: ModelSpec,
    run_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    steps: Any = None,
    central: str | None = None,
) -> dict[str, Any]:
    """Solve one task in its own repository, record the result as a commit, push to central.

    Safe to call again after a crash: a repository that already holds the result is only
    pushed again; a half-written one is deleted and the problem solved from scratch.

    Args:
        task: what to solve.
        spec: the model endpoint.
        run_dir: the run directory (shared read-only memories live here).
        out_dir: where repositories, fresh memories and ``central.git`` go (default ``run_dir``;
            the audit's re-run passes a scratch directory).
        steps: a durable engine's step runner (:mod:`got_core.solver.steps`; the ``dbos``
            executor passes one): each node becomes a recorded step.
        central: a URL of the central repository (``git://``, ``http(s)://``, ``ssh://``):
            the result is pushed there, and the task needs no path of it (default
            ``<out_dir>/central.git``).

    Returns:
        The result record (also committed as ``result.json`` on :attr:`Task.result_ref`).
    """
    from got_core.bench.checking import check_answer
    from got_core.bench.datasets import Problem
    from got_core.solver.budget import Budget
    from got_core.solver.run import solve

    # math-verify logs a warning per check when its own (signal) timeouts are off, as checking does.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    run_dir = Path(run_dir)
    out = Path(out_dir) if out_dir is not None else run_dir
    central = central or str(out / "central.git")
    path = task.repo_path(out)
    if path.exists():
        try:
            with ReasoningRepo(path, create=False) as old:
                done = read_result(old, task)
                if done is not None:
                    _push(old, task, central)
                    return done
        except (RepositoryNotFoundError, CorruptRepositoryError):
            pass  # killed while the repository was being created: nothing in it to keep
        shutil.rmtree(path)  # a killed attempt: start over, so the result equals an uninterrupted run's
    path.parent.mkdir(parents=True, exist_ok=True)
    repo = ReasoningRepo.open(path, clock=DeterministicClock(CLOCK_START), notes_ref=task.notes_ref)
    try:
        if task.options.get("prereg"):
            from got_core.bench.prereg import plant_prereg

            plant_prereg(path, task.options["prereg"])  # every node of this task descends from it
        memory = open_memory(task.memory, run_dir, out, repo, task)
        before = memory_fingerprint(memory)
        expected = None
        if task.memory and task.memory.get("mode") == "injected":
            # What the fresh memory must hold: exactly the injected lessons (the audit compares).
            held = sorted(
                (d.get("outcome", "insight"), d.get("topic_key", ""), d["text"].strip())
                for d in task.memory.get("lessons", [])
            )
            expected = {"n": len(held), "sha": hashlib.sha256(canonical_json(held).encode("utf-8")).hexdigest()}
        problem = Problem(**task.problem)
        opts = dict(task.options)
        t0 = time.perf_counter()
        res = solve(
            problem.question,
            problem.choices or None,
            model=_model(spec),
            memory=memory,
            repo=repo,
            session_ref="master",
            problem_id=problem.id,
            tools=tuple(opts.get("tools", ("calculator", "sympy", "lp"))),
            budget=Budget(wall_clock_s=float(opts.get("budget_s", 600.0)), max_tokens=None),
            arm=task.method,
            seed=task.seed,
            max_tokens=spec.max_tokens,
            k_lessons=int(opts.get("k_lessons", 3)),
            max_steps=int(opts.get("max_steps", 3)),
            parallel=spec.parallel_nodes,
            steps=steps,
            arm_options=opts.get("arm_options") or None,
            record_timings=False,
            lesson_chars=opts.get("lesson_chars", 500),
        )
        elapsed = time.perf_counter() - t0
        if res.outcome == "error" and not _server_answers(spec):
            # No node finished because the server went away: not a result of the problem. Leave
            # no result, so --resume solves it again once the server is back.
            raise BenchRunError(
                f"the model server at {spec.base_url} stopped answering during {task.key}; "
                "restart it and run again with --resume"
            )
        after = memory_fingerprint(memory)
        # Git tips hash the lessons' wall-clock creation times: kept apart (volatile, see VOLATILE_KEYS).
        tips = {"before": (before or {}).pop("tip", None), "after": (after or {}).pop("tip", None)}
        correct = bool(res.final_text) and check_answer(problem, res.final_text)
        winner = res.winner
        record = {
            "experiment": task.experiment,
            "phase": task.phase,
            "arm": task.arm,
            "problem_id": problem.id,
            "order": task.order,
            "method": task.method,
            "seed": task.seed,
            "kind": problem.kind,
            "domain": problem.domain,
            "subject": problem.subject,
            "gold_letter": problem.gold_letter,
            "choices_sha": hashlib.sha256(canonical_json(problem.choices).encode()).hexdigest()[:16],
            "answer": res.answer,
            "letter": res.letter,
            "correct": bool(correct),
            "outcome": res.outcome,
            "rounds": res.rounds,
            "n_calls": res.n_calls,
            "tokens": {"prompt": res.usage.prompt_tokens, "completion": res.usage.completion_tokens},
            "n_nodes": len(res.nodes),
            "node_labels": [str(n.metadata.get("label", "")) for n in res.nodes],
            "winner_label": str(winner.metadata.get("label", "")) if winner else None,
            "lessons_used": [hashlib.sha256(l.text.encode()).hexdigest()[:12] for l in res.lessons_used],
            "lesson": res.lesson,
            "lesson_source": res.lesson_source,
            "memory": None
            if task.memory is None
            else {
                "mode": task.memory.get("mode"),
                # the memory's name: its ingest record's (the backend's own unless the task names a store)
                "backend": task.memory.get("store") or task.memory.get("backend"),
                **({"store_backend": task.memory["backend"]} if task.memory.get("store") else {}),
                "before": before,
                "after": after,
                "tips": tips,
                "expected": expected,
                **_online_fields(task.memory, memory, res.final_text),
            },
            "budget_s": float(opts.get("budget_s", 600.0)),
            "extra": dict(task.extra),
            "elapsed_s": round(elapsed, 3),
            "winner_sha": winner.oid if winner else None,
        }
        if memory is not None and task.memory is not None and task.memory.get("mode") != "study":
            memory.close()
        parents = [t for t in [repo.tip("master")] if t]
        parents += [sha for ref, sha in sorted(repo.refs("refs/heads/explore/").items()) if sha not in parents]
        sha = repo.commit_files(
            task.result_ref,
            {"result.json": canonical_json(record) + "\n"},
            f"result {task.key}: {'correct' if correct else 'wrong'} ({res.outcome})\n",
            parents=parents,
        )
        _push(repo, task, central)
        record["result_sha"] = sha
        return record
    finally:
        repo.close()


def _online_fields(spec: dict[str, Any], memory: Any, final_text: str) -> dict[str, Any]:
    """What an online-memory question adds to its record: its place in the stream, and what it
    offers the memory (the lessons the solver wanted to write, or its solution text)."""
    if spec.get("mode") != "online":
        return {}
    return {
        "stream": spec.get("stream"),
        "position": spec.get("position"),
        "path": spec.get("path"),
        "branch": spec.get("branch"),
        "proposed": list(getattr(memory, "captured", [])),
        "solution": final_text if spec.get("offer") == "solution" else None,
    }


def _execute_entry(
    task_dict: dict[str, Any], spec_dict: dict[str, Any], run_dir: str, steps: Any = None, central: str | None = None
) -> dict[str, Any]:
    # Plain dicts cross the process (and Ray) boundary; the dataclasses are rebuilt here.
    return execute_task(Task.from_dict(task_dict), ModelSpec(**spec_dict), run_dir, steps=steps, central=central)


#: What a run keeps in central: the tasks' results, lessons and notes, and the driver's records
#: (ingest records, online logs, the paraphrases, the pre-registration; ARCHITECTURE §4).
#: With a central URL, ``RUN_DIR/central.git`` and the URL exchange all of these.
CENTRAL_REFS = (
    RESULT_PREFIX,
    LESSON_PREFIX,
    "refs/notes/",
    INGEST_PREFIX,
    "refs/got/online/",
    "refs/got/paraphrases",
    "refs/got/prereg",
)


def follow_central(run_dir: str | Path, central: str | None) -> None:
    """With a central URL, exchange the run's refs between it and ``RUN_DIR/central.git``.

    First what the driver wrote here (an ingest record, an online log...) is pushed, with
    git's compare-and-swap: only fast-forwards, a push refused while the server moved is
    tried again, nothing is ever forced. Then what the URL holds (the tasks' results) comes
    in, checked (:func:`got_core.repo.sharing.mirror`). Without a URL it does nothing.

    Raises:
        ConfigError: ``central`` is not a URL.
        PushRejectedError: the URL holds another value of one of these refs that ours does
            not descend from (another run's record under the same name); nothing was forced.
        RemoteError: the server cannot be reached or asked for credentials.
    """
    if central is None:
        return
    if not is_url(central):
        raise ConfigError(f"central must be a URL of a git server's repository, not {central!r}")
    with open_central(run_dir) as local:
        ours = sorted(ref for ref in local.refs("refs/") if ref.startswith(CENTRAL_REFS))
        if ours:
            local.push(central, branches=ours, tag_prefixes=(), merge=None)
        mirror(local, central, CENTRAL_REFS)


# ----------------------------------------------------------------------------- the driver


def open_central(run_dir: str | Path) -> ReasoningRepo:
    """Open (creating) ``RUN_DIR/central.git``."""
    return ReasoningRepo.open(Path(run_dir) / "central.git")


@contextlib.contextmanager
def _progress(total: int, done: int, label: str, enabled: bool) -> Iterator[Callable[[], None]]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    from got_core.bench.progress import LogProgress

    with LogProgress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not enabled,
        transient=False,
    ) as bar:
        handle = bar.add_task(label, total=total, completed=done)
        yield lambda: bar.advance(handle)


def run_tasks(
    tasks: Sequence[Task],
    run_dir: str | Path,
    spec: ModelSpec,
    *,
    workers: int = 1,
    ray_address: str | None = None,
    progress: bool = True,
    label: str = "solving",
    executor: str | Any | None = None,
    central: str | None = None,
) -> list[dict[str, Any]]:
    """Run every task not already finished; return all results, read back from ``central.git``.

    Args:
        tasks: in output order.
        run_dir: the run directory.
        spec: the model endpoint.
        workers: most tasks in flight (1: inline in this process; more: a process pool or Ray).
        ray_address: a Ray cluster address, or ``"local"`` to start a local instance.
        progress: show a progress bar on stderr.
        label: the progress bar's title.
        executor: where tasks run: ``local``, ``ray`` or ``dbos`` (durable: each node a
            recorded step, see :mod:`got_core.bench.executors`), or an executor object;
            default ``ray`` when ``ray_address`` is given, else ``local``.
        central: a URL of the central repository, served by a git server (``git://``,
            ``http(s)://``, ``ssh://``; it must exist there): tasks push their results to
            it and get no filesystem path of it; ``RUN_DIR/central.git`` is then the
            driver's copy, brought up to date from the URL before and after the tasks.

    Returns:
        Result records in the order of ``tasks``.

    Raises:
        BenchRunError: a task raised (model errors are outcomes, not exceptions).
        MissingExtraError: ``ray_address`` given without the ``ray`` extra.
    """
    run_dir = Path(run_dir).resolve()
    keys = [t.key for t in tasks]
    if len(set(keys)) != len(keys):
        raise ConfigError("two tasks share an (arm, problem) key; arm names must be unique in a run")
    if central is not None and not is_url(central):
        raise ConfigError(f"central must be a URL of a git server's repository, not {central!r}")
    follow_central(run_dir, central)
    with open_central(run_dir) as local:
        todo = [t for t in tasks if local.tip(t.result_ref) is None]
    with _progress(len(tasks), len(tasks) - len(todo), label, progress) as tick:
        if todo:
            from got_core.bench.executors import ExecutorError, Job, get_executor

            runner = (
                executor
                if executor is not None and not isinstance(executor, str)
                else get_executor(executor, workers=workers, ray_address=ray_address)
            )
            jobs = [Job(t.key, t.to_dict(), asdict(spec), str(run_dir)) for t in todo]
            try:
                entry = _execute_entry if central is None else functools.partial(_execute_entry, central=central)
                runner.run(jobs, entry, tick)
            except ExecutorError as exc:
                raise BenchRunError(str(exc)) from exc
    follow_central(run_dir, central)
    with open_central(run_dir) as local:
        found = [read_result(local, t) for t in tasks]
    records = [r for r in found if r is not None]
    missing = [t.key for t, r in zip(tasks, found) if r is None]
    if missing:
        raise BenchRunError(f"no result in central.git for {', '.join(missing[:5])}; run again with --resume")
    return records


# ----------------------------------------------------------------------------- run directory


def prepare_run_dir(run_dir: str | Path, config: dict[str, Any], *, resume: bool) -> dict[str, Any]:
    """Create the run directory and write ``config.json``; check a resumed run asks the same.

    ``config["identity"]`` must equal the stored one on resume (problems, split, arms,
    seeds, model name, max tokens); ``config["runtime"]`` (endpoint, workers) may change.

    Raises:
        ConfigError: the directory holds a run and ``resume`` is false, or the identity differs.
    """
    run_dir = Path(run_dir)
    path = run_dir / "config.json"
    if path.exists():
        if not resume:
            raise ConfigError(f"{run_dir} already holds a run; pass --resume to continue it, or choose another --out")
        old = load_config(run_dir)
        if old.get("identity") != config.get("identity"):
            diff = sorted(
                k
                for k in set(old.get("identity", {})) | set(config.get("identity", {}))
                if old.get("identity", {}).get(k) != config.get("identity", {}).get(k)
            )
            raise ConfigError(
                f"{run_dir} holds a run with different settings ({', '.join(diff)}); "
                "resume it with the same options, or choose another --out"
            )
        config = {**config, "resumed": int(old.get("resumed", 0)) + 1}
    run_dir.mkdir(parents=True, exist_ok=True)
    open_central(run_dir).close()
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return config
