"""The trace: every event of a run as one JSON line, written by structlog.

One processor chain, built per run by :func:`open_trace` and never installed globally, binds the
run id, numbers events, stamps the time and the trace format, redacts secrets, hands each event
to the terminal sinks, and renders the JSON line. Each line is flushed as it is written, so a
killed run leaves a file whose every complete line parses.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

import attrs
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from orchestrator.tools import looks_secret

#: Bump when a reader of an older format could misread the lines.
TRACE_FORMAT = 1

REDACTED = "[REDACTED]"
_SECRET_KEYS = re.compile(
    r"^(x-api-key|authorization|proxy-authorization|api[_-]?key|.*_api_key|.*secret.*|"
    r".*password.*|.*_token|token|access_token|auth_token|cookie|set-cookie)$",
    re.IGNORECASE,
)
_SECRET_VALUES = re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}")

EventSink = Callable[[Mapping[str, Any]], None]


class SequenceNumber:
    """Adds ``seq``: 1, 2, 3 … within a run (a resumed run goes on from its last number)."""

    def __init__(self, start: int = 0) -> None:
        self._last = start

    def __call__(self, _logger: WrappedLogger, _name: str, event: EventDict) -> EventDict:
        self._last += 1
        event["seq"] = self._last
        return event


class TraceFormatStamp:
    """Adds ``trace_format`` so a reader can refuse lines from a newer writer."""

    def __call__(self, _logger: WrappedLogger, _name: str, event: EventDict) -> EventDict:
        event["trace_format"] = TRACE_FORMAT
        return event


@functools.lru_cache(maxsize=1024)
def _secret_key(name: str) -> bool:
    return _SECRET_KEYS.match(name) is not None


class RedactSecrets:
    """Replaces secrets anywhere in an event: by key name, by known value, by key shape."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= 8}, key=len, reverse=True)

    def __call__(self, _logger: WrappedLogger, _name: str, event: EventDict) -> EventDict:
        return {key: self._clean(key, value) for key, value in event.items()}

    def _clean(self, key: str, value: Any) -> Any:
        # Exact type checks first: every event passes through here, most values are plain.
        kind = type(value)
        if kind is str:
            return REDACTED if value and _secret_key(key) else self._scrub(value)
        if kind is int or kind is bool or kind is float or value is None:
            return value
        if isinstance(value, bytes):
            return REDACTED if value and _secret_key(key) else value
        if isinstance(value, Mapping):
            return {k: self._clean(str(k), v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._clean(key, v) for v in value]
        if isinstance(value, str):
            return REDACTED if value and _secret_key(key) else self._scrub(value)
        return value

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return _SECRET_VALUES.sub(REDACTED, text) if "sk-ant-" in text else text


class EventTee:
    """Hands each finished event to the terminal sinks (the live view, ``--json``)."""

    def __init__(self, sinks: Iterable[EventSink]) -> None:
        self._sinks = tuple(sinks)

    def __call__(self, _logger: WrappedLogger, _name: str, event: EventDict) -> EventDict:
        for sink in self._sinks:
            sink(event)
        return event


class JSONLinesFile:
    """The wrapped logger: writes each rendered line and flushes it at once."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def msg(self, message: str) -> None:
        self._stream.write(message + "\n")
        self._stream.flush()

    info = msg


def secrets_from_environment(env: Mapping[str, str] | None = None) -> list[str]:
    """The values of variables whose names look secret: these never reach a trace."""
    env = os.environ if env is None else env
    return [value for name, value in env.items() if looks_secret(name) and value]


def _serialize(event: Any, **kw: Any) -> str:
    return json.dumps(event, ensure_ascii=False, default=str, separators=(",", ":"))


@attrs.define
class Trace:
    """An open trace: ``log`` is the bound logger the loop writes through."""

    path: Path
    run_id: str
    log: Any
    _stream: IO[str]

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def default_trace_path(workdir: Path, run_id: str) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return workdir / ".orchestrator" / "traces" / f"{stamp}-{run_id}.jsonl"


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def open_trace(
    path: Path,
    *,
    run_id: str | None = None,
    secrets: Iterable[str] = (),
    sinks: Iterable[EventSink] = (),
    append: bool = False,
    first_seq: int = 0,
) -> Trace:
    """Open ``path`` for writing and build the run's processor chain around it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    stream = path.open("a" if append else "w", encoding="utf-8")
    run_id = run_id or new_run_id()
    log = structlog.wrap_logger(
        JSONLinesFile(stream),
        processors=build_processors(secrets=secrets, sinks=sinks, first_seq=first_seq),
        wrapper_class=structlog.BoundLogger,
        context_class=dict,
    ).bind(run_id=run_id)
    return Trace(path, run_id, log, stream)


def build_processors(
    *, secrets: Iterable[str] = (), sinks: Iterable[EventSink] = (), first_seq: int = 0
) -> list[Processor]:
    """The one processor chain every trace uses, in order; the last step renders the line."""
    return [
        SequenceNumber(first_seq),
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
        TraceFormatStamp(),
        RedactSecrets(secrets),
        EventTee(sinks),
        structlog.processors.JSONRenderer(serializer=_serialize),
    ]
