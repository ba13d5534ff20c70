"""Cross-episode memory on ScienceWorld (the paper's Table 5; Table 9 row 3), one command.

The regime: one agent per memory backend (an *arm*: none, markdown, vector, graph,
git) plays the same sequence of episodes — tasks × variations, interleaved so each
task comes back after the others — and its memory accumulates one answer-free lesson
per episode. Nothing is reset between episodes except the simulator; the learning
curve (mean score so far against the episode number) is the signal, and the table
gives each arm's mean task score with a 95% bootstrap interval and the paired Δ to
the ``none`` arm over the same episodes.

A run directory holds ``config.json``; ``episodes.jsonl`` / ``episodes.csv`` (one row
per arm and episode); ``table.md``; ``curve.jsonl`` and ``learning_curve.png``;
``repos/<arm>.git`` (a branch per episode, every step a commit, the outcome a tag;
the git arm's lessons on its ``memory`` branch); ``memory/<arm>`` for the other
backends. See :mod:`got_core.bench.scienceworld_episodes` for what each commit holds.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from got_core.bench.scienceworld import DEFAULT_TASKS, ScienceWorldEnv
from got_core.bench.scienceworld_episodes import Episode, EpisodeSettings, run_episode
from got_core.bench.stats import DeltaCI, MeanCI, bootstrap_mean_ci, paired_bootstrap_mean_delta
from got_core.errors import ConfigError, InvalidInputError, MissingExtraError
from got_core.memory import BACKENDS
from got_core.solver.models import ChatModel

__all__ = [
    "ARMS",
    "STANDIN_LABEL",
    "ArmRow",
    "RunOptions",
    "RunResult",
    "learning_curve",
    "main",
    "plan_episodes",
    "plot_curve",
    "run_scienceworld",
    "summarize",
    "table_markdown",
]

#: The five arms of the paper's controlled comparison, baseline first.
ARMS = ("none", "markdown", "vector", "graph", "git")
#: How a run without a model is labelled everywhere (config, table, plot).
STANDIN_LABEL = "stand-in model (scripted policy)"
#: Commit timestamps start here and advance 1 s per commit (seeded re-runs write the same SHAs).
CLOCK_START = 1_700_000_000
#: Resamples per point of the learning curve (the table uses ``bootstrap``).
CURVE_RESAMPLES = 2_000


@dataclass(frozen=True)
class RunOptions:
    """Everything a run depends on (the CLI's options).

    Attributes:
        out: the run directory (must not hold a run yet).
        tasks: ScienceWorld task names.
        n_variations: variations per task, the first ones of ``split``.
        split: ``train``, ``dev`` or ``test`` variations.
        backends: the arms, one memory backend each.
        max_steps: actions per episode.
        simplification: ScienceWorld simplifications (``easy`` or ``""``, or a comma list).
        k_lessons: lessons retrieved at the start of each episode.
        shortlist_k: valid actions shown per step.
        max_tokens: completion tokens per call.
        temperature: sampling temperature.
        seed: model seeds and the scripted policy's.
        workers: arms played at once (threads; each has its own simulator).
        bootstrap: resamples of the table's intervals.
        base_url, model, api_key, timeout: the OpenAI-compatible endpoint (vLLM).
        standin: no model: a stand-in server plays the scripted policy.
    """

    out: Path
    tasks: tuple[str, ...] = DEFAULT_TASKS
    n_variations: int = 2
    split: str = "train"
    backends: tuple[str, ...] = ARMS
    max_steps: int = 15
    simplification: str = "easy"
    k_lessons: int = 3
    shortlist_k: int = 30
    max_tokens: int = 64
    temperature: float = 0.0
    seed: int = 0
    workers: int = 1
    bootstrap: int = 10_000
    base_url: str | None = None
    model: str | None = None
    api_key: str = field(default="EMPTY", repr=False)
    timeout: float = 300.0
    standin: bool = False


@dataclass
class ArmRow:
    """One arm's line of the table.

    Attributes:
        arm: the memory backend.
        mean: mean task score with its interval.
        delta: paired Δ to the baseline arm (``None`` for the baseline itself).
        successes: episodes finished with score 100.
        first_half / second_half: mean task score over each half of the sequence.
        lessons: lessons the memory holds at the end.
        calls / tokens: model calls and tokens (prompt + completion).
    """

    arm: str
    mean: MeanCI
    delta: DeltaCI | None
    successes: int
    first_half: float
    second_half: float
    lessons: int
    calls: int = 0
    tokens: int = 0


@dataclass
class RunResult:
    """What :func:`run_scienceworld` produced."""

    run_dir: Path
    records: list[dict[str, Any]]
    rows: list[ArmRow]
    table_md: str
    files: dict[str, Path]
    fsck: dict[str, bool]


def _check(opts: RunOptions) -> None:
    if not opts.tasks:
        raise InvalidInputError("pass at least one task (--tasks)")
    if not opts.backends:
        raise InvalidInputError("pass at least one memory backend (--backends)")
    unknown = [b for b in opts.backends if b not in BACKENDS]
    if unknown:
        raise ConfigError(f"unknown memory backend(s) {', '.join(unknown)}; choose from {', '.join(BACKENDS)}")
    if len(set(opts.backends)) != len(opts.backends):
        raise InvalidInputError("each backend may be one arm only (--backends has a duplicate)")
    for name, value, low in (
        ("n_variations", opts.n_variations, 1),
        ("max_steps", opts.max_steps, 1),
        ("shortlist_k", opts.shortlist_k, 1),
        ("max_tokens", opts.max_tokens, 1),
        ("workers", opts.workers, 1),
        ("bootstrap", opts.bootstrap, 1),
        ("k_lessons", opts.k_lessons, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InvalidInputError(f"{name} must be an integer >= {low}, not {value!r}")
    if (Path(opts.out) / "config.json").exists():
        raise ConfigError(f"{opts.out} already holds a run; choose another --out")


def plan_episodes(env: ScienceWorldEnv, tasks: Sequence[str], n_variations: int, split: str) -> list[Episode]:
    """The episode sequence: variation 1 of every task, then variation 2 of every task, …

    Raises:
        InvalidInputError: an unknown task, or a task with fewer variations in ``split``.
    """
    chosen: dict[str, list[int]] = {}
    for task in tasks:
        found = env.variations(task, split)
        if len(found) < n_variations:
            raise InvalidInputError(f"{task} has {len(found)} {split} variations; ask for at most that many")
        chosen[task] = found[:n_variations]
    order = [(task, chosen[task][v]) for v in range(n_variations) for task in tasks]
    return [Episode(i, task, variation) for i, (task, variation) in enumerate(order)]


def _open_memory(name: str, run_dir: Path, repo: Any) -> Any:
    from got_core.memory import get_backend
    from got_core.memory.git import GitMemory

    if name == "git":  # the arm's own repository: lessons on `memory`, beside the episodes
        return GitMemory(repo=repo)
    return get_backend(name, path=run_dir / "memory" / name)


def _play_arm(
    arm: str,
    episodes: Sequence[Episode],
    opts: RunOptions,
    model: ChatModel,
    run_dir: Path,
    progress: Callable[[str], None],
) -> tuple[list[dict[str, Any]], int, bool]:
    """Play every episode in order with one memory; returns (records, lessons stored, fsck ok)."""
    from got_core.repo import ReasoningRepo
    from got_core.types import DeterministicClock

    settings = EpisodeSettings(
        arm=arm,
        max_steps=opts.max_steps,
        k_lessons=opts.k_lessons,
        shortlist_k=opts.shortlist_k,
        max_tokens=opts.max_tokens,
        temperature=opts.temperature,
        seed=opts.seed,
        simplification=opts.simplification,
    )
    repo = ReasoningRepo.open(run_dir / "repos" / f"{arm}.git", clock=DeterministicClock(CLOCK_START))
    memory = _open_memory(arm, run_dir, repo)
    records = []
    try:
        # The simulator counts moves from 0 and ends an episode after its limit.
        with ScienceWorldEnv(step_limit=opts.max_steps + 1, simplification=opts.simplification) as env:
            for ep in episodes:
                record = run_episode(env, ep, model=model, memory=memory, repo=repo, settings=settings)
                records.append(record)
                progress(
                    f"[{arm}] {ep.index + 1}/{len(episodes)} {ep.task} v{ep.variation}: "
                    f"score {record['final_score']} in {record['steps']} steps, {len(record['lessons_used'])} lessons used"
                )
        lessons = len(memory.all_lessons())
        repo.maintenance()  # pack the loose objects of every step (libgit2 never runs gc)
        ok, _ = repo.fsck()
    finally:
        memory.close()
        repo.close()
    return records, lessons, ok


def summarize(
    records: Sequence[dict[str, Any]],
    arms: Sequence[str],
    *,
    lessons: dict[str, int] | None = None,
    bootstrap: int = 10_000,
    seed: int = 0,
) -> list[ArmRow]:
    """One :class:`ArmRow` per arm; Δ is paired over episodes against ``none`` (else the first arm).

    Raises:
        InvalidInputError: arms did not play the same episodes.
    """
    by_arm = {arm: sorted((r for r in records if r["arm"] == arm), key=lambda r: r["index"]) for arm in arms}
    order = [r["episode"] for r in by_arm[arms[0]]]
    for arm, rows in by_arm.items():
        if [r["episode"] for r in rows] != order or not rows:
            raise InvalidInputError(f"arm {arm} did not play the same episodes as {arms[0]}; Δ would not be paired")
    baseline = "none" if "none" in arms else arms[0]
    base_scores = [float(r["task_score"]) for r in by_arm[baseline]]
    out = []
    for arm in arms:
        rows = by_arm[arm]
        scores = [float(r["task_score"]) for r in rows]
        half = len(scores) // 2
        first, second = scores[:half] or scores, scores[half:]
        out.append(
            ArmRow(
                arm=arm,
                mean=bootstrap_mean_ci(scores, n_resamples=bootstrap, seed=seed),
                delta=None
                if arm == baseline
                else paired_bootstrap_mean_delta(scores, base_scores, n_resamples=bootstrap, seed=seed),
                successes=sum(1 for r in rows if r["success"]),
                first_half=sum(first) / len(first),
                second_half=sum(second) / len(second),
                lessons=(lessons or {}).get(arm, 0),
                calls=sum(int(r["calls"]) for r in rows),
                tokens=sum(int(r["prompt_tokens"]) + int(r["completion_tokens"]) for r in rows),
            )
        )
    return out


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _signed(x: float) -> str:
    value = round(x, 1)
    return f"{0.0 if value == 0 else value:+.1f}"


def table_markdown(rows: Sequence[ArmRow], caption: str) -> str:
    """Table 5's form: mean task score [95% CI], Δ vs the baseline [95% CI] (``*``: excludes 0)."""
    baseline = next((r.arm for r in rows if r.delta is None), "none")
    lines = [
        caption,
        "",
        f"| arm | episodes | mean score [95% CI] | Δ vs {baseline} [95% CI] | success | first half → second half | lessons | calls |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mean = f"{r.mean.mean:.1f} [{r.mean.low:.1f}, {r.mean.high:.1f}]"
        if r.delta is None:
            delta = "—"
        else:
            d = r.delta
            delta = f"{_signed(d.delta)} [{_signed(d.low)}, {_signed(d.high)}]" + (" *" if d.significant else "")
        lines.append(
            f"| {r.arm} | {r.mean.n} | {mean} | {delta} | {r.successes}/{r.mean.n} | "
            f"{r.first_half:.1f} → {r.second_half:.1f} | {r.lessons} | {r.calls} |"
        )
    return "\n".join(lines) + "\n"


def learning_curve(
    records: Sequence[dict[str, Any]], arms: Sequence[str], *, resamples: int = CURVE_RESAMPLES, seed: int = 0
) -> list[dict[str, Any]]:
    """Per arm and episode: the score, the mean score so far and its 95% bootstrap interval."""
    out = []
    for arm in arms:
        scores = [
            float(r["task_score"]) for r in sorted((r for r in records if r["arm"] == arm), key=lambda r: r["index"])
        ]
        for i in range(1, len(scores) + 1):
            ci = bootstrap_mean_ci(scores[:i], n_resamples=resamples, seed=seed)
            out.append(
                {
                    "arm": arm,
                    "episode": i,
                    "score": scores[i - 1],
                    "mean_so_far": ci.mean,
                    "low": ci.low,
                    "high": ci.high,
                }
            )
    return out


def plot_curve(curve: Sequence[dict[str, Any]], path: str | Path, title: str) -> Path:
    """Mean score so far against the episode number, one line per arm with its 95% band."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingExtraError("benchmark plots", "bench", exc) from None
    fig = Figure(figsize=(7.0, 4.2), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(111)
    styles = [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", "-")]
    for i, arm in enumerate(dict.fromkeys(p["arm"] for p in curve)):
        pts = [p for p in curve if p["arm"] == arm]
        xs = [p["episode"] for p in pts]
        marker, dash = styles[i % len(styles)]  # arms that coincide stay visible as different dashes
        (line,) = ax.plot(xs, [p["mean_so_far"] for p in pts], marker=marker, ms=4, ls=dash, label=arm)
        ax.fill_between(xs, [p["low"] for p in pts], [p["high"] for p in pts], color=line.get_color(), alpha=0.12)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # episodes are whole numbers
    ax.set_xlabel("episode (memory accumulates across episodes)")
    ax.set_ylabel("mean task score so far (0–100), 95% CI")
    ax.set_ylim(-2, 102)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(str(path))
    return Path(path)


def _flat(record: dict[str, Any]) -> dict[str, Any]:
    return {k: json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v for k, v in record.items()}


def _write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@contextlib.contextmanager
def _models(opts: RunOptions) -> Iterator[tuple[Callable[[], ChatModel], str, dict[str, Any]]]:
    """Yield (a factory of one model per arm, the label, the public model spec)."""
    from got_core.solver.openai_compat import OpenAICompatibleModel, check_endpoint

    def factory(url: str, name: str) -> Callable[[], ChatModel]:
        return lambda: OpenAICompatibleModel(
            url, name, api_key=opts.api_key, max_tokens=opts.max_tokens, timeout=opts.timeout, max_retries=3
        )

    spec = {"max_tokens": opts.max_tokens, "temperature": opts.temperature, "standin": opts.standin}
    if opts.standin:
        from got_core.bench.scienceworld_policy import standin_responder
        from got_core.bench.standin import StandInOpenAIServer

        with StandInOpenAIServer(responder=standin_responder(opts.seed), model="got-standin") as server:
            yield factory(server.url, server.model), STANDIN_LABEL, {**spec, "model": server.model}
        return
    if not opts.base_url or not opts.model:
        raise ConfigError("pass --base-url and --model (or --standin)")
    served = check_endpoint(opts.base_url, api_key=opts.api_key)
    if served and opts.model not in served:
        raise ConfigError(f"{opts.base_url} serves {', '.join(served)}, not {opts.model!r}; pass --model")
    yield factory(opts.base_url, opts.model), opts.model, {**spec, "model": opts.model, "base_url": opts.base_url}


def run_scienceworld(
    opts: RunOptions,
    *,
    model_factory: Callable[[], ChatModel] | None = None,
    label: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Run every arm over the same episode sequence; write the table, curve, records and repositories.

    Args:
        opts: the run's options.
        model_factory: a function making one chat model per arm (tests pass a scripted
            one); by default the endpoint of ``opts`` (or the stand-in with ``opts.standin``).
        label: how the model is named in the table and plot (with ``model_factory``).
        progress: called with one line per finished episode.

    Raises:
        ConfigError / InvalidInputError: bad options, an existing run in ``opts.out``, no endpoint.
        MissingExtraError: ``scienceworld`` (or a backend's extra) is not installed.
        ScienceWorldError: the simulator failed.
    """
    _check(opts)
    if model_factory is None and not opts.standin and not (opts.base_url and opts.model):
        from got_core.solver.models import START_SERVER_HINT

        raise ConfigError(f"no model endpoint (--base-url and --model): {START_SERVER_HINT}; or pass --standin")
    run_dir = Path(opts.out)
    say = progress or (lambda line: None)
    with ScienceWorldEnv(step_limit=opts.max_steps + 1, simplification=opts.simplification) as env:
        episodes = plan_episodes(env, opts.tasks, opts.n_variations, opts.split)
    with contextlib.ExitStack() as stack:
        if model_factory is None:
            model_factory, label, spec = stack.enter_context(_models(opts))
        else:
            spec = {"max_tokens": opts.max_tokens, "temperature": opts.temperature, "model": label or "custom"}
        label = label or "custom model"
        run_dir.mkdir(parents=True, exist_ok=True)
        from importlib.metadata import version

        config = {
            "experiment": "scienceworld_episodes",
            "model_label": label,
            "model": spec,
            "scienceworld": version("scienceworld"),
            "episodes": [{"id": e.episode_id, "task": e.task, "variation": e.variation} for e in episodes],
            "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items() if k != "api_key"},
        }
        (run_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        lock = threading.Lock()

        def said(line: str) -> None:
            with lock:
                say(line)

        factory = model_factory
        with ThreadPoolExecutor(max_workers=min(opts.workers, len(opts.backends))) as pool:
            futures = {
                arm: pool.submit(_play_arm, arm, episodes, opts, factory(), run_dir, said) for arm in opts.backends
            }
            results = {arm: f.result() for arm, f in futures.items()}
    records = [r for arm in opts.backends for r in results[arm][0]]
    lessons = {arm: results[arm][1] for arm in opts.backends}
    rows = summarize(records, opts.backends, lessons=lessons, bootstrap=opts.bootstrap, seed=opts.seed)
    caption = (
        f"**Table 5 — cross-episode memory on ScienceWorld** (model: {label}; {len(episodes)} episodes per arm: "
        f"{_n(len(opts.tasks), 'task')} × {_n(opts.n_variations, opts.split + ' variation')}, interleaved; ≤ {opts.max_steps} "
        f"steps; simplification '{opts.simplification or 'none'}'). Task score 0–100 (a final score below 0 counts 0); "
        f"95% bootstrap intervals ({opts.bootstrap} resamples), Δ paired over episodes, * when it excludes 0."
    )
    table = table_markdown(rows, caption)
    curve = learning_curve(records, opts.backends, seed=opts.seed)
    files = {
        "config": run_dir / "config.json",
        "table": run_dir / "table.md",
        "episodes": _write_jsonl(run_dir / "episodes.jsonl", records),
        "episodes_csv": run_dir / "episodes.csv",
        "curve": _write_jsonl(run_dir / "curve.jsonl", curve),
        "plot": plot_curve(curve, run_dir / "learning_curve.png", f"Learning curve — ScienceWorld ({label})"),
    }
    files["table"].write_text(table, encoding="utf-8")
    with files["episodes_csv"].open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(_flat(r) for r in records)
    return RunResult(run_dir, records, rows, table, files, {arm: results[arm][2] for arm in opts.backends})


# ----------------------------------------------------------------------------- command line


def parser() -> Any:
    """The cookbook's argparse parser (``--help`` lists every option)."""
    import argparse

    p = argparse.ArgumentParser(
        prog="scienceworld_episodes.py",
        description="Cross-episode memory on ScienceWorld (Table 5): one agent per memory backend plays the same "
        "episodes while its memory accumulates; mean task score per arm with paired bootstrap CIs, a learning curve.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    g = p.add_argument_group("episodes")
    g.add_argument("--tasks", default=",".join(DEFAULT_TASKS), help="comma-separated ScienceWorld tasks")
    g.add_argument("--variations", type=int, default=2, help="variations per task (the first of --split)")
    g.add_argument("--split", default="train", choices=("train", "dev", "test"), help="which variations")
    g.add_argument("--max-steps", type=int, default=15, help="actions per episode")
    g.add_argument("--simplification", default="easy", help="ScienceWorld simplifications ('' for none)")
    g = p.add_argument_group("agent and memory")
    g.add_argument("--backends", default=",".join(ARMS), help="comma-separated memory backends, one arm each")
    g.add_argument("--k-lessons", type=int, default=3, help="lessons retrieved per episode")
    g.add_argument("--shortlist", type=int, default=30, help="valid actions shown per step")
    g = p.add_argument_group("model")
    g.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint [$GOT_BASE_URL]")
    g.add_argument("--model", default=None, help="served model name [$GOT_MODEL]")
    g.add_argument("--api-key", default=None, help="API key [$GOT_API_KEY]")
    g.add_argument("--standin", action="store_true", help="no model: a stand-in server plays a scripted policy")
    g.add_argument("--max-tokens", type=int, default=64, help="completion tokens per call")
    g.add_argument("--temperature", type=float, default=0.0, help="sampling temperature")
    g.add_argument("--timeout", type=float, default=300.0, help="seconds per HTTP attempt")
    g = p.add_argument_group("run")
    g.add_argument("--seed", type=int, default=0, help="model seeds and the scripted policy's")
    g.add_argument("--workers", type=int, default=1, help="arms played at once")
    g.add_argument("--bootstrap", type=int, default=10_000, help="bootstrap resamples")
    g.add_argument("--out", type=Path, default=Path("runs") / "scienceworld", help="the run directory (new)")
    g.add_argument("--quiet", action="store_true", help="no line per episode")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run from the command line; 0 on success, 1 on a failure (or fsck), 2 on bad input."""
    from rich.console import Console

    from got_core.errors import GotError, GotUserError

    args = parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # MiniLM (vector arm) loads from its package only
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    console = Console()
    if args.standin and args.base_url:
        console.print("[bold red]error:[/] pass either --standin or --base-url, not both")
        return 2

    def split(text: str) -> tuple[str, ...]:
        return tuple(x.strip() for x in text.split(",") if x.strip())

    opts = RunOptions(
        out=args.out,
        tasks=split(args.tasks),
        n_variations=args.variations,
        split=args.split,
        backends=split(args.backends),
        max_steps=args.max_steps,
        simplification=args.simplification,
        k_lessons=args.k_lessons,
        shortlist_k=args.shortlist,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        seed=args.seed,
        workers=args.workers,
        bootstrap=args.bootstrap,
        base_url=args.base_url or (None if args.standin else os.environ.get("GOT_BASE_URL")),
        model=args.model or os.environ.get("GOT_MODEL"),
        api_key=args.api_key or os.environ.get("GOT_API_KEY") or "EMPTY",
        timeout=args.timeout,
        standin=args.standin,
    )
    try:
        result = run_scienceworld(opts, progress=None if args.quiet else lambda line: print(line, file=sys.stderr))
    except GotUserError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        return 2
    except GotError as exc:
        console.print(f"[bold red]failed:[/] {exc}")
        return 1
    # The table as markdown (what table.md holds), plain: it pastes into a document as is.
    print(result.table_md)
    for arm, ok in result.fsck.items():
        print(f"git fsck {result.run_dir / 'repos' / (arm + '.git')}: {'ok' if ok else 'FAILED'}")
    print("files: " + ", ".join(str(p) for p in result.files.values()))
    return 0 if all(result.fsck.values()) else 1


if __name__ == "__main__":  # python -m got_core.bench.scienceworld_run (the cookbook's entry point)
    sys.exit(main())
