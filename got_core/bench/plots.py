"""The experiments' figures (arXiv 2606.14470): Δ bars, the Fig. 2 forest, the Fig. 3 sweep, the online curve.

Plots use matplotlib's Agg canvas directly (no pyplot state, no display needed). They take
the report's rows (:class:`~got_core.bench.report.ArmSummary`: ``arm``, ``delta`` with
``delta``/``low``/``high``/``significant``) or plain dicts, so this module imports nothing
of the report's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from got_core.errors import MissingExtraError

__all__ = ["plot_copyability", "plot_deltas", "plot_forest", "plot_online"]

_COLOURS = ("#1f4e79", "#b22222", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f")


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingExtraError("benchmark plots", "bench", exc) from None
    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | Path) -> Path:
    fig.tight_layout()
    # The title is readable from the file too (a stand-in run's plot says so in its Title chunk).
    title = fig.axes[0].get_title() if fig.axes else ""
    fig.savefig(str(path), metadata={"Title": title})
    return Path(path)


def plot_deltas(rows: Sequence[Any] | Mapping[str, Sequence[Any]], path: str | Path, title: str) -> Path:
    """Δ accuracy (pp) per arm with its 95% interval as error bars; ``*`` marks significance.

    ``rows`` is one table's rows, or ``{benchmark: rows}`` for one panel per benchmark.
    """
    panels = dict(rows) if isinstance(rows, Mapping) else {"": list(rows)}
    panels = {k: [r for r in v if r.delta is not None] for k, v in panels.items()}
    panels = {k: v for k, v in panels.items() if v} or {"": []}
    widest = max(len(v) for v in panels.values())
    fig = _figure(max(4.0, 1.1 * widest + 2) * (1 if len(panels) == 1 else 0.8 * len(panels)), 3.8)
    for i, (bench, arms) in enumerate(panels.items()):
        ax = fig.add_subplot(1, len(panels), i + 1)
        xs = list(range(len(arms)))
        ys = [100 * r.delta.delta for r in arms]
        lo = [100 * (r.delta.delta - r.delta.low) for r in arms]
        hi = [100 * (r.delta.high - r.delta.delta) for r in arms]
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", capsize=5, color=_COLOURS[0])
        for x, y, r in zip(xs, ys, arms):
            if r.delta.significant:
                ax.annotate("*", (x, y), textcoords="offset points", xytext=(8, 2), fontsize=14)
        ax.axhline(0, color="grey", lw=1, ls="--")
        ax.set_xticks(xs, [r.arm for r in arms], rotation=20, ha="right")
        ax.set_ylabel(f"Δ accuracy vs {arms[0].baseline if arms else ''} (pp)")
        ax.set_title(f"{title} — {bench}" if bench else title, fontsize=9)
    return _save(fig, path)


def plot_forest(rows: Sequence[Any], path: str | Path, title: str) -> Path:
    """Fig. 2: a horizontal forest of Δ vs the baseline with 95% CIs; significant arms highlighted."""
    arms = [r for r in rows if r.delta is not None][::-1]  # first row on top
    fig = _figure(6.4, 0.45 * len(arms) + 1.4)
    ax = fig.add_subplot(111)
    for y, r in enumerate(arms):
        d = r.delta
        colour = _COLOURS[1] if d.significant else "#555555"
        ax.errorbar(
            [100 * d.delta],
            [y],
            xerr=[[100 * (d.delta - d.low)], [100 * (d.high - d.delta)]],
            fmt="D" if d.significant else "o",
            color=colour,
            capsize=4,
            lw=2 if d.significant else 1,
        )
    ax.axvline(0, color="grey", lw=1, ls="--")
    ax.set_yticks(range(len(arms)), [r.arm + (" *" if r.delta.significant else "") for r in arms])
    ax.set_xlabel(f"Δ accuracy vs {rows[0].baseline if rows else ''} (pp, paired 95% CI)")
    ax.set_title(title, fontsize=9)
    return _save(fig, path)


def plot_copyability(
    runs: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
    path: str | Path,
    *,
    tau: float = 0.8,
    title: str = "Copyability: tier-mean Δ vs tier-mean cosine",
) -> Path:
    """Fig. 3: per run (e.g. a 7B and a 32B model), one line through its tiers' (mean cosine, mean Δ).

    Args:
        runs: ``(label, tier rows)``; a tier row has ``tier``, ``mean_cosine``, ``delta``,
            ``delta_low``, ``delta_high`` (fractions; ``delta`` ``None`` rows are skipped).
        path: the PNG to write.
        tau: the copyability threshold; cosines at or above it are shaded.
        title: the plot's title.
    """
    fig = _figure(6.4, 4.0)
    ax = fig.add_subplot(111)
    ax.axvspan(tau, 1.02, color="#fde0dc", alpha=0.6, lw=0, label=f"cosine ≥ τ = {tau:g}")
    ax.axvline(tau, color=_COLOURS[1], lw=1, ls=":")
    for i, (label, tiers) in enumerate(runs):
        pts = sorted((float(t["mean_cosine"]), 100 * float(t["delta"]), t) for t in tiers if t.get("delta") is not None)
        if not pts:
            continue
        colour = _COLOURS[i % len(_COLOURS)]
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        lo = [y - 100 * float(p[2]["delta_low"]) for y, p in zip(ys, pts)]
        hi = [100 * float(p[2]["delta_high"]) - y for y, p in zip(ys, pts)]
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="-o", capsize=4, color=colour, label=label)
        for x, y, p in zip(xs, ys, pts):
            ax.annotate(str(p[2]["tier"]), (x, y), textcoords="offset points", xytext=(4, 5), fontsize=7)
    ax.axhline(0, color="grey", lw=1, ls="--")
    ax.set_xlabel("tier-mean cosine(test problem, injected example) — MiniLM")
    ax.set_ylabel("tier-mean Δ vs no memory (pp, 95% CI)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="best")
    return _save(fig, path)


def plot_online(curves: Mapping[str, Sequence[bool]], path: str | Path, title: str, *, quartiles: bool = True) -> Path:
    """Running accuracy along the test stream, one line per arm (the online memory's learning curve).

    Args:
        curves: ``{arm: [correct at position 0, 1, …]}`` in stream order.
        path: the PNG to write.
        title: the plot's title.
        quartiles: draw the quartile boundaries.
    """
    fig = _figure(6.4, 3.8)
    ax = fig.add_subplot(111)
    longest = 0
    for i, (arm, verdicts) in enumerate(curves.items()):
        running, total = [], 0
        for j, ok in enumerate(verdicts):
            total += int(bool(ok))
            running.append(100 * total / (j + 1))
        longest = max(longest, len(running))
        ax.plot(range(1, len(running) + 1), running, color=_COLOURS[i % len(_COLOURS)], label=arm)
    if quartiles and longest >= 4:
        for q in (1, 2, 3):
            ax.axvline(q * longest / 4 + 0.5, color="#cccccc", lw=1, ls=":")
    ax.set_xlabel("position in the test stream")
    ax.set_ylabel("running accuracy (%)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="best")
    return _save(fig, path)
