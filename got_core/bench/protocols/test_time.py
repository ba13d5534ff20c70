"""§6.2 test-time arms and §6 / Table 8 system comparison (arXiv 2606.14470): no memory, many arms.

* :func:`test_time_arms` — every test-time arm vs greedy, with its knobs swept
  (``arm_options={"self_consistency": {"n": [5], "temperature": [0.5, 0.7, 1.0]}}`` gives one
  arm per temperature) and tokens per problem with the ratio to greedy in the table.
* :func:`system_comparison` — a vanilla single call vs self-consistency (5 samples) vs the
  full tree-of-thoughts solver, each with its own wall-clock budget as published
  (``budgets={"vanilla": 60, "sc5": 180, "tot": 600}``), timeouts counted per arm; with
  ``compute_matched=S`` every arm runs again at one budget of S seconds, the paper's
  listed control, reported in a second table.
"""

from __future__ import annotations

import inspect
import itertools
import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from got_core.bench.datasets import stratified_split
from got_core.bench.protocols.common import (
    ExperimentOptions,
    ExperimentResult,
    begin_run,
    build_config,
    finish,
    load_pool,
    model_label,
    run_experiment_tasks,
    solver_options,
)
from got_core.bench.report import ArmSummary, Column, benchmark_of, benchmarks_in, summarize, table_markdown
from got_core.bench.runner import Task, model_endpoint, prepare_run_dir, task_seed
from got_core.errors import ConfigError

__all__ = [
    "PUBLISHED_BUDGETS",
    "SYSTEM_ARMS",
    "expand_arms",
    "parse_arm_options",
    "parse_budgets",
    "system_comparison",
    "test_time_arms",
]

#: §6 system comparison: name -> (solver arm, solve options).
SYSTEM_ARMS: dict[str, tuple[str, dict[str, Any]]] = {
    "vanilla": ("greedy", {"tools": [], "max_steps": 0}),
    "sc5": ("self_consistency", {"arm_options": {"n": 5}}),
    "tot": ("tot", {}),
}
#: Older names of the system arms.
_SYSTEM_ALIASES = {"self_consistency": "sc5"}
#: Table 8's budgets as published (seconds of wall clock per question).
PUBLISHED_BUDGETS = {"vanilla": 60.0, "sc5": 180.0, "tot": 600.0}


def _scalar(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (int, float, str, bool)) else text


def parse_arm_options(items: Sequence[str]) -> dict[str, dict[str, list[Any]]]:
    """``["self_consistency.temperature=0.5,0.7", "self_consistency.n=5"]`` -> ``{arm: {key: [values]}}``.

    Raises:
        ConfigError: an item not of the form ``ARM.KEY=V[,V...]``.
    """
    out: dict[str, dict[str, list[Any]]] = {}
    for item in items:
        head, sep, values = item.partition("=")
        arm, dot, key = head.strip().partition(".")
        vals = [_scalar(v.strip()) for v in values.split(",") if v.strip()]
        if not sep or not dot or not arm or not key or not vals:
            raise ConfigError(f"--arm-option {item!r}: expected ARM.KEY=VALUE[,VALUE...], e.g. self_consistency.n=5")
        out.setdefault(arm, {})[key.strip()] = vals
    return out


def parse_budgets(text: str | None) -> dict[str, float]:
    """``"vanilla=60,sc5=180,tot=600"`` -> ``{"vanilla": 60.0, ...}``.

    Raises:
        ConfigError: a malformed item or a budget that is not a positive number.
    """
    out: dict[str, float] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        arm, sep, value = item.partition("=")
        try:
            seconds = float(value)
        except ValueError:
            seconds = -1.0
        if not sep or not arm.strip() or not seconds > 0:
            raise ConfigError(f"--budgets item {item!r}: expected ARM=SECONDS with SECONDS > 0")
        out[_SYSTEM_ALIASES.get(arm.strip(), arm.strip())] = seconds
    return out


def expand_arms(
    names: Sequence[str], arm_options: dict[str, dict[str, list[Any]]]
) -> dict[str, tuple[str, dict[str, Any]]]:
    """One experiment arm per combination of an arm's swept option values.

    An arm with a single value per option keeps its name (the options apply); swept
    options name the arm, e.g. ``self_consistency[temperature=0.5]``.

    Raises:
        ConfigError: an option the arm does not take.
    """
    from got_core.solver.arms import ARMS

    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for arm in names:
        given = arm_options.get(arm) or {}
        keys = sorted(given)
        for combo in itertools.product(*(given[k] for k in keys)) if keys else [()]:
            chosen = dict(zip(keys, combo))
            try:
                inspect.signature(ARMS[arm]).bind(None, **chosen)
            except TypeError as exc:
                raise ConfigError(f"--arm-option: arm {arm!r} does not take {sorted(chosen)} ({exc})") from None
            swept = [k for k in keys if len(given[k]) > 1]
            label = arm + ("[" + ",".join(f"{k}={chosen[k]}" for k in swept) + "]" if swept else "")
            out[label] = (arm, {"arm_options": chosen} if chosen else {})
    unknown = sorted(set(arm_options) - set(names))
    if unknown:
        raise ConfigError(f"--arm-option names arm(s) not in the run: {', '.join(unknown)}")
    return out


def _token_columns(baseline: str) -> Any:
    def columns(rows: Sequence[ArmSummary]) -> list[Column]:
        base = next((r.extra["tokens_mean"] for r in rows if r.arm == baseline), 0.0)
        return [
            ("calls/problem", lambda r: f"{r.extra['calls_mean']:.1f}"),
            ("tokens/problem", lambda r: f"{r.extra['tokens_mean']:.0f}"),
            (f"× tokens vs {baseline}", lambda r: f"{r.extra['tokens_mean'] / base:.1f}×" if base else "—"),
        ]

    return columns


def _run(
    opts: ExperimentOptions,
    experiment: str,
    arms: dict[str, tuple[str, dict[str, Any], float]],
    baseline: str,
    identity: dict[str, Any],
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Run every (arm, problem) on the same test problems; returns the records and the pre-registration."""
    pool = load_pool(opts)
    test = stratified_split(pool, 0, opts.m_test, opts.seed).test
    identity = {
        "arms": {k: [m, o, b] for k, (m, o, b) in arms.items()},
        "m_test": opts.m_test,
        **identity,
    }
    pre = begin_run(opts, identity)
    tasks = [
        Task(
            experiment=experiment,
            phase="test",
            arm=name,
            problem=asdict(p),
            method=method,
            seed=task_seed(opts.seed, p.id),
            order=i,
            options={**solver_options(opts, pre, **more), "budget_s": budget},
        )
        for name, (method, more, budget) in arms.items()
        for i, p in enumerate(test)
    ]
    # Re-run (audit) the richest arm: the full solver when it is compared.
    rerun = next((t for t in tasks if t.method == "tot"), tasks[0])
    config = build_config(
        opts,
        experiment,
        test,
        tasks,
        baseline=baseline,
        rerun=rerun,
        identity=identity,
        pre=pre,
        protocol={"memory_arms": [], "answer_free_memory": None, "fresh_memory": None},
    )
    with model_endpoint(opts.spec) as spec:
        prepare_run_dir(opts.out, config, resume=opts.resume)
        records = run_experiment_tasks(opts, spec, tasks, experiment.replace("_", " "))
    return records, pre


def test_time_arms(opts: ExperimentOptions) -> ExperimentResult:
    """§6.2: every test-time arm (default: all of :data:`got_core.solver.arms.ARMS`) vs greedy.

    Raises:
        ConfigError: an unknown arm or arm option.
    """
    from got_core.solver.arms import ARMS

    names = tuple(dict.fromkeys(("greedy", *(opts.arms or tuple(ARMS)))))
    unknown = [a for a in names if a not in ARMS]
    if unknown:
        raise ConfigError(f"unknown arm(s) {', '.join(unknown)}; choose from {', '.join(ARMS)}")
    expanded = expand_arms(names, opts.arm_options)
    baseline = next(k for k, (a, _) in expanded.items() if a == "greedy")
    arms = {k: (a, o, opts.budgets.get(k, opts.budget_s)) for k, (a, o) in expanded.items()}
    records, pre = _run(opts, "test_time_arms", arms, baseline, {"arm_options": opts.arm_options})
    return finish(
        opts,
        records,
        baseline,
        "Test-time arms vs greedy (§6.2)",
        arms=list(arms),
        columns=_token_columns(baseline),
        pre=pre,
    )


def _system_columns(rows: Sequence[ArmSummary]) -> list[Column]:
    return [
        ("budget s/problem", lambda r: f"{r.extra['budget_s']:g}"),
        ("timeouts", lambda r: f"{r.extra['timeouts']}/{r.n}"),
        ("wall s/problem mean (max)", lambda r: f"{r.extra['wall_s_mean']:.2f} ({r.extra['wall_s_max']:.2f})"),
        ("calls/problem", lambda r: f"{r.extra['calls_mean']:.1f}"),
        *_token_columns(rows[0].baseline if rows else "vanilla")(rows)[1:],
    ]


def system_comparison(opts: ExperimentOptions) -> ExperimentResult:
    """§6 / Table 8: vanilla vs self-consistency vs the full ToT solver, per-arm budgets and use.

    Raises:
        ConfigError: an unknown system arm.
    """
    wanted = [_SYSTEM_ALIASES.get(a, a) for a in (opts.arms or tuple(SYSTEM_ARMS))]
    names = tuple(dict.fromkeys(("vanilla", *wanted)))
    unknown = [a for a in [*names, *opts.budgets] if a not in SYSTEM_ARMS]
    if unknown:
        raise ConfigError(f"unknown system arm(s) {', '.join(unknown)}; choose from {', '.join(SYSTEM_ARMS)}")
    arms = {a: (*SYSTEM_ARMS[a], opts.budgets.get(a, opts.budget_s)) for a in names}
    matched = opts.compute_matched
    control = {}
    if matched is not None:
        if not matched > 0:
            raise ConfigError("--compute-matched takes a budget in seconds > 0")
        control = {f"{a}@{matched:g}s": (*SYSTEM_ARMS[a], float(matched)) for a in names}
    records, pre = _run(opts, "system_comparison", {**arms, **control}, "vanilla", {"compute_matched": matched})
    notes = []
    if control:
        base = f"vanilla@{matched:g}s"
        for bench in benchmarks_in(records):
            rows = summarize(
                [r for r in records if benchmark_of(r) == bench],
                base,
                arms=list(control),
                seed=opts.seed,
                n_resamples=opts.bootstrap,
            )
            md = table_markdown(
                rows,
                f"Compute-matched control: every arm at {matched:g} s — {bench} ({model_label(opts)})",
                columns=_system_columns(rows),
                n_resamples=opts.bootstrap,
            )
            notes += ["", md]
    budgets = ", ".join(f"{a} {b:g} s" for a, (_, _, b) in arms.items())
    notes += ["", f"Budgets per question as run: {budgets}; a question that runs out is a timeout (counted)."]
    return finish(
        opts,
        records,
        "vanilla",
        "System comparison (§6, Table 8)",
        arms=list(arms),
        columns=_system_columns,
        notes=notes,
        pre=pre,
    )
