"""Tables, result files and plots of benchmark runs (got_core.bench.report)."""

from __future__ import annotations

import csv
import json

import pytest

from got_core.bench.report import (
    cosine_bins,
    plot_deltas,
    plot_sweep,
    summarize,
    table_markdown,
    table_rich,
    write_arms,
    write_results,
)
from got_core.errors import InvalidInputError


def _rec(arm, pid, correct, order, **extra):
    return {
        "experiment": "x",
        "phase": "test",
        "arm": arm,
        "problem_id": pid,
        "order": order,
        "correct": correct,
        "kind": "math",
        "n_calls": 2,
        "tokens": {"prompt": 10, "completion": 5},
        "elapsed_s": 1.5 + order,
        "budget_s": 60.0,
        "winner_sha": "ab" * 20,
        "result_sha": "cd" * 20,
        "memory": {"mode": "shared", "before": {"n": 1}, "after": {"n": 1}, "tips": {"before": "x"}},
        "extra": extra,
    }


def _records(a, b, arms=("base", "new")):
    out = []
    for arm, verdicts in zip(arms, (a, b)):
        out += [_rec(arm, f"p{i}", v, i) for i, v in enumerate(verdicts)]
    return out


def test_identical_arms_give_zero_delta_with_ci_containing_zero():
    verdicts = [True, False, True, True, False, True]
    rows = summarize(_records(verdicts, verdicts), "base", n_resamples=2000)
    base, new = rows
    assert base.delta is None and base.arm == "base"
    assert new.delta.delta == 0.0 and new.delta.low <= 0.0 <= new.delta.high
    assert not new.delta.significant
    assert new.accuracy.acc == pytest.approx(4 / 6)


def test_known_case_matches_a_direct_computation():
    a = [False, False, True, False, True, False, False, False]  # baseline: 2/8
    b = [True, True, True, False, True, True, False, True]  # new: 6/8
    rows = summarize(_records(a, b), "base", n_resamples=2000, seed=3)
    new = rows[1]
    assert new.correct == 6 and new.n == 8
    assert new.delta.delta == pytest.approx(sum(b) / 8 - sum(a) / 8)
    assert new.delta.n == 8
    # Extras come from the records: the mean of elapsed seconds 1.5..8.5 is 5.0.
    assert new.extra["wall_s_mean"] == pytest.approx(5.0)
    assert new.extra["calls_mean"] == 2 and new.extra["tokens_mean"] == 15


def test_significant_difference_is_starred_in_the_table():
    n = 40
    rows = summarize(_records([False] * n, [True] * n), "base", n_resamples=2000)
    md = table_markdown(rows, "Demo", columns=[("calls", lambda r: f"{r.extra['calls_mean']:.0f}")], notes=["a note"])
    lines = md.splitlines()
    assert lines[0] == "## Demo"
    assert "| arm | n | accuracy [95% CI] | Δ pp vs base [95% CI] | * | calls |" in lines
    new_row = next(line for line in lines if line.startswith("| new |"))
    assert "Δ +100.0 pp" in new_row and "| * |" in new_row
    base_row = next(line for line in lines if line.startswith("| base |"))
    assert "— (baseline)" in base_row and "| * |" not in base_row
    assert "a note" in md
    assert table_rich(rows, "Demo").row_count == 2


def test_missing_baseline_is_refused():
    with pytest.raises(InvalidInputError, match="baseline"):
        summarize(_records([True], [False]), "nope")


def test_only_the_requested_phase_is_summarised():
    recs = _records([True, False], [True, True])
    recs.append({**_rec("study", "s0", True, 0), "phase": "study"})
    arms = [r.arm for r in summarize(recs, "base", n_resamples=200)]
    assert arms == ["base", "new"]


def test_cosine_bins_pool_pairs_by_similarity():
    recs = [_rec("none", "p0", False, 0), _rec("none", "p1", False, 1), _rec("none", "p2", True, 2)]
    recs += [
        _rec("identical", "p0", True, 0, cosine=0.99),
        _rec("identical", "p1", True, 1, cosine=0.95),
        _rec("unrelated", "p2", False, 2, cosine=0.1),
        _rec("method_band", "p0", False, 0, cosine=0.6),
    ]
    bins = cosine_bins(recs, "none", n_resamples=500)
    by_label = {b.label: b for b in bins}
    assert [b.n for b in bins] == [1, 1, 2]
    high = bins[-1]
    assert high.delta.delta == pytest.approx(1.0) and high.mean_cosine == pytest.approx(0.97)
    assert bins[0].delta.delta == pytest.approx(-1.0)
    assert "0.5–0.8" in by_label and by_label["0.5–0.8"].delta.delta == 0.0


def test_result_files_are_reproducible_and_complete(tmp_path):
    recs = _records([True, False], [True, True])
    paths = write_results(tmp_path, recs)
    lines = [json.loads(line) for line in paths["jsonl"].read_text().splitlines()]
    assert len(lines) == 4
    for rec in lines:  # volatile fields stay in git and timings.jsonl only
        assert "elapsed_s" not in rec and "winner_sha" not in rec and "result_sha" not in rec
        assert "tips" not in rec["memory"] and rec["memory"]["before"] == {"n": 1}
    rows = list(csv.DictReader(paths["csv"].open()))
    assert [r["arm"] for r in rows] == ["base", "base", "new", "new"]
    assert rows[0]["prompt_tokens"] == "10" and rows[0]["elapsed_s"] == "1.5"
    timings = [json.loads(line) for line in paths["timings"].read_text().splitlines()]
    assert timings[1]["elapsed_s"] == 2.5
    again = write_results(tmp_path, recs)
    assert again["jsonl"].read_bytes() == paths["jsonl"].read_bytes()


def test_arm_files_hold_one_row_per_arm(tmp_path):
    rows = summarize(_records([True, False, True], [True, True, True]), "base", n_resamples=500)
    paths = write_arms(tmp_path, rows)
    data = [json.loads(line) for line in paths["jsonl"].read_text().splitlines()]
    assert [d["arm"] for d in data] == ["base", "new"]
    assert data[1]["delta"] == pytest.approx(1 / 3) and data[0]["delta"] is None
    assert list(csv.DictReader(paths["csv"].open()))[1]["accuracy"] == "1.0"


def test_plots_are_png_files(tmp_path):
    recs = _records([False, True, False], [True, True, False])
    rows = summarize(recs, "base", n_resamples=500)
    out = plot_deltas(rows, tmp_path / "d.png", "Δ")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    sweep = [
        _rec("none", "p0", False, 0),
        _rec("identical", "p0", True, 0, cosine=1.0),
        _rec("unrelated", "p0", False, 0, cosine=0.05),
    ]
    png = plot_sweep(sweep, "none", cosine_bins(sweep, "none", n_resamples=200), tmp_path / "s.png")
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"
