"""Effective settings: flags, then the environment, then ``orchestrator.toml``, then defaults.

Every value remembers where it came from, so ``orchestrator config`` can show it, and a wrong
value is refused with one line naming the setting, the source and what was expected.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

CONFIG_FILE = "orchestrator.toml"
DEFAULT_MODEL = "claude-sonnet-5-5"


class ConfigError(Exception):
    """A setting with a wrong value; ``str()`` is one line naming it."""


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


def _boolean(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"1", "true", "yes", "on"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError("true or false")


def _choice(*allowed: str) -> Callable[[object], str]:
    def check(value: object) -> str:
        if isinstance(value, str) and value.strip().lower() in allowed:
            return value.strip().lower()
        raise ValueError("one of " + ", ".join(allowed))

    return check


def _path_list(value: object) -> tuple[str, ...]:
    return _list_of(value, os.pathsep, "directories")


def _name_list(value: object) -> tuple[str, ...]:
    names = _list_of(value, ",", "variable names")
    for name in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"variable names (letters, digits, _), and {name!r} is not one")
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


#: Every setting, its parser, default and environment variables, in the order shown.
SETTINGS: tuple[_Setting, ...] = (
    _Setting("model", _text, DEFAULT_MODEL, ("ORCHESTRATOR_MODEL", "ANTHROPIC_MODEL")),
    _Setting("max_rounds", _positive_int, 50, ("ORCHESTRATOR_MAX_ROUNDS",)),
    _Setting("max_tokens", _positive_int, 8192, ("ORCHESTRATOR_MAX_TOKENS",)),
    _Setting("max_retries", _non_negative_int, 4, ("ORCHESTRATOR_MAX_RETRIES",)),
    _Setting("timeout", _positive_float, 600.0, ("ORCHESTRATOR_TIMEOUT",)),
    _Setting("reminder_threshold", _positive_int, 3, ("ORCHESTRATOR_REMINDER_THRESHOLD",)),
    _Setting("plan_limit", _positive_int, 20, ("ORCHESTRATOR_PLAN_LIMIT",)),
    _Setting("plan_policy", _choice("strict", "lenient"), "strict", ("ORCHESTRATOR_PLAN_POLICY",)),
    _Setting("board", _text, None, ("ORCHESTRATOR_BOARD",)),
    _Setting(
        "sandbox", _choice("auto", "bwrap", "workdir", "none"), "auto", ("ORCHESTRATOR_SANDBOX",)
    ),
    _Setting("allow_network", _boolean, False, ("ORCHESTRATOR_ALLOW_NETWORK",)),
    _Setting("ro_path", _path_list, (), ("ORCHESTRATOR_RO_PATH",)),
    _Setting("env", _name_list, (), ("ORCHESTRATOR_ENV",)),
    _Setting("deny_bash", _boolean, False, ("ORCHESTRATOR_DENY_BASH",)),
    _Setting("context_window", _window, None, ("ORCHESTRATOR_CONTEXT_WINDOW",)),
    _Setting(
        "compaction",
        _choice("auto", "client", "server", "off"),
        "auto",
        ("ORCHESTRATOR_COMPACTION",),
    ),
    _Setting("thinking", _thinking, "off", ("ORCHESTRATOR_THINKING",)),
    _Setting("effort", _choice("low", "medium", "high", "max"), None, ("ORCHESTRATOR_EFFORT",)),
    _Setting("base_url", _text, None, ("ANTHROPIC_BASE_URL",)),
    _Setting("api_key", _text, None, ("ANTHROPIC_API_KEY",), secret=True),
)
_BY_NAME = {setting.name: setting for setting in SETTINGS}
#: Settings a config file may not hold, and why: a key in a file checked into a repo is a
#: leak, and a repo must not choose a path outside it for orchestrator to overwrite.
_NOT_IN_FILE: Mapping[str, str] = {
    "api_key": "use ANTHROPIC_API_KEY",
    "board": "pass --board or set ORCHESTRATOR_BOARD",
}


def widens(name: str, value: object) -> bool:
    """Whether a project file's value moves the key or widens the sandbox (needs trust)."""
    if name == "sandbox":
        return value in ("workdir", "none")
    return name in ("base_url", "allow_network", "ro_path", "env") and bool(value)


class UntrustedConfig(ConfigError):
    """A project file in an untrusted folder sets something only a trusted one may."""

    def __init__(self, path: Path, names: list[str]) -> None:
        self.path, self.names = path, names
        super().__init__(
            f"{path}: {', '.join(names)} may only be set by a trusted folder's file; trust "
            f"{path.parent} with --trust (or answer yes when asked on a terminal), or remove "
            f"{'them' if len(names) > 1 else 'it'}"
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

    def shown(self) -> list[tuple[str, str, str]]:
        """(name, value, source) rows with secrets masked, for ``orchestrator config``."""
        rows = []
        for setting in SETTINGS:
            value = self.values[setting.name]
            text = "(not set)" if value is None else str(value)
            if isinstance(value, tuple):
                text = ", ".join(value) or "(none)"
            if setting.secret and value is not None:
                text = mask(str(value))
            rows.append((setting.name, text, self.sources[setting.name]))
        return rows


def mask(secret: str) -> str:
    """Show only enough of a secret to recognise it."""
    return secret[:6] + "…" + secret[-4:] if len(secret) > 14 else "…" * 3


def load_config(
    workdir: Path,
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    trusted: bool = True,
) -> Config:
    """Resolve every setting; flags with the value None count as not given.

    With ``trusted=False`` a project file that moves the key or widens the sandbox raises
    :class:`UntrustedConfig` instead of taking effect.
    """
    env = os.environ if env is None else env
    file_values, file_name = _read_file(workdir / CONFIG_FILE)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for setting in SETTINGS:
        candidates: list[tuple[str, object]] = []
        flag = (flags or {}).get(setting.name)
        if flag is not None:
            candidates.append((f"--{setting.name.replace('_', '-')}", flag))
        candidates.extend((var, env[var]) for var in setting.env if env.get(var))
        if setting.name in file_values:
            candidates.append((f"{file_name} [{setting.name}]", file_values[setting.name]))
        if not candidates:
            values[setting.name], sources[setting.name] = setting.default, "default"
            continue
        source, raw = candidates[0]
        try:
            values[setting.name] = setting.parse(raw)
        except ValueError as error:
            raise ConfigError(
                f"{source}: {setting.name} must be {error}, got {raw!r}"
                if not setting.secret
                else f"{source}: {setting.name} must be {error}"
            ) from None
        sources[setting.name] = source
    untrusted = [
        name
        for name, source in sources.items()
        if source.startswith(file_name) and widens(name, values[name])
    ]
    if untrusted and not trusted:
        raise UntrustedConfig(workdir / CONFIG_FILE, untrusted)
    return Config(values, sources)


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
        if key in _NOT_IN_FILE:
            raise ConfigError(f"{path}: {key} does not belong in a file; {_NOT_IN_FILE[key]}")
        if key not in _BY_NAME:
            known = ", ".join(s.name for s in SETTINGS if s.name not in _NOT_IN_FILE)
            raise ConfigError(f"{path}: unknown setting {key!r}; known settings: {known}")
    return data, str(path)
