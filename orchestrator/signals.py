"""SIGTERM and SIGHUP end a run the way Ctrl-C does: tools killed, trace closed, one exit code.

``timeout``, a CI cancel, ``docker stop`` and a closed terminal send these. The handler raises
:class:`Stopped` (a ``KeyboardInterrupt``), so every place that already cleans up after Ctrl-C
(the bash tool kills its process tree, the loop records ``run.finished``) does so for them too.

Python drops an exception raised where it cannot propagate (an at-fork hook, a finalizer: it
prints "Exception ignored" and goes on), so a stop signal arriving there would be lost and the
run would wait out its command. Every stop signal is therefore also counted: a wait loop takes
:func:`interrupt_mark` before it starts and calls :func:`raise_if_interrupted_since` as it polls.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import FrameType

#: Exit codes by signal, as a shell reports a process killed by it (128 + the number).
EXIT_BY_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
_NAMES = {signal.SIGTERM: "terminated (SIGTERM)", signal.SIGHUP: "hung up (SIGHUP)"}


class Stopped(KeyboardInterrupt):
    """A stop signal turned into an interrupt; ``signum`` says which one."""

    def __init__(self, signum: signal.Signals) -> None:
        super().__init__(_NAMES.get(signum, signum.name))
        self.signum = signum


class _Arrivals:
    """Stop signals received by this process; mutation is the point (the handlers count).

    A plain class, not attrs: every CLI start imports this module, and ``--version`` should not
    pay for attrs.
    """

    __slots__ = ("count", "last")

    def __init__(self) -> None:
        self.count = 0
        self.last: signal.Signals | None = None

    def arrived(self, signum: int) -> signal.Signals:
        self.count += 1
        self.last = signal.Signals(signum)
        return self.last


_ARRIVALS = _Arrivals()


def interrupt_mark() -> int:
    """How many stop signals have arrived so far (see :func:`raise_if_interrupted_since`)."""
    return _ARRIVALS.count


def raise_if_interrupted_since(mark: int) -> None:
    """Raise the interrupt of a stop signal that arrived since ``mark`` (its own was swallowed).

    Only in the main thread, where Python delivers signals: a worker's wait is not the one the
    signal meant to stop.
    """
    if _ARRIVALS.count == mark or threading.current_thread() is not threading.main_thread():
        return
    last = _ARRIVALS.last
    if last in _NAMES:
        assert last is not None
        raise Stopped(last)
    raise KeyboardInterrupt


class StopRecord:
    """Which stop signal arrived: the loop swallows the interrupt, but the exit code needs it."""

    __slots__ = ("received",)

    def __init__(self, received: signal.Signals | None = None) -> None:
        self.received = received

    def __repr__(self) -> str:
        return f"StopRecord(received={self.received!r})"

    @property
    def exit_code(self) -> int:
        return EXIT_BY_SIGNAL[self.received or signal.SIGINT]


@contextmanager
def stop_signals_interrupt() -> Iterator[StopRecord]:
    """While inside, stop signals raise (SIGTERM and SIGHUP :class:`Stopped`), each counted.

    The old handlers come back on the way out.
    """
    record = StopRecord()

    def handle(signum: int, _frame: FrameType | None) -> None:
        # Once is enough: a second signal during the clean-up must not cut the clean-up short.
        for stop in _NAMES:
            signal.signal(stop, signal.SIG_IGN)
        record.received = _ARRIVALS.arrived(signum)
        raise Stopped(record.received)

    def interrupt(signum: int, _frame: FrameType | None) -> None:
        _ARRIVALS.arrived(signum)
        raise KeyboardInterrupt

    with _handled_by({**dict.fromkeys(_NAMES, handle), signal.SIGINT: interrupt}):
        yield record


@contextmanager
def stop_signals_deferred(wake: Callable[[], object]) -> Iterator[None]:
    """While inside, a stop signal raises nothing: it is counted, then ``wake()`` is called.

    For a main thread that waits on its own worker threads. An interrupt raised inside a
    library's critical section (``concurrent.futures.wait`` taking each future's lock, a
    progress bar's update) can leave a lock held that a worker then waits on for ever, and the
    clean-up that joins the workers never ends. Inside, the code notices the signal where it is
    safe to stop, through :func:`interrupt_mark`; ``wake`` runs in the signal handler and must
    be safe there (``queue.SimpleQueue.put`` is). Outside the main thread, where Python
    delivers no signals, it changes nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def defer(signum: int, _frame: FrameType | None) -> None:
        _ARRIVALS.arrived(signum)
        wake()

    with _handled_by(dict.fromkeys((signal.SIGINT, *_NAMES), defer)):
        yield


_Handler = Callable[[int, FrameType | None], None]


@contextmanager
def _handled_by(handlers: Mapping[signal.Signals, _Handler]) -> Iterator[None]:
    """While inside, each signal goes to its handler; the old handlers come back on the way out."""
    previous = {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
