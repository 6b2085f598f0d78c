"""The exit codes every command shares.

A module of their own, so any command can name them without importing what reports a run
(see :mod:`orchestrator.report`).
"""

from __future__ import annotations

EXIT_DONE = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_INTERRUPTED = 130
