"""Benchmarks: harness overhead, plan cost at scale, replay speed, and token cost vs the seeds.

``python -m orchestrator.bench`` (``make bench``) prints a table; ``--json`` prints the same
figures as one JSON object; ``--quick`` shrinks every size (the test suite uses it);
``--profile`` adds a pyinstrument profile of our loop's 200-round session on stderr. The
baseline, the seeds' s03 loop, is :mod:`orchestrator.bench.baseline`. Benchmarks never fail:
the exit status is 0 whatever the numbers. See ``docs/performance.md``.
"""

from __future__ import annotations

from orchestrator.bench._figures import QUICK, Measured, Sizes, measure_all
from orchestrator.bench._report import TARGETS, Target, as_json

__all__ = ["QUICK", "TARGETS", "Measured", "Sizes", "Target", "as_json", "measure_all"]
