"""Paper-style tables, result files and plots for the benchmark runs (§5 of arXiv 2606.14470).

Every experiment reports each arm as accuracy with a bootstrap 95% interval and the
paired difference to a baseline arm on the same problems, ``Δ +3.4 pp [+0.8, +6.0] *``
(:mod:`got_core.bench.stats`; starred when the interval excludes 0). Files written into the
run directory:

* ``results.jsonl`` — one reproducible record per (arm, problem), in task order
  (volatile fields such as wall-clock seconds are left out: see ``timings.jsonl``);
* ``results.csv`` — the same, flattened;
* ``timings.jsonl`` — wall-clock seconds, calls and tokens per (arm, problem);
* ``arms.jsonl`` / ``arms.csv`` — one row per arm; ``table.md`` — the table;
* ``deltas.png`` — Δ per arm with CI bars; ``sweep.png`` — Δ against cosine similarity.

Plots use matplotlib's Agg canvas directly (no pyplot state, no display needed).
"""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from got_core.bench.runner import stable_record
from got_core.bench.stats import (
    AccuracyCI,
    DeltaCI,
    bootstrap_accuracy_ci,
    format_accuracy,
    format_delta_row,
    paired_bootstrap_delta,
)
from got_core.errors import InvalidInputError, MissingExtraError

__all__ = [
    "COSINE_EDGES",
    "ArmSummary",
    "BinSummary",
    "Column",
    "cosine_bins",
    "plot_deltas",
    "plot_sweep",
    "summarize",
    "table_markdown",
    "table_rich",
    "write_arms",
    "write_results",
]

#: Cosine bins of the copyability sweep; 0.8 is the paper's copyability threshold (§5).
COSINE_EDGES = (-1.0, 0.5, 0.8, 1.0001)


@dataclass
class ArmSummary:
    """One row of a results table.

    Attributes:
        arm: the arm's name.
        n: problems it was scored on.
        correct: how many it got right.
        accuracy: accuracy with its bootstrap interval.
        delta: paired Δ against the baseline (``None`` for the baseline itself).
        baseline: the baseline arm.
        extra: per-problem means (wall seconds, calls, tokens, cosine) for extra columns.
    """

    arm: str
    n: int
    correct: int
    accuracy: AccuracyCI
    delta: DeltaCI | None
    baseline: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A flat JSON-able dict (accuracy and Δ as fractions, plus their cells)."""
        d = self.delta
        return {
            "arm": self.arm,
            "n": self.n,
            "correct": self.correct,
            "accuracy": self.accuracy.acc,
            "acc_low": self.accuracy.low,
            "acc_high": self.accuracy.high,
            "baseline": self.baseline,
            "delta": d.delta if d else None,
            "delta_low": d.low if d else None,
            "delta_high": d.high if d else None,
            "n_paired": d.n if d else None,
            "significant": d.significant if d else None,
            "accuracy_cell": format_accuracy(self.accuracy),
            "delta_cell": format_delta_row(d, marker="") if d else "",
            **self.extra,
        }


@dataclass
class BinSummary:
    """Δ vs no memory over the (problem, tier) pairs whose cosine falls in one bin."""

    label: str
    low: float
    high: float
    n: int
    mean_cosine: float
    delta: DeltaCI | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        d = self.delta
        return {
            "bin": self.label,
            "n": self.n,
            "mean_cosine": self.mean_cosine,
            "delta": d.delta if d else None,
            "delta_low": d.low if d else None,
            "delta_high": d.high if d else None,
            "significant": d.significant if d else None,
        }


#: An extra table column: ``(header, cell(summary) -> str)``.
Column = tuple[str, Callable[[ArmSummary], str]]


def _mean(values: Iterable[float]) -> float:
    vals = list(values)
    return sum(vals) / len(vals) if vals else 0.0


def summarize(
    records: Sequence[dict[str, Any]],
    baseline: str,
    *,
    arms: Sequence[str] | None = None,
    phase: str | None = "test",
    seed: int = 0,
    n_resamples: int = 10_000,
) -> list[ArmSummary]:
    """One :class:`ArmSummary` per arm, Δ paired with ``baseline`` on the problems both ran.

    Args:
        records: result records (from :func:`got_core.bench.runner.run_tasks`).
        baseline: the arm every other is compared with.
        arms: the arms and their order (default: order of appearance).
        phase: keep only records of this phase (``None``: all).
        seed: bootstrap seed.
        n_resamples: bootstrap resamples (10 000 in the paper).

    Raises:
        InvalidInputError: no record of ``baseline``.
    """
    recs = [r for r in records if phase is None or r.get("phase") == phase]
    by_arm: dict[str, dict[str, dict[str, Any]]] = {}
    for r in sorted(recs, key=lambda r: r.get("order", 0)):
        by_arm.setdefault(r["arm"], {})[r["problem_id"]] = r
    if baseline not in by_arm:
        raise InvalidInputError(f"no results for the baseline arm {baseline!r}; arms: {', '.join(by_arm)}")
    base = by_arm[baseline]
    rows = []
    for arm in arms or list(by_arm):
        mine = by_arm.get(arm)
        if not mine:
            continue
        verdicts = [bool(r["correct"]) for r in mine.values()]
        acc = bootstrap_accuracy_ci(verdicts, n_resamples=n_resamples, seed=seed)
        delta = None
        if arm != baseline:
            common = [p for p in mine if p in base]
            if common:
                delta = paired_bootstrap_delta(
                    [bool(mine[p]["correct"]) for p in common],
                    [bool(base[p]["correct"]) for p in common],
                    n_resamples=n_resamples,
                    seed=seed,
                )
        vals = list(mine.values())
        extra = {
            "wall_s_mean": round(_mean(r.get("elapsed_s", 0.0) for r in vals), 3),
            "wall_s_max": round(max((r.get("elapsed_s", 0.0) for r in vals), default=0.0), 3),
            "budget_s": max((r.get("budget_s", 0.0) for r in vals), default=0.0),
            "calls_mean": round(_mean(r.get("n_calls", 0) for r in vals), 2),
            "tokens_mean": round(_mean(sum((r.get("tokens") or {}).values()) for r in vals), 1),
        }
        cos = [r["extra"]["cosine"] for r in vals if isinstance((r.get("extra") or {}).get("cosine"), (int, float))]
        if cos:
            extra["cosine_mean"] = round(_mean(cos), 4)
        rows.append(ArmSummary(arm, len(verdicts), sum(verdicts), acc, delta, baseline, extra))
    return rows


def cosine_bins(
    records: Sequence[dict[str, Any]],
    baseline: str,
    edges: Sequence[float] = COSINE_EDGES,
    *,
    seed: int = 0,
    n_resamples: int = 10_000,
) -> list[BinSummary]:
    """Pool (problem, arm) pairs by the cosine recorded in ``extra["cosine"]``; Δ vs ``baseline`` per bin."""
    base = {r["problem_id"]: bool(r["correct"]) for r in records if r["arm"] == baseline}
    out = []
    for low, high in itertools.pairwise(edges):
        pairs = [
            (bool(r["correct"]), base[r["problem_id"]], float(r["extra"]["cosine"]))
            for r in records
            if r["arm"] != baseline
            and r["problem_id"] in base
            and isinstance((r.get("extra") or {}).get("cosine"), (int, float))
            and low <= r["extra"]["cosine"] < high
        ]
        label = f"{max(low, -1.0):.1f}–{min(high, 1.0):.1f}"
        delta = (
            paired_bootstrap_delta([p[0] for p in pairs], [p[1] for p in pairs], n_resamples=n_resamples, seed=seed)
            if pairs
            else None
        )
        out.append(BinSummary(label, low, high, len(pairs), round(_mean(p[2] for p in pairs), 4), delta))
    return out


def _cells(row: ArmSummary, columns: Sequence[Column]) -> list[str]:
    delta = format_delta_row(row.delta, marker="") if row.delta else "— (baseline)"
    star = "*" if row.delta and row.delta.significant else ""
    return [row.arm, str(row.n), format_accuracy(row.accuracy), delta, star] + [fn(row) for _, fn in columns]


def table_markdown(
    rows: Sequence[ArmSummary], title: str, *, columns: Sequence[Column] = (), notes: Sequence[str] = ()
) -> str:
    """The paper-style table as markdown: arm, n, accuracy [95% CI], Δ pp [95% CI], *.

    Args:
        rows: from :func:`summarize`.
        title: a heading.
        columns: extra columns.
        notes: lines printed under the table.
    """
    baseline = rows[0].baseline if rows else ""
    header = ["arm", "n", "accuracy [95% CI]", f"Δ pp vs {baseline} [95% CI]", "*"] + [h for h, _ in columns]
    lines = [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(r, columns)) + " |" for r in rows]
    lines += ["", "`*`: the paired bootstrap 95% interval (10 000 resamples) excludes 0."]
    lines += list(notes)
    return "\n".join(lines) + "\n"


def table_rich(rows: Sequence[ArmSummary], title: str, *, columns: Sequence[Column] = ()) -> Any:
    """The same table as a ``rich.table.Table``."""
    from rich.table import Table

    baseline = rows[0].baseline if rows else ""
    table = Table(title=title)
    for h in ["arm", "n", "accuracy [95% CI]", f"Δ pp vs {baseline} [95% CI]", "*"] + [h for h, _ in columns]:
        table.add_column(h, overflow="fold")
    for r in rows:
        table.add_row(*_cells(r, columns))
    return table


_CSV_FIELDS = (
    "experiment",
    "phase",
    "arm",
    "problem_id",
    "kind",
    "domain",
    "subject",
    "method",
    "seed",
    "gold_letter",
    "answer",
    "letter",
    "correct",
    "outcome",
    "rounds",
    "n_calls",
    "prompt_tokens",
    "completion_tokens",
    "n_nodes",
    "winner_label",
    "n_lessons_used",
    "tier",
    "cosine",
    "elapsed_s",
    "budget_s",
)


def _flat(r: dict[str, Any]) -> dict[str, Any]:
    extra = r.get("extra") or {}
    tokens = r.get("tokens") or {}
    row = {k: r.get(k) for k in _CSV_FIELDS}
    row.update(
        prompt_tokens=tokens.get("prompt"),
        completion_tokens=tokens.get("completion"),
        n_lessons_used=len(r.get("lessons_used") or []),
        tier=extra.get("tier"),
        cosine=extra.get("cosine"),
    )
    return row


def write_results(run_dir: str | Path, records: Sequence[dict[str, Any]]) -> dict[str, Path]:
    """Write ``results.jsonl`` (reproducible), ``results.csv`` and ``timings.jsonl``; returns the paths."""
    run_dir = Path(run_dir)
    paths = {"jsonl": run_dir / "results.jsonl", "csv": run_dir / "results.csv", "timings": run_dir / "timings.jsonl"}
    with paths["jsonl"].open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(stable_record(r), sort_keys=True, ensure_ascii=False) + "\n")
    with paths["csv"].open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(_CSV_FIELDS))
        writer.writeheader()
        for r in records:
            writer.writerow(_flat(r))
    with paths["timings"].open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(
                json.dumps(
                    {
                        "arm": r["arm"],
                        "problem_id": r["problem_id"],
                        "phase": r.get("phase"),
                        "elapsed_s": r.get("elapsed_s"),
                        "budget_s": r.get("budget_s"),
                        "n_calls": r.get("n_calls"),
                        "tokens": r.get("tokens"),
                    },
                    sort_keys=True,
                )
                + "\n"
            )
    return paths


def write_arms(run_dir: str | Path, rows: Sequence[ArmSummary], name: str = "arms") -> dict[str, Path]:
    """Write ``<name>.jsonl`` and ``<name>.csv`` (one row per arm); returns the paths."""
    run_dir = Path(run_dir)
    dicts = [r.to_dict() for r in rows]
    paths = {"jsonl": run_dir / f"{name}.jsonl", "csv": run_dir / f"{name}.csv"}
    with paths["jsonl"].open("w", encoding="utf-8") as fh:
        for d in dicts:
            fh.write(json.dumps(d, sort_keys=True, ensure_ascii=False) + "\n")
    fields = list(dict.fromkeys(k for d in dicts for k in d))
    with paths["csv"].open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(dicts)
    return paths


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingExtraError("benchmark plots", "bench", exc) from None
    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def plot_deltas(rows: Sequence[ArmSummary], path: str | Path, title: str) -> Path:
    """Δ accuracy (pp) per arm with its 95% interval as error bars; ``*`` marks significance."""
    arms = [r for r in rows if r.delta is not None]
    fig = _figure(max(4.0, 1.1 * len(arms) + 2), 3.6)
    ax = fig.add_subplot(111)
    xs = list(range(len(arms)))
    deltas = [d for r in arms if (d := r.delta) is not None]
    ys = [100 * d.delta for d in deltas]
    lo = [100 * (d.delta - d.low) for d in deltas]
    hi = [100 * (d.high - d.delta) for d in deltas]
    ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", capsize=5, color="#1f4e79")
    for x, y, r in zip(xs, ys, arms):
        if r.delta and r.delta.significant:
            ax.annotate("*", (x, y), textcoords="offset points", xytext=(8, 2), fontsize=14)
    ax.axhline(0, color="grey", lw=1, ls="--")
    ax.set_xticks(xs, [r.arm for r in arms], rotation=20, ha="right")
    ax.set_ylabel(f"Δ accuracy vs {rows[0].baseline if rows else ''} (pp)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(str(path), metadata={"Title": title})  # the title also readable from the file
    return Path(path)


def plot_sweep(
    records: Sequence[dict[str, Any]],
    baseline: str,
    bins: Sequence[BinSummary],
    path: str | Path,
    title: str = "Copyability: Δ vs cosine similarity",
) -> Path:
    """Per-pair Δ (tier minus no memory, pp) against MiniLM cosine, with binned means and CIs."""
    base = {r["problem_id"]: bool(r["correct"]) for r in records if r["arm"] == baseline}
    fig = _figure(6.0, 3.8)
    ax = fig.add_subplot(111)
    pts = [
        (float(r["extra"]["cosine"]), 100 * (int(bool(r["correct"])) - int(base[r["problem_id"]])), r["arm"])
        for r in records
        if r["arm"] != baseline
        and r["problem_id"] in base
        and isinstance((r.get("extra") or {}).get("cosine"), (int, float))
    ]
    tiers = list(dict.fromkeys(p[2] for p in pts))
    for i, tier in enumerate(tiers):
        # A small fixed vertical offset per tier keeps coinciding points visible (said on the axis).
        sel = [(x, y + 1.5 * ((i % 5) - 2)) for x, y, t in pts if t == tier]
        ax.scatter([s[0] for s in sel], [s[1] for s in sel], s=18, alpha=0.6, label=tier)
    for b in bins:
        if b.delta is None:
            continue
        y = 100 * b.delta.delta
        ax.errorbar(
            [b.mean_cosine],
            [y],
            yerr=[[y - 100 * b.delta.low], [100 * b.delta.high - y]],
            fmt="s",
            color="black",
            capsize=5,
        )
    ax.axhline(0, color="grey", lw=1, ls="--")
    ax.axvline(0.8, color="#b22222", lw=1, ls=":", label="copyability threshold 0.8")
    ax.set_xlabel("cosine(test problem, injected example) — MiniLM")
    ax.set_ylabel(f"Δ vs {baseline} (pp; points offset ±3 by tier)")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(str(path), metadata={"Title": title})  # the title also readable from the file
    return Path(path)
