"""The trace: every event of a run as one JSON line, written by structlog.

One processor chain, built per run by :func:`open_trace` and never installed globally, binds the
run id, numbers events, stamps the time and the trace format, redacts secrets, hands each event
to the terminal sinks, and renders the JSON line as bytes. Each line goes to the file with one
unbuffered ``os.write`` as it is rendered, so a killed run leaves a file whose every complete
line parses.

The chain follows structlog's performance recipe: few processors, built once per trace, bytes
out of an ``orjson`` renderer, a timestamp made from ``time.time_ns()`` with the date part
cached per second, and a bound logger of our own (:class:`TraceLogger`, structlog's
custom-wrapper recipe) whose ``info`` goes straight through the chain to the file. Redaction
looks where a secret can appear: the rendered line is searched for the known secret values
(prebuilt when the trace opens) and the shape of an API key, and the key names are judged
(an event's key set once, nested keys once per name), and a line where ``orjson`` handed a
value to its default (a namedtuple, a mapping that is not a dict, a datetime) is suspect
whatever it holds. Only a suspect line is walked and redacted field by field, and rendered
again the way :func:`json.dumps` renders it; any other line is the line the walk would have
produced, byte for byte (``tests/test_trace.py`` checks both).
"""

from __future__ import annotations

import datetime as dt
import errno
import functools
import itertools
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

import attrs
import orjson
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from orchestrator.tools.secrets import looks_secret
from orchestrator.trace_file import TRACE_FORMAT, json_utf8

REDACTED = "[REDACTED]"
_SECRET_KEYS = re.compile(
    r"^(x-api-key|authorization|proxy-authorization|api[_-]?key|.*_api_key|.*secret.*|"
    r".*password.*|.*_token|token|access_token|auth_token|cookie|set-cookie)$",
    re.IGNORECASE,
)
_SECRET_VALUES = re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}")
#: What every line with a key's shape in it holds: such a line takes the exact path.
_KEY_SHAPE = b"sk-ant-"

EventSink = Callable[[Mapping[str, Any]], None]
#: What writing to a terminal that is gone raises: a hung-up tty, a closed pipe.
TERMINAL_GONE = frozenset({errno.EIO, errno.EPIPE})

_time_ns = time.time_ns
_write = os.write


class TraceStamps:
    """Adds ``seq``, ``ts`` and ``trace_format`` to every event.

    ``seq`` counts 1, 2, 3 … within a run (a resumed run goes on from its last number); ``ts``
    is the UTC time, ISO 8601 with microseconds and ``Z``; ``trace_format`` lets a reader refuse
    lines from a newer writer. One processor for the three, as structlog's performance advice
    has it; the date and time of day are formatted once per second, the microseconds each time.
    """

    def __init__(self, start: int = 0) -> None:
        self._seq = itertools.count(start + 1)
        self._second = -1
        self._prefix = ""

    def __call__(self, _logger: WrappedLogger, _name: str, event: EventDict) -> EventDict:
        event["seq"] = next(self._seq)
        second, micros = divmod(_time_ns() // 1000, 1_000_000)
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)) + "."
        # %-formatting of one int is the cheapest spelling CPython has (f-strings with a format
        # spec cost a quarter more).
        event["ts"] = self._prefix + "%06dZ" % micros  # noqa: UP031
        event["trace_format"] = TRACE_FORMAT
        return event


@functools.lru_cache(maxsize=1024)
def _secret_key(name: str) -> bool:
    return _SECRET_KEYS.match(name) is not None


class RedactSecrets:
    """Replaces secrets anywhere in an event: by key name, by known value, by key shape."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= 8}, key=len, reverse=True)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values redacted wherever they appear (eight characters or more), longest first."""
        return tuple(self._secrets)

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
    """Hands each finished event to the terminal sinks (the live view, ``--json``).

    A sink whose terminal is gone (``EIO`` after a hang-up, ``EPIPE`` when ``| head`` closed
    the pipe) is dropped quietly: the trace line is written all the same, ``run.finished``
    included, and the run ends as its signal says.
    """

    def __init__(self, sinks: Iterable[EventSink]) -> None:
        self._sinks = list(sinks)

    def __call__(self, _logger: WrappedLogger, _name: str, event: EventDict) -> EventDict:
        for sink in tuple(self._sinks):
            try:
                sink(event)
            except OSError as error:
                if error.errno not in TERMINAL_GONE:
                    raise
                self._sinks.remove(sink)
        return event


class JSONLinesFile:
    """The wrapped logger: writes each rendered line to the file with one ``os.write``.

    The file is unbuffered, so every line is in the file (the kernel's) as soon as it is logged,
    as a flush after every line would leave it.
    """

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._fd = stream.fileno()

    def msg(self, message: bytes) -> None:
        written = _write(self._fd, message)
        if written < len(message):  # a regular file takes it whole; a signal may cut it short
            rest = memoryview(message)[written:]
            while rest:
                rest = rest[_write(self._fd, rest) :]

    info = msg


class TraceLogger(structlog.BoundLoggerBase):
    """The trace's bound logger: ``info`` runs the chain and hands the line to the file.

    structlog's recipe for a custom wrapper class: a method per level the code calls, where the
    generic ``BoundLogger`` routes every call through a ``functools.partial`` of
    ``_proxy_to_logger`` and a ``getattr`` of the logger method. ``info`` does what
    ``_process_event`` does for it (context, fields, event, then each processor) in one dict
    display: a tenth of the trace's cost per event (``make bench``'s ``trace_vs_floor``).
    """

    _logger: JSONLinesFile

    def info(self, event: str, **fields: Any) -> None:
        # ``_process_event``'s work minus what this chain never needs: a second copy of the
        # fields, and a check of what the last processor returned (always the line's bytes).
        event_dict: Any = {**self._context, **fields, "event": event}
        logger = self._logger
        for processor in self._processors:
            event_dict = processor(logger, "info", event_dict)
        logger.msg(event_dict)


def secrets_from_environment(env: Mapping[str, str] | None = None) -> list[str]:
    """The values of variables whose names look secret: these never reach a trace."""
    env = os.environ if env is None else env
    return [value for name, value in env.items() if looks_secret(name) and value]


def _serialize(event: Any, **kw: Any) -> str:
    """The line as the trace always rendered it: compact, unicode as is, anything else as str."""
    return json.dumps(event, ensure_ascii=False, default=str, separators=(",", ":"))


def _orjson_default(value: Any) -> Any:
    # What the walk would have made of it: a mapping becomes an object, anything else its str.
    if isinstance(value, Mapping):
        return dict(value)
    return str(value)


#: orjson must hand datetimes and dataclasses to the default, as json.dumps(default=str) does;
#: the line ends in its newline, so the writer writes the renderer's bytes as they are.
_ORJSON_OPTIONS = (
    orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_APPEND_NEWLINE
)

#: How many key names :class:`TraceRenderer` remembers as plain.
_KEYS_KEPT = 4096


class TraceRenderer:
    """The chain's last step: redact where needed, hand the event to the sinks, render bytes.

    The event is rendered with ``orjson`` and the line searched for what could be a secret: the
    known values as they appear in JSON (built here, once), the shape of an API key, a key name
    that holds secrets. A line with none of them is written as it is and its event handed to the
    sinks unchanged, which is what the walk of :class:`RedactSecrets` would have given. Any
    other line takes the exact path: the walk, the sinks, then :func:`json.dumps`.
    """

    def __init__(self, redact: RedactSecrets, tee: EventTee | None) -> None:
        self._redact = redact
        self._tee = tee
        # A secret shaped like an API key is found by the key shape's search: one find a line.
        escaped = (orjson.dumps(s)[1:-1] for s in redact.secrets)
        self._values = (*(v for v in escaped if _KEY_SHAPE not in v), _KEY_SHAPE)
        #: Key names already judged plain, at any depth: the same few again and again.
        self._plain_keys: set[str] = set()
        #: Set while rendering when orjson handed a value to the default (a tuple subclass, a
        #: mapping that is not a dict, a datetime): its text is the default's, maybe not the
        #: walk's (``json.dumps`` writes a namedtuple as a list), so the line is suspect.
        self._defaulted = False
        self._dumps_default = self._default  # bound once, not on every line

    def _default(self, value: Any) -> Any:
        self._defaulted = True
        return _orjson_default(value)

    def suspect(self, event: EventDict, line: bytes) -> bool:
        """Whether the walk could change anything in this event, rendered as ``line``."""
        if self._defaulted:
            return True
        find = line.find  # a fifth cheaper than ``in`` on bytes, which goes through a buffer
        for value in self._values:
            if find(value) != -1:
                return True
        # Each check below is one call into C where it can be: on the common path an event
        # costs a handful of them, and each Python step is a tenth of a microsecond here.
        if not self._plain_keys.issuperset(event) and not self._all_plain(event):
            return True
        if find(b"{", 1) == -1:
            return False  # no object inside: no other keys
        return not self._plain_keys_within(event.values())

    def _all_plain(self, keys: Iterable[Any]) -> bool:
        """Whether every key is a str the walk leaves alone; those are remembered."""
        plain = self._plain_keys
        for key in keys:
            if key not in plain:
                if type(key) is not str or _secret_key(key):
                    return False
                if len(plain) < _KEYS_KEPT:
                    plain.add(key)
        return True

    def _plain_keys_within(self, values: Iterable[Any]) -> bool:
        """Whether every key of every mapping inside ``values`` is one the walk leaves alone."""
        plain = self._plain_keys
        for value in values:
            kind = type(value)
            if kind is str or kind is int or kind is bool or kind is float or value is None:
                continue
            if kind is dict:
                if not plain.issuperset(value) and not self._all_plain(value):
                    return False
                if not self._plain_keys_within(value.values()):
                    return False
            elif kind is list or kind is tuple:
                if not self._plain_keys_within(value):
                    return False
            elif isinstance(value, Mapping | list | tuple):
                return False  # a subclass or another mapping: let the walk decide
        return True

    def __call__(self, logger: WrappedLogger, name: str, event: EventDict) -> bytes:
        self._defaulted = False
        try:
            line = orjson.dumps(event, default=self._dumps_default, option=_ORJSON_OPTIONS)
        except (TypeError, orjson.JSONEncodeError):
            line = b""  # a key that is not a str, an int past 64 bits: the exact path
        if line and not self.suspect(event, line):
            if self._tee is not None:
                self._tee(logger, name, event)
            return line
        event = self._redact(logger, name, event)
        if self._tee is not None:
            self._tee(logger, name, event)
        return json_utf8(_serialize(event)) + b"\n"


@attrs.define
class Trace:
    """An open trace: ``log`` is the bound logger the loop writes through."""

    path: Path
    run_id: str
    log: Any
    _stream: IO[bytes]

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
    stream = path.open("ab" if append else "wb", buffering=0)
    run_id = run_id or new_run_id()
    log = structlog.wrap_logger(
        JSONLinesFile(stream),
        processors=build_processors(secrets=secrets, sinks=sinks, first_seq=first_seq),
        wrapper_class=TraceLogger,
        context_class=dict,
        cache_logger_on_first_use=True,
    ).bind(run_id=run_id)
    return Trace(path, run_id, log, stream)


def build_processors(
    *, secrets: Iterable[str] = (), sinks: Iterable[EventSink] = (), first_seq: int = 0
) -> list[Processor]:
    """The one processor chain every trace uses, in order; the last step renders the line."""
    sinks = tuple(sinks)
    return [
        TraceStamps(first_seq),
        TraceRenderer(RedactSecrets(secrets), EventTee(sinks) if sinks else None),
    ]
