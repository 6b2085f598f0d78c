"""The plan-scaling figure for boards with dependencies: full rewrites that carry ``blocked_by``.

A board of n items carries about 1.5 n edges (20 items, 30 edges): a chain, each item waiting
for the one before, plus skip edges to the one before that. Each update rewrites the whole list
with every ``blocked_by`` list, completes the item in progress and starts the next, so every
update runs the graph check (unknown ids, cycles), the ``dependencies_completed`` guard and the
render's ``(blocked by …)`` and ``Next ready`` lines. The exponent of cost against n says
whether that stays linear.
"""

from __future__ import annotations

import gc
import math
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.bench._timing import Found, slope, us
from orchestrator.bench._workload import plan_items, plan_update_seconds
from orchestrator.protocols import JSONObject

if TYPE_CHECKING:
    from orchestrator.bench._figures import Sizes

#: The issue's board: 20 items, 30 dependency edges.
SMALL = 20


def dependency_edges(size: int) -> dict[str, list[str]]:
    """round(1.5 n) backward edges on items ``"1"`` … ``str(n)``: acyclic by construction."""
    blockers: dict[str, list[str]] = {str(n): [] for n in range(1, size + 1)}
    for number in range(2, size + 1):
        blockers[str(number)].append(str(number - 1))
    skips = [n for n in range(3, size + 1) if n % 2] + [n for n in range(4, size + 1) if not n % 2]
    for number in skips[: max(0, round(1.5 * size) - (size - 1))]:
        blockers[str(number)].append(str(number - 2))
    return blockers


def _payload(size: int, active: int, blockers: dict[str, list[str]]) -> JSONObject:
    items = plan_items(size, active)
    for item in items:
        item["blocked_by"] = blockers[item["id"]]
    return {"items": items}


def _update_seconds(size: int, updates: int) -> float:
    """Seconds per full rewrite of ``size`` items with their edges, moving one item."""
    blockers = dependency_edges(size)
    return plan_update_seconds(size, updates, lambda n, active: _payload(n, active, blockers))


def measure_plan_dependencies(sizes: Sizes, workdir: Path) -> Found:
    wanted = sorted({SMALL, *(size for size in sizes.plan_sizes if size >= SMALL)})
    samples: dict[int, list[float]] = {size: [] for size in wanted}
    _update_seconds(SMALL, 2)  # warm-up
    for _ in range(sizes.plan_samples):
        for size in wanted:  # interleaved, so a noisy moment spreads over every size
            gc.collect()
            samples[size].append(_update_seconds(size, sizes.plan_updates))
    medians = {size: statistics.median(times) for size, times in samples.items()}
    exponent = slope([math.log(size) for size in wanted], [math.log(medians[s]) for s in wanted])
    edges = sum(map(len, dependency_edges(SMALL).values()))
    figures = {
        "plan_update_us_20_deps": us(medians[SMALL]),
        "plan_deps_scaling_exponent": round(exponent, 3),
    }
    floors = {"plan_deps_scaling_exponent": "linear = 1.0"}
    context = {
        "plan update with dependencies": (
            f"a full rewrite of n items with about 1.5n blocked_by edges ({SMALL} items, "
            f"{edges} edges), completing one item and starting the next; per size (us): "
            + ", ".join(f"{size}: {us(medians[size]):g}" for size in wanted)
        )
    }
    return figures, floors, context
