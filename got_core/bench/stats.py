"""Bootstrap confidence intervals for benchmark accuracy (§5 of arXiv 2606.14470).

The paper reports every arm as accuracy plus the paired difference to a
baseline arm on the *same* problems: ``Δ +3.4 pp [+0.8, +6.0] *``, a
percentile bootstrap 95% interval from 10 000 resamples, starred when the
interval excludes zero. This module computes exactly that.

Why the resampling is done on category counts: per-problem correctness is
binary, so a paired bootstrap resample of ``n`` problems is fully described
by how many of the drawn problems fall in each of the four (a, b) outcome
cells — (1, 1), (1, 0), (0, 1), (0, 0). Drawing ``n`` problems with
replacement is *exactly* a multinomial draw over those cells with the
observed cell frequencies, so we draw the counts directly
(``Generator.multinomial``): the same distribution as index resampling, in
``O(n_resamples)`` instead of ``O(n_resamples · n)`` memory and time.

numpy is imported lazily, so ``import got_core`` stays light and a missing
numpy surfaces as :class:`~got_core.errors.MissingExtraError`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from got_core.errors import InvalidInputError, MissingExtraError

__all__ = [
    "AccuracyCI",
    "DeltaCI",
    "MeanCI",
    "bootstrap_accuracy_ci",
    "bootstrap_mean_ci",
    "format_accuracy",
    "format_delta_row",
    "paired_bootstrap_delta",
    "paired_bootstrap_mean_delta",
]


@dataclass(frozen=True)
class AccuracyCI:
    """One arm's accuracy with its percentile bootstrap interval.

    Attributes:
        acc: observed accuracy in [0, 1].
        low: lower bound of the interval.
        high: upper bound of the interval.
        n: number of problems.
        level: confidence level of the interval (0.95 for the paper's tables).
    """

    acc: float
    low: float
    high: float
    n: int
    level: float = 0.95


@dataclass(frozen=True)
class DeltaCI:
    """Paired difference of accuracy, arm ``a`` minus arm ``b``, with its interval.

    Attributes:
        delta: observed ``acc(a) - acc(b)`` in [-1, 1] (a fraction, not pp).
        low: lower bound of the bootstrap interval.
        high: upper bound of the bootstrap interval.
        n: number of paired problems.
        significant: ``True`` when the interval excludes 0 (the paper's ``*``).
        level: confidence level of the interval.
    """

    delta: float
    low: float
    high: float
    n: int
    significant: bool
    level: float = 0.95


def _numpy() -> Any:
    try:
        import numpy
    except ImportError as exc:  # pragma: no cover - numpy ships with every bench install
        raise MissingExtraError("bootstrap statistics", "bench", exc) from None
    return numpy


def _as_binary(values: Any, what: str) -> list[int]:
    """Validate per-problem correctness and return it as a list of 0/1 ints.

    Accepted elements: ``bool``, numpy booleans, and integers equal to 0 or 1.
    Floats (even 0.0/1.0), strings and ``None`` are refused: a score that is
    not a verdict must not slip into an accuracy silently.
    """
    if isinstance(values, (str, bytes)) or values is None:
        raise InvalidInputError(f"{what} must be a sequence of booleans, not {type(values).__name__}")
    try:
        items = list(values)
    except TypeError:
        raise InvalidInputError(
            f"{what} must be a sequence of booleans (one per problem), not {type(values).__name__}"
        ) from None
    if not items:
        raise InvalidInputError(f"{what} is empty; a confidence interval needs at least one problem")
    out: list[int] = []
    for i, v in enumerate(items):
        # numpy bool_ is not a numbers.Integral; its type name is the portable check.
        is_bool = isinstance(v, bool) or type(v).__name__ in ("bool_", "bool")
        if not is_bool and not isinstance(v, numbers.Integral):
            raise InvalidInputError(f"{what}[{i}] is {v!r} ({type(v).__name__}); pass True/False or 0/1 per problem")
        iv = int(v)
        if iv not in (0, 1):
            raise InvalidInputError(f"{what}[{i}] is {iv}; correctness must be 0 or 1")
        out.append(iv)
    return out


def _check_params(n_resamples: Any, level: Any, seed: Any) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, numbers.Integral) or n_resamples < 1:
        raise InvalidInputError(f"n_resamples must be a positive integer, not {n_resamples!r}")
    if isinstance(level, bool) or not isinstance(level, numbers.Real) or not 0 < float(level) < 1:
        raise InvalidInputError(f"level must be a number strictly between 0 and 1, not {level!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InvalidInputError(f"seed must be a non-negative integer (runs must be reproducible), not {seed!r}")


def _percentiles(np: Any, samples: Any, level: float) -> tuple[float, float]:
    alpha = (1.0 - float(level)) / 2.0
    low, high = np.quantile(samples, [alpha, 1.0 - alpha])
    return float(low), float(high)


def bootstrap_accuracy_ci(
    correct: Sequence[bool | int],
    n_resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> AccuracyCI:
    """Percentile bootstrap interval of one arm's accuracy.

    Args:
        correct: per-problem correctness (``bool`` or 0/1 ``int``), one per problem.
        n_resamples: number of bootstrap resamples (10 000 in the paper).
        seed: seed of the numpy generator; the same seed gives the same interval.
        level: confidence level, strictly between 0 and 1.

    Returns:
        :class:`AccuracyCI` with the observed accuracy and the interval bounds.

    Raises:
        InvalidInputError: empty input, a non-boolean element, or bad parameters.
        MissingExtraError: numpy is not installed.
    """
    _check_params(n_resamples, level, seed)
    x = _as_binary(correct, "correct")
    np = _numpy()
    n = len(x)
    k = sum(x)
    rng = np.random.default_rng(int(seed))
    # Resampling n binary outcomes with replacement: the number of correct draws
    # is Binomial(n, k/n), so draw it directly (see the module docstring).
    means = rng.binomial(n, k / n, size=int(n_resamples)) / n
    low, high = _percentiles(np, means, level)
    return AccuracyCI(acc=k / n, low=low, high=high, n=n, level=float(level))


def paired_bootstrap_delta(
    a: Sequence[bool | int],
    b: Sequence[bool | int],
    n_resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> DeltaCI:
    """Paired percentile bootstrap interval of ``acc(a) - acc(b)`` (§5, the Δ columns).

    Both arms must have been run on the same problems in the same order: a
    resample draws *problems*, and each drawn problem contributes both arms'
    verdicts, so between-problem difficulty cancels out.

    Args:
        a: per-problem correctness of the arm under test.
        b: per-problem correctness of the baseline arm, aligned with ``a``.
        n_resamples: number of bootstrap resamples (10 000 in the paper).
        seed: seed of the numpy generator; the same seed gives the same interval.
        level: confidence level, strictly between 0 and 1.

    Returns:
        :class:`DeltaCI`; ``significant`` is ``True`` when the interval excludes 0.

    Raises:
        InvalidInputError: different lengths, empty input, a non-boolean element,
            or bad parameters.
        MissingExtraError: numpy is not installed.
    """
    _check_params(n_resamples, level, seed)
    xa = _as_binary(a, "a")
    xb = _as_binary(b, "b")
    if len(xa) != len(xb):
        raise InvalidInputError(
            f"arms have different lengths ({len(xa)} vs {len(xb)}); a paired bootstrap needs "
            "both arms' verdicts on the same problems, aligned by position"
        )
    np = _numpy()
    n = len(xa)
    n10 = sum(1 for u, v in zip(xa, xb) if u and not v)  # a right, b wrong
    n01 = sum(1 for u, v in zip(xa, xb) if v and not u)  # b right, a wrong
    n_same = n - n10 - n01  # both right or both wrong: contribute 0 to Δ
    rng = np.random.default_rng(int(seed))
    counts = rng.multinomial(n, [n10 / n, n01 / n, n_same / n], size=int(n_resamples))
    deltas = (counts[:, 0] - counts[:, 1]) / n
    low, high = _percentiles(np, deltas, level)
    # Guard the zero boundary against float noise: exactly-zero bounds are not "excluding 0".
    significant = bool(low > 0.0 or high < 0.0)
    return DeltaCI(delta=(n10 - n01) / n, low=low, high=high, n=n, significant=significant, level=float(level))


def _signed_pp(x: float, decimals: int) -> str:
    value = round(100.0 * x, decimals)
    if value == 0:
        value = 0.0  # no "-0.0"
    return f"{value:+.{decimals}f}"


def format_delta_row(delta: DeltaCI, decimals: int = 1, marker: str = "*") -> str:
    """Render a Δ cell as the paper's tables do: ``"Δ +3.4 pp [+0.8, +6.0] *"``.

    Args:
        delta: the result of :func:`paired_bootstrap_delta`.
        decimals: digits after the point, in percentage points.
        marker: appended (after a space) when the interval excludes 0.

    Returns:
        The cell text; no marker when the difference is not significant.

    Raises:
        InvalidInputError: ``delta`` is not a :class:`DeltaCI` or ``decimals`` is negative.
    """
    if not isinstance(delta, DeltaCI):
        raise InvalidInputError(f"format_delta_row needs a DeltaCI, not {type(delta).__name__}")
    if not isinstance(decimals, int) or decimals < 0:
        raise InvalidInputError(f"decimals must be a non-negative integer, not {decimals!r}")
    for name in ("delta", "low", "high"):
        if not math.isfinite(getattr(delta, name)):
            raise InvalidInputError(f"DeltaCI.{name} is not finite")
    cell = (
        f"Δ {_signed_pp(delta.delta, decimals)} pp "
        f"[{_signed_pp(delta.low, decimals)}, {_signed_pp(delta.high, decimals)}]"
    )
    return f"{cell} {marker}" if delta.significant and marker else cell


def format_accuracy(ci: AccuracyCI, decimals: int = 1) -> str:
    """Render an accuracy cell: ``"62.4% [58.1, 66.6]"``.

    Args:
        ci: the result of :func:`bootstrap_accuracy_ci`.
        decimals: digits after the point, in percent.

    Returns:
        The cell text.

    Raises:
        InvalidInputError: ``ci`` is not an :class:`AccuracyCI` or ``decimals`` is negative.
    """
    if not isinstance(ci, AccuracyCI):
        raise InvalidInputError(f"format_accuracy needs an AccuracyCI, not {type(ci).__name__}")
    if not isinstance(decimals, int) or decimals < 0:
        raise InvalidInputError(f"decimals must be a non-negative integer, not {decimals!r}")
    return f"{100 * ci.acc:.{decimals}f}% [{100 * ci.low:.{decimals}f}, {100 * ci.high:.{decimals}f}]"


# ----------------------------------------------------------------------------- continuous scores
# ScienceWorld's task score is a number in [0, 100] per episode, not a verdict; its
# intervals resample episodes by index (n is an episode count, so O(n_resamples · n) is small).


@dataclass(frozen=True)
class MeanCI:
    """One arm's mean score with its percentile bootstrap interval.

    Attributes:
        mean: observed mean of the scores.
        low: lower bound of the interval.
        high: upper bound of the interval.
        n: number of scores (episodes).
        level: confidence level of the interval.
    """

    mean: float
    low: float
    high: float
    n: int
    level: float = 0.95


def _as_scores(values: Any, what: str) -> list[float]:
    """Validate per-episode scores: finite real numbers (booleans refused: a verdict is not a score)."""
    if isinstance(values, (str, bytes)) or values is None:
        raise InvalidInputError(f"{what} must be a sequence of numbers, not {type(values).__name__}")
    try:
        items = list(values)
    except TypeError:
        raise InvalidInputError(
            f"{what} must be a sequence of numbers (one per episode), not {type(values).__name__}"
        ) from None
    if not items:
        raise InvalidInputError(f"{what} is empty; a confidence interval needs at least one score")
    out: list[float] = []
    for i, v in enumerate(items):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
            raise InvalidInputError(f"{what}[{i}] is {v!r}; pass one finite number per episode")
        out.append(float(v))
    return out


def bootstrap_mean_ci(
    values: Sequence[float],
    n_resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> MeanCI:
    """Percentile bootstrap interval of a mean score (episodes resampled with replacement).

    Args:
        values: one score per episode (any finite numbers, e.g. ScienceWorld's 0–100).
        n_resamples: number of bootstrap resamples.
        seed: seed of the numpy generator; the same seed gives the same interval.
        level: confidence level, strictly between 0 and 1.

    Returns:
        :class:`MeanCI` with the observed mean and the interval bounds.

    Raises:
        InvalidInputError: empty input, a non-numeric or non-finite element, or bad parameters.
        MissingExtraError: numpy is not installed.
    """
    _check_params(n_resamples, level, seed)
    x = _as_scores(values, "values")
    np = _numpy()
    arr = np.asarray(x, dtype=float)
    rng = np.random.default_rng(int(seed))
    idx = rng.integers(0, len(x), size=(int(n_resamples), len(x)))
    low, high = _percentiles(np, arr[idx].mean(axis=1), level)
    return MeanCI(mean=float(arr.mean()), low=low, high=high, n=len(x), level=float(level))


def paired_bootstrap_mean_delta(
    a: Sequence[float],
    b: Sequence[float],
    n_resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> DeltaCI:
    """Paired percentile bootstrap interval of ``mean(a) - mean(b)`` over the same episodes.

    A resample draws episode indices; each drawn episode contributes both arms' scores,
    so differences in episode difficulty cancel out (as in :func:`paired_bootstrap_delta`).

    Args:
        a: per-episode scores of the arm under test.
        b: per-episode scores of the baseline arm, aligned with ``a``.
        n_resamples: number of bootstrap resamples.
        seed: seed of the numpy generator.
        level: confidence level, strictly between 0 and 1.

    Returns:
        :class:`DeltaCI` in the scores' own unit; ``significant`` when the interval excludes 0.

    Raises:
        InvalidInputError: different lengths, empty input, a non-numeric element, or bad parameters.
        MissingExtraError: numpy is not installed.
    """
    _check_params(n_resamples, level, seed)
    xa = _as_scores(a, "a")
    xb = _as_scores(b, "b")
    if len(xa) != len(xb):
        raise InvalidInputError(
            f"arms have different lengths ({len(xa)} vs {len(xb)}); a paired bootstrap needs "
            "both arms' scores on the same episodes, aligned by position"
        )
    np = _numpy()
    diff = np.asarray(xa, dtype=float) - np.asarray(xb, dtype=float)
    rng = np.random.default_rng(int(seed))
    idx = rng.integers(0, len(diff), size=(int(n_resamples), len(diff)))
    low, high = _percentiles(np, diff[idx].mean(axis=1), level)
    significant = bool(low > 0.0 or high < 0.0)
    return DeltaCI(
        delta=float(diff.mean()), low=low, high=high, n=len(diff), significant=significant, level=float(level)
    )
