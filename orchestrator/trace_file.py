"""Reading a trace file back: each line checked, a cut-off last line tolerated, events streamed.

:func:`read_trace` checks a whole trace line by line and says clearly what is wrong with a bad
one; it keeps nothing but counts, and every reader after it streams the file again one line at a
time, so memory stays flat however long the trace is. This module needs neither the machines
nor the logger, so ``show`` and ``sessions`` read traces without loading the loop;
:mod:`orchestrator.replay` re-drives the machines from what it reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import attrs
import orjson

from orchestrator.inert import json_escaped

#: The trace format this orchestrator writes and the newest it reads. Bump it when a reader of
#: an older format could misread the lines.
TRACE_FORMAT = 1

#: Half a UTF-16 surrogate pair: a JSON text may escape one (``"\\udc80"``), UTF-8 cannot hold it.
_SURROGATE = re.compile("[\ud800-\udfff]")


def json_utf8(text: str) -> bytes:
    r"""JSON ``text`` as UTF-8, a lone surrogate written as its JSON escape (the same string).

    A response's JSON may carry ``"\ud800"`` and Python reads it as that lone half; inside a
    JSON string its escape means the same, and outside strings JSON has no such character.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return escape_surrogates(text).encode("utf-8")


def json_text(value: Any) -> str:
    """``value`` as one line of JSON for stdout (``default=str``).

    What the JSON outputs print: it can be written as UTF-8 even when a text in it holds half a
    surrogate pair, and no character a terminal would act on is written raw
    (:func:`orchestrator.inert.json_escaped`).
    """
    return json_escaped(json.dumps(value, ensure_ascii=False, default=str))


def escape_surrogates(text: str) -> str:
    """JSON ``text`` with each lone surrogate as its JSON escape, so it can be written as UTF-8."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


KNOWN_EVENTS = frozenset(
    {
        "run.started",
        "run.finished",
        "loop.transition",
        "plan.transition",
        "model.request",
        "model.response",
        "tool.call",
        "tool.result",
        "plan.updated",
        "plan.rejected",
        "audit.reminder",
        "guard.blocked",
        "context.window",
        "context.cleared",
        "context.compacted",
        "mcp.server",
        "mcp.error",
        "loop.done_check",
        "plan.check",
        "hook.updated_input",
    }
)


class TraceError(Exception):
    """A trace that cannot be read at all; ``str()`` is one line for a person."""


@attrs.frozen
class TraceLine:
    """One known event and its line number; ``skipped_before`` counts unknown events just before."""

    number: int
    event: Mapping[str, Any]
    skipped_before: int = 0

    @property
    def name(self) -> str:
        return str(self.event.get("event"))


@attrs.frozen
class TraceFile:
    """A checked trace on disk: what its pass found, and its events streamed on demand."""

    path: Path
    last: TraceLine
    truncated_tail: bool = False
    unknown_events: int = 0

    @property
    def warnings(self) -> list[str]:
        notes = []
        if self.truncated_tail:
            notes.append(f"{self.path}: the last line is cut off (a killed run?); ignored it")
        if self.unknown_events:
            notes.append(f"{self.path}: skipped {self.unknown_events} events of unknown types")
        return notes

    def events(self) -> Iterator[TraceLine]:
        """The known events, read from the file one line at a time."""
        yield from _Scan(self.path)

    @property
    def lines(self) -> tuple[TraceLine, ...]:
        """Every known event at once: for tests and small traces; readers use :meth:`events`."""
        return tuple(self.events())


class _Scan:
    """One pass over a trace file: yields its known events and counts what it tolerated."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.truncated = False
        self.unknown = 0
        self.blank = True

    def __iter__(self) -> Iterator[TraceLine]:
        with _open_trace_file(self.path) as stream:
            yield from self._lines(stream)

    def _lines(self, stream: IO[bytes]) -> Iterator[TraceLine]:
        path, skipped = self.path, 0
        for index, raw in enumerate(stream, start=1):
            if not raw.strip():
                continue
            self.blank = False
            event = _parse_line(path, index, raw.rstrip(b"\n"), is_tail=not raw.endswith(b"\n"))
            if event is None:
                self.truncated = True
                continue
            version = event.get("trace_format", TRACE_FORMAT)
            if not isinstance(version, int) or version > TRACE_FORMAT:
                raise TraceError(
                    f"{path}:{index}: trace_format {version} is newer than this orchestrator "
                    f"reads ({TRACE_FORMAT}); upgrade orchestrator to replay it"
                )
            if event["event"] not in KNOWN_EVENTS:
                self.unknown += 1
                skipped += 1
                continue
            yield TraceLine(index, event, skipped)
            skipped = 0


def _open_trace_file(path: Path) -> IO[bytes]:
    try:
        return path.open("rb")
    except FileNotFoundError:
        raise TraceError(f"{path}: no such trace file") from None
    except OSError as error:
        raise TraceError(f"{path}: cannot read the trace: {error.strerror}") from None


def _parse_line(path: Path, index: int, raw: bytes, *, is_tail: bool) -> dict[str, Any] | None:
    """The event on one line; None for a cut-off last line; :class:`TraceError` otherwise."""
    try:
        event = orjson.loads(raw)
    except orjson.JSONDecodeError:
        # json reads what orjson refuses (NaN, big integers, lone surrogates, UTF-16) and words
        # the error as the trace's readers always have.
        try:
            event = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            if is_tail:
                return None
            reason = getattr(error, "msg", str(error))
            raise TraceError(f"{path}:{index}: not a JSON line ({reason})") from None
    if not isinstance(event, dict) or not isinstance(event.get("event"), str):
        raise TraceError(f'{path}:{index}: not a trace event (no "event" field)')
    return event


def read_trace(path: Path) -> TraceFile:
    """Check a trace file line by line; :class:`TraceError` for all but a cut-off last line.

    Nothing is kept but counts and the last event: the readers stream the file again.
    """
    scan = _Scan(path)
    last: TraceLine | None = None
    try:
        for line in scan:
            last = line
    except OSError as error:
        raise TraceError(f"{path}: cannot read the trace: {error.strerror}") from None
    if scan.blank:
        raise TraceError(f"{path}: the trace is empty")
    if last is None:
        raise TraceError(f"{path}: no trace events in the file")
    return TraceFile(path, last, scan.truncated, scan.unknown)
