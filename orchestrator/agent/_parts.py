"""The parts a session is built from: the model client, the board, the model's limits, the trace.

Each turns the merged settings into one part, and a setting that cannot work into a
:class:`SettingsError` naming it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.agent.options import RunOptions
from orchestrator.board.shared import SharedBoard
from orchestrator.config import (
    Config,
    SettingsError,
    flag_label,
    given,
    relabel,
)
from orchestrator.context import resolve_limits
from orchestrator.plan import EdgePolicy, PlanBoard
from orchestrator.protocols import (
    Model,
    ModelLimits,
    Tool,
)
from orchestrator.sessions import SessionError, check_new_trace
from orchestrator.trace import secrets_from_environment

if TYPE_CHECKING:
    from orchestrator.tools.sandbox import SandboxChoice


def to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def to_stdout(text: str) -> None:
    print(text, flush=True)


def new_trace(options: RunOptions, run_id: str) -> Path:
    """Where a new session's trace goes: ``--trace``, else the state directory; never over one."""
    if options.trace is not None:
        check_new_trace(options.trace, flag=options.label("trace"))
        return options.trace
    from orchestrator.sessions import new_trace_path

    path = new_trace_path(options.workdir, run_id)
    try:
        check_new_trace(path, flag="trace")
    except SessionError as error:
        raise SessionError(
            f"{error}; set ORCHESTRATOR_STATE_DIR to a writable folder, or pass "
            f"{given(options.label, 'trace', 'FILE')}"
        ) from None
    return path


def quiet_when_gone(write: Callable[[str], None]) -> Callable[[str], None]:
    """The model's streamed text to the console, until the terminal is gone (then nowhere)."""
    from orchestrator.trace import TERMINAL_GONE

    gone = False

    def on_text(text: str) -> None:
        nonlocal gone
        if gone:
            return
        try:
            write(text)
        except OSError as error:
            if error.errno not in TERMINAL_GONE:
                raise
            gone = True

    return on_text


def configured_tools(config: Config) -> list[Tool]:
    """The ``@tool`` functions of the modules the ``tools`` setting names."""
    from orchestrator.tools.python import tools_from_modules

    try:
        return list(tools_from_modules(config.tools))
    except ImportError as error:
        raise SettingsError(f"tools: {error}") from None


def model_settings(config: Config, limits: ModelLimits) -> dict[str, Any]:
    """The loop settings that come from the configuration and the model's limits."""
    return {
        "model": config.model,
        "max_tokens": config.max_tokens,
        "reminder_threshold": config.reminder_threshold,
        "thinking": config.thinking,
        "effort": config.effort,
        "context_window": limits.max_input_tokens,
        "compaction": _compaction_mode(limits, config),
        "done_check": config.done_check,
        "done_check_retries": config.done_check_retries,
    }


def secret_values(config: Config) -> list[str]:
    """Every secret value this process holds: these never reach a trace or a request body."""
    found = secrets_from_environment()
    found.extend(value for value in (config.api_key, config.auth_token) if value)
    # What the user passes into bash with --env is theirs to use, not to show the model.
    found.extend(os.environ[name] for name in config.env if os.environ.get(name))
    return found


def check_thinking(config: Config, label: Callable[[str], str] = flag_label) -> None:
    """A thinking budget the output cap cannot hold is the person's mistake, said before a call."""
    thinking = config.thinking
    if thinking not in ("off", "adaptive") and int(thinking) >= config.max_tokens:
        raise SettingsError(
            f"{given(label, 'thinking', thinking)}: the budget must be below "
            f"{label('max_tokens')} ({config.max_tokens})"
        )


def model_limits(
    model: Model, config: Config, label: Callable[[str], str] = flag_label
) -> ModelLimits:
    """The model's limits, and a settings error for a setting the model cannot honour."""
    check_thinking(config, label)
    limits = resolve_limits(
        model, config.model, config.context_window, config.sources["context_window"]
    )
    for problem in _unsupported(limits, config, label):
        raise SettingsError(problem)
    return limits


def _unsupported(limits: ModelLimits, config: Config, label: Callable[[str], str]) -> list[str]:
    """What the model's advertised capabilities refuse (nothing when they are unknown)."""
    server = given(label, "compaction", "server")
    if not limits.capabilities:
        if config.compaction == "server":
            return [f"{server}: {limits.reason or 'the model has no capabilities'}"]
        return []
    problems = []
    thinking, name = config.thinking, config.model
    if thinking == "adaptive" and not limits.supports("thinking", "types", "adaptive"):
        problems.append(
            f"{given(label, 'thinking', 'adaptive')}: {name} does not support adaptive thinking"
        )
    budget = thinking not in ("off", "adaptive")
    if budget and not limits.supports("thinking", "types", "enabled"):
        problems.append(
            f"{given(label, 'thinking', thinking)}: {name} does not take a thinking budget; "
            f"try {given(label, 'thinking', 'adaptive')}"
        )
    if config.effort is not None and not limits.supports("effort", config.effort):
        problems.append(f"{given(label, 'effort', config.effort)}: {name} does not support it")
    if config.compaction == "server" and not _server_compaction(limits):
        problems.append(
            f"{server}: {name} does not advertise server-side compaction "
            f"(compact_20260112); use {given(label, 'compaction', 'client')}"
        )
    if limits.max_tokens is not None and config.max_tokens > limits.max_tokens:
        problems.append(
            f"{given(label, 'max_tokens', config.max_tokens)}: {name} allows at most "
            f"{limits.max_tokens}"
        )
    return problems


def _server_compaction(limits: ModelLimits) -> bool:
    return limits.supports("context_management", "compact_20260112")


def _compaction_mode(limits: ModelLimits, config: Config) -> str:
    """``auto`` becomes ``server`` where the model advertises it, ``client`` elsewhere."""
    if config.compaction == "auto":
        return "server" if _server_compaction(limits) else "client"
    return str(config.compaction)


def new_board(
    config: Config,
    warn: Callable[[str], None] | None = None,
    label: Callable[[str], str] = flag_label,
) -> PlanBoard | SharedBoard:
    """The board the ``board`` setting names (a store, a JSON file), else one in memory."""
    from orchestrator.board.json_file import BoardFileError, open_board
    from orchestrator.board.stores import is_store_url

    if config.board is not None and is_store_url(config.board):
        return _shared_board(config, label)

    policy = EdgePolicy(config.plan_policy)
    if config.board is None:
        return PlanBoard(limit=config.plan_limit, policy=policy)
    try:
        return open_board(
            Path(config.board),
            limit=config.plan_limit,
            policy=policy,
            on_write_error=warn or _warn,
        )
    except BoardFileError as error:
        raise SettingsError(relabel(str(error), label)) from None


def _shared_board(config: Config, label: Callable[[str], str]) -> SharedBoard:
    """The agent's view of the shared store ``--board`` names, its claims kept alive."""
    from orchestrator.board.store import BoardError
    from orchestrator.board.stores import BoardUrlError, open_store

    url = str(config.board)
    agent = config.agent or f"agent-{os.getpid()}"
    try:
        board = SharedBoard(open_store(url), agent, lease=config.lease)
    except (BoardUrlError, BoardError) as error:
        raise SettingsError(f"{label('board')} {error}") from None
    board.start_renewing(lambda: open_store(url))
    return board


def _warn(message: str) -> None:
    to_stderr(f"orchestrator: warning: {message}")


def anthropic_model(config: Config) -> Model:
    """The real Messages-API client, or a settings error naming the missing key."""
    if not (config.api_key or config.auth_token):
        raise SettingsError(
            "ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) is not set; export it "
            "(ANTHROPIC_BASE_URL points the client at any Messages-API endpoint), or try "
            "`orchestrator demo`, which runs offline"
        )
    from orchestrator.anthropic_model import AnthropicModel

    return AnthropicModel(
        max_retries=config.max_retries,
        timeout=config.timeout,
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
        api_key=config.api_key,
        auth_token=config.auth_token,
        base_url=config.base_url,
    )


def broken_command(code: int, command: str) -> str | None:
    """What exit ``code`` of ``command`` says about the command itself, or None (not broken).

    126: bash found the program but could not run it (most often a script without its
    executable bit); 127: there is no such program.
    """
    if code == 127:
        return "command not found"
    if code != 126:
        return None
    first = _program(command) or command
    return f"not executable (chmod +x, or run it as `sh {first}`)"


def _program(command: str) -> str:
    """The program ``command`` runs as bash reads it: past ``NAME=value`` words ("" if unclear)."""
    import shlex

    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return ""  # unbalanced quotes: bash names the problem when it runs
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0], re.S):
        words.pop(0)  # NAME=value before the command
    first = words[0] if words else ""
    return first if first and (first[0].isalnum() or first[0] in "./_~") else ""


def command_problem(command: str, workdir: Path) -> str | None:
    """Why ``command``'s program cannot run here, or None (a check's mistyped first word).

    The first word is looked up as bash would (``type -t``: a builtin, a keyword, a function,
    a file on ``PATH`` or a path from the work directory), on this host's ``PATH``; the
    sandbox's is the same system's. Leading ``NAME=value`` words and a command that starts
    with punctuation (``( … )``, ``{ …; }``) are left to bash.
    """
    import subprocess

    first = _program(command)
    if not first or first.startswith("~"):
        return None
    try:
        found = subprocess.run(
            ["bash", "-c", 'type -t -- "$1"', "type", first],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None  # nothing to say before the check runs and says it itself
    if found.stdout.strip():
        return None
    if "/" in first:
        path = workdir / first
        if path.is_dir():
            return f"`{first}`: a directory, not a command"
        if path.exists():  # there, but bash would not run it: exit 126
            return f"`{first}`: {broken_command(126, first)}"
    return f"`{first}`: {broken_command(127, first)} (bash looked on PATH and in {workdir})"


# --- the public API ---------------------------------------------------------------------------


def session_sandbox(options: RunOptions, hidden: Sequence[Path]) -> SandboxChoice:
    """The sandbox bash runs in; ``sandbox="bwrap"`` that cannot run here is a settings error."""
    from orchestrator.doctor import sandbox_policy
    from orchestrator.tools.sandbox import SandboxUnavailable, choose_sandbox

    policy = sandbox_policy(options.workdir, options.config, hidden)
    try:
        choice = choose_sandbox(options.config.sandbox, policy)
    except SandboxUnavailable as error:
        raise SettingsError(relabel(str(error), options.label)) from None
    if policy.stores and choice.sandbox.mode != "bwrap":
        # Only bwrap can hide the store from bash; anywhere else the model could forge it.
        raise SettingsError(
            relabel(
                f"--board {options.config.board}: the board's file {policy.stores[0]} is inside "
                f"the work directory, where bash (--sandbox {choice.sandbox.mode}) could rewrite "
                "it; keep the board outside the work directory, or run with --sandbox bwrap",
                options.label,
            )
        )
    return choice
