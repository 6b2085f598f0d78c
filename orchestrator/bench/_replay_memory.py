"""Child process of the memory benchmark: replay one trace and report this process's peak RSS.

Run as ``python -m orchestrator.bench._replay_memory TRACE``; prints one JSON object with
``imports_rss_mb`` (after importing the replayer) and ``peak_rss_mb`` (after ``replay --check``'s
work: :func:`~orchestrator.replay.read_trace` and :meth:`~orchestrator.replay.Replay.check`).
A fresh interpreter, so the benchmark driver's own memory does not count.

On Linux ``ru_maxrss`` is carried over from the parent through fork and exec (a child of a
300 MiB parent reports 300 MiB before it has done anything), so the peak is read from the
address space's own high-water mark, ``VmHWM`` in ``/proc/self/status``; ``ru_maxrss`` is the
fallback where there is no ``/proc``.
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

from orchestrator.replay import Replay, read_trace


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


def main(argv: list[str]) -> int:
    imports = _peak_rss_mb()
    divergence = Replay(read_trace(Path(argv[0]))).check()
    report = {
        "imports_rss_mb": imports,
        "peak_rss_mb": _peak_rss_mb(),
        "diverged": divergence is not None,
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
