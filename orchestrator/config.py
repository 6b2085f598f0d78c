"""Effective settings: a flag, the environment, ``orchestrator.toml``, the user file, the default.

Every value remembers where it came from, so ``orchestrator config`` can show it, and a wrong
value is refused with one line naming the setting, the source and what was expected. The user
file is ``config.toml`` in the per-user config directory (``platformdirs``; on Linux
``$XDG_CONFIG_HOME/orchestrator/`` or ``~/.config/orchestrator/``, or ``$ORCHESTRATOR_CONFIG_DIR``).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

CONFIG_FILE = "orchestrator.toml"
USER_CONFIG_FILE = "config.toml"
#: Points the per-user config directory elsewhere (tests, or a second profile).
CONFIG_DIR_VARIABLE = "ORCHESTRATOR_CONFIG_DIR"
DEFAULT_MODEL = "claude-sonnet-5-5"


class ConfigError(Exception):
    """A setting with a wrong value; ``str()`` is one line naming it."""


class SettingsError(ConfigError):
    """A setting, file or flag that cannot work here (the CLI: one line, exit 2)."""


def _positive_int(value: object) -> int:
    number = _integer(value)
    if number < 1:
        raise ValueError("a whole number of at least 1")
    return number


def _non_negative_int(value: object) -> int:
    number = _integer(value)
    if number < 0:
        raise ValueError("a whole number of at least 0")
    return number


def _integer(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError("a whole number")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]+\s*", value):
        return int(value)
    raise ValueError("a whole number")


def _dollars(value: object) -> float:
    try:
        return _positive_float(value)
    except ValueError:
        raise ValueError("an amount of US dollars above 0, such as 2 or 0.50") from None


def _positive_float(value: object) -> float:
    if isinstance(value, bool):
        raise ValueError("a number of seconds")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError("a number of seconds") from None
    # float() also reads "nan" and "inf", which no timeout can mean.
    if not math.isfinite(number) or number <= 0:
        raise ValueError("a number of seconds above 0")
    return number


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smh]?)")
_SECONDS_PER = {"": 1, "s": 1, "m": 60, "h": 3600}


def _duration(value: object) -> float:
    """Seconds from ``90``, ``90s``, ``15m`` or ``2h``."""
    found = _DURATION.fullmatch(str(value).strip().lower())
    if isinstance(value, bool) or found is None or float(found.group(1)) <= 0:
        raise ValueError("a duration such as 90, 90s, 15m or 2h")
    return float(found.group(1)) * _SECONDS_PER[found.group(2)]


def _at_least(floor: int, unit: str) -> Callable[[object], int]:
    """A whole number of at least ``floor``: less leaves a command unable to start at all."""

    def parse(value: object) -> int:
        number = _integer(value)
        if number < floor:
            raise ValueError(f"a whole number of {unit}, at least {floor}")
        return number

    return parse


def _thinking(value: object) -> str:
    if isinstance(value, str) and value.strip().lower() in ("adaptive", "off"):
        return value.strip().lower()
    try:
        budget = _integer(value)
    except ValueError:
        raise ValueError("adaptive, off, or a budget of at least 1024 tokens") from None
    if budget < 1024:
        raise ValueError("adaptive, off, or a budget of at least 1024 tokens")
    return str(budget)


def _window(value: object) -> int:
    number = _integer(value)
    if number < 1000:
        raise ValueError("a number of tokens, at least 1000")
    return number


def _text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a non-empty string")
    return value.strip()


def _lease(value: object) -> float:
    """A claim's lease on a shared board, by the board's own rule (finite, 1 s to 24 h)."""
    from orchestrator.board.inputs import LEASE_RULE, lease_problem

    try:
        seconds = _positive_float(value)
    except ValueError:
        raise ValueError(LEASE_RULE) from None
    if lease_problem(seconds) is not None:
        raise ValueError(LEASE_RULE)
    return seconds


def _agent_name(value: object) -> str:
    """A shared board's agent name: printable, not a person's (``person:…``)."""
    from orchestrator.board.inputs import agent_problem

    if agent_problem(value.strip() if isinstance(value, str) else value) is not None:
        raise ValueError(
            "a name of printable characters that does not start with person: "
            "(such as alice or TEAM/worker-1)"
        )
    return str(value).strip()


def _url(value: object) -> str:
    """An http(s) URL with a host: a typo here would otherwise be retried as a network error."""
    from urllib.parse import urlsplit

    text = _text(value)
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError:
        raise ValueError("an http(s) URL such as https://api.anthropic.com") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("an http(s) URL such as https://api.anthropic.com")
    return text


def _boolean(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"1", "true", "yes", "on"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError("true or false")


@attrs.frozen
class Choice:
    """A parser accepting one of a few words; the CLI offers ``allowed`` as the flag's choices."""

    allowed: tuple[str, ...]

    def __call__(self, value: object) -> str:
        if isinstance(value, str) and value.strip().lower() in self.allowed:
            return value.strip().lower()
        raise ValueError("one of " + ", ".join(self.allowed))


def _choice(*allowed: str) -> Choice:
    return Choice(allowed)


def _prices(value: object) -> tuple[float, float, float, float]:
    """Dollars per million tokens: input, output, cache read, cache write."""
    expected = "four numbers 'input,output,cache_read,cache_write' in dollars per million tokens"
    if isinstance(value, str):
        parts: list[object] = [part.strip() for part in value.split(",")]
    elif isinstance(value, list | tuple):
        parts = list(value)
    else:
        raise ValueError(expected)
    if len(parts) != 4:
        raise ValueError(expected)
    numbers = []
    for part in parts:
        try:
            number = float(part)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ValueError(expected) from None
        if isinstance(part, bool) or not math.isfinite(number) or number < 0:
            raise ValueError(expected)
        numbers.append(number)
    return numbers[0], numbers[1], numbers[2], numbers[3]


def _path_list(value: object) -> tuple[str, ...]:
    return _list_of(value, os.pathsep, "directories")


def _name_list(value: object) -> tuple[str, ...]:
    names = _list_of(value, ",", "variable names")
    for name in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"variable names (letters, digits, _), and {name!r} is not one")
    return names


#: An ``auto_approve`` rule: a tool's name (``mcp__SERVER`` also stands for every tool of that
#: MCP server, as in Claude Code), or ``mcp__SERVER__*``. approval.py reads what they match.
TOOL_RULE = re.compile(r"[A-Za-z0-9_-]{1,128}|mcp__[A-Za-z0-9_-]{1,120}__\*")


def _pattern_problem(patterns: Sequence[str]) -> str | None:
    """Why ``patterns`` cannot be protect globs (one line), or None when they can."""
    import pathspec

    for pattern in patterns:
        if pattern.startswith("!"):
            return f"protect: {pattern!r}: a negated pattern cannot unprotect a file; remove it"
        try:
            pathspec.GitIgnoreSpec.from_lines([pattern])
        except (ValueError, TypeError) as error:
            return f"protect: {pattern!r} is not a gitignore-style pattern: {error}"
    return None


def _glob_list(value: object) -> tuple[str, ...]:
    patterns = _list_of(value, ",", "gitignore-style patterns")
    problem = _pattern_problem(patterns)
    if problem is not None:
        raise ValueError(f"gitignore-style patterns ({problem})")
    return patterns


def _tool_list(value: object) -> tuple[str, ...]:
    names = _list_of(value, ",", "tool names")
    for name in names:
        if not TOOL_RULE.fullmatch(name):
            raise ValueError(
                "tool names (letters, digits, _ and -), mcp__SERVER or mcp__SERVER__*, "
                f"and {name!r} is not one"
            )
    return names


def _module_list(value: object) -> tuple[str, ...]:
    names = _list_of(value, ",", "module names")
    for name in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", name):
            raise ValueError(f"dotted module names, and {name!r} is not one")
    return names


def _list_of(value: object, separator: str, what: str) -> tuple[str, ...]:
    # A flag given several times arrives as a tuple, a variable as one separated string.
    items = value.split(separator) if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(item, str) for item in items):
        raise ValueError(f"a list of {what}")
    return tuple(item.strip() for item in items if item.strip())


@attrs.frozen
class _Setting:
    name: str
    parse: Callable[[object], Any]
    default: Any
    env: tuple[str, ...]
    secret: bool = False
    #: One line for ``--help`` and docs/cli.md.
    help: str = ""
    #: What the flag's value is, for ``--help`` (``FILE``, ``USD``); else one from the default.
    metavar: str = ""

    @property
    def flag(self) -> str:
        """The command-line flag: ``max_rounds`` → ``--max-rounds``."""
        return flag_label(self.name)


def flag_label(name: str) -> str:
    """How the CLI names a setting or option in a message: ``max_rounds`` → ``--max-rounds``.

    Messages built below the front ends take a ``label`` like this one, so the Python API can
    say ``max_rounds=`` instead (see :func:`given`).
    """
    return "--" + name.replace("_", "-")


def given(label: Callable[[str], str], name: str, value: object) -> str:
    """A setting as a person gives it: ``--max-cost 2`` on the CLI, ``max_cost=2`` in Python.

    A ``label`` that ends in ``=`` is Python's; ``True`` is then ``trust=True``, on the CLI the
    bare flag ``--trust``.
    """
    named, python = label(name), label(name).endswith("=")
    if isinstance(value, float):
        shown = f"{value:g}"
    else:
        shown = repr(value) if python and isinstance(value, str | bool) else str(value)
    if python:
        return named + shown
    return named if value is True else f"{named} {shown}"


_FLAG = re.compile(r"--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")


def relabel(text: str, label: Callable[[str], str]) -> str:
    """``text`` with each CLI flag (``--max-rounds``) named as ``label`` names it.

    For messages made by parts that know only the CLI's words (the sandbox's refusal); a
    flag that is no setting or option of the front ends is left as it is.
    """
    if label is flag_label:
        return text
    known = {setting.name for setting in SETTINGS} | {"workdir", "trace"}
    # Flags that take no value: what they say is "= True".
    switches = {setting.name for setting in SETTINGS if setting.default is False} | {"trust"}

    def one(match: re.Match[str]) -> str:
        name = match.group(1).replace("-", "_")
        if name in switches:
            return given(label, name, True)
        return label(name) if name in known else match.group(0)

    return _FLAG.sub(one, text)


#: Every setting, its parser, default and environment variables, in the order shown.
SETTINGS: tuple[_Setting, ...] = (
    _Setting(
        "model",
        _text,
        DEFAULT_MODEL,
        ("ORCHESTRATOR_MODEL", "ANTHROPIC_MODEL"),
        help="Model name sent to the Messages API.",
        metavar="NAME",
    ),
    _Setting(
        "max_rounds",
        _positive_int,
        50,
        ("ORCHESTRATOR_MAX_ROUNDS",),
        help="Stop the run (failed) after this many model rounds.",
    ),
    _Setting(
        "max_cost",
        _dollars,
        None,
        ("ORCHESTRATOR_MAX_COST",),
        help="End the run (failed) once it has spent this many US dollars [no limit].",
        metavar="USD",
    ),
    _Setting(
        "max_duration",
        _duration,
        None,
        ("ORCHESTRATOR_MAX_DURATION",),
        help="End the run (failed) after this long: seconds, or 90s, 15m, 2h [no limit].",
        metavar="DURATION",
    ),
    _Setting(
        "max_tokens",
        _positive_int,
        8192,
        ("ORCHESTRATOR_MAX_TOKENS",),
        help="Output token limit of each model response.",
    ),
    _Setting(
        "max_retries",
        _non_negative_int,
        2,
        ("ORCHESTRATOR_MAX_RETRIES",),
        help="Retries of a 429, 529, 5xx or a broken-off stream.",
    ),
    _Setting(
        "timeout",
        _positive_float,
        600.0,
        ("ORCHESTRATOR_TIMEOUT",),
        help="Most seconds any one wait for the API may take (caps the two below).",
    ),
    _Setting(
        "connect_timeout",
        _positive_float,
        10.0,
        ("ORCHESTRATOR_CONNECT_TIMEOUT",),
        help="Seconds to open the connection to the API.",
    ),
    _Setting(
        "read_timeout",
        _positive_float,
        60.0,
        ("ORCHESTRATOR_READ_TIMEOUT",),
        help="Seconds to wait for the first (or next) byte of a response.",
    ),
    _Setting(
        "reminder_threshold",
        _positive_int,
        3,
        ("ORCHESTRATOR_REMINDER_THRESHOLD",),
        help="Remind the model after this many rounds without a plan change.",
    ),
    _Setting(
        "plan_limit",
        _positive_int,
        20,
        ("ORCHESTRATOR_PLAN_LIMIT",),
        help="Most items the todo board holds.",
    ),
    _Setting(
        "plan_policy",
        _choice("strict", "lenient"),
        "strict",
        ("ORCHESTRATOR_PLAN_POLICY",),
        help="lenient lets one update walk pending → in_progress → completed.",
    ),
    _Setting(
        "board",
        _text,
        None,
        ("ORCHESTRATOR_BOARD",),
        help="Keep the plan in this JSON file: loaded at start, written after each update.",
        metavar="FILE|URL",
    ),
    _Setting(
        "context_window",
        _window,
        None,
        ("ORCHESTRATOR_CONTEXT_WINDOW",),
        help="The model's input window in tokens [asked of the Models API].",
        metavar="TOKENS",
    ),
    _Setting(
        "compaction",
        _choice("auto", "client", "server", "off"),
        "auto",
        ("ORCHESTRATOR_COMPACTION",),
        help="How the context is kept inside the window: auto, client, server or off.",
    ),
    _Setting(
        "thinking",
        _thinking,
        "off",
        ("ORCHESTRATOR_THINKING",),
        help="Extended thinking: adaptive, off, or a token budget N.",
        metavar="adaptive|off|TOKENS",
    ),
    _Setting(
        "effort",
        _choice("low", "medium", "high", "max"),
        None,
        ("ORCHESTRATOR_EFFORT",),
        help="Effort level the model is asked for (low, medium, high, max).",
    ),
    _Setting(
        "approval",
        _choice("ask", "edits", "auto", "deny"),
        "ask",
        ("ORCHESTRATOR_APPROVAL",),
        help="ask: before bash and file writes; edits: only before bash; auto: never; "
        "deny: refuse them all.",
    ),
    _Setting(
        "sandbox",
        _choice("auto", "bwrap", "workdir", "none"),
        "auto",
        ("ORCHESTRATOR_SANDBOX",),
        help="auto: bubblewrap when it works, else workdir; bwrap: bash in bubblewrap; "
        "workdir: file tools stay inside the work directory; none: no confinement.",
    ),
    _Setting(
        "allow_network",
        _boolean,
        False,
        ("ORCHESTRATOR_ALLOW_NETWORK",),
        help="Let sandboxed bash reach the network.",
    ),
    _Setting(
        "ro_path",
        _path_list,
        (),
        ("ORCHESTRATOR_RO_PATH",),
        help="Extra read-only paths for sandboxed bash (comma-separated).",
        metavar="PATH",
    ),
    _Setting(
        "env",
        _name_list,
        (),
        ("ORCHESTRATOR_ENV",),
        help="Environment variables passed into sandboxed bash (comma-separated names).",
        metavar="NAME",
    ),
    _Setting(
        "max_processes",
        # bwrap alone takes three: its monitor, its pid 1 and bash.
        _at_least(8, "processes"),
        1024,
        ("ORCHESTRATOR_MAX_PROCESSES",),
        help="Most processes one bash command may run at once (its control group's pids.max "
        "where one is writable, else RLIMIT_NPROC, which root is not held to).",
    ),
    _Setting(
        "max_memory",
        _at_least(64, "MiB"),
        8192,
        ("ORCHESTRATOR_MAX_MEMORY",),
        help="MiB of memory one bash command may use: all its processes together where a "
        "control group is writable, and each process's data segments (RLIMIT_DATA).",
    ),
    _Setting(
        "deny_bash",
        _boolean,
        False,
        ("ORCHESTRATOR_DENY_BASH",),
        help="Offer the model no bash tool (it gets list_files instead).",
    ),
    # issue 22
    _Setting(
        "mcp_timeout",
        _positive_float,
        30.0,
        ("ORCHESTRATOR_MCP_TIMEOUT",),
        help="Seconds an MCP server may take to start (in a run at least 10) and to answer "
        "one call; Claude Code's default.",
    ),
    _Setting(
        "auto_approve",
        _tool_list,
        (),
        ("ORCHESTRATOR_AUTO_APPROVE",),
        help="Tools that run without asking: a name (mcp__docs__search), every tool of an MCP "
        "server (mcp__docs or mcp__docs__*); comma-separated.",
        metavar="TOOL",
    ),
    _Setting(
        "tools",
        _module_list,
        (),
        ("ORCHESTRATOR_TOOLS",),
        help="Python modules whose @tool functions the model gets, e.g. mypkg.agent_tools "
        "(comma-separated; a project file's need trust).",
        metavar="MODULE",
    ),
    # issue 25
    _Setting(
        "allow_write",
        _path_list,
        (),
        ("ORCHESTRATOR_ALLOW_WRITE",),
        help="A protected path (git hooks or config, orchestrator.toml, .mcp.json) the model "
        "may write after all (a flag or your own config only, never a project file).",
        metavar="PATH",
    ),
    # issue 31
    _Setting(
        "protect",
        _glob_list,
        (),
        ("ORCHESTRATOR_PROTECT",),
        help="Files the model may not change, as gitignore-style patterns relative to the work "
        "directory, e.g. 'tests/**' (comma-separated; every source adds, none removes): "
        "read-only under bwrap, refused to the file tools, and a check fails while one differs.",
        metavar="GLOB",
    ),
    # issue 24
    _Setting(
        "settle_plan",
        _boolean,
        True,
        ("ORCHESTRATOR_SETTLE_PLAN",),
        help="A run ends done only with every item completed or cancelled (one reminder "
        "first, then exit 3); false lets it end with items open.",
    ),
    _Setting(
        "done_check",
        _text,
        None,
        ("ORCHESTRATOR_DONE_CHECK",),
        help="A command (run where bash runs) that must pass before the run may end done; "
        "its failure goes back to the model.",
        metavar="COMMAND",
    ),
    _Setting(
        "done_check_retries",
        _non_negative_int,
        3,
        ("ORCHESTRATOR_DONE_CHECK_RETRIES",),
        help="Failed done-checks the model may fix before the run ends failed.",
    ),
    _Setting(
        "completion_check",
        _text,
        None,
        ("ORCHESTRATOR_COMPLETION_CHECK",),
        help="A command every todo item's completion must pass (unless the item has its own "
        "check), e.g. 'make test'.",
        metavar="COMMAND",
    ),
    _Setting(
        "check_timeout",
        _positive_float,
        300.0,
        ("ORCHESTRATOR_CHECK_TIMEOUT",),
        help="Seconds a done-check or an item's check may run before it is killed (and fails).",
    ),
    # issue 23
    _Setting(
        "agent",
        _agent_name,
        None,
        ("ORCHESTRATOR_AGENT",),
        help="This agent's name on a shared board (--board sqlite:///… or postgresql://…) "
        "[agent-PID].",
        metavar="NAME",
    ),
    _Setting(
        "lease",
        _lease,
        120.0,
        ("ORCHESTRATOR_LEASE",),
        help="Seconds a claim on a shared board holds unless renewed (the run renews it); "
        "1 to 86400 (24 h).",
    ),
    _Setting(
        "price_per_mtok",
        _prices,
        None,
        ("ORCHESTRATOR_PRICE_PER_MTOK",),
        help="Dollars per million tokens 'in,out,cache_read,cache_write' [the model's list "
        "price from the built-in table].",
        metavar="IN,OUT,CACHE_READ,CACHE_WRITE",
    ),
    _Setting(
        "base_url",
        _url,
        None,
        ("ANTHROPIC_BASE_URL",),
        help="Messages-API endpoint (a proxy, a gateway, the loopback test server).",
        metavar="URL",
    ),
    _Setting(
        "api_key",
        _text,
        None,
        ("ANTHROPIC_API_KEY",),
        secret=True,
        help="API key, sent as x-api-key (environment only).",
    ),
    _Setting(
        "auth_token",
        _text,
        None,
        ("ANTHROPIC_AUTH_TOKEN",),
        secret=True,
        help="Bearer token, sent as Authorization (environment only).",
    ),
)
_BY_NAME = {setting.name: setting for setting in SETTINGS}


def where_settable(name: str) -> str:
    """Which files may set a setting, in a few words (for docs/cli.md's table)."""
    if name in _NOT_IN_FILE:
        return "no file"
    if name == "allow_write":
        return "your own file only"
    return "both files"


#: Settings a config file may not hold, and why: a key in a file checked into a repo is a
#: leak, and a repo must not choose a path outside it for orchestrator to overwrite.
_NOT_IN_FILE: Mapping[str, str] = {
    **{s.name: f"use {s.env[0]}" for s in SETTINGS if s.secret},
    "board": "pass --board or set ORCHESTRATOR_BOARD",
}


# From the narrowest: ``auto`` may fall back to ``workdir`` where ``bwrap`` would refuse to start,
# and each approval mode asks about less than the one before (``ask`` refuses without a terminal
# what ``edits`` and ``auto`` let through).
_WIDER: Mapping[str, tuple[str, ...]] = {
    "sandbox": ("bwrap", "auto", "workdir", "none"),
    "approval": ("deny", "ask", "edits", "auto"),
}
_NO_VALUE = object()
#: Settings whose every source counts (a flag, a variable and both files add up).
_ADDED_UP = frozenset({"protect"})
#: Tables other modules read from the same files (``[mcp_servers.NAME]``: the MCP servers;
#: ``[[hooks.EVENT]]``: the hooks).
_TABLES = frozenset({"mcp_servers", "hooks"})


def widens(name: str, value: object, baseline: object = _NO_VALUE) -> bool:
    """Whether a project file's value moves the key, widens the sandbox or asks less (trust).

    ``baseline`` is what the setting would be without the project file (the user's own file,
    else the default): a repo may narrow the user's choice, never widen it.
    """
    if baseline is _NO_VALUE:
        baseline = _BY_NAME[name].default
    if name in _WIDER:
        order = _WIDER[name]
        return value in order and (
            baseline not in order or order.index(value) > order.index(baseline)
        )
    if name in ("max_processes", "max_memory"):
        return isinstance(value, int) and isinstance(baseline, int) and value > baseline
    if name == "auto_approve":  # asks about less than the user's own file does
        return isinstance(value, tuple) and not set(value) <= set(baseline or ())  # type: ignore[call-overload]
    if name == "tools":  # importing a module runs its code, outside the sandbox
        return isinstance(value, tuple) and not set(value) <= set(baseline or ())  # type: ignore[call-overload]
    if name in ("done_check", "completion_check"):  # a repo's command to run: trust first
        return value is not None and value != baseline
    return name in ("base_url", "allow_network", "ro_path", "env") and bool(value)


class UntrustedConfig(ConfigError):
    """A project file in an untrusted folder sets something only a trusted one may."""

    def __init__(
        self, path: Path, names: list[str], label: Callable[[str], str] = flag_label
    ) -> None:
        self.path, self.names = path, names
        how = given(label, "trust", True)
        if label is flag_label:
            how += " (or answer yes when asked on a terminal, or run `orchestrator trust`)"
        super().__init__(
            f"{path}: {', '.join(names)} may only be set by a trusted folder's file; trust "
            f"{path.parent} with {how}, or remove {'them' if len(names) > 1 else 'it'}"
        )


@attrs.frozen
class Config:
    """The effective settings and where each came from (flag, a variable, the file, default)."""

    values: Mapping[str, Any]
    sources: Mapping[str, str]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def updated(self, values: Mapping[str, Any], *, source: str) -> Config:
        """These ``values`` instead, each said to come from ``source``."""
        return Config({**self.values, **values}, {**self.sources, **dict.fromkeys(values, source)})

    def shown(self, invalid: Sequence[Invalid] = ()) -> list[tuple[str, str, str]]:
        """(name, value, source) rows with secrets masked, for ``orchestrator config``.

        A setting in ``invalid`` shows the value as given, not the default standing in for it.
        """
        given = {bad.name: bad.raw for bad in invalid}
        rows = []
        for setting in SETTINGS:
            if setting.name in given:
                rows.append((setting.name, given[setting.name], self.sources[setting.name]))
                continue
            value = self.values[setting.name]
            text = "(not set)" if value is None else _shown_value(value)
            if setting.secret and value is not None:
                text = mask(str(value))
            rows.append((setting.name, text, self.sources[setting.name]))
        return rows


def _shown_value(value: object) -> str:
    if isinstance(value, tuple):
        if not value:
            return "(none)"
        if all(isinstance(part, str) for part in value):
            return ", ".join(value)
        return ",".join(f"{part:g}" if isinstance(part, float) else str(part) for part in value)
    return str(value)


def user_config_path(env: Mapping[str, str] | None = None) -> Path:
    """The per-user config file: ``$ORCHESTRATOR_CONFIG_DIR/config.toml`` or the platform's."""
    env = os.environ if env is None else env
    folder = env.get(CONFIG_DIR_VARIABLE)
    if folder:
        return Path(folder) / USER_CONFIG_FILE
    import platformdirs

    return Path(platformdirs.user_config_dir("orchestrator")) / USER_CONFIG_FILE


def mask(secret: str) -> str:
    """Show only enough of a secret to recognise it."""
    return secret[:6] + "…" + secret[-4:] if len(secret) > 14 else "…" * 3


@attrs.frozen
class Invalid:
    """A setting whose value does not parse: where it came from, what it was, what was wanted."""

    name: str
    source: str
    #: The value as given, already masked when the setting is a secret.
    raw: str
    #: What the setting takes, e.g. ``a whole number of at least 1``.
    expected: str
    secret: bool = False

    def __str__(self) -> str:
        """The one line :func:`load_config` refuses the value with."""
        if self.secret:  # not even masked: the error line goes to logs and CI output
            return f"{self.source}: {self.name} must be {self.expected}"
        return f"{self.source}: {self.name} must be {self.expected}, got {self.raw}"


def load_config(
    workdir: Path,
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    user_file: bool = True,
    trusted: bool = True,
    label: Callable[[str], str] | None = None,
) -> Config:
    """Resolve every setting; flags with the value None count as not given.

    ``user_file=False`` leaves the per-user config out (the demo must play the same anywhere).
    With ``trusted=False`` a project file that moves the key or widens the sandbox raises
    :class:`UntrustedConfig` instead of taking effect.
    """
    config, invalid, untrusted = _resolve(workdir, flags, env, user_file=user_file, label=label)
    if invalid:  # the first, in the table's order: one line names it
        raise ConfigError(str(invalid[0]))
    if untrusted and not trusted:
        raise UntrustedConfig(workdir / CONFIG_FILE, untrusted, label or flag_label)
    return config


def inspect_config(
    workdir: Path,
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    user_file: bool = True,
    trusted: bool = True,
    label: Callable[[str], str] | None = None,
) -> tuple[Config, tuple[Invalid, ...]]:
    """:func:`load_config`, but a value that does not parse is collected instead of raised.

    Each such setting takes its default in the returned config (its source stays the place
    that gave the bad value), so ``config`` can still show the whole table and ``doctor`` can
    still check the rest. A file that cannot be read at all still raises :class:`ConfigError`,
    and an untrusted widening :class:`UntrustedConfig`, as :func:`load_config` does.
    """
    config, invalid, untrusted = _resolve(workdir, flags, env, user_file=user_file, label=label)
    if untrusted and not trusted:
        raise UntrustedConfig(workdir / CONFIG_FILE, untrusted, label or flag_label)
    return config, invalid


def _resolve(
    workdir: Path,
    flags: Mapping[str, Any] | None,
    env: Mapping[str, str] | None,
    *,
    user_file: bool,
    label: Callable[[str], str] | None,
) -> tuple[Config, tuple[Invalid, ...], list[str]]:
    """Every setting's value and source, the values that did not parse, and the widenings."""
    env = os.environ if env is None else env
    file_values, file_name = _read_file(workdir / CONFIG_FILE)
    if "allow_write" in file_values:
        # A repo may never unprotect its own hooks: only the person (a flag, their file) may.
        raise ConfigError(
            f"{file_name}: allow_write does not belong in a project file; pass --allow-write "
            "or set it in your own config"
        )
    user_values, user_name = _read_file(user_config_path(env)) if user_file else ({}, "")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    invalid: list[Invalid] = []
    # What each setting the project file sets would be without it: the user's file, else the
    # default (flags and variables win over the file, so they never reach this).
    baselines: dict[str, Any] = {}
    for setting in SETTINGS:
        candidates: list[tuple[str, object]] = []
        flag = (flags or {}).get(setting.name)
        if flag is not None:
            candidates.append((setting.flag if label is None else label(setting.name), flag))
        candidates.extend((var, env[var]) for var in setting.env if env.get(var))
        if setting.name in file_values:
            candidates.append((f"{file_name} [{setting.name}]", file_values[setting.name]))
        if setting.name in user_values:
            candidates.append((f"{user_name} [{setting.name}]", user_values[setting.name]))
        if not candidates:
            values[setting.name], sources[setting.name] = setting.default, "default"
            continue
        source, raw = candidates[0]
        sources[setting.name] = source
        if setting.name in _ADDED_UP and len(candidates) > 1:
            # Protecting more only narrows what the model may do: every source adds its own.
            merged: list[str] = []
            try:
                for _where, each in candidates:
                    merged += [item for item in setting.parse(each) if item not in merged]
            except ValueError as error:
                invalid.append(Invalid(setting.name, source, repr(raw), str(error)))
                values[setting.name] = setting.default
                continue
            values[setting.name] = tuple(merged)
            sources[setting.name] = ", ".join(where for where, _each in candidates)
            continue
        try:
            values[setting.name] = setting.parse(raw)
        except ValueError as error:
            shown = mask(str(raw)) if setting.secret else repr(raw)
            invalid.append(Invalid(setting.name, source, shown, str(error), setting.secret))
            values[setting.name] = setting.default
            continue
        if source.startswith(file_name):
            baselines[setting.name] = setting.default
            if setting.name in user_values:
                with contextlib.suppress(ValueError):  # a value of the user's it cannot read: unset
                    baselines[setting.name] = setting.parse(user_values[setting.name])
    untrusted = [
        name
        for name, source in sources.items()
        if name in baselines and widens(name, values[name], baselines[name])
    ]
    return Config(values, sources), tuple(invalid), untrusted


def _read_file(path: Path) -> tuple[Mapping[str, Any], str]:
    if not path.is_file():
        return {}, str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read it: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    for key in data:
        if key in _TABLES:
            continue
        if key in _NOT_IN_FILE:
            raise ConfigError(f"{path}: {key} does not belong in a file; {_NOT_IN_FILE[key]}")
        if key not in _BY_NAME:
            known = ", ".join(s.name for s in SETTINGS if s.name not in _NOT_IN_FILE)
            raise ConfigError(f"{path}: unknown setting {key!r}; known settings: {known}")
    return data, str(path)
