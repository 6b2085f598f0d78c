"""The shared board's figures: claims per second, a claim against its floor, updates lost.

Claims per second at 1, 4 and 16 claimer processes on SQLite; a claim against a bare SQLite
write transaction; and updates lost (which must be none).

Each claimer is a process of its own (``python -m orchestrator.bench._board``): it claims the
next ready item, completes it, and goes on until the board is all done. The floor is the same
number of processes doing the same number of bare ``BEGIN IMMEDIATE`` write transactions
(two per item, as a claim and a completion are), measured in the same run.

Both sides are timed from one start signal, given once every process has imported what it
needs and opened its connection, to the last one's exit: a process start costs a claimer
(which imports the item machine) several times what it costs the floor (which imports
``sqlite3``), and that is not a claim's cost. The start is reported beside the figure.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.bench._timing import Found

if TYPE_CHECKING:
    from orchestrator.bench._figures import Sizes

CLAIMERS = (1, 4, 16)


def _ready_then_wait() -> None:
    """Say this process is set up, then wait for the start signal (a line on stdin)."""
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()


def _claims(url: str, agent: str) -> None:
    from orchestrator.board.store import NothingClaimable
    from orchestrator.board.stores import open_store

    with open_store(url, create=False) as store:
        _ready_then_wait()
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
    _ready_then_wait()
    for _ in range(transactions):
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("UPDATE counter SET value = value + 1 WHERE id = 1")
        connection.execute("COMMIT")
    connection.close()


def _wall(commands: list[list[str]]) -> tuple[float, float]:
    """Seconds from the start signal to the last exit; seconds the processes took to set up."""
    launched = time.perf_counter()
    processes = [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for command in commands
    ]
    try:
        for process in processes:
            assert process.stdout is not None
            if process.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a benchmark process failed to start: {process.args!r}")
        started = time.perf_counter()
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.close()
        for process in processes:
            if process.wait() != 0:
                raise RuntimeError(f"a benchmark process failed: {process.args!r}")
        return time.perf_counter() - started, started - launched
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def _drain(folder: Path, items: int, claimers: int) -> tuple[float, int, float]:
    """Seconds for ``claimers`` processes to work ``items`` items, lost updates, start seconds."""
    from orchestrator.board.check import check_log
    from orchestrator.board.stores import open_store, sqlite_url

    url = sqlite_url(folder / f"board-{claimers}.db")
    with open_store(url) as store, store.change() as change:
        for number in range(items):
            change.add(f"item {number + 1}")
    me = [sys.executable, "-m", "orchestrator.bench._board"]
    seconds, start = _wall([[*me, "claims", url, f"agent-{n}"] for n in range(claimers)])
    with open_store(url) as store:
        final, entries = store.snapshot()
    completions = Counter(e.item for e in entries if e.trigger == "complete")
    lost = sum(completions[item.id] != 1 for item in final)
    lost += int(check_log(entries, final) is not None)
    return seconds, lost, start


def _floor_seconds(folder: Path, items: int, claimers: int) -> tuple[float, float]:
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
            seconds, lost_here, _start = _drain(folder, items, claimers)
            figures[f"board_claims_per_s_{claimers}"] = round(items / seconds, 1)
            lost += lost_here
        # Side by side at 16 processes: the board's claim cycle, then the bare floor.
        claims, _, claims_start = _drain(folder, items, 16)
        floor, floor_start = _floor_seconds(folder, items, 16)
    figures["board_claim_vs_floor"] = round(claims / floor, 2)
    figures["board_lost_updates"] = float(lost)
    floors = {
        "board_claim_vs_floor": f"bare write transactions: {2 * items / floor:.0f}/s",
        "board_lost_updates": "each board's log, replayed by board check",
    }
    context = {
        "board_items": f"{items} items, claim + complete each, SQLite WAL",
        "board_process_start": (
            f"16 processes' start (imports, open), not timed: claimers {claims_start:.2f} s, "
            f"floor {floor_start:.2f} s"
        ),
    }
    return figures, floors, context


if __name__ == "__main__":
    if sys.argv[1] == "claims":
        _claims(sys.argv[2], sys.argv[3])
    else:
        _floor(sys.argv[2], int(sys.argv[3]))
