"""SIGTERM and SIGHUP end a run the way Ctrl-C does: tools killed, trace closed, one exit code.

``timeout``, a CI cancel, ``docker stop`` and a closed terminal send these. The handler raises
:class:`Stopped` (a ``KeyboardInterrupt``), so every place that already cleans up after Ctrl-C
(the bash tool kills its process tree, the loop records ``run.finished``) does so for them too.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import attrs

#: Exit codes by signal, as a shell reports a process killed by it (128 + the number).
EXIT_BY_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
_NAMES = {signal.SIGTERM: "terminated (SIGTERM)", signal.SIGHUP: "hung up (SIGHUP)"}


class Stopped(KeyboardInterrupt):
    """A stop signal turned into an interrupt; ``signum`` says which one."""

    def __init__(self, signum: signal.Signals) -> None:
        super().__init__(_NAMES.get(signum, signum.name))
        self.signum = signum


@attrs.define
class StopRecord:
    """Which stop signal arrived: the loop swallows the interrupt, but the exit code needs it."""

    received: signal.Signals | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_BY_SIGNAL[self.received or signal.SIGINT]


@contextmanager
def stop_signals_interrupt() -> Iterator[StopRecord]:
    """While inside, SIGTERM and SIGHUP raise :class:`Stopped`; the old handlers come back."""
    record = StopRecord()

    def handle(signum: int, _frame: FrameType | None) -> None:
        # Once is enough: a second signal during the clean-up must not cut the clean-up short.
        for stop in _NAMES:
            signal.signal(stop, signal.SIG_IGN)
        record.received = signal.Signals(signum)
        raise Stopped(record.received)

    previous = {stop: signal.signal(stop, handle) for stop in _NAMES}
    try:
        yield record
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
