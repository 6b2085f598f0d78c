"""How long the command line takes to start: ``orchestrator --version`` against a bare interpreter.

Wall-clock, because a start is mostly imports and the interpreter's own set-up in a child
process; medians of side-by-side ratios, the two sides alternating, so a busy machine slows both.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from orchestrator.bench._timing import Found, alternate, median_ratio


def cli_command() -> list[str]:
    """The installed ``orchestrator`` script beside this interpreter, else ``python -m``."""
    script = Path(sys.executable).parent / "orchestrator"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "orchestrator"]


def _seconds(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def cli_start(repeats: int) -> Found:
    """``cli_start_vs_python``: the median ratio of ``--version`` to ``python -c pass``."""
    command = [*cli_command(), "--version"]
    bare = [sys.executable, "-c", "pass"]
    ours, floor = alternate(lambda: _seconds(command), lambda: _seconds(bare), repeats)
    ratio = median_ratio(ours, floor)
    floor_ms = sorted(floor)[len(floor) // 2] * 1000
    ours_ms = sorted(ours)[len(ours) // 2] * 1000
    return (
        {"cli_start_vs_python": round(ratio, 2), "cli_start_ms": round(ours_ms, 1)},
        {"cli_start_vs_python": f"python -c pass: {floor_ms:.1f} ms"},
        {"cli start": f"{' '.join(command)}: median of {repeats} alternating repeats"},
    )
