"""One plotting helper for the benchmark scripts: metric-vs-size lines, one panel per metric."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def log_lines(
    rows: Sequence[dict], metrics: Sequence[str], x: str, series: str, out: Path, *, xlabel: str, log_x: bool = False
) -> Path | None:
    """Plot ``metrics`` against ``x`` for each value of ``series`` (log y); None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.4 * len(metrics), 4))
    for ax, metric in zip(axes, metrics):
        for name in sorted({r[series] for r in rows}):
            pts = sorted((r[x], r[metric]) for r in rows if r[series] == name)
            ax.plot([p[0] for p in pts], [max(p[1], 1e-4) for p in pts], marker="o", label=name)
        if log_x:
            ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_title(metric.replace("_ms", " (ms, log)").replace("_bytes", " (bytes, log)"))
        ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
