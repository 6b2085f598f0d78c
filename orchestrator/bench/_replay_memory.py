"""Child process of the memory benchmark: replay one trace and report this process's peak RSS.

Run as ``python -m orchestrator.bench._replay_memory TRACE [--replayer MODULE:FUNCTION]``;
prints one JSON object with ``imports_rss_mb`` (after importing the CLI) and ``peak_rss_mb``
(after ``orchestrator replay --check TRACE`` ran in this process through the CLI's own entry
point, or the given function of one ``Path`` argument, which the tests use to watch the figure
move). A fresh interpreter, so the benchmark driver's own memory does not count.

On Linux ``ru_maxrss`` is carried over from the parent through fork and exec (a child of a
300 MiB parent reports 300 MiB before it has done anything), so the peak is read from the
address space's own high-water mark, ``VmHWM`` in ``/proc/self/status``; ``ru_maxrss`` is the
fallback where there is no ``/proc``.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import resource
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator import cli


def _peak_rss_mb() -> float:
    try:
        status = Path("/proc/self/status").read_text(encoding="ascii")
    except OSError:
        status = ""
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # reported in kB
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes there, KiB here


def _replay_check(path: Path) -> bool:
    """``orchestrator replay --check PATH`` as the command runs it; True when it diverged.

    Its one line goes nowhere: this process's stdout is the JSON report alone.
    """
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            cli.main(["replay", "--check", str(path)])
    except SystemExit as exit_status:
        return exit_status.code != 0
    return False


def _replayer(argv: list[str]) -> Callable[[Path], Any]:
    if len(argv) == 3 and argv[1] == "--replayer":
        module, _, name = argv[2].partition(":")
        found: Callable[[Path], Any] = getattr(importlib.import_module(module), name)
        return found
    return _replay_check


def main(argv: list[str]) -> int:
    replay = _replayer(argv)
    imports = _peak_rss_mb()
    diverged = replay(Path(argv[0]))
    report = {
        "imports_rss_mb": imports,
        "peak_rss_mb": _peak_rss_mb(),
        "diverged": bool(diverged),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
