"""Which MCP servers a run starts: ``.mcp.json`` and ``[mcp_servers.NAME]`` tables, checked.

Three places name servers, nearest last so it wins a shared name: the user's ``config.toml``,
the project's ``orchestrator.toml`` and the project's ``.mcp.json`` (the ``mcpServers`` format
Claude Code and others read). Each server is ``command`` / ``args`` / ``env`` / ``cwd`` (stdio)
or ``type = "http"`` / ``url`` / ``headers`` (streamable HTTP). ``${VAR}`` and ``${VAR:-default}``
in those values are read from the environment, which is how a server gets a token: a server's
environment holds only what its config names (and a minimal ``PATH``/``HOME``).

A stdio server starts in its ``cwd``, else in the folder of the file that names it, never in
the work directory unless its config says so: the model writes there, and a ``python3 -m tool``
or ``npx tool`` started there would run the model's ``tool.py`` or ``node_modules/.bin/tool``.
What a server's command runs from the work directory (a project's ``python3 srv.py``) is
pinned as a hook's is (:func:`server_reading`, :mod:`orchestrator.pinning`), and every stdio
server starts with ``PYTHONSAFEPATH=1``, so no module planted beside its script is imported.

A malformed file is a person's mistake: :class:`McpConfigError`, one line. A server that
cannot start as written (an unset variable, a transport we do not speak) is not: it is reported
as not started, and the run goes on without it.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import attrs

from orchestrator.pinning import Reading, read_argv

MCP_JSON = ".mcp.json"
PROJECT_TOML = "orchestrator.toml"
TABLE = "mcp_servers"
Transport = Literal["stdio", "http"]

_TOML_KEYS = frozenset({"type", "command", "args", "env", "cwd", "url", "headers"})
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9_-]")
#: What a stdio server's environment takes from ours besides what its config names (the SDK's
#: list on POSIX).
_INHERITED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
#: Set for every stdio server (its config may say otherwise): ``python3 srv.py`` does not put
#: the script's folder first on ``sys.path``, so a module planted beside it is never imported.
SAFE_PYTHON = {"PYTHONSAFEPATH": "1"}


class McpConfigError(Exception):
    """A file that names MCP servers is malformed; ``str()`` is one line naming file and server."""


def _frozen_mapping(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


@attrs.frozen
class McpServerConfig:
    """One configured server, its values as written (``${VAR}`` not yet read)."""

    name: str
    origin: str  # the file it came from, as shown to a person
    project: bool  # the project's file: it starts a process, so it needs the folder trusted
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)
    url: str = ""
    headers: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)
    #: Why it cannot start as written (a transport we do not speak), or "".
    unusable: str = ""
    #: Where a stdio server starts, as written (relative: to ``folder``); "" for ``folder``.
    cwd: str = ""
    #: The folder of the file that names it; "" (a server made in code) means the home folder.
    folder: str = ""

    @property
    def prefix(self) -> str:
        """The start of its tools' names: ``mcp__NAME__`` with the API's allowed characters."""
        return f"mcp__{tool_name_part(self.name)}__"

    def describe(self) -> str:
        """How it starts, in a few words: the command line or the URL."""
        if self.transport == "http":
            return f"http {self.url}"
        where = f" (in {self.cwd})" if self.cwd else ""
        return " ".join([self.command, *self.args]) + where


@attrs.frozen
class Resolved:
    """A server's values with ``${VAR}`` read, or the variable that is missing."""

    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)
    url: str = ""
    headers: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)
    missing: str = ""
    #: The absolute folder a stdio server starts in.
    cwd: str = ""


def tool_name_part(text: str) -> str:
    """``text`` with every character the API refuses in a tool name made ``_``."""
    return _NAME_CHARACTERS.sub("_", text)


def resolve(server: McpServerConfig, environ: Mapping[str, str] | None = None) -> Resolved:
    """The server's values with ``${VAR}`` and ``${VAR:-default}`` read from ``environ``."""
    environ = os.environ if environ is None else environ
    missing: list[str] = []

    def expand(text: str) -> str:
        def one(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            value = environ.get(name)
            if value:
                return value
            if default is not None:
                return default
            missing.append(name)
            return ""

        return _VARIABLE.sub(one, text)

    folder = Path(server.folder) if server.folder else Path.home()
    resolved = Resolved(
        command=expand(server.command),
        args=tuple(expand(arg) for arg in server.args),
        env={key: expand(value) for key, value in server.env.items()},
        url=expand(server.url),
        headers={key: expand(value) for key, value in server.headers.items()},
        cwd=str(folder / Path(expand(server.cwd)).expanduser()),
    )
    if missing:
        return attrs.evolve(resolved, missing=", ".join(dict.fromkeys(missing)))
    return resolved


def server_environment(
    resolved: Resolved, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment a stdio server starts with: a minimal one of ours, then its config's."""
    environ = os.environ if environ is None else environ
    inherited = {
        name: environ[name]
        for name in _INHERITED
        if name in environ and not environ[name].startswith("()")  # no shell functions
    }
    return {**inherited, **SAFE_PYTHON, **resolved.env}


def server_reading(
    server: McpServerConfig, workdir: Path, environ: Mapping[str, str] | None = None
) -> Reading | None:
    """What a stdio server's command runs from ``workdir``.

    None when it starts no process here: HTTP, a transport we do not speak, an unset variable.
    """
    if server.transport != "stdio" or server.unusable:
        return None
    resolved = resolve(server, environ)
    if resolved.missing:
        return None
    argv = [resolved.command, *resolved.args]
    return read_argv(
        argv, Path(resolved.cwd), workdir, environ=server_environment(resolved, environ)
    )


def mcp_secret_values(
    servers: Iterable[McpServerConfig], environ: Mapping[str, str] | None = None
) -> list[str]:
    """The credentials the servers are given (secret-looking env values, auth headers).

    A server that echoes its token must not show it to the model or write it to the trace.
    """
    from orchestrator.tools.secrets import looks_secret

    found: list[str] = []
    for server in servers:
        resolved = resolve(server, environ)
        pairs = [*resolved.env.items(), *resolved.headers.items()]
        for name, value in pairs:
            if looks_secret(name) or name.lower() in ("authorization", "proxy-authorization"):
                found.append(value)
                scheme, _, credential = value.partition(" ")
                if credential and scheme.lower() in ("bearer", "basic", "token"):
                    found.append(credential)
    return found


def load_servers(
    workdir: Path, user_file: Path | None, *, trusted: bool = True
) -> tuple[McpServerConfig, ...]:
    """Every configured server, nearest file winning a shared name, in the order first named.

    ``user_file`` is the user's ``config.toml`` (None leaves it out). In an untrusted folder
    (``trusted=False``) the project's files cannot take a name from the user's file: a clone
    must not switch off the user's own server by naming one like it. Raises
    :class:`McpConfigError` for a malformed file or two names that become the same tool prefix.
    """
    user = _from_toml(user_file, project=False) if user_file is not None else {}
    project = {**_from_toml(workdir / PROJECT_TOML, project=True), **_from_json(workdir / MCP_JSON)}
    found = {**user, **project}
    if not trusted:
        found = {**user, **{name: s for name, s in project.items() if name not in user}}
    _check_prefixes(found.values())
    return tuple(found.values())


def project_files_naming_servers(workdir: Path) -> list[str]:
    """The project's files that name servers (what trusting the folder would let start)."""
    servers = [s for s in load_servers(workdir, None) if s.project]
    return list(dict.fromkeys(s.origin for s in servers))


def _check_prefixes(servers: Iterable[McpServerConfig]) -> None:
    seen: dict[str, McpServerConfig] = {}
    for server in servers:
        other = seen.get(server.prefix)
        if other is not None:
            raise McpConfigError(
                f"{server.origin}: MCP servers {other.name!r} and {server.name!r} would both name "
                f"their tools {server.prefix}…; rename one (letters, digits, _ and - are kept)"
            )
        seen[server.prefix] = server


def _from_toml(path: Path, *, project: bool) -> dict[str, McpServerConfig]:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise McpConfigError(f"{path}: cannot read it: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise McpConfigError(f"{path}: not valid TOML: {error}") from None
    table = data.get(TABLE)
    if table is None:
        return {}
    where = f"{path} [{TABLE}]"
    if not isinstance(table, dict):
        raise McpConfigError(f"{where}: expected tables [{TABLE}.NAME], got {_kind(table)}")
    servers = {}
    for name, entry in table.items():
        if not isinstance(entry, dict):
            raise McpConfigError(f"{where}: {name} must be a table, got {_kind(entry)}")
        unknown = sorted(set(entry) - _TOML_KEYS)
        if unknown:
            raise McpConfigError(
                f"{path} [{TABLE}.{name}]: unknown key {unknown[0]!r}; "
                f"known keys: {', '.join(sorted(_TOML_KEYS))}"
            )
        servers[name] = _server(name, entry, path, f"{path} [{TABLE}.{name}]", project)
    return servers


def _from_json(path: Path) -> dict[str, McpServerConfig]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise McpConfigError(f"{path}: cannot read it: {error}") from None
    except ValueError as error:
        raise McpConfigError(f"{path}: not valid JSON: {error}") from None
    table = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise McpConfigError(f'{path}: expected {{"mcpServers": {{NAME: {{...}}, ...}}}}')
    servers = {}
    for name, entry in table.items():
        if not isinstance(entry, dict):
            raise McpConfigError(f"{path}: mcpServers.{name} must be an object, got {_kind(entry)}")
        # Keys other tools read (timeouts, OAuth) are left alone: the file is shared with them.
        servers[name] = _server(name, entry, path, f"{path}: mcpServers.{name}", True)
    return servers


def _server(
    name: str, entry: Mapping[str, Any], path: Path, where: str, project: bool
) -> McpServerConfig:
    origin, folder = str(path), str(path.resolve().parent)
    if not name.strip():
        raise McpConfigError(f"{where}: a server needs a name")
    kind = entry.get("type")
    if kind is None:
        kind = "http" if "url" in entry and "command" not in entry else "stdio"
    if kind in ("streamable-http", "streamable_http"):
        kind = "http"
    if not isinstance(kind, str):
        raise McpConfigError(f"{where}: type must be a string, got {_kind(kind)}")
    if kind not in ("stdio", "http"):
        # Another client's transport (sse, ws): not started here, but not an error in the file.
        shown = entry.get("url") or entry.get("command")
        return McpServerConfig(
            name,
            origin,
            project,
            "stdio",
            command=f"{kind} {shown}" if isinstance(shown, str) else kind,
            unusable=f"type {kind!r} is not supported here (stdio and http are)",
            folder=folder,
        )
    if kind == "http":
        url = _string(entry, "url", where, required=True)
        if not re.match(r"https?://", url):
            raise McpConfigError(f"{where}: url must be an http(s) URL, got {url!r}")
        return McpServerConfig(
            name,
            origin,
            project,
            "http",
            url=url,
            headers=_string_map(entry, "headers", where),
            folder=folder,
        )
    return McpServerConfig(
        name,
        origin,
        project,
        "stdio",
        command=_string(entry, "command", where, required=True),
        args=_string_list(entry, "args", where),
        env=_string_map(entry, "env", where),
        cwd=_string(entry, "cwd", where, required=False),
        folder=folder,
    )


def _string(entry: Mapping[str, Any], key: str, where: str, *, required: bool) -> str:
    value = entry.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise McpConfigError(f"{where}: {key} must be a non-empty string, got {_kind(value)}")
    return value


def _string_list(entry: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise McpConfigError(f"{where}: {key} must be a list of strings, got {_kind(value)}")
    return tuple(value)


def _string_map(entry: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    value = entry.get(key, {})
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise McpConfigError(
            f"{where}: {key} must map names to strings, got {_kind(value)} "
            '(write numbers as strings: {"PORT": "8080"})'
        )
    return value


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {value!r}" if value.strip() else "an empty string"
    return f"{type(value).__name__} {value!r}"
