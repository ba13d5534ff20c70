"""The cookbooks' command line: one parser for every experiment, then the run and its audit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from got_core.bench.protocols.ablations import math500_ablations
from got_core.bench.protocols.common import ExperimentOptions, ExperimentResult
from got_core.bench.protocols.copyability import copyability_sweep
from got_core.bench.protocols.five_substrates import five_substrates
from got_core.bench.protocols.test_time import (
    PUBLISHED_BUDGETS,
    parse_arm_options,
    parse_budgets,
    system_comparison,
    test_time_arms,
)
from got_core.bench.runner import ModelSpec
from got_core.errors import ConfigError

__all__ = [
    "COOKBOOK_DEFAULTS",
    "EXPERIMENTS",
    "cookbook_main",
    "cookbook_parser",
    "options_from_args",
    "run_experiment",
]

EXPERIMENTS = ("five_substrates", "copyability_sweep", "test_time_arms", "system_comparison", "math500_ablations")

#: experiment name -> function.
_RUNNERS: dict[str, Callable[[ExperimentOptions], ExperimentResult]] = {
    "five_substrates": five_substrates,
    "copyability_sweep": copyability_sweep,
    "test_time_arms": test_time_arms,
    "system_comparison": system_comparison,
    "math500_ablations": math500_ablations,
}


def run_experiment(name: str, opts: ExperimentOptions) -> ExperimentResult:
    """Run the experiment called ``name`` (one of :data:`EXPERIMENTS`).

    Raises:
        ConfigError: an unknown experiment.
    """
    if name not in _RUNNERS:
        raise ConfigError(f"unknown experiment {name!r}; choose one of {', '.join(EXPERIMENTS)}")
    return _RUNNERS[name](opts)


_PUBLISHED = ",".join(f"{k}={v:g}" for k, v in PUBLISHED_BUDGETS.items())
#: Per-experiment defaults of the cookbook options (the paper's, on the sample data).
COOKBOOK_DEFAULTS: dict[str, dict[str, Any]] = {
    "five_substrates": {
        "k_study": 4,
        "m_test": 6,
        "backends": "none,markdown,vector,graph,git",
        "method": "single_shot",
    },
    "copyability_sweep": {"k_study": 0, "m_test": 6, "backends": "vector", "method": "single_shot", "n_gpqa": 0},
    "test_time_arms": {"k_study": 0, "m_test": 6, "backends": "", "method": "tot"},
    "system_comparison": {"k_study": 0, "m_test": 6, "backends": "", "method": "tot", "budgets": _PUBLISHED},
    "math500_ablations": {"k_study": 0, "m_test": 10, "backends": "", "method": "single_shot", "n_gpqa": 0},
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
    g.add_argument("--n-gpqa", type=int, default=d.get("n_gpqa"), help="first N GPQA problems (0: none)")
    g.add_argument("--levels", default=None, help="keep MATH problems of these levels, e.g. 4,5")
    g.add_argument(
        "--memory-corpus",
        type=Path,
        default=None,
        help="MATH-train JSONL the ablations retrieve from [DATA_DIR/math_train_sample.jsonl]",
    )
    g.add_argument(
        "--tier-corpus",
        default=None,
        help="MATH-train JSONL the sweep builds its tiers from ('none': the test pool) [DATA_DIR/math_train_sample.jsonl]",
    )
    g.add_argument(
        "--leakage-cosine", type=float, default=0.95, help="corpus items this similar to a test problem are removed"
    )
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
    g.add_argument("--budget-s", type=float, default=600.0, help="wall-clock budget per question (every arm)")
    g.add_argument(
        "--budgets", default=d.get("budgets"), help="per-arm budgets ARM=S,... (Table 8: vanilla=60,sc5=180,tot=600)"
    )
    g.add_argument(
        "--compute-matched",
        type=float,
        default=None,
        metavar="S",
        help="also run every arm at one budget S (Table 8's control)",
    )
    g = p.add_argument_group("experiment")
    g.add_argument("--backends", default=d["backends"], help="comma-separated memory backends")
    g.add_argument("--arms", default=None, help="comma-separated arms to compare (default: all)")
    g.add_argument(
        "--arm-option",
        action="append",
        default=[],
        metavar="ARM.KEY=V[,V]",
        help="an arm's option; several values sweep it (self_consistency.temperature=0.5,0.7,1.0); repeatable",
    )
    g.add_argument(
        "--method", default=d["method"], help="solver of the memory experiments: single_shot, or an arm (tot, ...)"
    )
    g.add_argument(
        "--memory-mode",
        choices=("shared", "online"),
        default="shared",
        help="shared: read-only post-ingest memory; online: accumulates over the test stream",
    )
    g.add_argument(
        "--online-start",
        default="empty",
        help="online memory starts empty, or from 'study' (five substrates) / 'corpus' (ablations)",
    )
    g.add_argument(
        "--online-verify",
        choices=("gold", "self"),
        default="gold",
        help="what makes an answer worth remembering online",
    )
    g.add_argument("--k-study", type=int, default=d["k_study"], help="study problems")
    g.add_argument("--m-test", type=int, default=d["m_test"], help="test problems")
    g.add_argument("--k-retrieve", type=int, default=3, help="lessons retrieved per question")
    g.add_argument("--fewshot-ids", default=None, help="the static few-shot exemplars (corpus ids), comma-separated")
    g.add_argument(
        "--paraphrase",
        choices=("model", "file", "template"),
        default="model",
        help="sweep: who writes the paraphrase tier",
    )
    g.add_argument(
        "--paraphrase-file", type=Path, default=None, help="JSONL lines {id, paraphrase} for --paraphrase file"
    )
    g.add_argument("--example-chars", type=int, default=0, help="cap an injected example at N characters (0: whole)")
    g.add_argument("--bins", default="0.60,0.85", help="sweep: inner cosine bin edges")
    g.add_argument("--tau", type=float, default=0.8, help="sweep: copyability threshold shaded in the plot")
    g.add_argument(
        "--overlay",
        action="append",
        type=Path,
        default=[],
        metavar="RUN_DIR",
        help="sweep: draw another run's tiers in the same plot; repeatable",
    )
    g.add_argument(
        "--prereg", type=Path, default=None, help="pre-registration (YAML/JSON), committed before the first model call"
    )
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


def _split(s: str | None) -> tuple[str, ...]:
    return tuple(x.strip() for x in (s or "").split(",") if x.strip())


def _numbers(s: str | None, kind: type, what: str) -> tuple[Any, ...]:
    try:
        return tuple(kind(x) for x in _split(s))
    except ValueError:
        raise ConfigError(f"{what} takes comma-separated numbers, not {s!r}") from None


def options_from_args(experiment: str, args: Any) -> ExperimentOptions:
    """Turn parsed cookbook arguments into :class:`ExperimentOptions`.

    Raises:
        ConfigError: no endpoint and no ``--standin``, or both; a malformed option.
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
    corpus = args.memory_corpus or args.data_dir / "math_train_sample.jsonl"
    tiers = args.tier_corpus or str(args.data_dir / "math_train_sample.jsonl")
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
        backends=_split(args.backends),
        arms=_split(args.arms) or None,
        method=args.method,
        workers=args.workers,
        ray=args.ray,
        central=args.central,
        resume=args.resume,
        budget_s=args.budget_s,
        budgets=parse_budgets(args.budgets) if experiment == "system_comparison" or args.budgets else {},
        compute_matched=args.compute_matched,
        arm_options=parse_arm_options(args.arm_option),
        progress=not args.no_progress,
        bootstrap=args.bootstrap,
        prereg=args.prereg,
        memory_mode=args.memory_mode,
        online_start=args.online_start,
        online_verify=args.online_verify,
        levels=_numbers(args.levels, int, "--levels") or None,
        memory_corpus=corpus if experiment == "math500_ablations" else args.memory_corpus,
        tier_corpus=None if tiers.strip().lower() == "none" else Path(tiers),
        paraphrase=args.paraphrase,
        paraphrase_file=args.paraphrase_file,
        example_chars=args.example_chars,
        bin_edges=_numbers(args.bins, float, "--bins"),
        tau=args.tau,
        overlay=tuple(args.overlay),
        leakage_cosine=args.leakage_cosine,
        k_retrieve=args.k_retrieve,
        fewshot_ids=_split(args.fewshot_ids),
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
