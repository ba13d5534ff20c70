"""One plotting helper for the benchmark scripts: metric-vs-size lines, one panel per metric.

Panels use log axes, and a log axis cannot show zero: a series whose value is 0 (the ``none``
memory backend stores nothing and costs ~0 ms) is left out of that panel and named in a note
under it, never drawn at a made-up small value.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path


def default_out(name: str) -> Path:
    """Where a benchmark writes by default: ``<system temp dir>/got-bench/<name>``, outside the tracked tree."""
    return Path(tempfile.gettempdir()) / "got-bench" / name


def log_points(
    rows: Sequence[dict], metric: str, x: str, series: str
) -> tuple[dict[str, list[tuple[float, float]]], list[str]]:
    """The points a log-log panel can show, per series, and the series left out.

    Returns:
        ``(points, omitted)``: ``points[name]`` is the sorted ``(x, value)`` pairs with a positive
        value; ``omitted`` names each series with a point of value <= 0 (with how many).
    """
    points: dict[str, list[tuple[float, float]]] = {}
    omitted: list[str] = []
    for name in sorted({r[series] for r in rows}):
        pts = sorted((r[x], r[metric]) for r in rows if r[series] == name)
        shown = [p for p in pts if p[1] > 0]
        if len(shown) < len(pts):
            omitted.append(name if not shown else f"{name} ({len(pts) - len(shown)} of {len(pts)} points)")
        if shown:
            points[name] = shown
    return points, omitted


def log_lines(
    rows: Sequence[dict],
    metrics: Sequence[str],
    x: str,
    series: str,
    out: Path,
    *,
    xlabel: str,
    log_x: bool = False,
    title: str | None = None,
) -> Path | None:
    """Plot ``metrics`` against ``x`` for each value of ``series`` (log y); None without matplotlib.

    Values of 0 are left out (see the module docstring) and named in a note under the panel.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.4 * len(metrics), 4.4))
    names = sorted({r[series] for r in rows})
    colors = {name: f"C{i % 10}" for i, name in enumerate(names)}  # one colour per series in every panel
    for ax, metric in zip(axes, metrics):
        points, omitted = log_points(rows, metric, x, series)
        for name, pts in points.items():
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name, color=colors[name])
        if log_x:
            ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_title(metric.replace("_ms", " (ms, log)").replace("_bytes", " (bytes, log)"))
        if points:
            ax.legend()
        if omitted:
            ax.annotate(
                "value 0, not shown on a log axis: " + ", ".join(omitted),
                xy=(0.5, -0.22),
                xycoords="axes fraction",
                ha="center",
                fontsize=7,
            )
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
