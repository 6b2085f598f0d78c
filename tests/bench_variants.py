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


def hoarding_replay(path: Path) -> Any:
    """``replay --check`` as it was before it streamed: every event held in memory at once."""
    events = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    divergence = check_trace(path)
    return divergence is not None and bool(events)
