"""A claimer process for the shared-board concurrency tests: claim, work a moment, complete.

``python -m tests.board_worker URL AGENT`` loops until the board is all done, printing one
line per item it completed. It may be SIGKILLed at any point: its claim must expire.
"""

from __future__ import annotations

import sys
import time

from orchestrator.board.store import BoardError, NothingClaimable
from orchestrator.board.stores import open_store


def main(url: str, agent: str, lease: float) -> None:
    with open_store(url) as store:
        while True:
            try:
                item = store.claim(agent, lease=lease)
            except NothingClaimable as nothing:
                if nothing.reason == "all done":
                    return
                time.sleep(0.02)  # others hold the rest, or blockers are unfinished
                continue
            time.sleep(0.001)  # the work: long enough that a kill often lands mid-claim
            try:
                store.complete(item.id, agent=agent)
            except BoardError:
                # Too slow (a loaded machine): the lease ran out and another agent took the
                # item over. The board refused the stale completion, as it must.
                continue
            print(item.id, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 2.0)
