"""Deliberately slowed (or bloated) variants of what the benchmarks measure.

``tests/test_bench.py`` swaps these in to watch each figure move: a figure that does not move
when what it measures gets slower is a constant, not a measurement. Nothing here is used by the
harness.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from orchestrator.replay import check_trace


def burn(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU (the benchmarks' clock), not of the wall."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


#: How many copies of the trace's events :func:`hoarding_replay` holds: a small trace then
#: stands far above the interpreter's own ~30 MiB, so the test needs no long trace to generate.
HOARDED_COPIES = 10


def hoarding_replay(path: Path) -> Any:
    """``replay --check`` as it was before it streamed, many times over: every event held in
    memory at once, :data:`HOARDED_COPIES` times."""
    lines = [line for line in path.read_bytes().splitlines() if line.strip()]
    hoard = [[json.loads(line) for line in lines] for _ in range(HOARDED_COPIES)]
    divergence = check_trace(path)
    return divergence is not None and all(hoard)
