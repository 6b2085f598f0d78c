"""A loopback Messages API for tests: a server that plays a script, and the API's request rules.

:class:`MessagesServer` answers ``POST /v1/messages`` on 127.0.0.1 the way the Anthropic service
does (plain JSON, or server-sent events when the body asks to stream), so the real SDK can be
driven end to end without a network or a key. It also injects the faults a script lists
(error statuses, dropped connections, cut streams, broken JSON, delays) and rejects requests
that break the structural rules :func:`check_request` knows, the way the service answers 400.

It also answers ``GET /v1/models/{id}`` and ``POST /v1/messages/count_tokens`` from its
:class:`ServerLimits`, and refuses a request over the model's window with the service's own
400 (``prompt is too long: N tokens > M maximum``). Tokens are counted as the scripted usage
estimates them (four characters of JSON a token), so the usage a response reports adds up to
what the limit was checked against.

It ships inside the package so users can test their own harness changes the same way.
"""

from __future__ import annotations

import copy
import json
import math
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Final, Self, cast

import attrs
import structlog
from structlog.testing import LogCapture

from orchestrator.conversation import cache_usage
from orchestrator.protocols import JSONObject, Model, ModelTurn
from orchestrator.script import (
    Fault,
    Script,
    ScriptedTurn,
    ScriptEntry,
    check_expectations,
    error_type_for_status,
)

#: The service allows this many ``cache_control`` breakpoints in one request.
MAX_CACHE_BREAKPOINTS: Final = 4

_MESSAGES_PATH: Final = "/v1/messages"
_COUNT_TOKENS_PATH: Final = "/v1/messages/count_tokens"
_MODELS_PREFIX: Final = "/v1/models/"
_STREAM_CHUNKS: Final = 3
_BAD_JSON_BODY: Final = b'{"id": "msg_broken", "type": "message", "content": [{"type": "te'


def count_tokens(body: Mapping[str, Any]) -> int:
    """The server's token count of a request: what its usage reports, and its limit checks.

    As the service does, it reads nothing before the newest compaction block.
    """
    return sum(cache_usage(None, _effective(body)).tokens().values())


def _effective(body: Mapping[str, Any]) -> Mapping[str, Any]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, Mapping) and any(
            block.get("type") == "compaction" for block in _blocks(message)
        ):
            return {**body, "messages": messages[index:]}
    return body


def _compaction_trigger(body: Mapping[str, Any]) -> int | None:
    """The ``input_tokens`` trigger of a ``compact_20260112`` edit in the request, if any."""
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, Mapping) else None
    for edit in edits if isinstance(edits, list) else []:
        if isinstance(edit, Mapping) and edit.get("type") == "compact_20260112":
            trigger = edit.get("trigger")
            value = trigger.get("value") if isinstance(trigger, Mapping) else None
            return value if isinstance(value, int) else 150_000
    return None


def full_capabilities(*, context_management: bool = False) -> JSONObject:
    """A ``capabilities`` object as the Models API sends it.

    Everything is supported but (unless asked) server-side context management.
    """
    yes, no = {"supported": True}, {"supported": False}
    return {
        "batch": yes,
        "citations": yes,
        "code_execution": yes,
        "context_management": {
            "supported": context_management,
            "clear_thinking_20251015": yes if context_management else no,
            "clear_tool_uses_20250919": yes if context_management else no,
            "compact_20260112": yes if context_management else no,
        },
        "effort": {"supported": True, "low": yes, "medium": yes, "high": yes, "max": yes},
        "image_input": yes,
        "pdf_input": yes,
        "server_tools": yes,
        "structured_outputs": yes,
        "thinking": {
            "supported": True,
            "types": {"adaptive": yes, "enabled": yes, "disabled": yes, "between_tools": no},
        },
    }


@attrs.frozen
class ServerLimits:
    """What the server says about its models and enforces: the window and the output cap.

    ``known_models`` of None knows every model name; otherwise ``GET /v1/models/{id}`` answers
    404 for the others, as the service does for a name it does not serve. ``advertised_tokens``
    is what the Models API claims when it differs from the window enforced (a proxy in front
    of a smaller deployment).
    """

    max_input_tokens: int = 200_000
    max_tokens: int = 64_000
    capabilities: JSONObject = attrs.field(factory=full_capabilities)
    known_models: frozenset[str] | None = None
    advertised_tokens: int | None = None

    def model_info(self, model: str) -> JSONObject:
        return {
            "type": "model",
            "id": model,
            "display_name": model,
            "created_at": "2026-01-01T00:00:00Z",
            "lifecycle": "active",
            "max_input_tokens": self.advertised_tokens or self.max_input_tokens,
            "max_tokens": self.max_tokens,
            "capabilities": self.capabilities,
        }


def default_summary(body: Mapping[str, Any]) -> str:
    """A summariser's answer to a tool-less request: a fixed, honest line about its input."""
    return f"Scripted summary of a {count_tokens(body):,}-token transcript: the work went on."


def check_request(body: Mapping[str, Any]) -> list[str]:
    """The Messages API structural rules ``body`` breaks, one readable string each.

    Each string starts with the path of the offending field (``messages.2.content.0: ...``),
    like the service's own 400 messages, so a failing test says where to look.
    """
    problems: list[str] = []
    if "model" not in body:
        problems.append("model: field required")
    elif not isinstance(body["model"], str) or not body["model"]:
        problems.append("model: must be a non-empty string")
    if "max_tokens" not in body:
        problems.append("max_tokens: field required")
    elif not _is_positive_int(body["max_tokens"]):
        problems.append("max_tokens: must be a whole number of at least 1")
    problems.extend(_check_system(body.get("system")))
    messages = body.get("messages")
    if messages is None:
        problems.append("messages: field required")
    elif not isinstance(messages, list):
        problems.append("messages: must be a list of messages")
    elif not messages:
        problems.append("messages: must contain at least one message")
    else:
        problems.extend(_check_messages(messages))
        if not body.get("tools") and _has_tool_blocks(messages):
            problems.append(
                "tools: requests which include `tool_use` or `tool_result` blocks must define tools"
            )
    breakpoints = _count_cache_breakpoints(body)
    if breakpoints > MAX_CACHE_BREAKPOINTS:
        problems.append(
            f"cache_control: {breakpoints} breakpoints found across tools, system and messages; "
            f"at most {MAX_CACHE_BREAKPOINTS} are allowed"
        )
    return problems


class MessagesServer:
    """A loopback Messages API server that answers with a script's turns and faults.

    Use it as a context manager; inside, :attr:`base_url` is where to point the SDK. Every
    received body and its headers are kept, and every broken rule or unmet expectation is
    recorded in :attr:`violations` (the server keeps answering, so a test can look at them all).
    With ``streams=False`` it behaves like a gateway that ignores ``"stream": true`` and
    answers every request with one plain JSON message.
    """

    def __init__(
        self,
        script: Script,
        *,
        streams: bool = True,
        limits: ServerLimits | None = None,
        summarize: Callable[[Mapping[str, Any]], str] | None = None,
    ) -> None:
        """Serve ``script`` within ``limits``.

        ``summarize``, when given, answers every request that carries no tools (a harness's
        summary call) without taking a turn from the script.
        """
        self._script = script
        self._streams = streams
        self.limits = limits or ServerLimits()
        self._summarize = summarize
        self._summaries: list[JSONObject] = []
        self._refusals: list[str] = []
        self._counted: list[JSONObject] = []
        self._compactions = 0
        self._lookups: list[str] = []
        self._lock = threading.Lock()
        self._position = 0
        self._served = 0
        self._requests: list[JSONObject] = []
        self._raw_bodies: list[bytes] = []
        self._last_answered: JSONObject | None = None
        self._request_headers: list[dict[str, str]] = []
        self._violations: list[str] = []
        self._httpd: _LoopbackHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        httpd = _LoopbackHTTPServer(self)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"messages-server-{self._script.name}",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is None or thread is None:
            return
        httpd.shutdown()
        httpd.close_open_connections()
        httpd.server_close()
        thread.join()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the MessagesServer is not running; use it in a with block")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[JSONObject]:
        """The JSON bodies received, in order, including rejected ones."""
        with self._lock:
            return list(self._requests)

    @property
    def raw_bodies(self) -> list[bytes]:
        """Every request body exactly as received, whatever its path or shape, in order."""
        with self._lock:
            return list(self._raw_bodies)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of each received request (names lower-cased), in order.

        This is the only place the credentials a client sends (``x-api-key``, or
        ``authorization`` as SDK 2.x sends it) are kept; the server logs nothing.
        """
        with self._lock:
            return [dict(headers) for headers in self._request_headers]

    @property
    def refusals(self) -> list[str]:
        """The error message of every request refused as too long, in order."""
        with self._lock:
            return list(self._refusals)

    @property
    def summary_requests(self) -> list[JSONObject]:
        """The tool-less requests answered by ``summarize``, in order (also in :attr:`requests`)."""
        with self._lock:
            return list(self._summaries)

    @property
    def model_lookups(self) -> list[str]:
        """The model names asked of ``GET /v1/models/{id}``, in order."""
        with self._lock:
            return list(self._lookups)

    @property
    def compactions(self) -> int:
        """How many answers began with a server-side compaction block."""
        with self._lock:
            return self._compactions

    @property
    def counted(self) -> list[JSONObject]:
        """The bodies sent to ``count_tokens``, in order."""
        with self._lock:
            return list(self._counted)

    @property
    def violations(self) -> list[str]:
        with self._lock:
            return list(self._violations)

    @property
    def served(self) -> int:
        """How many scripted turns have been answered (faults do not count)."""
        with self._lock:
            return self._served

    def _record_violation(self, text: str) -> None:
        with self._lock:
            self._violations.append(text)

    def _answer(self, handler: _Handler) -> None:
        """Read one request from ``handler`` and write the scripted answer to it."""
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length)
        with self._lock:
            self._raw_bodies.append(raw)
        path = handler.path.split("?", 1)[0]
        if path not in (_MESSAGES_PATH, _COUNT_TOKENS_PATH):
            self._record_violation(f"request to unknown path {path}")
            _send_error(handler, 404, f"Not found: {path}")
            return
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            self._record_violation(f"request body is not JSON: {error}")
            _send_error(handler, 400, f"The request body is not valid JSON: {error}")
            return
        if not isinstance(body, dict):
            self._record_violation("request body is not a JSON object")
            _send_error(handler, 400, "The request body must be a JSON object")
            return
        if path == _COUNT_TOKENS_PATH:
            with self._lock:
                self._counted.append(body)
            _send_json(handler, 200, {"input_tokens": count_tokens(body)})
            return
        with self._lock:
            self._requests.append(body)
            self._request_headers.append({k.lower(): v for k, v in handler.headers.items()})
            number = len(self._requests)
        problems = check_request(body)
        if problems:
            for problem in problems:
                self._record_violation(f"request {number}: {problem}")
            _send_error(handler, 400, "; ".join(problems))
            return
        tokens, maximum = count_tokens(body), self.limits.max_input_tokens
        trigger = _compaction_trigger(body)
        if trigger is not None and tokens > trigger:
            self._play_next(handler, body, number, compact=True)
            return
        if tokens > maximum:
            message = f"prompt is too long: {tokens} tokens > {maximum} maximum"
            with self._lock:
                self._refusals.append(message)
            _send_error(handler, 400, message)
            return
        if self._summarize is not None and not body.get("tools"):
            self._answer_summary(handler, body)
            return
        self._play_next(handler, body, number)

    def _answer_summary(self, handler: _Handler, body: JSONObject) -> None:
        assert self._summarize is not None
        turn = ScriptedTurn(
            content=({"type": "text", "text": self._summarize(body)},), stop_reason="end_turn"
        )
        with self._lock:
            self._summaries.append(body)
        message = _message_json(turn, body, f"msg_summary_{len(self._summaries):04d}")
        if body.get("stream") is True:
            _send_events(handler, _stream_events(message))
        else:
            _send_json(handler, 200, message)

    def _answer_get(self, handler: _Handler) -> None:
        path = handler.path.split("?", 1)[0]
        model = path[len(_MODELS_PREFIX) :] if path.startswith(_MODELS_PREFIX) else ""
        if not model or "/" in model:
            self._record_violation(f"GET request to {handler.path}")
            _send_error(handler, 404, f"Not found: GET {handler.path}")
            return
        with self._lock:
            self._lookups.append(model)
        known = self.limits.known_models
        if known is not None and model not in known:
            _send_error(handler, 404, f"model: {model}")
            return
        _send_json(handler, 200, self.limits.model_info(model))

    def _play_next(
        self, handler: _Handler, body: JSONObject, number: int, *, compact: bool = False
    ) -> None:
        while True:
            taken = self._take_entry()
            if isinstance(taken, str):
                self._record_violation(f"request {number}: {taken}")
                # The client must not retry: every retry would find the script just as empty.
                _send_error(handler, 500, taken, headers={"x-should-retry": "false"})
                return
            turn_number, entry = taken
            if not isinstance(entry, Fault) or entry.kind != "slow":
                break
            if not _wait_while_connected(handler, entry.seconds):
                # The client gave up (its timeout was shorter): the turn after this fault is
                # left for the retry instead of being answered into a closed socket.
                return
        stream = body.get("stream") is True and self._streams
        if isinstance(entry, Fault):
            _send_fault(handler, entry, stream=stream)
            return
        for mismatch in check_expectations(entry, body):
            self._record_violation(f"turn {turn_number}: {mismatch}")
        with self._lock:
            self._served += 1
            message_id = f"msg_loopback_{self._served:04d}"
            previous, self._last_answered = self._last_answered, body
        message = _message_json(entry, body, message_id, previous)
        if compact:
            # Server-side compaction: the history so far becomes one block the client sends
            # back verbatim; usage counts what the service reads from here on.
            summary = (self._summarize or default_summary)(body)
            block = {"type": "compaction", "content": summary, "signature": f"sig-{number}"}
            message["content"] = [block, *message["content"]]
            with self._lock:
                self._compactions += 1
            after = {**body, "messages": [{"role": "assistant", "content": [block]}]}
            message["usage"] = entry.usage_for(after, None)
        if stream:
            _send_events(handler, _stream_events(message))
        else:
            _send_json(handler, 200, message)

    def _take_entry(self) -> tuple[int, ScriptEntry] | str:
        """The next entry and its number, or why there is none."""
        with self._lock:
            entries = self._script.turns
            if self._position >= len(entries):
                return (
                    f"script {self._script.name!r} has no turn {self._position + 1}; "
                    f"it has {len(entries)}"
                )
            self._position += 1
            return self._position, entries[self._position - 1]


class _LoopbackHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: MessagesServer) -> None:
        self.owner = owner
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_open_connections(self) -> None:
        """End keep-alive connections so their handler threads stop waiting for requests."""
        with self._open_lock:
            sockets = list(self._open)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                continue

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError):
            # The client hung up (a timeout, a test that stopped reading): nothing to report.
            return
        self.owner._record_violation(f"server error: {type(error).__name__}: {error}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A streamed answer is many small writes; with Nagle's algorithm each waits for the
    # client's delayed ACK (40 ms on Linux), which made every round cost that much idle time.
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        cast(_LoopbackHTTPServer, self.server).owner._answer(self)

    def do_GET(self) -> None:
        cast(_LoopbackHTTPServer, self.server).owner._answer_get(self)

    def log_message(self, format: str, *args: Any) -> None:
        """Stay silent: tests read :attr:`MessagesServer.violations`, not stderr."""


def _wait_while_connected(handler: _Handler, seconds: float) -> bool:
    """Sleep ``seconds``; return False as soon as the client closes its end."""
    deadline = time.monotonic() + seconds
    connection = handler.connection
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([connection], [], [], min(left, 0.05))
        if readable:
            try:
                if connection.recv(1, socket.MSG_PEEK) == b"":
                    return False
            except OSError:
                return False
            time.sleep(min(left, 0.05))  # data waiting (a pipelined request): keep sleeping
    return True


def _send_json(
    handler: _Handler,
    status: int,
    payload: Mapping[str, Any],
    headers: Mapping[str, str] | None = None,
) -> None:
    data = json.dumps(payload).encode("utf-8")
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


def _send_error(
    handler: _Handler,
    status: int,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
) -> None:
    payload = {
        "type": "error",
        "error": {"type": error_type_for_status(status), "message": message},
    }
    _send_json(handler, status, payload, headers)


def _send_fault(handler: _Handler, fault: Fault, *, stream: bool) -> None:
    if fault.kind == "status":
        status = fault.status if fault.status is not None else 500
        headers = {} if fault.retry_after is None else {"retry-after": f"{fault.retry_after:g}"}
        if isinstance(fault.body, Mapping):
            _send_json(handler, status, fault.body, headers)
        else:
            message = fault.body if fault.body is not None else f"Scripted fault: HTTP {status}"
            _send_error(handler, status, message, headers=headers)
    elif fault.kind == "bad_json":
        if stream:
            # A streamed answer is never one JSON document; break the first event's data instead.
            _start_event_stream(handler)
            _write_chunk(handler, b"event: message_start\ndata: " + _BAD_JSON_BODY + b"\n\n")
            _end_event_stream(handler)
        else:
            handler.send_response(200)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(_BAD_JSON_BODY)))
            handler.end_headers()
            handler.wfile.write(_BAD_JSON_BODY)
    elif fault.kind == "cut_stream" and stream:
        _start_event_stream(handler)
        partial = {
            "type": "message_start",
            "message": {
                "id": "msg_cut",
                "type": "message",
                "role": "assistant",
                "model": "loopback",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        }
        _write_chunk(handler, _event_bytes("message_start", partial))
        start = {
            "type": "content_block_start",
            "index": 0,
            "content_block": _empty_block({"type": "text"}),
        }
        _write_chunk(handler, _event_bytes("content_block_start", start))
        # No terminating chunk: the client sees the body end mid-message.
        handler.close_connection = True
    else:
        # disconnect, or cut_stream on a request that did not ask to stream
        handler.close_connection = True


def _start_event_stream(handler: _Handler) -> None:
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream; charset=utf-8")
    handler.send_header("cache-control", "no-cache")
    handler.send_header("transfer-encoding", "chunked")
    handler.end_headers()


def _write_chunk(handler: _Handler, data: bytes) -> None:
    handler.wfile.write(f"{len(data):x}\r\n".encode("ascii") + data + b"\r\n")
    handler.wfile.flush()


def _end_event_stream(handler: _Handler) -> None:
    handler.wfile.write(b"0\r\n\r\n")
    handler.wfile.flush()


def _send_events(handler: _Handler, events: Sequence[tuple[str, JSONObject]]) -> None:
    _start_event_stream(handler)
    for name, data in events:
        _write_chunk(handler, _event_bytes(name, data))
    _end_event_stream(handler)


def _event_bytes(name: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _message_json(
    turn: ScriptedTurn,
    request: Mapping[str, Any],
    message_id: str,
    previous: Mapping[str, Any] | None = None,
) -> JSONObject:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": str(request.get("model", "")),
        "content": [dict(block) for block in turn.content],
        "stop_reason": turn.stop_reason,
        "stop_sequence": None,
        "usage": turn.usage_for(request, previous),
    }


def _stream_events(message: Mapping[str, Any]) -> list[tuple[str, JSONObject]]:
    """The server-sent events that stream ``message``, in the order the service sends them."""
    usage = dict(message["usage"])
    opening = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 1},
    }
    events: list[tuple[str, JSONObject]] = [
        ("message_start", {"type": "message_start", "message": opening})
    ]
    for index, block in enumerate(message["content"]):
        start = {
            "type": "content_block_start",
            "index": index,
            "content_block": _empty_block(block),
        }
        events.append(("content_block_start", start))
        if index == 0:
            events.append(("ping", {"type": "ping"}))
        events.extend(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            for delta in _block_deltas(block)
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _empty_block(block: Mapping[str, Any]) -> JSONObject:
    """The ``content_block`` a ``content_block_start`` carries: the block before its deltas."""
    kind = block["type"]
    if kind == "text":
        return {"type": "text", "text": ""}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
    if kind == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    return dict(block)


def _block_deltas(block: Mapping[str, Any]) -> list[JSONObject]:
    kind = block["type"]
    if kind == "text":
        return [{"type": "text_delta", "text": part} for part in _chunks(str(block["text"]))]
    if kind == "tool_use":
        arguments = json.dumps(block["input"])
        return [{"type": "input_json_delta", "partial_json": part} for part in _chunks(arguments)]
    if kind == "thinking":
        deltas: list[JSONObject] = [
            {"type": "thinking_delta", "thinking": part}
            for part in _chunks(str(block.get("thinking", "")))
        ]
        return [*deltas, {"type": "signature_delta", "signature": str(block.get("signature", ""))}]
    return []


def _chunks(text: str) -> list[str]:
    """Split ``text`` into a few pieces, so clients must join deltas to get it back."""
    if not text:
        return []
    size = math.ceil(len(text) / _STREAM_CHUNKS)
    return [text[start : start + size] for start in range(0, len(text), size)]


def _check_system(system: object) -> list[str]:
    if system is None or isinstance(system, str):
        return []
    if not isinstance(system, list):
        return ["system: must be a string or a list of text blocks"]
    problems: list[str] = []
    for index, block in enumerate(system):
        where = f"system.{index}"
        if not isinstance(block, Mapping) or block.get("type") != "text":
            problems.append(f"{where}: must be a text block")
        elif not _has_text(block):
            problems.append(f"{where}: text content blocks must contain non-whitespace text")
    return problems


def _check_messages(messages: list[Any]) -> list[str]:
    problems: list[str] = []
    previous_role: object = None
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        if not isinstance(message, Mapping):
            problems.append(f"{where}: must be an object with role and content")
            previous_role = None
            continue
        role = message.get("role")
        if role not in ("user", "assistant"):
            problems.append(f"{where}.role: must be 'user' or 'assistant', got {role!r}")
        elif index == 0 and role != "user":
            problems.append(f"{where}.role: the first message must be a user message, got {role!r}")
        elif role == previous_role:
            problems.append(
                f"{where}.role: roles must alternate between user and assistant; "
                f"messages.{index - 1} is also a {role!r} message"
            )
        previous_role = role
        is_last = index == len(messages) - 1
        problems.extend(_check_content(where, role, message.get("content"), is_last=is_last))
        if role == "assistant":
            following = messages[index + 1] if index + 1 < len(messages) else None
            problems.extend(_check_tool_pairing(index, _blocks(message), following))
        elif role == "user":
            preceding = messages[index - 1] if index > 0 else None
            problems.extend(_check_orphan_results(index, _blocks(message), preceding))
    return problems


def _check_content(where: str, role: object, content: object, *, is_last: bool) -> list[str]:
    if isinstance(content, str):
        if not content.strip():
            return [f"{where}.content: text content must contain non-whitespace text"]
        return []
    if not isinstance(content, list):
        return [f"{where}.content: must be a string or a list of content blocks"]
    if not content:
        # Only a final assistant message may be empty (an empty prefill).
        return [] if role == "assistant" and is_last else [f"{where}.content: must not be empty"]
    problems: list[str] = []
    for index, block in enumerate(content):
        at = f"{where}.content.{index}"
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            problems.append(f"{at}: must be a content block object with a type")
            continue
        kind = block["type"]
        if kind == "text" and not _has_text(block):
            problems.append(f"{at}: text content blocks must contain non-whitespace text")
        elif kind == "tool_use" and role == "user":
            problems.append(f"{at}: tool_use blocks may only appear in assistant messages")
        elif kind == "tool_result":
            if role == "assistant":
                problems.append(f"{at}: tool_result blocks may only appear in user messages")
            problems.extend(_check_result_content(at, block.get("content")))
    if role == "user":
        problems.extend(_check_result_order(where, content))
    return problems


def _check_result_order(where: str, content: list[Any]) -> list[str]:
    """Flag a user message whose tool_result blocks do not all come before its other blocks."""
    kinds = [block.get("type") if isinstance(block, Mapping) else None for block in content]
    if "tool_result" not in kinds:
        return []
    last_result = len(kinds) - 1 - kinds[::-1].index("tool_result")
    early = next((i for i in range(last_result) if kinds[i] != "tool_result"), None)
    if early is None:
        return []
    return [
        f"{where}.content.{early}: a {kinds[early]} block comes before the tool_result at "
        f"content.{last_result}; in a user message every tool_result block must come first, "
        "with any text after them"
    ]


def _check_result_content(where: str, content: object) -> list[str]:
    if not isinstance(content, list):
        return []
    return [
        f"{where}.content.{index}: text content blocks must contain non-whitespace text"
        for index, block in enumerate(content)
        if isinstance(block, Mapping) and block.get("type") == "text" and not _has_text(block)
    ]


def _check_tool_pairing(
    index: int, blocks: list[Mapping[str, Any]], following: object
) -> list[str]:
    ids = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
    if not ids:
        return []
    problems = [
        f"messages.{index}: tool_use id {tool_id!r} is used more than once"
        for tool_id in sorted({i for i in ids if ids.count(i) > 1})
    ]
    if not isinstance(following, Mapping) or following.get("role") != "user":
        problems.append(
            f"messages.{index}: tool_use ids {', '.join(ids)} have no tool_result blocks "
            "immediately after; the next message must be a user message with one tool_result "
            "per tool_use"
        )
        return problems
    answered = [
        str(b.get("tool_use_id")) for b in _blocks(following) if b.get("type") == "tool_result"
    ]
    for tool_id in dict.fromkeys(ids):
        count = answered.count(tool_id)
        if count == 0:
            problems.append(
                f"messages.{index + 1}: tool_use id {tool_id!r} from messages.{index} has no "
                "tool_result block; every tool_use needs exactly one"
            )
        elif count > 1:
            problems.append(
                f"messages.{index + 1}: tool_use id {tool_id!r} from messages.{index} has "
                f"{count} tool_result blocks; every tool_use needs exactly one"
            )
    return problems


def _check_orphan_results(
    index: int, blocks: list[Mapping[str, Any]], preceding: object
) -> list[str]:
    offered: set[str] = set()
    if isinstance(preceding, Mapping) and preceding.get("role") == "assistant":
        offered = {str(b.get("id")) for b in _blocks(preceding) if b.get("type") == "tool_use"}
    return [
        f"messages.{index}.content.{position}: tool_result for {block.get('tool_use_id')!r} "
        "has no matching tool_use in the preceding assistant message"
        for position, block in enumerate(blocks)
        if block.get("type") == "tool_result" and str(block.get("tool_use_id")) not in offered
    ]


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The message's content blocks that are objects; a string content has none."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, Mapping)]


def _count_cache_breakpoints(body: Mapping[str, Any]) -> int:
    """Count ``cache_control`` marks on tools, system blocks and message blocks (nested too).

    A top-level ``cache_control`` (automatic caching) takes one breakpoint as well.
    """
    count = 1 if body.get("cache_control") is not None else 0
    for key in ("tools", "system"):
        items = body.get(key)
        if isinstance(items, list):
            count += sum(1 for item in items if _marked(item))
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if not isinstance(message, Mapping):
                continue
            for block in _blocks(message):
                count += 1 if _marked(block) else 0
                nested = block.get("content")
                if isinstance(nested, list):
                    count += sum(1 for item in nested if _marked(item))
    return count


def _has_tool_blocks(messages: list[Any]) -> bool:
    return any(
        block.get("type") in ("tool_use", "tool_result")
        for message in messages
        if isinstance(message, Mapping)
        for block in _blocks(message)
    )


def _marked(item: object) -> bool:
    return isinstance(item, Mapping) and item.get("cache_control") is not None


def _has_text(block: Mapping[str, Any]) -> bool:
    text = block.get("text")
    return isinstance(text, str) and bool(text.strip())


def _is_positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


class EventCapture:
    """An event log for tests: keeps every event the loop emits, as dicts.

    structlog's ``capture_logs`` captures through the global configuration, which this package
    never touches; this wraps a :class:`structlog.testing.LogCapture` in a logger of its own.
    """

    def __init__(self) -> None:
        self._capture = LogCapture()
        self.log: Any = structlog.wrap_logger(None, processors=[self._capture])

    @property
    def events(self) -> list[MutableMapping[str, Any]]:
        return self._capture.entries

    def named(self, event: str) -> list[MutableMapping[str, Any]]:
        """The captured events called ``event``, in order."""
        return [entry for entry in self._capture.entries if entry.get("event") == event]


class RecordingModel:
    """Wraps a model and keeps a deep copy of every request it answers, to assert on later."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.requests: list[JSONObject] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def respond(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        self.requests.append(copy.deepcopy(dict(request)))
        return self.inner.respond(request, on_text)
