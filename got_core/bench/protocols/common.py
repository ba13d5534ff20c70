"""What every experiment shares: options, the problem pool, the config record, the finish.

:func:`begin_run` checks the run directory and commits the pre-registration (before any
model call); :func:`build_config` writes what the audit must check; :func:`finish` writes
the results, one table per benchmark (labelled "stand-in model" for stand-in runs), the
plots and the pre-registered verdict.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from got_core.bench.datasets import Problem, load_gpqa, load_math500, normalize_question
from got_core.bench.report import (
    ArmSummary,
    Column,
    benchmark_of,
    benchmarks_in,
    summarize,
    table_markdown,
    write_arms,
    write_results,
)
from got_core.bench.runner import ModelSpec, Task, follow_central, load_config, run_tasks
from got_core.errors import ConfigError, InvalidInputError, UnknownBackendError
from got_core.types import canonical_json

__all__ = [
    "METHODS",
    "ExperimentOptions",
    "ExperimentResult",
    "begin_run",
    "build_config",
    "check_backends",
    "finish",
    "load_pool",
    "model_label",
    "resolve_method",
    "solver_options",
]

#: Solver methods besides the test-time arms: name -> (arm, solve options). The paper's
#: primary agent is single-shot retrieval-augmented: one call, lessons in the prompt, no tools.
METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "single_shot": ("greedy", {"tools": [], "max_steps": 0}),
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
        arms: the arms to compare (test-time arms, system comparison, ablations); ``None``: all.
        method: the solver of the memory experiments: ``single_shot`` (the paper's) or an arm.
        workers: tasks in flight (1 runs inline).
        ray: a Ray address, or ``"local"``.
        central: a URL of the central repository on a git server (tasks push there; see
            :func:`got_core.bench.runner.run_tasks`), or None for ``RUN_DIR/central.git``.
        resume: continue a run in ``out``.
        budget_s: wall-clock budget per question (every arm, unless ``budgets`` names it).
        budgets: per-arm budgets, ``{arm: seconds}`` (Table 8 as published).
        compute_matched: also run every system arm at this one budget (Table 8's control).
        arm_options: ``{arm: {option: [values]}}``; several values sweep (``--arm-option``).
        progress: show progress bars.
        bootstrap: bootstrap resamples.
        prereg: a pre-registration file (YAML/JSON), committed before the first model call.
        memory_mode: ``shared`` (read-only post-ingest memory) or ``online`` (accumulating).
        online_start: ``empty``, ``study`` (five substrates) or ``corpus`` (ablations).
        online_verify: what makes an answer worth remembering online: ``gold`` or ``self``.
        levels: keep only MATH problems of these levels (``None``: all).
        memory_corpus: a MATH-train-format file the ablations retrieve from.
        tier_corpus: the sweep's source of method-band / same-subject / unrelated examples.
        paraphrase: ``model``, ``file`` or ``template``; paraphrase_file: JSONL ``{id, paraphrase}``.
        example_chars: cap on an injected example's characters (0: none, the full example).
        bin_edges: inner cosine bin edges of the sweep (the paper's: 0.60, 0.85).
        tau: the copyability threshold drawn in the sweep's plot.
        overlay: other sweep run directories to draw in the same Fig. 3 plot.
        leakage_cosine: corpus items at least this similar to a test problem are removed.
        k_retrieve: lessons retrieved per question (top-3 in the paper).
        fewshot_ids: the static few-shot exemplars (default: three picked by the seed).
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
    method: str = "single_shot"
    workers: int = 2
    ray: str | None = None
    central: str | None = None
    resume: bool = False
    budget_s: float = 600.0
    budgets: dict[str, float] = field(default_factory=dict)
    compute_matched: float | None = None
    arm_options: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    progress: bool = True
    bootstrap: int = 10_000
    prereg: Path | None = None
    memory_mode: str = "shared"
    online_start: str = "empty"
    online_verify: str = "gold"
    levels: tuple[int, ...] | None = None
    memory_corpus: Path | None = None
    tier_corpus: Path | None = None
    paraphrase: str = "template"
    paraphrase_file: Path | None = None
    example_chars: int = 0
    bin_edges: tuple[float, ...] = (0.60, 0.85)
    tau: float = 0.8
    overlay: tuple[Path, ...] = ()
    leakage_cosine: float = 0.95
    k_retrieve: int = 3
    fewshot_ids: tuple[str, ...] = ()


@dataclass
class ExperimentResult:
    """What an experiment returns: where it wrote, every record, the table(s).

    ``rows`` holds every benchmark's rows in order; ``tables`` maps a benchmark's name to its
    rows; ``verdicts`` holds the pre-registered verdicts (empty without ``--prereg``).
    """

    run_dir: Path
    records: list[dict[str, Any]]
    rows: list[ArmSummary]
    table_md: str
    files: dict[str, Path] = field(default_factory=dict)
    tables: dict[str, list[ArmSummary]] = field(default_factory=dict)
    verdicts: list[Any] = field(default_factory=list)


def model_label(opts: ExperimentOptions) -> str:
    """``stand-in model`` for stand-in runs (every table and plot says so), else the model name."""
    return "stand-in model" if opts.spec.standin else opts.spec.model


def resolve_method(name: str) -> tuple[str, dict[str, Any]]:
    """A solver method's ``(arm, solve options)``: :data:`METHODS` or a test-time arm by name.

    Raises:
        ConfigError: an unknown method.
    """
    from got_core.solver.arms import ARMS

    if name in METHODS:
        arm, more = METHODS[name]
        return arm, dict(more)
    if name in ARMS:
        return name, {}
    raise ConfigError(f"unknown method {name!r}; choose from {', '.join([*METHODS, *ARMS])}")


def load_pool(opts: ExperimentOptions) -> list[Problem]:
    """MATH problems then GPQA problems (options shuffled by ``opts.seed``), in file order.

    ``opts.levels`` keeps only MATH problems of those levels (GPQA has none: dropped then).

    Raises:
        InvalidInputError: no problems at all, or a data file problem.
    """
    pool: list[Problem] = []
    if opts.math_path is not None and opts.n_math != 0:
        pool += load_math500(opts.math_path, limit=opts.n_math)
    if opts.gpqa_path is not None and opts.n_gpqa != 0:
        pool += load_gpqa(opts.gpqa_path, seed=opts.seed, limit=opts.n_gpqa)
    if opts.levels:
        pool = [p for p in pool if p.level in opts.levels]
    if not pool:
        what = f" of level {', '.join(map(str, opts.levels))}" if opts.levels else ""
        raise InvalidInputError(f"no problems{what}: pass --math and/or --gpqa files")
    return pool


def sha256(text: str) -> str:
    """Hex SHA-256 of UTF-8 text."""
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
        "choices_sha": sha256(canonical_json(p.choices))[:16],
        "question_sha": sha256(normalize_question(p.question))[:16],
        "shuffle_seed": p.meta.get("shuffle_seed"),
        "permutation": p.meta.get("permutation"),
    }


def data_entry(path: Path | None, limit: int | None) -> dict[str, Any] | None:
    """Where a data file is and its SHA-256 (``None`` when not used)."""
    if path is None:
        return None
    return {
        "path": str(Path(path).resolve()),
        "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest(),
        "limit": limit,
    }


def begin_run(opts: ExperimentOptions, identity: dict[str, Any]) -> dict[str, Any] | None:
    """Check ``opts.out`` can take this run, then commit the pre-registration, if any.

    Call it before any model call. ``identity`` gains ``prereg`` (the rule's hash).

    Returns:
        ``{"spec": ..., "prereg": Prereg}`` or ``None`` without ``opts.prereg``.

    Raises:
        ConfigError: the directory holds a run and ``resume`` is false, a resumed run asked
            something else, or it was pre-registered with another rule.
        InvalidInputError: a malformed pre-registration file.
    """
    from got_core.bench.prereg import commit_prereg, load_prereg

    pre = load_prereg(opts.prereg) if opts.prereg is not None else None
    identity["prereg"] = sha256(canonical_json(pre[0].to_dict())) if pre else None
    out = Path(opts.out)
    if (out / "config.json").exists():
        if not opts.resume:
            raise ConfigError(f"{out} already holds a run; pass --resume to continue it, or choose another --out")
        old = load_config(out).get("identity") or {}
        # the rest of the identity (problems, tasks, model) is compared when the config is written
        diff = sorted(k for k in identity if old.get(k) != identity[k])
        if diff:
            raise ConfigError(
                f"{out} holds a run with different settings ({', '.join(diff)}); "
                "resume it with the same options, or choose another --out"
            )
    if opts.central is not None:
        # what a central URL already holds (a resumed run's records) comes in before anything is written
        out.mkdir(parents=True, exist_ok=True)
        follow_central(out, opts.central)
    if pre is None:
        return None
    out.mkdir(parents=True, exist_ok=True)
    return {"spec": commit_prereg(out, *pre), "prereg": pre[0]}


def solver_options(opts: ExperimentOptions, pre: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    """Solve options of a task: budget, lessons retrieved, ReAct steps, the pre-registration."""
    out = {"budget_s": opts.budget_s, "k_lessons": opts.k_retrieve, "max_steps": 3, **more}
    if pre is not None:
        out["prereg"] = pre["spec"]
    return out


def build_config(
    opts: ExperimentOptions,
    experiment: str,
    problems: Sequence[Problem],
    tasks: Sequence[Task],
    *,
    baseline: str,
    protocol: dict[str, Any],
    rerun: Task,
    identity: dict[str, Any],
    split: dict[str, Any] | None = None,
    pre: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``config.json``: what was asked (identity), how it ran, the problems, tasks, protocol."""
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
            **identity,
        },
        "runtime": {
            "model": opts.spec.public(),
            "workers": opts.workers,
            "ray": opts.ray,
            **({"central": opts.central} if opts.central else {}),
        },
        "data": {
            "math": data_entry(opts.math_path, opts.n_math) if opts.n_math != 0 else None,
            "gpqa": data_entry(opts.gpqa_path, opts.n_gpqa) if opts.n_gpqa != 0 else None,
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
        "prereg": None
        if pre is None
        else {"sha": pre["spec"]["sha"], "ref": pre["spec"]["ref"], "rule": pre["prereg"].to_dict()},
        "audit": {"rerun_task": rerun.to_dict()},
        **(extra or {}),
    }


def check_backends(names: Sequence[str]) -> None:
    """Raise :class:`UnknownBackendError` for a backend name that is not registered."""
    from got_core.memory import BACKENDS

    for name in names:
        if name not in BACKENDS:
            raise UnknownBackendError(f"unknown memory backend {name!r}; choose from {', '.join(BACKENDS)}")


def finish(
    opts: ExperimentOptions,
    records: list[dict[str, Any]],
    baseline: str,
    title: str,
    *,
    arms: Sequence[str] | None = None,
    columns: Sequence[Column] | Callable[[list[ArmSummary]], Sequence[Column]] = (),
    notes: Sequence[str] = (),
    plot: bool = True,
    pre: dict[str, Any] | None = None,
) -> ExperimentResult:
    """Write results, one table per benchmark, the Δ plot and the verdict; return the result.

    ``columns`` may be a function of a benchmark's rows (for ratios to the baseline row).
    """
    from got_core.bench.plots import plot_deltas

    run_dir = Path(opts.out)
    follow_central(run_dir, opts.central)  # records the driver wrote after the last tasks reach a central URL
    files = write_results(run_dir, records)
    label = model_label(opts)
    tables: dict[str, list[ArmSummary]] = {}
    sections: list[str] = []
    benches = benchmarks_in(records)
    for bench in benches:
        mine = [r for r in records if benchmark_of(r) == bench]
        rows = summarize(mine, baseline, arms=arms, seed=opts.seed, n_resamples=opts.bootstrap)
        for r in rows:
            r.extra["benchmark"] = bench
        tables[bench] = rows
        cols = columns(rows) if callable(columns) else columns
        heading = f"{title} — {bench} ({label})"
        md = table_markdown(rows, heading, columns=cols, n_resamples=opts.bootstrap)
        if len(benches) > 1:
            (run_dir / f"table_{bench.lower()}.md").write_text(md, encoding="utf-8")
            files[f"table_{bench.lower()}"] = run_dir / f"table_{bench.lower()}.md"
        sections.append(md)
    verdicts = []
    if pre is not None:
        from got_core.bench.prereg import evaluate

        verdicts = evaluate(pre["prereg"], records, baseline, seed=opts.seed, n_resamples=opts.bootstrap)
        (run_dir / "verdict.json").write_text(
            json.dumps([v.to_dict() for v in verdicts], indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        files["verdict"] = run_dir / "verdict.json"
        sections.append(
            "\n".join(
                [f"Pre-registered ({pre['spec']['ref']} {pre['spec']['sha'][:10]}): {pre['prereg'].title}", ""]
                + [f"- {v.line()}" for v in verdicts]
            )
            + "\n"
        )
    md = "\n".join(sections) + "\n".join(notes) + ("\n" if notes else "")
    (run_dir / "table.md").write_text(md, encoding="utf-8")
    files["table"] = run_dir / "table.md"
    all_rows = [r for rows in tables.values() for r in rows]
    files.update({f"arms_{k}": v for k, v in write_arms(run_dir, all_rows).items()})
    if plot and any(r.delta is not None for r in all_rows):
        files["deltas_png"] = plot_deltas(tables, run_dir / "deltas.png", f"{title} ({label})")
    return ExperimentResult(run_dir, records, all_rows, md, files, tables, verdicts)


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """One JSON object a line."""
    path.write_text("".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def run_experiment_tasks(
    opts: ExperimentOptions, spec: ModelSpec, tasks: Sequence[Task], label: str
) -> list[dict[str, Any]]:
    """:func:`~got_core.bench.runner.run_tasks` with the experiment's execution options.

    Workers, the Ray address, the central repository's URL and progress come from ``opts``,
    so every protocol runs its tasks the same way.
    """
    return run_tasks(
        tasks,
        opts.out,
        spec,
        workers=opts.workers,
        ray_address=opts.ray,
        central=opts.central,
        progress=opts.progress,
        label=label,
    )
