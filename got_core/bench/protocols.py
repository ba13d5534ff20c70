"""The paper's four experiments as library functions (§4–§6 of arXiv 2606.14470).

1. :func:`five_substrates` — controlled transfer (§4): study K problems with memory
   writes on, distil one answer-free lesson each, make *every* backend ingest the
   *same* lessons, then test M held-out problems per backend with the memory
   read-only (each test question sees exactly the post-ingest memory). Study and test
   come from a deterministic, domain-stratified split audited for zero overlap.
2. :func:`copyability_sweep` — §5: inject one worked example per question, fresh per
   question, at five similarity tiers (identical, paraphrase, method band, same
   subject, unrelated); MiniLM cosine to the test problem; Δ vs no memory per tier
   and pooled by cosine bin.
3. :func:`test_time_arms` — §6.2: every test-time arm vs greedy.
4. :func:`system_comparison` — §6: a vanilla single call vs self-consistency vs the
   full tree-of-thoughts solver, with each arm's wall-clock budget and use reported.

Each writes a run directory (:mod:`got_core.bench.runner`), the results and table
(:mod:`got_core.bench.report`), and records in ``config.json`` what the audit
(:mod:`got_core.bench.audit`) must check.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from got_core.bench.datasets import (
    Problem,
    audit_overlap,
    load_gpqa,
    load_math500,
    normalize_question,
    stratified_split,
)
from got_core.bench.report import (
    ArmSummary,
    Column,
    cosine_bins,
    plot_deltas,
    plot_sweep,
    summarize,
    table_markdown,
    write_arms,
    write_results,
)
from got_core.bench.runner import (
    CLOCK_START,
    INGEST_PREFIX,
    ModelSpec,
    Task,
    memory_fingerprint,
    model_endpoint,
    open_central,
    prepare_run_dir,
    run_tasks,
    task_seed,
)
from got_core.errors import ConfigError, InvalidInputError, UnknownBackendError
from got_core.names import encode_component
from got_core.types import canonical_json

__all__ = [
    "COOKBOOK_DEFAULTS",
    "EXPERIMENTS",
    "SYSTEM_ARMS",
    "TIERS",
    "ExperimentOptions",
    "ExperimentResult",
    "build_tiers",
    "cookbook_main",
    "cookbook_parser",
    "copyability_sweep",
    "distill_lessons",
    "five_substrates",
    "ingest",
    "load_pool",
    "options_from_args",
    "paraphrase",
    "run_experiment",
    "system_comparison",
    "test_time_arms",
    "worked_example",
]

EXPERIMENTS = ("five_substrates", "copyability_sweep", "test_time_arms", "system_comparison")
#: §5's similarity tiers, from "the same problem" to "nothing in common".
TIERS = ("identical", "paraphrase", "method_band", "same_subject", "unrelated")
#: §6 system comparison: name -> (solver arm, solve options).
SYSTEM_ARMS: dict[str, tuple[str, dict[str, Any]]] = {
    "vanilla": ("greedy", {"tools": [], "max_steps": 0}),
    "self_consistency": ("self_consistency", {"arm_options": {"n": 5}}),
    "tot": ("tot", {}),
}


@dataclass
class ExperimentOptions:
    """What every experiment takes (the cookbooks' command-line options).

    Attributes:
        out: the run directory.
        spec: the model endpoint (``spec.standin`` starts the stand-in server).
        math_path, gpqa_path: data files (``None`` skips that set).
        n_math, n_gpqa: keep the first N problems of each file (``None``: all).
        seed: split, option-shuffle and solver seeds derive from it.
        k_study, m_test: study and test problems.
        backends: memory backends (five substrates: all compared, ``none`` is the baseline;
            sweep: the first one holds the injected example).
        arms: the arms to compare (test-time arms, system comparison); ``None``: all.
        method: the solver arm of the five-substrate and sweep experiments.
        workers: tasks in flight (1 runs inline).
        ray: a Ray address, or ``"local"``.
        central: a URL of the central repository on a git server (tasks push there; see
            :func:`got_core.bench.runner.run_tasks`), or None for ``RUN_DIR/central.git``.
        resume: continue a run in ``out``.
        budget_s: wall-clock budget per question.
        progress: show progress bars.
        bootstrap: bootstrap resamples.
    """

    out: Path
    spec: ModelSpec
    math_path: Path | None = None
    gpqa_path: Path | None = None
    n_math: int | None = None
    n_gpqa: int | None = None
    seed: int = 0
    k_study: int = 4
    m_test: int = 6
    backends: tuple[str, ...] = ("none", "markdown", "vector", "graph", "git")
    arms: tuple[str, ...] | None = None
    method: str = "tot"
    workers: int = 2
    ray: str | None = None
    central: str | None = None
    resume: bool = False
    budget_s: float = 600.0
    progress: bool = True
    bootstrap: int = 10_000


@dataclass
class ExperimentResult:
    """What an experiment returns: where it wrote, every record, the table."""

    run_dir: Path
    records: list[dict[str, Any]]
    rows: list[ArmSummary]
    table_md: str
    files: dict[str, Path] = field(default_factory=dict)


# ----------------------------------------------------------------------------- shared pieces


def load_pool(opts: ExperimentOptions) -> list[Problem]:
    """MATH problems then GPQA problems (options shuffled by ``opts.seed``), in file order.

    Raises:
        InvalidInputError: no problems at all, or a data file problem.
    """
    pool: list[Problem] = []
    if opts.math_path is not None and opts.n_math != 0:
        pool += load_math500(opts.math_path, limit=opts.n_math)
    if opts.gpqa_path is not None and opts.n_gpqa != 0:
        pool += load_gpqa(opts.gpqa_path, seed=opts.seed, limit=opts.n_gpqa)
    if not pool:
        raise InvalidInputError("no problems: pass --math and/or --gpqa files")
    return pool


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _problem_entry(p: Problem) -> dict[str, Any]:
    return {
        "id": p.id,
        "kind": p.kind,
        "domain": p.domain,
        "subject": p.subject,
        "level": p.level,
        "answer": p.answer,
        "gold_letter": p.gold_letter,
        "choices_sha": _sha(canonical_json(p.choices))[:16],
        "question_sha": _sha(normalize_question(p.question))[:16],
        "shuffle_seed": p.meta.get("shuffle_seed"),
        "permutation": p.meta.get("permutation"),
    }


def _data_entry(path: Path | None, limit: int | None) -> dict[str, Any] | None:
    if path is None:
        return None
    return {
        "path": str(Path(path).resolve()),
        "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest(),
        "limit": limit,
    }


def _config(
    opts: ExperimentOptions,
    experiment: str,
    problems: Sequence[Problem],
    tasks: Sequence[Task],
    *,
    baseline: str,
    protocol: dict[str, Any],
    rerun: Task,
    split: dict[str, Any] | None = None,
    identity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "experiment": experiment,
        "identity": {
            "experiment": experiment,
            "seed": opts.seed,
            "model": opts.spec.model,
            "max_tokens": opts.spec.max_tokens,
            "budget_s": opts.budget_s,
            "problems": [p.id for p in problems],
            "tasks": [t.key for t in tasks],
            **(identity or {}),
        },
        "runtime": {
            "model": opts.spec.public(),
            "workers": opts.workers,
            "ray": opts.ray,
            **({"central": opts.central} if opts.central else {}),
        },
        "data": {
            "math": _data_entry(opts.math_path, opts.n_math) if opts.n_math != 0 else None,
            "gpqa": _data_entry(opts.gpqa_path, opts.n_gpqa) if opts.n_gpqa != 0 else None,
            "shuffle_seed": opts.seed,
        },
        "problems": [_problem_entry(p) for p in problems],
        "split": split,
        "tasks": [
            {
                "key": t.key,
                "phase": t.phase,
                "arm": t.arm,
                "problem_id": t.problem_id,
                "ref": t.result_ref,
                "memory": (t.memory or {}).get("mode"),
            }
            for t in tasks
        ],
        "baseline": baseline,
        "protocol": protocol,
        "audit": {"rerun_task": rerun.to_dict()},
    }


def _options(opts: ExperimentOptions, **more: Any) -> dict[str, Any]:
    return {"budget_s": opts.budget_s, "k_lessons": 3, "max_steps": 3, **more}


def _finish(
    opts: ExperimentOptions,
    records: list[dict[str, Any]],
    baseline: str,
    title: str,
    *,
    arms: Sequence[str] | None = None,
    columns: Sequence[Column] = (),
    notes: Sequence[str] = (),
    plot: bool = True,
) -> ExperimentResult:
    run_dir = Path(opts.out)
    title = standin_title(title, opts.spec)
    files = write_results(run_dir, records)
    rows = summarize(records, baseline, arms=arms, seed=opts.seed, n_resamples=opts.bootstrap)
    files.update({f"arms_{k}": v for k, v in write_arms(run_dir, rows).items()})
    md = table_markdown(rows, title, columns=columns, notes=notes)
    (run_dir / "table.md").write_text(md, encoding="utf-8")
    files["table"] = run_dir / "table.md"
    if plot and any(r.delta is not None for r in rows):
        files["deltas_png"] = plot_deltas(rows, run_dir / "deltas.png", title)
    return ExperimentResult(run_dir, records, rows, md, files)


def _check_backends(names: Sequence[str]) -> None:
    from got_core.memory import BACKENDS

    for name in names:
        if name not in BACKENDS:
            raise UnknownBackendError(f"unknown memory backend {name!r}; choose from {', '.join(BACKENDS)}")


def standin_title(title: str, spec: ModelSpec) -> str:
    """``title``, saying so when the answers came from the stand-in server: its tables and plots show no model's accuracy."""
    return f"{title} — stand-in model (scripted answers, not a model's accuracy)" if spec.standin else title


# ----------------------------------------------------------------------------- 1. five substrates


def distill_lessons(
    study: Sequence[dict[str, Any]], problems: dict[str, Problem], min_chars: int = 4
) -> tuple[list[Any], list[dict[str, str]]]:
    """One answer-free lesson per study result (§4): the solver's lesson, refused if it names the gold answer.

    The solver already strips its *own* answer from a lesson; here the study problem's
    gold answer is checked too (the study phase may use gold), with the audit's rule
    (:func:`got_core.bench.audit.answer_needles`).

    Returns:
        ``(lessons, dropped)``: :class:`~got_core.memory.Lesson` objects in study order, and
        ``{"problem_id", "reason"}`` for study problems that gave none.
    """
    from got_core.bench.audit import answer_needles
    from got_core.memory import Lesson

    lessons, dropped = [], []
    for r in study:
        pid, text = r["problem_id"], (r.get("lesson") or "").strip()
        if not text:
            dropped.append({"problem_id": pid, "reason": f"no lesson ({r.get('lesson_source')})"})
            continue
        checked, _ = answer_needles(problems[pid].answer, min_chars)
        if any(n in text for n in checked):
            dropped.append({"problem_id": pid, "reason": "the lesson names the gold answer"})
            continue
        lessons.append(
            Lesson(
                text=text,
                source_problem=pid,
                outcome="success" if r.get("outcome") == "success" else "failure",
                score=0.5,
                meta={"study_problem": pid},
            )
        )
    return lessons, dropped


def _writable_backend(name: str, path: Path) -> Any:
    from got_core.memory import get_backend
    from got_core.memory.git import GitMemory
    from got_core.repo import ReasoningRepo
    from got_core.types import DeterministicClock

    if name == "git":
        return GitMemory(repo=ReasoningRepo.open(path, clock=DeterministicClock(CLOCK_START)))
    return get_backend(name, path=path)


def ingest(run_dir: Path, backend: str, lessons: Sequence[Any], dropped: Sequence[dict[str, str]]) -> dict[str, Any]:
    """Make ``backend`` ingest ``lessons`` under ``RUN_DIR/memory/<backend>``, once; record it in git.

    The record is a commit on ``refs/got/ingest/<backend>`` in ``central.git``: the lessons
    given, the lessons the backend then holds, and its fingerprint — what the audit compares
    every test question's memory with. A backend whose record exists is not touched again
    (a resumed run); one without is wiped and ingested from scratch.

    Returns:
        The ``state.json`` of the record.
    """
    import json

    with open_central(run_dir) as central:
        ref = INGEST_PREFIX + encode_component(backend, "backend")
        tip = central.tip(ref)
        if tip is not None:
            return json.loads(central.read_file(tip, "state.json"))
        path = Path(run_dir) / "memory" / backend
        shutil.rmtree(path, ignore_errors=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        with _writable_backend(backend, path) as mem:
            mem.add_lessons(lessons)
            if backend == "git":
                mem.repo.reindex()  # build the derived index once, before readers in many processes
            fp = memory_fingerprint(mem) or {}
            stored = sorted((l.outcome, l.topic_key, l.text) for l in mem.all_lessons())
        tip_sha = fp.pop("tip", None)
        state = {
            "backend": backend,
            "fingerprint": fp,
            "tip": tip_sha,
            "n_given": len(lessons),
            "n_stored": len(stored),
            "dropped": list(dropped),
            "path": f"memory/{backend}",
        }
        given = "".join(
            json.dumps(
                {"text": l.text, "outcome": l.outcome, "source_problem": l.source_problem},
                sort_keys=True,
                ensure_ascii=False,
            )
            + "\n"
            for l in lessons
        )
        held = "".join(json.dumps(list(s), ensure_ascii=False) + "\n" for s in stored)
        central.commit_files(
            ref,
            {"lessons.jsonl": given, "stored.jsonl": held, "state.json": canonical_json(state) + "\n"},
            f"ingest {backend}: {len(lessons)} lessons given, {len(stored)} held\n",
            parents=[],
        )
        return state


def five_substrates(opts: ExperimentOptions) -> ExperimentResult:
    """§4 controlled transfer across memory substrates (see the module docstring).

    Raises:
        InvalidInputError: too few problems for ``k_study + m_test``, or an overlapping split.
        UnknownBackendError: a backend name that is not registered.
    """
    pool = load_pool(opts)
    split = stratified_split(pool, opts.k_study, opts.m_test, opts.seed)
    overlap = audit_overlap(split)
    if overlap:
        raise InvalidInputError(f"study and test share {overlap} problem(s); the split must be disjoint")
    backends = tuple(dict.fromkeys(("none", *opts.backends)))
    _check_backends(backends)
    base: dict[str, Any] = {"experiment": "five_substrates", "method": opts.method, "options": _options(opts)}
    study = [
        Task(
            phase="study",
            arm="study",
            problem=asdict(p),
            seed=task_seed(opts.seed, p.id),
            order=i,
            memory={"mode": "study", "backend": "git"},
            **base,
        )
        for i, p in enumerate(split.study)
    ]
    test = [
        Task(
            phase="test",
            arm=b,
            problem=asdict(p),
            seed=task_seed(opts.seed, p.id),
            order=i,
            memory={"mode": "shared", "backend": b, "path": f"memory/{b}"},
            **base,
        )
        for b in backends
        for i, p in enumerate(split.test)
    ]
    memory_arms = [b for b in backends if b != "none"]
    rerun = next((t for t in test if t.arm in memory_arms), test[0])
    config = _config(
        opts,
        "five_substrates",
        split.study + split.test,
        study + test,
        baseline="none",
        rerun=rerun,
        identity={"backends": list(backends), "method": opts.method, "k_study": opts.k_study, "m_test": opts.m_test},
        split={
            "study": [p.id for p in split.study],
            "test": [p.id for p in split.test],
            "strata": {k: list(v) for k, v in split.strata.items()},
            "overlap": overlap,
            "key": split.key,
            "dropped": split.dropped,
        },
        protocol={
            "memory_arms": memory_arms,
            "answer_free_memory": True,
            "fresh_memory": "read-only: every test question sees the post-ingest memory",
            "study_arm": "study",
        },
    )
    with model_endpoint(opts.spec) as spec:
        prepare_run_dir(opts.out, config, resume=opts.resume)
        done = run_tasks(
            study,
            opts.out,
            spec,
            workers=opts.workers,
            ray_address=opts.ray,
            central=opts.central,
            progress=opts.progress,
            label="study",
        )
        lessons, dropped = distill_lessons(done, {p.id: p for p in split.study})
        for b in backends:
            ingest(Path(opts.out), b, lessons, dropped)
        results = run_tasks(
            test,
            opts.out,
            spec,
            workers=opts.workers,
            ray_address=opts.ray,
            central=opts.central,
            progress=opts.progress,
            label="test",
        )
    notes = [
        "",
        (
            f"Study K={len(split.study)}, test M={len(split.test)} per backend; {len(lessons)} lessons "
            f"ingested by every backend ({len(dropped)} study problems gave none). Memory read-only at test."
        ),
    ]
    return _finish(
        opts, done + results, "none", "Five-substrate controlled transfer (§4)", arms=list(backends), notes=notes
    )


# ----------------------------------------------------------------------------- 2. copyability sweep

_REWRITES = (
    (r"^What is\b", "Determine"),
    (r"^Find\b", "Determine"),
    (r"^How many\b", "Count how many"),
    (r"^Compute\b", "Evaluate"),
    (r"^Which\b", "Identify which"),
    (r"\bthe value of\b", "the value of"),
)


def paraphrase(question: str) -> str:
    """A deterministic template rewrite of ``question`` (the sweep's paraphrase tier).

    The opening verb is swapped ("What is" → "Determine", "How many" → "Count how many"…)
    and a framing sentence is prepended; the mathematics is untouched.
    """
    text = " ".join(question.split())
    for pattern, repl in _REWRITES:
        text = re.sub(pattern, repl, text, count=1)
    return "Consider the following problem. " + text


def worked_example(problem_text: str, answer: str, solution: str) -> str:
    """The injected memory of the sweep: a worked example, answer first (§5)."""
    sol = " ".join((solution or "").split())[:600] or "(no worked solution in the data)"
    return f"Worked example. Final answer: {answer.strip()}. Problem: {' '.join(problem_text.split())} Solution: {sol}"


def _solution(p: Problem) -> str:
    return str(p.meta.get("solution") or p.meta.get("explanation") or "")


def _extreme(candidates: list[int], cos: list[float], pool: Sequence[Problem], sign: int = 1) -> int:
    """The most (``sign=1``) or least (``-1``) similar candidate; ties go to the smaller id."""
    return min(candidates, key=lambda j: (-sign * cos[j], pool[j].id))


def _source(q: Problem, cosine: float, fallback: bool) -> dict[str, Any]:
    return {
        "source_id": q.id,
        "problem": q.question,
        "answer": q.answer,
        "solution": _solution(q),
        "cosine": cosine,
        "fallback": fallback,
    }


def build_tiers(
    test: Sequence[Problem], pool: Sequence[Problem], embedder: Any = None
) -> dict[str, dict[str, dict[str, Any]]]:
    """The worked example of every tier for every test problem, with its MiniLM cosine.

    Deterministic (ties go to the smaller problem id):

    * ``identical`` — the problem itself with its solution and answer;
    * ``paraphrase`` — :func:`paraphrase` of it, same solution and answer;
    * ``method_band`` — the most similar other problem of the same subject (fallback:
      same domain, then same kind);
    * ``same_subject`` — the least similar other problem of the same domain (fallback:
      the most similar problem of the same kind in another domain);
    * ``unrelated`` — the least similar problem of the other kind (MATH ↔ multiple choice).

    Returns:
        ``{problem id: {tier: {"source_id", "problem", "answer", "solution", "cosine", "fallback"}}}``.
    """
    from got_core.memory.embeddings import cosine_matrix

    stems = [p.question for p in pool]
    para = [paraphrase(p.question) for p in test]
    sims = cosine_matrix([p.question for p in test], stems + para, embedder)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for ti, p in enumerate(test):
        cos = [round(float(sims[ti, j]), 4) for j in range(len(stems))]
        others = [
            j
            for j, q in enumerate(pool)
            if q.id != p.id and normalize_question(q.question) != normalize_question(p.question)
        ]
        if not others:
            raise InvalidInputError("the sweep needs at least two distinct problems in the pool")
        subj = [j for j in others if pool[j].subject == p.subject]
        dom = [j for j in others if pool[j].domain == p.domain]
        kind = [j for j in others if pool[j].kind == p.kind]
        mb = _extreme(subj or dom or kind or others, cos, pool)
        ss_pool = [j for j in dom if j != mb]
        ss = (
            _extreme(ss_pool, cos, pool, -1) if ss_pool else _extreme([j for j in kind if j != mb] or others, cos, pool)
        )
        un = _extreme([j for j in others if pool[j].kind != p.kind] or others, cos, pool, -1)
        me = next((j for j, q in enumerate(pool) if q.id == p.id), None)
        out[p.id] = {
            "identical": {
                "source_id": p.id,
                "problem": p.question,
                "answer": p.answer,
                "solution": _solution(p),
                "cosine": cos[me] if me is not None else 1.0,
                "fallback": False,
            },
            "paraphrase": {
                "source_id": p.id,
                "problem": para[ti],
                "answer": p.answer,
                "solution": _solution(p),
                "cosine": round(float(sims[ti, len(stems) + ti]), 4),
                "fallback": False,
            },
            "method_band": _source(pool[mb], cos[mb], not subj),
            "same_subject": _source(pool[ss], cos[ss], not ss_pool),
            "unrelated": _source(pool[un], cos[un], all(pool[j].kind == p.kind for j in others)),
        }
    return out


def copyability_sweep(opts: ExperimentOptions) -> ExperimentResult:
    """§5 copyability sweep: one worked example per question at five similarity tiers."""
    pool = load_pool(opts)
    test = stratified_split(pool, 0, opts.m_test, opts.seed).test
    backend = (opts.backends or ("vector",))[0]
    _check_backends([backend])
    tiers = build_tiers(test, pool)
    base: dict[str, Any] = {"experiment": "copyability_sweep", "method": opts.method, "options": _options(opts)}
    tasks = [
        Task(
            phase="test",
            arm="none",
            problem=asdict(p),
            seed=task_seed(opts.seed, p.id),
            order=i,
            extra={"tier": "none"},
            **base,
        )
        for i, p in enumerate(test)
    ]
    for tier in TIERS:
        for i, p in enumerate(test):
            t = tiers[p.id][tier]
            lesson = {
                "text": worked_example(t["problem"], t["answer"], t["solution"]),
                "topic_key": "worked-example",
                "source_problem": t["source_id"],
                "outcome": "success",
                "score": 1.0,
            }
            tasks.append(
                Task(
                    phase="test",
                    arm=tier,
                    problem=asdict(p),
                    seed=task_seed(opts.seed, p.id),
                    order=i,
                    memory={"mode": "injected", "backend": backend, "lessons": [lesson]},
                    extra={"tier": tier, "source_id": t["source_id"], "cosine": t["cosine"], "fallback": t["fallback"]},
                    **base,
                )
            )
    rerun = next(t for t in tasks if t.arm == "identical")
    config = _config(
        opts,
        "copyability_sweep",
        test,
        tasks,
        baseline="none",
        rerun=rerun,
        identity={"backend": backend, "method": opts.method, "m_test": opts.m_test},
        protocol={
            "memory_arms": list(TIERS),
            "answer_free_memory": False,
            "answer_free_reason": "the sweep injects a worked example WITH its answer by design (§5)",
            "fresh_memory": "fresh per question: a new memory holding only the injected example",
        },
    )
    with model_endpoint(opts.spec) as spec:
        prepare_run_dir(opts.out, config, resume=opts.resume)
        records = run_tasks(
            tasks,
            opts.out,
            spec,
            workers=opts.workers,
            ray_address=opts.ray,
            central=opts.central,
            progress=opts.progress,
            label="sweep",
        )
    bins = cosine_bins(records, "none", seed=opts.seed, n_resamples=opts.bootstrap)
    notes = [
        "",
        "Pooled by cosine bin (MiniLM, test problem vs injected example):",
        "",
        "| cosine bin | pairs | mean cosine | Δ pp vs none [95% CI] |",
        "|---|---|---|---|",
    ]
    from got_core.bench.stats import format_delta_row

    notes += [
        f"| {b.label} | {b.n} | {b.mean_cosine:.3f} | {format_delta_row(b.delta) if b.delta else '—'} |" for b in bins
    ]
    result = _finish(
        opts,
        records,
        "none",
        "Copyability sweep (§5)",
        arms=["none", *TIERS],
        columns=[
            (
                "mean cosine",
                lambda r: f"{r.extra.get('cosine_mean', float('nan')):.3f}" if "cosine_mean" in r.extra else "—",
            )
        ],
        notes=notes,
    )
    import json

    (result.run_dir / "bins.jsonl").write_text("".join(json.dumps(b.to_dict()) + "\n" for b in bins), encoding="utf-8")
    result.files["bins"] = result.run_dir / "bins.jsonl"
    result.files["sweep_png"] = plot_sweep(
        records,
        "none",
        bins,
        result.run_dir / "sweep.png",
        standin_title("Copyability: Δ vs cosine similarity", opts.spec),
    )
    return result


# ----------------------------------------------------------------------------- 3 and 4


def _no_memory_experiment(
    opts: ExperimentOptions,
    experiment: str,
    arms: dict[str, tuple[str, dict[str, Any]]],
    baseline: str,
    title: str,
    columns: Sequence[Column] = (),
) -> ExperimentResult:
    pool = load_pool(opts)
    test = stratified_split(pool, 0, opts.m_test, opts.seed).test
    tasks = [
        Task(
            experiment=experiment,
            phase="test",
            arm=name,
            problem=asdict(p),
            method=method,
            seed=task_seed(opts.seed, p.id),
            order=i,
            options=_options(opts, **more),
        )
        for name, (method, more) in arms.items()
        for i, p in enumerate(test)
    ]
    # Re-run (audit) the richest arm: the full solver when it is compared.
    rerun = next((t for t in tasks if t.method == "tot"), tasks[0])
    config = _config(
        opts,
        experiment,
        test,
        tasks,
        baseline=baseline,
        rerun=rerun,
        identity={"arms": {k: [m, o] for k, (m, o) in arms.items()}, "m_test": opts.m_test},
        protocol={"memory_arms": [], "answer_free_memory": None, "fresh_memory": None},
    )
    with model_endpoint(opts.spec) as spec:
        prepare_run_dir(opts.out, config, resume=opts.resume)
        records = run_tasks(
            tasks,
            opts.out,
            spec,
            workers=opts.workers,
            ray_address=opts.ray,
            central=opts.central,
            progress=opts.progress,
            label=experiment.replace("_", " "),
        )
    return _finish(opts, records, baseline, title, arms=list(arms), columns=columns)


def test_time_arms(opts: ExperimentOptions) -> ExperimentResult:
    """§6.2: every test-time arm (default: all of :data:`got_core.solver.arms.ARMS`) vs greedy."""
    from got_core.solver.arms import ARMS

    names = tuple(dict.fromkeys(("greedy", *(opts.arms or tuple(ARMS)))))
    unknown = [a for a in names if a not in ARMS]
    if unknown:
        raise ConfigError(f"unknown arm(s) {', '.join(unknown)}; choose from {', '.join(ARMS)}")
    return _no_memory_experiment(
        opts,
        "test_time_arms",
        {a: (a, {}) for a in names},
        "greedy",
        "Test-time arms vs greedy (§6.2)",
        columns=[("calls/problem", lambda r: f"{r.extra['calls_mean']:.1f}")],
    )


def system_comparison(opts: ExperimentOptions) -> ExperimentResult:
    """§6: vanilla single call vs self-consistency vs the full ToT solver, with budgets and use."""
    names = tuple(dict.fromkeys(("vanilla", *(opts.arms or tuple(SYSTEM_ARMS)))))
    unknown = [a for a in names if a not in SYSTEM_ARMS]
    if unknown:
        raise ConfigError(f"unknown system arm(s) {', '.join(unknown)}; choose from {', '.join(SYSTEM_ARMS)}")
    columns: list[Column] = [
        ("budget s/problem", lambda r: f"{r.extra['budget_s']:g}"),
        ("wall s/problem mean (max)", lambda r: f"{r.extra['wall_s_mean']:.2f} ({r.extra['wall_s_max']:.2f})"),
        ("calls/problem", lambda r: f"{r.extra['calls_mean']:.1f}"),
        ("tokens/problem", lambda r: f"{r.extra['tokens_mean']:.0f}"),
    ]
    return _no_memory_experiment(
        opts,
        "system_comparison",
        {a: SYSTEM_ARMS[a] for a in names},
        "vanilla",
        "System comparison (§6)",
        columns=columns,
    )


#: experiment name -> function.
_RUNNERS: dict[str, Callable[[ExperimentOptions], ExperimentResult]] = {
    "five_substrates": five_substrates,
    "copyability_sweep": copyability_sweep,
    "test_time_arms": test_time_arms,
    "system_comparison": system_comparison,
}


def run_experiment(name: str, opts: ExperimentOptions) -> ExperimentResult:
    """Run the experiment called ``name`` (one of :data:`EXPERIMENTS`).

    Raises:
        ConfigError: an unknown experiment.
    """
    if name not in _RUNNERS:
        raise ConfigError(f"unknown experiment {name!r}; choose one of {', '.join(EXPERIMENTS)}")
    return _RUNNERS[name](opts)


# ----------------------------------------------------------------------------- cookbooks (one command each)

#: Per-experiment defaults of the cookbook options.
COOKBOOK_DEFAULTS: dict[str, dict[str, Any]] = {
    "five_substrates": {"k_study": 4, "m_test": 6, "backends": "none,markdown,vector,graph,git", "method": "tot"},
    "copyability_sweep": {"k_study": 0, "m_test": 6, "backends": "vector", "method": "greedy"},
    "test_time_arms": {"k_study": 0, "m_test": 6, "backends": "", "method": "tot"},
    "system_comparison": {"k_study": 0, "m_test": 6, "backends": "", "method": "tot"},
}


def cookbook_parser(experiment: str, description: str, default_data_dir: Path) -> Any:
    """The argparse parser every cookbook shares (``--help`` lists the options)."""
    import argparse

    d = COOKBOOK_DEFAULTS[experiment]
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    g = p.add_argument_group("data")
    g.add_argument("--data-dir", type=Path, default=default_data_dir, help="folder of the default data files")
    g.add_argument("--math", type=Path, default=None, help="MATH-500 JSONL [DATA_DIR/math500_sample.jsonl]")
    g.add_argument("--gpqa", type=Path, default=None, help="GPQA CSV [DATA_DIR/gpqa_sample.csv]")
    g.add_argument("--n-math", type=int, default=None, help="first N MATH problems (0: none)")
    g.add_argument("--n-gpqa", type=int, default=None, help="first N GPQA problems (0: none)")
    g = p.add_argument_group("model")
    g.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint [$GOT_BASE_URL]")
    g.add_argument("--model", default=None, help="served model name [$GOT_MODEL]")
    g.add_argument("--api-key", default=None, help="API key [$GOT_API_KEY]")
    g.add_argument(
        "--standin",
        action="store_true",
        help="start the stand-in server (no model) in-process: the whole path runs without weights",
    )
    g.add_argument("--standin-latency-ms", type=float, default=0.0, help="stand-in delay per answer")
    g.add_argument("--max-tokens", type=int, default=256, help="completion tokens per call")
    g.add_argument("--budget-s", type=float, default=600.0, help="wall-clock budget per question")
    g = p.add_argument_group("experiment")
    g.add_argument("--backends", default=d["backends"], help="comma-separated memory backends")
    g.add_argument("--arms", default=None, help="comma-separated arms to compare (default: all)")
    g.add_argument("--method", default=d["method"], help="solver arm for the memory experiments")
    g.add_argument("--k-study", type=int, default=d["k_study"], help="study problems")
    g.add_argument("--m-test", type=int, default=d["m_test"], help="test problems")
    g.add_argument("--seed", type=int, default=0, help="split, shuffle and solver seed")
    g.add_argument("--bootstrap", type=int, default=10_000, help="bootstrap resamples")
    g = p.add_argument_group("run")
    g.add_argument("--out", type=Path, default=Path("runs") / experiment, help="the run directory")
    g.add_argument("--resume", action="store_true", help="continue the run in --out where it stopped")
    g.add_argument(
        "--workers", type=int, default=2, help="tasks in flight (1: inline); bound it by what the server takes"
    )
    g.add_argument("--ray", default=None, metavar="ADDRESS", help="run tasks on Ray ('local' starts a local instance)")
    g.add_argument(
        "--central", default=None, metavar="URL", help="central repository on a git server (git://, https://, ssh://)"
    )
    g.add_argument("--no-progress", action="store_true", help="no progress bars")
    g.add_argument("--no-audit", action="store_true", help="skip the audit at the end")
    g.add_argument("--no-rerun", action="store_true", help="audit without the seeded re-run")
    return p


def options_from_args(experiment: str, args: Any) -> ExperimentOptions:
    """Turn parsed cookbook arguments into :class:`ExperimentOptions`.

    Raises:
        ConfigError: no endpoint and no ``--standin``, or both.
    """
    import os

    from got_core.solver.models import START_SERVER_HINT

    if args.standin and args.base_url:
        raise ConfigError("pass either --standin or --base-url, not both")
    base_url = args.base_url or os.environ.get("GOT_BASE_URL")
    model = args.model or os.environ.get("GOT_MODEL")
    if args.standin:
        spec = ModelSpec(
            "http://127.0.0.1:0/v1",
            args.model or "got-standin",
            max_tokens=args.max_tokens,
            standin={"responder": "bench", "latency_ms": args.standin_latency_ms},
        )
    elif base_url:
        if not model:
            raise ConfigError("pass --model (the served model name; GET <base-url>/models lists them)")
        spec = ModelSpec(
            base_url,
            model,
            api_key=args.api_key or os.environ.get("GOT_API_KEY") or "EMPTY",
            max_tokens=args.max_tokens,
        )
    else:
        raise ConfigError(f"no model endpoint: {START_SERVER_HINT}; or pass --standin to run without a model")

    def split(s: str | None) -> tuple[str, ...]:
        return tuple(x.strip() for x in (s or "").split(",") if x.strip())

    return ExperimentOptions(
        out=args.out,
        spec=spec,
        math_path=args.math or args.data_dir / "math500_sample.jsonl",
        gpqa_path=args.gpqa or args.data_dir / "gpqa_sample.csv",
        n_math=args.n_math,
        n_gpqa=args.n_gpqa,
        seed=args.seed,
        k_study=args.k_study,
        m_test=args.m_test,
        backends=split(args.backends),
        arms=split(args.arms) or None,
        method=args.method,
        workers=args.workers,
        ray=args.ray,
        central=args.central,
        resume=args.resume,
        budget_s=args.budget_s,
        progress=not args.no_progress,
        bootstrap=args.bootstrap,
    )


def cookbook_main(experiment: str, description: str, default_data_dir: Path, argv: list[str] | None = None) -> int:
    """Run one experiment from the command line: table, files, plots, then the audit.

    Returns:
        0 when the run and its audit pass, 1 on a failure or a FAILed audit check, 2 on bad input.
    """
    import os
    import time

    from rich.console import Console
    from rich.markdown import Markdown

    from got_core.bench.audit import audit_run, print_report
    from got_core.errors import GotError, GotUserError

    args = cookbook_parser(experiment, description, default_data_dir).parse_args(argv)
    # Weights load from local folders only; their per-load progress bars would drown the run's own.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    console = Console()
    t0 = time.perf_counter()
    try:
        result = run_experiment(experiment, options_from_args(experiment, args))
    except GotUserError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        return 2
    except GotError as exc:
        console.print(f"[bold red]failed:[/] {exc}")
        return 1
    console.print(Markdown(result.table_md))
    console.print(
        f"{len(result.records)} results in {time.perf_counter() - t0:.1f} s; files: "
        + ", ".join(str(p) for p in sorted(set(result.files.values())))
    )
    if args.no_audit:
        return 0
    report = audit_run(result.run_dir, rerun=not args.no_rerun, api_key=args.api_key)
    print_report(report, console)
    return 0 if report.ok else 1
