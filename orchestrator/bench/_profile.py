"""``--profile``: where our loop spends a scripted session's time, by pyinstrument."""

from __future__ import annotations

from pathlib import Path

from orchestrator.bench._figures import Sizes
from orchestrator.bench._workload import run_ours, session_script


def profile_session(sizes: Sizes, workdir: Path) -> str:
    """A pyinstrument call tree of one session of our loop (the overhead benchmark's)."""
    from pyinstrument import Profiler  # a dev dependency: imported only when asked for

    rounds = sizes.session_rounds
    script = session_script(rounds)
    trace = workdir / "profile.jsonl"
    profiler = Profiler(interval=0.0002)
    with profiler:
        run_ours(script, trace, rounds=rounds)
    text: str = profiler.output_text(unicode=True, color=False)
    return text
