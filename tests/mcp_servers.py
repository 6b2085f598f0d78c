"""Small MCP servers the MCP tests start for real: written with the SDK's own ``MCPServer``.

``python tests/mcp_servers.py stdio`` serves on stdin/stdout; ``http PORT`` serves streamable
HTTP on loopback; ``liar`` is a hand-written stdio server that answers the handshake properly
and every call with something that is not an MCP result (``garbage``: not JSON; ``misshapen``:
JSON of the wrong shape); ``silent`` starts and never answers, as a hung server does;
``stubborn`` never answers either, and records a SIGTERM instead of ending on it (``$MCP_CALLS``
then says how it was stopped); ``slow SECONDS`` answers the handshake and the tool list properly,
each after that long. Each call is appended to the file ``$MCP_CALLS`` names, so a test sees
what the server really got.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer


def _record(text: str) -> None:
    with open(os.environ["MCP_CALLS"], "a", encoding="utf-8") as calls:
        calls.write(text + "\n")


def _server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("test-server")

    @server.tool()
    def note(text: str) -> str:
        """Write a note into the server's call log and say so."""
        _record(f"note {text}")
        return f"noted: {text}"

    @server.tool()
    def environment() -> str:
        """The names of the variables the server was started with, and its token's value."""
        _record("environment")
        return " ".join([*sorted(os.environ), f"NOTES_TOKEN={os.environ.get('NOTES_TOKEN')}"])

    @server.tool()
    def hang(seconds: float) -> str:
        """Take this long to answer."""
        _record(f"hang {seconds}")
        time.sleep(seconds)
        return "woke up"

    @server.tool()
    def crash() -> str:
        """Exit at once, mid-call."""
        _record("crash")
        os._exit(3)

    @server.tool()
    def large() -> str:
        """Answer with more than the output cap, starting with the key the tests' runs use."""
        return "leaked test-key-1234 " + "x" * 60_000

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Add a tool named fresh and tell the client its list changed."""
        server.add_tool(lambda: "fresh result", name="fresh", description="A fresh tool.")
        await ctx.session.send_tool_list_changed()
        return "grown"

    return server


def _liar(kind: str) -> None:
    """A stdio server that shakes hands properly and then answers every call with garbage."""

    def send(message: dict[str, object]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        message = json.loads(line)
        method, number = message.get("method"), message.get("id")
        if method == "initialize":
            version = message["params"]["protocolVersion"]
            info = {"name": "liar", "version": "1"}
            result = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
            send({"jsonrpc": "2.0", "id": number, "result": result})
        elif method == "tools/list":
            tool = {"name": "ask", "inputSchema": {"type": "object"}}
            send({"jsonrpc": "2.0", "id": number, "result": {"tools": [tool]}})
        elif method == "tools/call":
            _record("ask")
            if kind == "garbage":
                sys.stdout.write("}} this is not JSON-RPC\n")
                sys.stdout.flush()
            else:
                result = {"content": "not a list", "isError": "perhaps"}
                send({"jsonrpc": "2.0", "id": number, "result": result})
        elif number is not None:
            send({"jsonrpc": "2.0", "id": number, "error": {"code": -32601, "message": "no"}})


def _slow(seconds: float) -> None:
    """A stdio server that shakes hands and lists its tools properly, each after ``seconds``."""
    for line in sys.stdin:
        message = json.loads(line)
        method, number = message.get("method"), message.get("id")
        if number is None:
            continue  # a notification
        time.sleep(seconds)
        if method == "initialize":
            info = {"name": "slow", "version": "1"}
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": info,
            }
        else:
            result = {"tools": [{"name": "ask", "inputSchema": {"type": "object"}}]}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": number, "result": result}) + "\n")
        sys.stdout.flush()


def _stubborn() -> None:
    signal.signal(signal.SIGTERM, lambda _signal, _frame: _record("got SIGTERM"))
    _record("started stubborn")
    while True:
        time.sleep(1)


def main(argv: list[str]) -> None:
    mode = argv[0] if argv else "stdio"
    if mode == "silent":
        time.sleep(3600)
        return
    if mode == "stubborn":
        _stubborn()
    if mode == "slow":
        _slow(float(argv[1]))
        return
    if mode in ("garbage", "misshapen"):
        _liar(mode)
        return
    server = _server()
    _record(f"started {mode}")
    if mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
