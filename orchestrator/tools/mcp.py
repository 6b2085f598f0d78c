"""MCP servers as tools: started once per run, called through the registry, stopped at exit.

:class:`McpServers` is a tool source: :meth:`~McpServers.open` starts every configured server
(stdio or streamable HTTP, on the official ``mcp`` SDK), :attr:`~McpServers.tools` is what they
offer now (``mcp__SERVER__TOOL``; a server's tool-list-changed notification is followed), and
:meth:`~McpServers.close` stops them all, killing what a stdio server left running.

The SDK is async and the loop is not: the client sessions live on one event-loop thread per run,
and every call crosses to it with a timeout (``--mcp-timeout``). Whatever a server does (fails to
start, crashes, hangs, answers garbage) becomes a tool result with ``is_error`` for the model,
one line for the person and an ``mcp.server`` or ``mcp.error`` event for the trace. A server
whose command runs a file from the work directory that differs from what a person trusted (or
that cannot be pinned) does not start, and counts as a refusal (exit code 3). Events and
lines are queued by the event-loop thread and written by the caller's thread, so the trace keeps
one writer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

import attrs

from orchestrator.config import flag_label
from orchestrator.pinning import pin_problem
from orchestrator.protocols import EventLog, JSONObject, Tool, ToolResult
from orchestrator.tools._reaper import process_ids
from orchestrator.tools.arguments import error_result, with_note
from orchestrator.tools.mcp_config import (
    McpServerConfig,
    Resolved,
    resolve,
    server_environment,
    server_reading,
    tool_name_part,
)

if TYPE_CHECKING:
    import anyio
    import mcp
    import mcp.types
    from anyio.from_thread import BlockingPortal

#: The most characters of one result the model gets, as for bash.
OUTPUT_LIMIT = 50_000
#: The API's longest tool name.
NAME_LIMIT = 64
#: Seconds a server may take to start, and to answer one call: Claude Code's default.
DEFAULT_TIMEOUT = 30.0
#: In a run, starting may take at least this long whatever the timeout: a slow start is not a
#: hang, and a short ``--mcp-timeout`` is meant for the calls (``mcp list`` takes it as given).
START_FLOOR = 10.0
#: How long stopping every server may take before what is left is killed.
_STOP_SECONDS = 8.0
#: What is left of the caller's wait once the call's own timeout has passed on the loop thread.
_CROSSING_SLACK = 5.0
_PAGE_LIMIT = 100
_REASON_CHARACTERS = 300

State = Literal["starting", "running", "failed", "not_trusted", "refused", "crashed", "stopped"]


@attrs.frozen
class McpTool:
    """One server tool as the model sees it; :meth:`run` calls it on the server."""

    name: str
    remote: str
    server: str
    schema: JSONObject
    _call: Callable[[str, str, Mapping[str, Any]], ToolResult] = attrs.field(repr=False)

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        return self._call(self.server, self.remote, arguments)


@attrs.frozen
class ServerStatus:
    """How one server stands: for ``orchestrator mcp list`` and ``doctor``."""

    name: str
    origin: str
    how: str
    state: State
    reason: str
    tools: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """It started (and, once listed, was stopped again)."""
        return self.state in ("running", "stopped")

    def lines(self, *, untrusted_hint: str) -> list[str]:
        """Its name, how it starts and from where; then how it went and its tools.

        ``untrusted_hint`` says how to trust the folder, in the words of the command showing it.
        """
        lines = [f"{self.name}: {self.how}  ({self.origin})"]
        how = _HOW.get(self.state, self.state)
        if self.ok:
            count = len(self.tools)
            lines.append(f"  {how}, {count} tool{'s' if count != 1 else ''}")
            lines.extend(f"    {name}" for name in self.tools)
        elif self.state == "not_trusted":
            lines.append(f"  {how}: the folder is not trusted; {untrusted_hint}")
        else:
            lines.append(f"  {how}: {self.reason}")
        return lines


#: How each state reads in ``mcp list`` and ``doctor``.
_HOW: Mapping[str, str] = {
    "running": "started",
    "stopped": "started",
    "failed": "did not start",
    "crashed": "stopped",
    "not_trusted": "not started",
    "refused": "not started",
    "starting": "did not start",
}


class _Garbage(Exception):
    """The server sent something that is not an MCP message."""


@attrs.define
class _Connection:
    """One server's session on the loop thread; mutation is the point (it starts, runs, stops)."""

    config: McpServerConfig
    state: State = "starting"
    reason: str = ""
    tools: tuple[McpTool, ...] = ()
    client: mcp.Client | None = None
    errlog: IO[str] | None = None
    ready: threading.Event = attrs.Factory(threading.Event)
    stop: anyio.Event | None = None
    stopped: anyio.Event | None = None
    in_flight: set[anyio.CancelScope] = attrs.Factory(set)
    stale: bool = False
    garbage: str = ""

    def stderr_tail(self) -> str:
        """The server's last line on stderr, to say why it failed."""
        if self.errlog is None:
            return ""
        try:
            self.errlog.flush()
            self.errlog.seek(0)
            lines = [line.strip() for line in self.errlog.read().splitlines() if line.strip()]
        except (OSError, ValueError):
            return ""
        return lines[-1][:_REASON_CHARACTERS] if lines else ""


@attrs.define
class McpServers:
    """The run's MCP servers: a tool source opened once at the start and closed at exit.

    ``trusted`` says whether the project's files may start servers; without it their servers
    are reported and left alone. ``log`` receives the ``mcp.*`` trace events. A stdio server
    starts in its configured folder (:func:`~orchestrator.tools.mcp_config.resolve`), never in
    the work directory by default. ``start_timeout`` bounds the start (default: ``timeout``,
    at least :data:`START_FLOOR`); ``label`` names a setting in the person's lines (the CLI's
    ``--mcp-timeout``, the API's ``mcp_timeout=``) and ``untrusted_hint`` says how to trust.
    What a server runs from ``workdir`` (for a project's server, at least from its own folder)
    must hold what ``trusted_files`` says a person trusted; one that does not is refused.
    """

    servers: Sequence[McpServerConfig]
    timeout: float = DEFAULT_TIMEOUT
    trusted: bool = True
    log: EventLog | None = None
    environ: Mapping[str, str] | None = None
    start_timeout: float | None = None
    label: Callable[[str], str] = flag_label
    untrusted_hint: str = "pass --trust, or answer yes when asked on a terminal"
    #: The work directory: what a server runs from it is pinned (None: a project server's folder).
    workdir: Path | None = None
    #: The states of the files in it a person trusted (relative path → sha256 or ``absent``).
    trusted_files: Mapping[str, str] = attrs.field(factory=dict)
    #: The servers that did not start because of what they run: (name, why); each counts in the
    #: exit code.
    refused: list[tuple[str, str]] = attrs.field(init=False, factory=list)
    _connections: dict[str, _Connection] = attrs.field(init=False, factory=dict)
    _notify: Callable[[str], None] = attrs.field(init=False, default=lambda _line: None)
    _events: deque[tuple[str, JSONObject]] = attrs.field(init=False, factory=deque)
    _lines: deque[str] = attrs.field(init=False, factory=deque)
    _portal: BlockingPortal | None = attrs.field(init=False, default=None)
    _thread: threading.Thread | None = attrs.field(init=False, default=None)
    _opened: bool = attrs.field(init=False, default=False)
    _closed: bool = attrs.field(init=False, default=False)

    # --- the tool source ---------------------------------------------------------------------

    def open(self, notify: Callable[[str], None]) -> None:
        """Start every server, each within the timeout; one line for each that did not start."""
        if self._opened:
            return
        self._opened = True
        self._notify = notify
        startable = []
        untrusted = []
        for server in self.servers:
            connection = _Connection(server)
            self._connections[server.name] = connection
            if server.project and not self.trusted:
                connection.state, connection.reason = "not_trusted", "the folder is not trusted"
                untrusted.append(server)
            elif server.unusable:
                self._failed(connection, server.unusable)
            elif (problem := self._pin_problem(server)) is not None:
                self._refuse(connection, problem)
            else:
                startable.append(connection)
        if untrusted:
            names = ", ".join(s.name for s in untrusted)
            files = ", ".join(dict.fromkeys(s.origin for s in untrusted))
            self._say(
                f"mcp: not starting {names} ({files}): this folder's files are not trusted; "
                f"{self.untrusted_hint}"
            )
            for server in untrusted:
                self._event(
                    "mcp.server", server=server.name, status="not_trusted", origin=server.origin
                )
        if startable:
            _quiet_sdk_logging()
            self._start_loop()
            assert self._portal is not None
            for connection in startable:
                self._portal.start_task_soon(self._serve, connection)
            # They start side by side, so one deadline covers them all.
            deadline = time.monotonic() + self._start_limit + _CROSSING_SLACK
            for connection in startable:
                connection.ready.wait(max(0.0, deadline - time.monotonic()))
                if connection.state == "starting":
                    self._failed(
                        connection,
                        f"no answer within {self._start_limit:g} s ({self.label('mcp_timeout')})",
                    )
        # The lines now; the events once the run reads its tools, so they follow run.started.
        self._flush(events=False)

    @property
    def _start_limit(self) -> float:
        if self.start_timeout is not None:
            return self.start_timeout
        return max(self.timeout, START_FLOOR)

    @property
    def tools(self) -> Sequence[Tool]:
        """Every running server's tools as they are now (a server may change its list)."""
        portal = self._portal
        for connection in self._connections.values():
            if connection.stale and connection.state == "running" and portal is not None:
                with contextlib.suppress(Exception):  # _relist reports its own failure
                    future = portal.start_task_soon(self._relist, connection)
                    future.result(self.timeout + _CROSSING_SLACK)
        self._flush()
        return [tool for c in self._connections.values() for tool in c.tools]

    def close(self) -> None:
        """Stop every server (idempotent); what a stdio server left behind is killed."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):  # what happened at the start, if never read
            self._flush()
        portal, thread = self._portal, self._thread
        try:
            if portal is not None:
                with contextlib.suppress(Exception):
                    portal.start_task_soon(self._stop_all).result(_STOP_SECONDS + 1)
                with contextlib.suppress(Exception):
                    portal.call(portal.stop, True)
                if thread is not None:
                    thread.join(2.0)
        finally:
            # Also after a second Ctrl-C cut the polite stop short: nothing may outlive the run.
            for connection in self._connections.values():
                _kill_holders(connection.errlog)
                if connection.errlog is not None:
                    connection.errlog.close()
                if connection.state == "running":
                    connection.state = "stopped"

    # --- what ``mcp list`` and ``doctor`` show -----------------------------------------------

    def statuses(self) -> list[ServerStatus]:
        return [
            ServerStatus(
                c.config.name,
                c.config.origin,
                c.config.describe(),
                c.state,
                c.reason,
                tuple(t.name for t in c.tools),
            )
            for c in self._connections.values()
        ]

    # --- calling a tool (the caller's thread) ------------------------------------------------

    def _call(self, server: str, remote: str, arguments: Mapping[str, Any]) -> ToolResult:
        self._flush()
        connection = self._connections[server]
        label = f"{connection.config.prefix}{tool_name_part(remote)}"
        if connection.state != "running" or self._portal is None:
            return self._error(
                connection,
                remote,
                "not_running",
                f"Error: {label} is unavailable: MCP server {server!r} {connection.reason}; "
                "do not call its tools again in this run",
            )
        future = self._portal.start_task_soon(self._call_on_loop, connection, remote, arguments)
        try:
            result = future.result(self.timeout + _CROSSING_SLACK)
        except KeyboardInterrupt:
            future.cancel()
            raise
        except TimeoutError:
            future.cancel()
            return self._timed_out(connection, remote, label)
        except Exception as error:
            return self._failure(connection, remote, label, error)
        finally:
            self._flush()
        return _rendered(result, label)

    def _timed_out(self, connection: _Connection, remote: str, label: str) -> ToolResult:
        return self._error(
            connection,
            remote,
            "timeout",
            f"Error: {label}: MCP server {connection.config.name!r} did not answer within "
            f"{self.timeout:g} s ({self.label('mcp_timeout')}); try a smaller request, or go on "
            "without it",
        )

    def _failure(
        self, connection: _Connection, remote: str, label: str, error: Exception
    ) -> ToolResult:
        import mcp.types
        from mcp.shared.exceptions import MCPError
        from pydantic import ValidationError

        name = connection.config.name
        if isinstance(error, TimeoutError):
            return self._timed_out(connection, remote, label)
        if isinstance(error, MCPError) and error.error.code == mcp.types.CONNECTION_CLOSED:
            tail = connection.stderr_tail()
            connection.state = "crashed"
            connection.reason = "stopped during the run" + (f" ({tail})" if tail else "")
            self._event(
                "mcp.server", server=name, status="crashed", reason=connection.reason, tools=[]
            )
            return self._error(
                connection,
                remote,
                "crashed",
                f"Error: {label}: MCP server {name!r} has stopped; its tools are unavailable "
                "for the rest of this run",
            )
        if isinstance(error, MCPError):
            return self._error(
                connection,
                remote,
                "server_error",
                f"Error: {label}: MCP server {name!r} refused the call: {_one_line(str(error))}",
            )
        if isinstance(error, _Garbage | ValidationError | ValueError):
            why = _garbage_reason(error)
            return self._error(
                connection,
                remote,
                "garbage",
                f"Error: {label}: MCP server {name!r} sent an answer that is not a valid MCP "
                f"tool result ({why}); the call may or may not have happened",
            )
        return self._error(
            connection,
            remote,
            "error",
            f"Error: {label}: {type(error).__name__}: {_one_line(str(error))}",
        )

    def _error(self, connection: _Connection, remote: str, kind: str, message: str) -> ToolResult:
        self._event(
            "mcp.error", server=connection.config.name, tool=remote, kind=kind, message=message
        )
        self._say(f"mcp: {message.removeprefix('Error: ')}")
        self._flush()
        return error_result(message)

    # --- the event-loop thread ---------------------------------------------------------------

    def _start_loop(self) -> None:
        import anyio
        from anyio.from_thread import BlockingPortal

        started = threading.Event()

        async def main() -> None:
            async with BlockingPortal() as portal:
                self._portal = portal
                started.set()
                await portal.sleep_until_stopped()

        # A daemon, so an exit that could not stop it politely never waits for it.
        self._thread = threading.Thread(
            target=anyio.run, args=(main,), name="mcp-servers", daemon=True
        )
        self._thread.start()
        started.wait()

    async def _serve(self, connection: _Connection) -> None:
        import anyio

        connection.stop, connection.stopped = anyio.Event(), anyio.Event()
        try:
            async with AsyncExitStack() as stack:
                # No deadline scope around this: the session's task groups outlive it. Each
                # request has the client's read timeout, and open() waits no longer than that.
                try:
                    client = await self._connect(connection, stack)
                    listed = await _list_tools(client)
                except Exception as error:
                    if connection.state == "starting":
                        self._failed(
                            connection,
                            _start_failure(connection, error, self.label, self._start_limit),
                        )
                    return
                if connection.state != "starting":
                    return  # open() gave up waiting: the session closes unused
                connection.client = client
                self._take_tools(connection, listed, first=True)
                connection.state = "running"
                connection.ready.set()
                await connection.stop.wait()
        except Exception as error:  # a session that broke down starting, or on the way out
            if connection.state == "starting":
                self._failed(
                    connection, _start_failure(connection, error, self.label, self._start_limit)
                )
        finally:
            connection.ready.set()
            connection.stopped.set()

    async def _connect(self, connection: _Connection, stack: AsyncExitStack) -> mcp.Client:
        import mcp
        import mcp.types

        config = connection.config
        resolved = resolve(config, self.environ)
        if resolved.missing:
            raise _NotConfigured(f"variable {resolved.missing} is not set")
        if config.transport == "stdio" and not Path(resolved.cwd).is_dir():
            raise _NotConfigured(f"its folder {resolved.cwd} is not a directory (cwd)")

        async def on_message(message: Any) -> None:
            if isinstance(message, Exception):
                # A line that is no MCP message: the calls waiting on this server fail now.
                connection.garbage = _garbage_reason(message)
                for scope in list(connection.in_flight):
                    scope.cancel()
            elif isinstance(message, mcp.types.ToolListChangedNotification):
                # Listed again when the run next reads its tools: before its next request.
                connection.stale = True

        transport = await self._transport(connection, resolved, stack)
        client = mcp.Client(
            transport,
            mode="legacy",
            # Each request's own limit; a call also has its own deadline (_call_on_loop).
            read_timeout_seconds=self._start_limit,
            message_handler=on_message,
            cache=None,
            client_info=mcp.types.Implementation(name="orchestrator", version=_version()),
        )
        return await stack.enter_async_context(client)

    async def _transport(
        self, connection: _Connection, resolved: Resolved, stack: AsyncExitStack
    ) -> Any:
        if connection.config.transport == "http":
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=dict(resolved.headers),
                    timeout=httpx2.Timeout(30.0, read=max(300.0, self.timeout)),
                )
            )
            return streamable_http_client(resolved.url, http_client=http)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        # The server's stderr for the whole run (closed by close()): why it failed, and how
        # close() finds every process it left behind.
        connection.errlog = tempfile.TemporaryFile(  # noqa: SIM115
            "w+", encoding="utf-8", errors="replace"
        )
        parameters = StdioServerParameters(
            command=resolved.command,
            args=list(resolved.args),
            # The SDK's minimal PATH, HOME, USER, SHELL, TERM, LOGNAME, PYTHONSAFEPATH, then the
            # config's: no key.
            env=server_environment(resolved, self.environ),
            # Its config's folder, not the work directory: `python3 -m tool` and `npx tool`
            # look there first, and the model may have planted a tool.py or node_modules.
            cwd=resolved.cwd,
        )
        return stdio_client(parameters, errlog=connection.errlog)

    async def _relist(self, connection: _Connection) -> None:
        import anyio

        client = connection.client
        if client is None or connection.state != "running":
            return
        connection.stale = False
        try:
            with anyio.fail_after(self.timeout):
                listed = await _list_tools(client)
        except Exception as error:
            self._event(
                "mcp.error",
                server=connection.config.name,
                tool="",
                kind="tools_changed",
                message=f"could not list the changed tools: {_one_line(str(error))}",
            )
            return
        self._take_tools(connection, listed, first=False)

    async def _call_on_loop(
        self, connection: _Connection, remote: str, arguments: Mapping[str, Any]
    ) -> mcp.types.CallToolResult:
        import anyio

        assert connection.client is not None
        with anyio.CancelScope() as scope:
            connection.in_flight.add(scope)
            try:
                with anyio.fail_after(self.timeout):
                    return await connection.client.call_tool(remote, dict(arguments))
            finally:
                connection.in_flight.discard(scope)
        raise _Garbage(connection.garbage)

    async def _stop_all(self) -> None:
        import anyio

        for connection in self._connections.values():
            if connection.stop is not None:
                connection.stop.set()
        with anyio.move_on_after(_STOP_SECONDS):
            for connection in self._connections.values():
                if connection.stopped is not None:
                    await connection.stopped.wait()

    # --- shared bookkeeping (either thread: deques and whole-value swaps only) ----------------

    def _take_tools(
        self, connection: _Connection, listed: Sequence[mcp.types.Tool], *, first: bool
    ) -> None:
        config = connection.config
        tools: dict[str, McpTool] = {}
        for remote in listed:
            name = _tool_name(config, remote.name)
            schema = remote.input_schema
            if name in tools:
                self._say(
                    f"mcp: {config.name}: tools {tools[name].remote!r} and {remote.name!r} both "
                    f"become {name}; {remote.name!r} is left out"
                )
                continue
            if not isinstance(schema, dict) or schema.get("type") != "object":
                self._say(f"mcp: {config.name}: tool {remote.name!r} has no object input schema")
                continue
            description = remote.description or f"{remote.name} (MCP server {config.name})"
            tools[name] = McpTool(
                name,
                remote.name,
                config.name,
                {"name": name, "description": description, "input_schema": schema},
                self._call,
            )
        connection.tools = tuple(tools.values())
        names = list(tools)
        self._event(
            "mcp.server",
            server=config.name,
            status="started" if first else "tools_changed",
            transport=config.transport,
            origin=config.origin,
            tools=names,
        )
        count = f"{len(names)} tool{'s' if len(names) != 1 else ''}"
        if first:
            self._say(f"mcp server {config.name}: started ({config.transport}), {count}")
        else:
            self._say(f"mcp server {config.name}: its tools changed, now {count}")

    def _failed(self, connection: _Connection, reason: str) -> None:
        connection.state, connection.reason = "failed", reason
        config = connection.config
        self._event(
            "mcp.server",
            server=config.name,
            status="failed",
            transport=config.transport,
            origin=config.origin,
            reason=reason,
        )
        self._say(
            f"mcp server {config.name} did not start: {reason}; its tools are left out of this run"
        )
        connection.ready.set()

    def _pin_problem(self, server: McpServerConfig) -> str | None:
        """Why ``server`` may not start because of what it runs from the work directory."""
        folder = self.workdir
        if folder is None and server.project and server.folder:
            folder = Path(server.folder)
        if folder is None:
            return None
        reading = server_reading(server, folder, self.environ)
        if reading is None:
            return None
        if reading.refusal:
            return reading.refusal
        now = reading.pins(folder)
        return pin_problem(now, folder, trusted=self.trusted_files, outside=True)

    def _refuse(self, connection: _Connection, reason: str) -> None:
        connection.state, connection.reason = "refused", reason
        config = connection.config
        self.refused.append((config.name, reason))
        self._event(
            "mcp.server", server=config.name, status="refused", origin=config.origin, reason=reason
        )
        self._say(
            f"! mcp server {config.name} does not start: {reason}; review it, then "
            "`orchestrator trust` records it (exit code 3)"
        )

    def _event(self, name: str, **fields: Any) -> None:
        self._events.append((name, fields))

    def _say(self, line: str) -> None:
        self._lines.append(line)

    def _flush(self, *, events: bool = True) -> None:
        """Write queued events and lines, in the caller's thread (the trace has one writer)."""
        if threading.current_thread() is self._thread:
            return
        while events and self._events:
            name, fields = self._events.popleft()
            if self.log is not None:
                self.log.info(name, **fields)
        while self._lines:
            self._notify(self._lines.popleft())


def check_servers(
    servers: Sequence[McpServerConfig],
    *,
    trusted: bool,
    timeout: float = DEFAULT_TIMEOUT,
    environ: Mapping[str, str] | None = None,
    workdir: Path | None = None,
    trusted_files: Mapping[str, str] | None = None,
) -> list[ServerStatus]:
    """Start every server once, see what it offers, stop it (``mcp list``, ``doctor``).

    Each may take ``timeout`` seconds to start and list its tools: no more, and no floor.
    ``workdir`` and ``trusted_files`` are as for :class:`McpServers`.
    """
    source = McpServers(
        servers,
        timeout=timeout,
        start_timeout=timeout,
        trusted=trusted,
        environ=environ,
        workdir=workdir,
        trusted_files=dict(trusted_files or {}),
    )
    try:
        source.open(lambda _line: None)
        return source.statuses()
    finally:
        source.close()


class _NotConfigured(Exception):
    """The server's config cannot be used as it stands (a variable it names is unset)."""


async def _list_tools(client: mcp.Client) -> list[mcp.types.Tool]:
    tools: list[mcp.types.Tool] = []
    cursor: str | None = None
    for _ in range(_PAGE_LIMIT):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _tool_name(config: McpServerConfig, remote: str) -> str:
    name = config.prefix + tool_name_part(remote)
    if len(name) <= NAME_LIMIT:
        return name
    # Cut to the API's limit; the digest keeps two long names that share a start apart.
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: NAME_LIMIT - 9]}_{digest}"


def _start_failure(
    connection: _Connection, error: BaseException, label: Callable[[str], str], limit: float
) -> str:
    import mcp.types
    from mcp.shared.exceptions import MCPError

    inner = error
    while isinstance(inner, BaseExceptionGroup) and inner.exceptions:
        inner = inner.exceptions[0]
    timed_out = isinstance(inner, MCPError) and inner.error.code == mcp.types.REQUEST_TIMEOUT
    if timed_out or isinstance(inner, TimeoutError):
        return f"no answer within {limit:g} s ({label('mcp_timeout')})"
    if isinstance(error, FileNotFoundError | PermissionError):
        return f"cannot run {connection.config.command!r}: {error.strerror}"
    text = _one_line(_innermost(error))
    tail = connection.stderr_tail()
    if tail and tail not in text:
        text = f"{text} (its stderr: {tail})" if text else f"its stderr: {tail}"
    return text or f"{type(error).__name__}"


def _innermost(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, FileNotFoundError | PermissionError):
        return f"{error.strerror}: {error.filename}"
    return str(error) or type(error).__name__


def _rendered(result: mcp.types.CallToolResult, label: str) -> ToolResult:
    """A tool result's content as text: text kept, other content types summarised."""
    import mcp.types

    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp.types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp.types.ImageContent | mcp.types.AudioContent):
            kind = "image" if isinstance(block, mcp.types.ImageContent) else "audio"
            parts.append(f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes, not shown]")
        elif isinstance(block, mcp.types.ResourceLink):
            parts.append(f"[resource link {block.uri} ({block.name})]")
        elif isinstance(block, mcp.types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp.types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[resource {resource.uri}: {resource.mime_type or 'binary'}]")
        else:
            parts.append(f"[{getattr(block, 'type', 'unknown')} content, not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts) or "(no output)"
    if len(text) > OUTPUT_LIMIT:
        text = with_note(
            text[:OUTPUT_LIMIT],
            f"... [output truncated: {len(text) - OUTPUT_LIMIT} more characters not shown; "
            "ask the tool for less]",
        )
    if result.is_error:
        return error_result(f"Error: {label} reported an error: {text}")
    return ToolResult(text)


def _garbage_reason(error: BaseException) -> str:
    """What was wrong with a server's answer, in a few words (pydantic's first complaint)."""
    from pydantic import ValidationError

    if isinstance(error, ValidationError) and error.errors():
        first = error.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        value = repr(first.get("input"))[:60]
        return _one_line(f"{where + ': ' if where else ''}{first.get('msg', '')}, got {value}")
    return _one_line(str(error)) or "an answer that is not an MCP message"


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _REASON_CHARACTERS else line[: _REASON_CHARACTERS - 1] + "…"


def _kill_holders(errlog: IO[str] | None) -> None:
    """SIGKILL every process that still holds a stdio server's stderr file: it and its children.

    The SDK stops the server's process group; a child that left the group (setsid) still
    holds the stderr it inherited, so this finds it wherever it went.
    """
    if errlog is None or errlog.closed:
        return
    try:
        mine = os.fstat(errlog.fileno())
    except (OSError, ValueError):
        return
    me = os.getpid()
    for pid in process_ids():
        if pid == me:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                held = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if (held.st_dev, held.st_ino) == (mine.st_dev, mine.st_ino):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                break


def _quiet_sdk_logging() -> None:
    """The SDK logs protocol trouble with tracebacks; the run reports it in its own lines."""
    for name in ("mcp", "client", "httpx2", "httpx"):
        logger = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())
        logger.propagate = False


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("orchestrator")
    except PackageNotFoundError:
        return "0"


__all__ = ["DEFAULT_TIMEOUT", "McpServers", "McpTool", "ServerStatus", "check_servers"]
