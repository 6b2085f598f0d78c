"""Wilson and Newcombe intervals against the published values (Newcombe 1998, Tables I and II)."""

from __future__ import annotations

import pytest

from orchestrator.eval.stats import newcombe_difference, wilson_interval


@pytest.mark.parametrize(
    ("successes", "runs", "low", "high"),
    [
        # Newcombe (1998), "Two-sided confidence intervals for the single proportion", method 3.
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_matches_the_published_intervals(
    successes: int, runs: int, low: float, high: float
) -> None:
    assert wilson_interval(successes, runs) == pytest.approx((low, high), abs=5e-5)


def test_wilson_is_exact_at_the_ends_and_symmetric() -> None:
    assert wilson_interval(10, 10)[1] == 1.0
    assert wilson_interval(0, 10)[0] == 0.0
    low, high = wilson_interval(3, 10)
    assert (1 - high, 1 - low) == pytest.approx(wilson_interval(7, 10))
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(("successes", "runs"), [(-1, 5), (6, 5), (1, -1)])
def test_wilson_refuses_impossible_counts(successes: int, runs: int) -> None:
    with pytest.raises(ValueError, match="successes must be between 0 and runs"):
        wilson_interval(successes, runs)


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        # Newcombe (1998), "Interval estimation for the difference between independent
        # proportions", method 10 (hybrid score), the paper's worked examples.
        ((56, 70, 48, 80), (0.2, 0.0524, 0.3339)),
        ((9, 10, 3, 10), (0.6, 0.1705, 0.8090)),
        ((6, 7, 2, 7), (0.5714, 0.0582, 0.8062)),
        ((5, 56, 0, 29), (0.0893, -0.0381, 0.1926)),
    ],
)
def test_newcombe_matches_the_published_intervals(
    counts: tuple[int, int, int, int], expected: tuple[float, float, float]
) -> None:
    assert newcombe_difference(*counts) == pytest.approx(expected, abs=5e-5)


def test_newcombe_is_antisymmetric_and_stays_within_minus_one_and_one() -> None:
    difference, low, high = newcombe_difference(3, 10, 9, 10)
    assert (difference, low, high) == pytest.approx((-0.6, -0.8090, -0.1705), abs=5e-5)
    assert newcombe_difference(10, 10, 0, 10)[1:] == pytest.approx((0.6075, 1.0), abs=5e-4)
