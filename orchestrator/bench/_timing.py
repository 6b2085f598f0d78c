"""How the benchmarks time things: alternating repeats, median ratios, fitted slopes."""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable, Sequence

#: What one benchmark returns: its figures, the floor each figure is measured against (shown
#: beside it), and context lines that explain the run.
Found = tuple[dict[str, float], dict[str, str], dict[str, str]]


def alternate(
    first: Callable[[], float],
    second: Callable[[], float],
    repeats: int,
    *,
    warm_up: bool = True,
) -> tuple[list[float], list[float]]:
    """Time two sides alternately, swapping which goes first, after an untimed run of each."""
    if warm_up:
        first()
        second()
    a: list[float] = []
    b: list[float] = []
    for repeat in range(repeats):
        order = ((first, a), (second, b)) if repeat % 2 == 0 else ((second, b), (first, a))
        for side, times in order:
            gc.collect()
            times.append(side())
    return a, b


def median_ratio(top: Sequence[float], bottom: Sequence[float]) -> float:
    return statistics.median(t / max(b, 1e-9) for t, b in zip(top, bottom, strict=True))


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The least-squares slope of ``ys`` against ``xs``."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    num = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    den = sum((x - mx) ** 2 for x in xs)
    return num / den


def us(seconds: float) -> float:
    """Seconds as microseconds, to two decimals."""
    return round(seconds * 1e6, 2)
