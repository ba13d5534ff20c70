"""Tables, result files and plots of benchmark runs (got_core.bench.report)."""

from __future__ import annotations

import csv
import json

import pytest

from got_core.bench.plots import plot_copyability, plot_deltas, plot_forest, plot_online
from got_core.bench.report import (
    COSINE_EDGES,
    benchmark_of,
    cosine_bins,
    quartile_summary,
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
    # The paper's edges: below the core band, the core band [0.60, 0.85), the top bin >= 0.85.
    assert COSINE_EDGES[1:3] == (0.60, 0.85)
    assert list(by_label) == ["< 0.60", "0.60–0.85", "≥ 0.85"]
    assert by_label["0.60–0.85"].delta.delta == 0.0 and by_label["0.60–0.85"].n == 1
    custom = cosine_bins(recs, "none", (-1.0, 0.5, 1.0001), n_resamples=200)
    assert [b.n for b in custom] == [1, 3]


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
    panels = plot_deltas({"MATH": rows, "GPQA": rows}, tmp_path / "p.png", "Δ")
    assert panels.read_bytes()[:4] == b"\x89PNG"
    forest = plot_forest(rows, tmp_path / "f.png", "forest")
    assert forest.stat().st_size > 1000 and forest.read_bytes()[:4] == b"\x89PNG"
    tiers = [
        {"tier": "identical", "mean_cosine": 1.0, "delta": 0.3, "delta_low": 0.1, "delta_high": 0.5},
        {"tier": "unrelated", "mean_cosine": 0.1, "delta": 0.0, "delta_low": -0.1, "delta_high": 0.1},
        {"tier": "paraphrase", "mean_cosine": 0.95, "delta": None},
    ]
    png = plot_copyability([("7B", tiers), ("32B", tiers[:1])], tmp_path / "s.png", tau=0.8)
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"
    curve = plot_online(
        {"none": [True, False, True, True], "git_online": [False, True, True, True]}, tmp_path / "o.png", "t"
    )
    assert curve.read_bytes()[:4] == b"\x89PNG"


def test_timeouts_and_empty_answers_are_counted_per_arm():
    recs = _records([True, False, True], [True, True, False])
    recs[3]["outcome"], recs[4]["outcome"] = "timeout", "timeout"
    recs[5]["answer"] = None
    recs[0]["answer"] = "5"
    rows = {r.arm: r for r in summarize(recs, "base", n_resamples=200)}
    assert rows["new"].extra["timeouts"] == 2 and rows["base"].extra["timeouts"] == 0
    assert rows["new"].extra["empty"] == 3 and rows["base"].extra["empty"] == 2


def test_benchmark_of_names_the_table():
    assert benchmark_of({"kind": "math"}) == "MATH" and benchmark_of({"kind": "mcq"}) == "GPQA"


def test_quartiles_cut_the_stream_in_order_and_pair_with_the_baseline():
    recs = []
    for i in range(10):
        recs.append(_rec("none", f"p{i}", i % 2 == 0, i))
        online = _rec("git_online", f"p{i}", i >= 5, i)
        online["memory"] = {"mode": "online", "position": i, "before": {"n": i // 2}}
        recs.append(online)
    qs = quartile_summary(recs, "git_online", "none", n_resamples=200)
    assert [q.n for q in qs] == [2, 3, 2, 3] and [q.positions for q in qs] == [(0, 1), (2, 4), (5, 6), (7, 9)]
    assert [q.accuracy for q in qs] == [0.0, 0.0, 1.0, 1.0]
    assert qs[0].baseline_accuracy == 0.5 and qs[3].delta.delta == pytest.approx(1 - 1 / 3)
    assert qs[0].memory_size == 0.0 and qs[3].memory_size == pytest.approx((3 + 4 + 4) / 3, abs=0.01)
