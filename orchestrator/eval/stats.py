"""Intervals for success rates: Wilson's score interval and Newcombe's interval for a difference.

**Wilson (1927).** For k successes in n runs, the 95% interval is the set of rates p whose score
test does not reject p: ``(p̂ + z²/2n ± z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n)``. Unlike the
textbook ``p̂ ± z·√(p̂(1−p̂)/n)`` it stays inside [0, 1] and keeps close to its nominal coverage
for the small n and the rates near 0 or 1 that an eval produces.

**Newcombe (1998), method 10, the "hybrid score" interval.** For the difference d = p̂₁ − p̂₂ of
two independent rates with Wilson intervals (l₁, u₁) and (l₂, u₂)::

    lower = d − √((p̂₁ − l₁)² + (u₂ − p̂₂)²)
    upper = d + √((u₁ − p̂₁)² + (p̂₂ − l₂)²)

It inherits Wilson's good behaviour at small n and extreme rates, where the Wald interval for a
difference is far too narrow. Runs are treated as independent Bernoulli trials pooled over the
suite's tasks; with few tasks, tasks of very different difficulty make the true uncertainty
larger than the interval says, so the report also shows each task on its own.
"""

from __future__ import annotations

import math

#: The two-sided 95% normal quantile.
Z_95 = 1.959963984540054


def wilson_interval(successes: int, runs: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval for ``successes`` out of ``runs``; (0, 1) when there are none."""
    if runs < 0 or not 0 <= successes <= runs:
        raise ValueError(f"successes must be between 0 and runs ({runs}), got {successes}")
    if runs == 0:
        return 0.0, 1.0
    rate = successes / runs
    z2 = z * z
    centre = (rate + z2 / (2 * runs)) / (1 + z2 / runs)
    half = z * math.sqrt(rate * (1 - rate) / runs + z2 / (4 * runs * runs)) / (1 + z2 / runs)
    # Clamp away rounding: at k = 0 or k = n the bound is exactly 0 or 1.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == runs else min(1.0, centre + half)
    return low, high


def newcombe_difference(
    successes_a: int, runs_a: int, successes_b: int, runs_b: int, z: float = Z_95
) -> tuple[float, float, float]:
    """The difference of rates a − b and its Newcombe hybrid score interval (method 10)."""
    rate_a = successes_a / runs_a if runs_a else 0.0
    rate_b = successes_b / runs_b if runs_b else 0.0
    low_a, high_a = wilson_interval(successes_a, runs_a, z)
    low_b, high_b = wilson_interval(successes_b, runs_b, z)
    difference = rate_a - rate_b
    lower = difference - math.sqrt((rate_a - low_a) ** 2 + (high_b - rate_b) ** 2)
    upper = difference + math.sqrt((high_a - rate_a) ** 2 + (rate_b - low_b) ** 2)
    return difference, max(-1.0, lower), min(1.0, upper)
