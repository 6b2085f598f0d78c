"""The team's figures: items per second through the real loop, by the number of workers.

A real team (:func:`orchestrator.team.lead.run_team`): a scripted lead writes N independent
items, and 1, 2 or 4 ``orchestrator work --scripted`` processes claim them, each item a
session of its own (real loop, tools, board, trace) committed in the worker's worktree and
merged into the integration branch, which merges back at the end. The figure is items per
second of wall-clock time, lead and process starts included; the ratio to one worker says
what more workers buy. The same is measured with four workers, one SIGKILLed after its first
claim: its item waits out the lease (2 s here) and another worker finishes it.

On a machine with two cores, workers share them with git and SQLite: expect a modest rise
from one worker to two and little past it. Each item's session is mostly CPU (the loop, the
trace, git), not a model's latency, which is what workers overlap with a real model.
"""

from __future__ import annotations

import io
import os
import re
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.bench._timing import Found

if TYPE_CHECKING:
    from orchestrator.bench._figures import Sizes

WORKERS = (1, 2, 4)
#: The killed run: four workers, one of them SIGKILLed after its first claim.
KILLED = ((4, "worker-2"),)
LEASE = 2.0


class _Out(io.StringIO):
    """The team's output, kept to find a worker's pid in it (written from several threads)."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            return super().write(text)

    def seen(self) -> str:
        with self.lock:
            return self.getvalue()


def _repository(folder: Path) -> Path:
    from orchestrator.harness_git import run_git

    folder.mkdir()
    (folder / "README.md").write_text("# bench\n", encoding="utf-8")
    run_git(folder, "init", "-q", "-b", "main")
    run_git(folder, "add", "-A")
    run_git(folder, "commit", "-q", "-m", "start")
    return folder


def _team_seconds(folder: Path, items: int, workers: int, kill: str | None) -> float:
    """Wall-clock seconds for a team to do ``items``; raises if it did not do them all."""
    from orchestrator.agent import load_options
    from orchestrator.team.lead import TeamPlan, run_team
    from orchestrator.team.scripted import ScriptedLead

    repo = _repository(folder / f"repo-{workers}-{kill or 'all'}")
    plan_items = tuple((str(n), f"Write notes/bench-{n}.md", ()) for n in range(1, items + 1))

    def options(where: Path, agent: str, trace: Path, url: str) -> Any:
        settings = {"board": url, "agent": agent, "approval": "auto", "lease": LEASE}
        return load_options(where, settings, trace=trace)

    out = _Out()
    plan = TeamPlan(
        task="bench",
        workers=workers,
        workdir=repo,
        board=None,
        base=folder / "team",
        options=options,
        model=lambda _agent: ScriptedLead(plan_items),
        out=out,
        lease=LEASE,
        scripted=True,
    )
    killer = None
    if kill is not None:
        killer = threading.Thread(target=_kill_after_claim, args=(out, kill), daemon=True)
        killer.start()
    started = time.perf_counter()
    result = run_team(plan)
    seconds = time.perf_counter() - started
    if killer is not None:
        killer.join(5)
    if result.unfinished or result.board_check != "ok" or not result.merged:
        raise RuntimeError(f"the bench team did not finish: {result.closing_lines()}")
    return seconds


def _kill_after_claim(out: _Out, worker: str) -> None:
    """SIGKILL ``worker`` once it has claimed an item (read from the team's output)."""
    deadline = time.monotonic() + 120
    pid_line = re.compile(rf"/{worker}: pid (\d+) ")
    while time.monotonic() < deadline:
        seen = out.seen()
        found = pid_line.search(seen)
        if found and f"{worker} │ claimed #" in seen:
            os.kill(int(found[1]), signal.SIGKILL)
            return
        time.sleep(0.01)


def measure_team(sizes: Sizes, workdir: Path) -> Found:
    items = sizes.team_items
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="team-bench-", dir=workdir) as scratch:
        folder = Path(scratch)
        for workers in WORKERS:
            seconds = _team_seconds(folder, items, workers, None)
            figures[f"team_items_per_second_{workers}"] = round(items / seconds, 2)
        for workers, killed in KILLED:
            seconds = _team_seconds(folder, items, workers, killed)
            figures[f"team_items_per_second_{workers}_one_killed"] = round(items / seconds, 2)
    one = figures["team_items_per_second_1"]
    for name in list(figures):
        if name != "team_items_per_second_1":
            ratio = name.replace("team_items_per_second_", "team_speedup_")
            figures[ratio] = round(figures[name] / one, 2)
    floors = {name: f"one worker: {one:.2f} items/s" for name in figures if "speedup" in name}
    context = {
        "team_items": (
            f"{items} independent items, scripted workers, real loop, git and SQLite; "
            f"killed runs: one worker SIGKILLed after its first claim, lease {LEASE:g} s; "
            f"{os.cpu_count()} cores"
        )
    }
    return figures, floors, context
