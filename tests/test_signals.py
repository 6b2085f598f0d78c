"""SIGTERM and SIGHUP end a run like Ctrl-C: tools killed, trace closed, exit 143 or 129.

A real ``orchestrator run`` subprocess runs a bash call that sleeps (with a child of its own in
the background); the signal arrives while it runs. Survivors are looked for by a unique number
in their command line, since the tool's processes live in their own session.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pexpect
import pytest

from orchestrator.script import parse_script
from orchestrator.signals import (
    EXIT_BY_SIGNAL,
    Stopped,
    interrupt_mark,
    raise_if_interrupted_since,
    stop_signals_deferred,
    stop_signals_interrupt,
)
from orchestrator.testing import MessagesServer
from tests.test_chat import TIMEOUT, signal_during_bash

# Signals to real processes: the e2e layer (docs/development.md).
pytestmark = pytest.mark.e2e


def _survivors(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in command:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_kills_the_tool_closes_the_trace_and_exits_128_plus_n(
    tmp_path: Path, stop: signal.Signals
) -> None:
    marker = f"30.{uuid.uuid4().int % 10**9:09d}"
    command = f"sleep {marker} & sleep {marker}"
    script = parse_script(
        {
            "name": "stop",
            "turns": [
                {"tool_calls": [{"name": "bash", "input": {"command": command}}]},
                {"text": "never reached"},
            ],
        },
        source="test",
    )
    trace = tmp_path / "run.jsonl"

    def command_started(process: subprocess.Popen[str]) -> None:
        # Waits for the command or for the run's end, whichever comes first: on a loaded
        # machine the start may be slow, and a run that ended says why in its trace.
        deadline = time.monotonic() + TIMEOUT
        while not _survivors(marker) and process.poll() is None:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if not _survivors(marker):
            process.kill()
            out, err = process.communicate()
            pytest.fail(
                f"the command never started (exit {process.returncode}):\n{out}\n{err}\n"
                + trace.read_text(encoding="utf-8", errors="replace")[-4000:]
            )

    with MessagesServer(script) as server:
        process, out, err = signal_during_bash(server, tmp_path, trace, stop, command_started)
    assert process.returncode == EXIT_BY_SIGNAL[stop], err
    assert "Traceback" not in err
    name = "terminated (SIGTERM)" if stop == signal.SIGTERM else "hung up (SIGHUP)"
    assert f"orchestrator: run interrupted: {name}" in err
    assert _survivors(marker) == []
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert events[-1]["event"] == "run.finished"
    assert (events[-1]["status"], events[-1]["reason"]) == ("interrupted", name)
    assert f"trace: {trace}" in out
    # The process group leader is gone too: nothing of the run is left.
    with pytest.raises(ProcessLookupError):
        os.kill(process.pid, 0)


def test_a_closed_terminal_ends_the_chat_with_129(tmp_path: Path) -> None:
    from tests.test_chat import _server, _spawn_chat, _state, wait_for_terminal_mode

    work = tmp_path / "work"
    work.mkdir()
    with _server({"text": "unused"}) as server:
        child = _spawn_chat(server, work)
        wait_for_terminal_mode(child, raw=True)  # at the prompt, reading keys
        child.kill(signal.SIGHUP)
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == EXIT_BY_SIGNAL[signal.SIGHUP]
    assert not list((_state(work) / "sessions").glob("*/*.jsonl"))


@pytest.mark.parametrize(
    ("stop", "raised"),
    [(signal.SIGTERM, Stopped), (signal.SIGHUP, Stopped), (signal.SIGINT, KeyboardInterrupt)],
)
def test_a_stop_signal_python_swallowed_is_raised_again_by_the_next_check(
    stop: signal.Signals, raised: type[BaseException]
) -> None:
    with stop_signals_interrupt() as record:
        mark = interrupt_mark()
        raise_if_interrupted_since(mark)  # nothing arrived: nothing raised
        # As an at-fork hook or a finalizer would: the interrupt is caught and dropped.
        with contextlib.suppress(KeyboardInterrupt):
            os.kill(os.getpid(), stop)
            time.sleep(5)  # the handler runs at the next bytecode; never reached
        worker_raised: list[BaseException] = []

        def in_a_worker() -> None:
            try:
                raise_if_interrupted_since(mark)
            except BaseException as error:  # the point is that none arrives
                worker_raised.append(error)

        worker = threading.Thread(target=in_a_worker)
        worker.start()
        worker.join()
        assert worker_raised == []  # signals stop the main thread's wait, not a worker's
        with pytest.raises(raised) as caught:
            raise_if_interrupted_since(mark)
        if raised is Stopped:
            assert caught.value.signum == stop  # type: ignore[attr-defined]
            assert record.received == stop
        raise_if_interrupted_since(interrupt_mark())  # a fresh mark sees nothing


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_deferred_stop_signal_wakes_the_waiter_and_raises_nothing_until_it_is_over(
    stop: signal.Signals,
) -> None:
    woken: list[int] = []
    with stop_signals_interrupt():
        mark = interrupt_mark()
        with stop_signals_deferred(lambda: woken.append(interrupt_mark())):
            os.kill(os.getpid(), stop)
            deadline = time.monotonic() + 30
            while not woken and time.monotonic() < deadline:
                time.sleep(0.001)  # an interrupt here would fail the test
        assert woken == [mark + 1]  # counted before the wake, so the waiter sees it
        assert interrupt_mark() == mark + 1
        # Out of it, the CLI's own handlers are back: the next signal raises again.
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), stop)
            time.sleep(5)
