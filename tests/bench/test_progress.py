"""LogProgress: a long run shows progress in a log, not only on a terminal."""

from __future__ import annotations

import io

from rich.console import Console

from got_core.bench.progress import LogProgress


def _run(console: Console, n: int) -> None:
    with LogProgress(console=console, transient=True) as bar:
        task = bar.add_task("scale: threads", total=n)
        for _ in range(n):
            bar.advance(task)


def test_a_log_gets_a_line_at_the_start_at_each_tenth_and_at_the_end() -> None:
    out = io.StringIO()
    _run(Console(file=out, force_terminal=False, width=120), 1000)
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    assert lines[0] == "scale: threads: 0/1,000"
    assert lines[-1] == "scale: threads: 1,000/1,000"
    assert [line for line in lines if line.endswith("/1,000")] == lines
    assert len(lines) == 11, lines  # 0, 100, ..., 900 and 1,000 (10 tenths + the start)


def test_a_task_without_a_total_is_logged_by_time(monkeypatch) -> None:
    out = io.StringIO()
    clock = iter(float(t) for t in range(0, 10_000, 40))
    monkeypatch.setattr("got_core.bench.progress.time.monotonic", lambda: next(clock))
    with LogProgress(console=Console(file=out, force_terminal=False), every_s=30.0) as bar:
        task = bar.add_task("filling", total=None)
        bar.advance(task, 5)
        bar.advance(task, 5)
    logged = [line for line in out.getvalue().splitlines() if line.startswith("filling:")]
    assert logged == ["filling: 0", "filling: 5", "filling: 10"]


def test_a_terminal_gets_the_live_bar_and_no_log_lines() -> None:
    out = io.StringIO()
    _run(Console(file=out, force_terminal=True, width=120), 50)
    assert "scale: threads: 0/50" not in out.getvalue()


def test_a_disabled_bar_prints_nothing() -> None:
    out = io.StringIO()
    with LogProgress(console=Console(file=out, force_terminal=False), disable=True) as bar:
        task = bar.add_task("quiet", total=3)
        bar.advance(task, 3)
    assert out.getvalue() == ""
