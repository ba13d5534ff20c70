"""Bootstrap intervals of continuous scores (ScienceWorld's 0–100): known cases, a re-computation, bad input."""

from __future__ import annotations

import random

import numpy as np
import pytest

from got_core.bench.stats import DeltaCI, MeanCI, bootstrap_mean_ci, paired_bootstrap_mean_delta
from got_core.errors import InvalidInputError


def _scores(n: int = 60, seed: int = 7) -> tuple[list[float], list[float]]:
    """Two correlated arms of per-episode scores; ``a`` is ahead by about 10 points."""
    rng = random.Random(seed)
    base = [rng.choice([0, 8, 17, 25, 50, 75, 100]) for _ in range(n)]
    a = [min(100.0, b + rng.choice([0, 0, 8, 17, 25])) for b in base]
    return a, [float(b) for b in base]


def test_mean_interval_matches_an_independent_index_resampling():
    a, _ = _scores()
    ci = bootstrap_mean_ci(a, n_resamples=4000, seed=3)
    # the same generator, the same draws, written out with plain numpy per resample
    rng = np.random.default_rng(3)
    idx = rng.integers(0, len(a), size=(4000, len(a)))
    means = sorted(float(np.mean([a[i] for i in row])) for row in idx)
    assert isinstance(ci, MeanCI) and ci.n == len(a)
    assert ci.mean == pytest.approx(sum(a) / len(a))
    assert ci.low == pytest.approx(float(np.quantile(means, 0.025)))
    assert ci.high == pytest.approx(float(np.quantile(means, 0.975)))
    assert ci.low < ci.mean < ci.high


def test_constant_scores_give_a_degenerate_interval():
    ci = bootstrap_mean_ci([25, 25, 25, 25])
    assert (ci.mean, ci.low, ci.high) == (25.0, 25.0, 25.0)


def test_identical_arms_give_zero_delta_not_significant():
    a, _ = _scores()
    d = paired_bootstrap_mean_delta(a, list(a))
    assert isinstance(d, DeltaCI)
    assert (d.delta, d.low, d.high, d.significant) == (0.0, 0.0, 0.0, False)


def test_a_clearly_better_arm_is_significant_and_the_pairing_matters():
    a, b = _scores()
    d = paired_bootstrap_mean_delta(a, b, seed=1)
    assert d.delta == pytest.approx(sum(a) / len(a) - sum(b) / len(b))
    assert d.significant and d.low > 0
    # Unpaired, the same difference drowns in the spread of episode difficulty.
    low_a, high_b = bootstrap_mean_ci(a, seed=1).low, bootstrap_mean_ci(b, seed=1).high
    assert low_a < high_b
    # Swapping the arms mirrors the interval.
    r = paired_bootstrap_mean_delta(b, a, seed=1)
    assert r.delta == pytest.approx(-d.delta) and r.significant


def test_same_seed_same_interval_other_seed_other_draws():
    a, b = _scores()
    assert paired_bootstrap_mean_delta(a, b, seed=5) == paired_bootstrap_mean_delta(a, b, seed=5)
    assert bootstrap_mean_ci(a, seed=5) != bootstrap_mean_ci(a, seed=6)


@pytest.mark.parametrize(
    "values",
    [[], [True, False], [1.0, float("nan")], [1.0, float("inf")], ["50"], None, "100", [None]],
)
def test_bad_scores_are_refused(values):
    with pytest.raises(InvalidInputError):
        bootstrap_mean_ci(values)


def test_unpaired_lengths_and_bad_parameters_are_refused():
    with pytest.raises(InvalidInputError, match="different lengths"):
        paired_bootstrap_mean_delta([1, 2, 3], [1, 2])
    with pytest.raises(InvalidInputError):
        bootstrap_mean_ci([1, 2], n_resamples=0)
    with pytest.raises(InvalidInputError):
        paired_bootstrap_mean_delta([1, 2], [2, 1], level=1.5)
