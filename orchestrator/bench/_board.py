"""The shared board's figures: claims per second, a claim against its floor, updates lost.

Claims per second at 1, 4 and 16 claimer processes on SQLite; a claim against a bare SQLite
write transaction; and updates lost (which must be none).

Each claimer is a process of its own (``python -m orchestrator.bench._board``): it claims the
next ready item, completes it, and goes on until the board is all done. The floor is the same
number of processes doing the same number of bare ``BEGIN IMMEDIATE`` write transactions
(two per item, as a claim and a completion are), alternated with the claimers three times in
the same run; the figure is the median of the three ratios. Both are timed from launch to the
last exit, so a claimer's start (importing the item machine, opening and
checking the store) is part of its cost.
"""

from __future__ import annotations

import itertools
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.bench._timing import Found, alternate, median_ratio

if TYPE_CHECKING:
    from orchestrator.bench._figures import Sizes

CLAIMERS = (1, 4, 16)


def _claims(url: str, agent: str) -> None:
    from orchestrator.board.store import NothingClaimable
    from orchestrator.board.stores import open_store

    with open_store(url, create=False) as store:
        while True:
            try:
                item = store.claim(agent)
            except NothingClaimable as nothing:
                if nothing.reason == "all done":
                    return
                time.sleep(0.001)
                continue
            store.complete(item.id, agent=agent)


def _floor(path: str, transactions: int) -> None:
    import sqlite3

    connection = sqlite3.connect(path, timeout=60, isolation_level=None)
    # WAL was set once by the parent (it persists): sixteen processes switching it at once
    # race on creating the -wal and -shm files.
    connection.execute("PRAGMA synchronous=NORMAL")
    for _ in range(transactions):
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("UPDATE counter SET value = value + 1 WHERE id = 1")
        connection.execute("COMMIT")
    connection.close()


def _wall(commands: list[list[str]]) -> float:
    started = time.perf_counter()
    processes = [subprocess.Popen(command) for command in commands]
    for process in processes:
        if process.wait() != 0:
            raise RuntimeError(f"a benchmark process failed: {process.args!r}")
    return time.perf_counter() - started


def _drain(folder: Path, items: int, claimers: int) -> tuple[float, int]:
    """Seconds for ``claimers`` processes to work ``items`` items; updates lost doing it."""
    from orchestrator.board.check import check_log
    from orchestrator.board.stores import open_store, sqlite_url

    url = sqlite_url(folder / f"board-{claimers}.db")
    with open_store(url) as store, store.change() as change:
        for number in range(items):
            change.add(f"item {number + 1}")
    me = [sys.executable, "-m", "orchestrator.bench._board"]
    seconds = _wall([[*me, "claims", url, f"agent-{n}"] for n in range(claimers)])
    with open_store(url) as store:
        final, entries = store.snapshot()
    completions = Counter(e.item for e in entries if e.trigger == "complete")
    lost = sum(completions[item.id] != 1 for item in final)
    lost += int(check_log(entries, final) is not None)
    return seconds, lost


def _floor_seconds(folder: Path, items: int, claimers: int) -> float:
    import sqlite3

    path = folder / "floor.db"
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA journal_mode=WAL")  # as the board's store runs
        connection.execute("CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, value INT)")
        connection.execute("INSERT OR REPLACE INTO counter VALUES (1, 0)")
    each = 2 * items // claimers
    me = [sys.executable, "-m", "orchestrator.bench._board"]
    return _wall([[*me, "floor", str(path), str(each)] for _ in range(claimers)])


def measure_board(sizes: Sizes, workdir: Path) -> Found:
    items = 64 if sizes.quick else 2000
    figures: dict[str, float] = {}
    lost = 0
    with tempfile.TemporaryDirectory(prefix="board-bench-", dir=workdir) as scratch:
        folder = Path(scratch)
        for claimers in CLAIMERS:
            seconds, lost_here = _drain(folder, items, claimers)
            figures[f"board_claims_per_s_{claimers}"] = round(items / seconds, 1)
            lost += lost_here
        # Side by side at 16 processes, alternated (which goes first swaps each round): the
        # board's claim cycle and the bare floor. One pair alone moved by a third between
        # runs on a busy machine, where every hand-over of the board waits on the scheduler.
        rounds = itertools.count()

        def claims() -> float:
            round_folder = folder / f"round-{next(rounds)}"
            round_folder.mkdir()
            seconds, lost_here = _drain(round_folder, items, 16)
            nonlocal lost
            lost += lost_here
            return seconds

        claim_times, floor_times = alternate(
            claims,
            lambda: _floor_seconds(folder, items, 16),
            1 if sizes.quick else 3,
            warm_up=False,  # the drains above warmed both sides' files and imports
        )
        floor = statistics.median(floor_times)
    figures["board_claim_vs_floor"] = round(median_ratio(claim_times, floor_times), 2)
    figures["board_lost_updates"] = float(lost)
    floors = {
        "board_claim_vs_floor": f"bare write transactions: {2 * items / floor:.0f}/s",
        "board_lost_updates": "each board's log, replayed by board check",
    }
    context = {"board_items": f"{items} items, claim + complete each, SQLite WAL"}
    return figures, floors, context


if __name__ == "__main__":
    if sys.argv[1] == "claims":
        _claims(sys.argv[2], sys.argv[3])
    else:
        _floor(sys.argv[2], int(sys.argv[3]))
