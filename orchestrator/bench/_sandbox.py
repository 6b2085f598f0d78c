"""The per-command cost of the sandbox: plain ``bash -c true`` against the bash tool's modes.

Wall-clock milliseconds, medians over alternating repeats: the cost lives in child processes
(the launcher and bash, or bwrap's namespaces and mounts), not in this one.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from orchestrator.tools import BashTool, Workdir
from orchestrator.tools.sandbox import Sandbox, SandboxPolicy, find_bwrap, probe_bwrap

Figures = tuple[dict[str, float], dict[str, str]]


def _ms(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) * 1000


def sandbox_cost(repeats: int, workdir: Path) -> Figures:
    """Milliseconds per command: plain bash, the workdir mode, and bwrap where it runs."""
    root = workdir / "sandbox-bench"
    root.mkdir(exist_ok=True)
    policy = SandboxPolicy(root)
    plain = lambda: subprocess.run(["bash", "-c", "true"], check=False)  # noqa: E731
    sides: dict[str, Callable[[], object]] = {
        "bash_ms_per_command_plain": plain,
        "sandbox_ms_per_command_workdir": lambda: BashTool(
            Workdir(root), sandbox=Sandbox("workdir", policy)
        ).run({"command": "true"}),
    }
    notes: dict[str, str] = {}
    binary = find_bwrap()
    problem = "no bwrap found" if binary is None else probe_bwrap(binary)
    if problem is None and binary is not None:
        bwrap = BashTool(Workdir(root), sandbox=Sandbox("bwrap", policy, binary))
        sides["sandbox_ms_per_command_bwrap"] = lambda: bwrap.run({"command": "true"})
        notes["sandbox"] = f"bwrap {binary.path} (from {binary.origin})"
    else:
        notes["sandbox"] = f"bwrap cannot run here ({problem}); its figure is 0"
    times: dict[str, list[float]] = {name: [] for name in sides}
    for side in sides.values():
        side()  # warm the page cache and the /etc walk
    for repeat in range(repeats):
        order = list(sides.items())
        for name, side in order if repeat % 2 == 0 else reversed(order):
            times[name].append(_ms(side))
    figures = {name: round(statistics.median(found), 2) for name, found in times.items()}
    figures.setdefault("sandbox_ms_per_command_bwrap", 0.0)
    return figures, notes
