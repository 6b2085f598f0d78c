"""The parts a session is built from: the model client, the board, the model's limits, the trace.

Each turns the merged settings into one part, and a setting that cannot work into a
:class:`SettingsError` naming it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.agent.options import RunOptions
from orchestrator.board.shared import SharedBoard
from orchestrator.config import (
    Config,
    SettingsError,
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
        check_new_trace(options.trace)
        return options.trace
    from orchestrator.sessions import new_trace_path

    path = new_trace_path(options.workdir, run_id)
    try:
        check_new_trace(path, flag="trace")
    except SessionError as error:
        raise SessionError(
            f"{error}; set ORCHESTRATOR_STATE_DIR to a writable folder, or pass --trace FILE"
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


def check_thinking(config: Config) -> None:
    """A thinking budget the output cap cannot hold is the person's mistake, said before a call."""
    thinking = config.thinking
    if thinking not in ("off", "adaptive") and int(thinking) >= config.max_tokens:
        raise SettingsError(
            f"--thinking {thinking}: the budget must be below --max-tokens ({config.max_tokens})"
        )


def model_limits(model: Model, config: Config) -> ModelLimits:
    """The model's limits, and a settings error for a setting the model cannot honour."""
    check_thinking(config)
    limits = resolve_limits(
        model, config.model, config.context_window, config.sources["context_window"]
    )
    for problem in _unsupported(limits, config):
        raise SettingsError(problem)
    return limits


def _unsupported(limits: ModelLimits, config: Config) -> list[str]:
    """What the model's advertised capabilities refuse (nothing when they are unknown)."""
    if not limits.capabilities:
        if config.compaction == "server":
            return [f"--compaction server: {limits.reason or 'the model has no capabilities'}"]
        return []
    problems = []
    thinking, name = config.thinking, config.model
    if thinking == "adaptive" and not limits.supports("thinking", "types", "adaptive"):
        problems.append(f"--thinking adaptive: {name} does not support adaptive thinking")
    budget = thinking not in ("off", "adaptive")
    if budget and not limits.supports("thinking", "types", "enabled"):
        problems.append(
            f"--thinking {thinking}: {name} does not take a thinking budget; "
            "try --thinking adaptive"
        )
    if config.effort is not None and not limits.supports("effort", config.effort):
        problems.append(f"--effort {config.effort}: {name} does not support it")
    if config.compaction == "server" and not _server_compaction(limits):
        problems.append(
            f"--compaction server: {name} does not advertise server-side compaction "
            "(compact_20260112); use --compaction client"
        )
    if limits.max_tokens is not None and config.max_tokens > limits.max_tokens:
        problems.append(
            f"--max-tokens {config.max_tokens}: {name} allows at most {limits.max_tokens}"
        )
    return problems


def _server_compaction(limits: ModelLimits) -> bool:
    return limits.supports("context_management", "compact_20260112")


def _compaction_mode(limits: ModelLimits, config: Config) -> str:
    """``auto`` becomes ``server`` where the model advertises it, ``client`` elsewhere."""
    if config.compaction == "auto":
        return "server" if _server_compaction(limits) else "client"
    return str(config.compaction)


def new_board(config: Config, warn: Callable[[str], None] | None = None) -> PlanBoard | SharedBoard:
    """The board the ``board`` setting names (a store, a JSON file), else one in memory."""
    from orchestrator.board.stores import is_store_url
    from orchestrator.board_file import BoardFileError, open_board

    if config.board is not None and is_store_url(config.board):
        return _shared_board(config)

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
        raise SettingsError(str(error)) from None


def _shared_board(config: Config) -> SharedBoard:
    """The agent's view of the shared store ``--board`` names, its claims kept alive."""
    from orchestrator.board.store import BoardError
    from orchestrator.board.stores import BoardUrlError, open_store

    url = str(config.board)
    agent = config.agent or f"agent-{os.getpid()}"
    try:
        board = SharedBoard(open_store(url), agent, lease=config.lease)
    except (BoardUrlError, BoardError) as error:
        raise SettingsError(f"--board {error}") from None
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


# --- the public API ---------------------------------------------------------------------------


def session_sandbox(options: RunOptions, hidden: Sequence[Path]) -> SandboxChoice:
    """The sandbox bash runs in; ``sandbox="bwrap"`` that cannot run here is a settings error."""
    from orchestrator.doctor import sandbox_policy
    from orchestrator.tools.sandbox import SandboxUnavailable, choose_sandbox

    policy = sandbox_policy(options.workdir, options.config, hidden)
    try:
        choice = choose_sandbox(options.config.sandbox, policy)
    except SandboxUnavailable as error:
        raise SettingsError(str(error)) from None
    if policy.stores and choice.sandbox.mode != "bwrap":
        # Only bwrap can hide the store from bash; anywhere else the model could forge it.
        raise SettingsError(
            f"--board {options.config.board}: the board's file {policy.stores[0]} is inside the "
            f"work directory, where bash (--sandbox {choice.sandbox.mode}) could rewrite it; "
            "keep the board outside the work directory, or run with --sandbox bwrap"
        )
    return choice
