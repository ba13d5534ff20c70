"""Bootstrap statistics (§5): known cases, independent re-computations, determinism, bad input."""

from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats as scipy_stats

from got_core.bench.stats import (
    AccuracyCI,
    DeltaCI,
    bootstrap_accuracy_ci,
    format_accuracy,
    format_delta_row,
    paired_bootstrap_delta,
)
from got_core.errors import GotUserError, InvalidInputError


def _fixed_arms() -> tuple[list[int], list[int]]:
    """A fixed 200-problem case: two correlated arms, a ahead of b by about 6 pp."""
    rng = random.Random(1234)
    # Correlated arms, as in the paper: most problems are solved by both or by neither.
    cells = [(0.50, (1, 1)), (0.62, (1, 0)), (0.68, (0, 1)), (1.01, (0, 0))]
    a, b = [], []
    for _ in range(200):
        u = rng.random()
        x, y = next(pair for bound, pair in cells if u < bound)
        a.append(x)
        b.append(y)
    return a, b


def _python_percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), written out by hand."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])


# --- known cases -------------------------------------------------------------------------


def test_identical_arms_give_zero_delta_not_significant():
    a, _ = _fixed_arms()
    result = paired_bootstrap_delta(a, list(a))
    assert result.delta == 0.0
    assert result.low <= 0.0 <= result.high
    assert result.significant is False
    assert result.n == len(a)
    assert format_delta_row(result) == "Δ +0.0 pp [+0.0, +0.0]"


def test_all_correct_arm_has_degenerate_interval():
    ci = bootstrap_accuracy_ci([True] * 50)
    assert (ci.acc, ci.low, ci.high, ci.n) == (1.0, 1.0, 1.0, 50)


def test_large_consistent_gain_is_significant():
    a = [1] * 90 + [0] * 10
    b = [0] * 90 + [0] * 10
    result = paired_bootstrap_delta(a, b)
    assert result.delta == pytest.approx(0.9)
    assert result.low > 0 and result.significant
    assert format_delta_row(result).endswith(" *")


def test_consistent_loss_is_significant_with_negative_interval():
    a = [0] * 40 + [1] * 60
    b = [1] * 40 + [1] * 60
    result = paired_bootstrap_delta(a, b)
    assert result.delta == pytest.approx(-0.4)
    assert result.high < 0 and result.significant


# --- independent computations --------------------------------------------------------------


def test_paired_delta_matches_scipy_paired_percentile_bootstrap():
    a, b = _fixed_arms()
    ours = paired_bootstrap_delta(a, b, n_resamples=20_000, seed=7)
    ref = scipy_stats.bootstrap(
        (np.array(a, dtype=float), np.array(b, dtype=float)),
        statistic=lambda x, y, axis=-1: x.mean(axis=axis) - y.mean(axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=20_000,
        confidence_level=0.95,
        method="percentile",
        random_state=np.random.default_rng(99),
    )
    assert ours.delta == pytest.approx((sum(a) - sum(b)) / len(a))
    # Monte-Carlo error of a 2.5% quantile at 20k resamples is well under one problem (0.005).
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.006)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.006)


def test_paired_delta_matches_pure_python_index_resampling():
    a, b = _fixed_arms()
    n = len(a)
    rng = random.Random(2024)
    deltas = []
    for _ in range(4000):
        idx = [rng.randrange(n) for _ in range(n)]
        deltas.append(sum(a[i] - b[i] for i in idx) / n)
    deltas.sort()
    ours = paired_bootstrap_delta(a, b, n_resamples=10_000, seed=3)
    assert ours.low == pytest.approx(_python_percentile(deltas, 0.025), abs=0.01)
    assert ours.high == pytest.approx(_python_percentile(deltas, 0.975), abs=0.01)


def test_accuracy_ci_matches_pure_python_resampling_and_normal_approximation():
    a, _ = _fixed_arms()
    n = len(a)
    rng = random.Random(5)
    means = sorted(sum(a[rng.randrange(n)] for _ in range(n)) / n for _ in range(4000))
    ci = bootstrap_accuracy_ci(a, seed=11)
    assert ci.acc == pytest.approx(sum(a) / n)
    assert ci.low == pytest.approx(_python_percentile(means, 0.025), abs=0.01)
    assert ci.high == pytest.approx(_python_percentile(means, 0.975), abs=0.01)
    # And the Wald interval, a third, analytic reference.
    p = ci.acc
    half = 1.959964 * (p * (1 - p) / n) ** 0.5
    assert ci.low == pytest.approx(p - half, abs=0.01)
    assert ci.high == pytest.approx(p + half, abs=0.01)


def test_lower_level_gives_narrower_interval():
    a, b = _fixed_arms()
    wide = paired_bootstrap_delta(a, b, level=0.99)
    narrow = paired_bootstrap_delta(a, b, level=0.80)
    assert wide.low < narrow.low and narrow.high < wide.high
    assert narrow.level == 0.80


# --- determinism -----------------------------------------------------------------------------


def test_same_seed_same_result_and_other_seed_differs():
    a, b = _fixed_arms()
    first = paired_bootstrap_delta(a, b, seed=42)
    again = paired_bootstrap_delta(a, b, seed=42)
    assert first == again
    others = {(paired_bootstrap_delta(a, b, seed=s, n_resamples=500).low) for s in range(8)}
    assert len(others) > 1
    assert bootstrap_accuracy_ci(a, seed=1) == bootstrap_accuracy_ci(a, seed=1)


def test_numpy_and_bool_inputs_are_accepted_alike():
    a, b = _fixed_arms()
    plain = paired_bootstrap_delta(a, b, seed=5)
    as_bool = paired_bootstrap_delta([bool(x) for x in a], [bool(x) for x in b], seed=5)
    as_numpy = paired_bootstrap_delta(np.array(a, dtype=bool), np.array(b, dtype=np.int64), seed=5)
    assert plain == as_bool == as_numpy


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b",
    [
        ([1, 0, 1], [1, 0]),
        ([], []),
        ([1, 0.5], [1, 0]),
        ([1, 0], [1, 2]),
        (["1", "0"], [1, 0]),
        ([None, 1], [1, 0]),
        ([1.0, 0.0], [1, 0]),
        ("1010", "1010"),
        (5, 5),
    ],
)
def test_bad_paired_input_raises_typed_error(a, b):
    with pytest.raises(InvalidInputError):
        paired_bootstrap_delta(a, b)


@pytest.mark.parametrize(
    "kwargs",
    [{"n_resamples": 0}, {"n_resamples": 2.5}, {"level": 1.0}, {"level": 0}, {"seed": -1}, {"seed": None}],
)
def test_bad_parameters_raise_user_error(kwargs):
    with pytest.raises(GotUserError):
        bootstrap_accuracy_ci([1, 0, 1], **kwargs)


def test_empty_accuracy_input_raises():
    with pytest.raises(InvalidInputError, match="empty"):
        bootstrap_accuracy_ci([])


# --- formatting ------------------------------------------------------------------------------


def test_format_delta_row_matches_paper_style():
    cell = format_delta_row(DeltaCI(delta=0.034, low=0.008, high=0.060, n=500, significant=True))
    assert cell == "Δ +3.4 pp [+0.8, +6.0] *"
    cell = format_delta_row(DeltaCI(delta=-0.012, low=-0.05, high=0.021, n=500, significant=False))
    assert cell == "Δ -1.2 pp [-5.0, +2.1]"
    assert format_delta_row(DeltaCI(0.0, -0.0001, 0.0, 10, False)) == "Δ +0.0 pp [+0.0, +0.0]"
    with pytest.raises(InvalidInputError):
        format_delta_row(AccuracyCI(0.5, 0.4, 0.6, 10))


def test_format_accuracy():
    assert format_accuracy(AccuracyCI(acc=0.624, low=0.581, high=0.666, n=500)) == "62.4% [58.1, 66.6]"


def test_importing_got_core_does_not_load_stats_or_numpy_eagerly():
    code = (
        "import sys, got_core; assert 'got_core.bench.stats' not in sys.modules; "
        "import got_core.bench.stats; assert 'numpy' not in sys.modules, 'stats imported numpy at import'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
