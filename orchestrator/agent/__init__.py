"""The public Python API, and the one place that wires a session's parts together.

``Agent(model=…, workdir=…, tools=[…]).run(task)`` is what a program embeds (:mod:`.api`);
the CLI's ``run``, ``resume``, ``chat``, ``demo``, ``team`` and ``eval`` build the same
:class:`Session` (:mod:`.session`) from :class:`RunOptions` (:mod:`.options`), so the wiring
exists once. Names are imported on first use, so importing a submodule stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator._lazy import lazy_exports

if TYPE_CHECKING:
    from orchestrator.agent._parts import anthropic_model, new_board
    from orchestrator.agent.api import KEPT_ON_RESUME, Agent, silent_view
    from orchestrator.agent.options import RunOptions, load_options
    from orchestrator.agent.result import RunResult, RunStatus
    from orchestrator.agent.session import Session
    from orchestrator.config import SettingsError
    from orchestrator.tools.python import tool

__all__ = [
    "KEPT_ON_RESUME",
    "Agent",
    "RunOptions",
    "RunResult",
    "RunStatus",
    "Session",
    "SettingsError",
    "anthropic_model",
    "load_options",
    "new_board",
    "silent_view",
    "tool",
]

_HOMES = {
    "KEPT_ON_RESUME": "orchestrator.agent.api",
    "Agent": "orchestrator.agent.api",
    "silent_view": "orchestrator.agent.api",
    "RunOptions": "orchestrator.agent.options",
    "load_options": "orchestrator.agent.options",
    "RunResult": "orchestrator.agent.result",
    "RunStatus": "orchestrator.agent.result",
    "Session": "orchestrator.agent.session",
    "anthropic_model": "orchestrator.agent._parts",
    "new_board": "orchestrator.agent._parts",
    "SettingsError": "orchestrator.config",
    "tool": "orchestrator.tools.python",
}

__getattr__ = lazy_exports(__name__, _HOMES)


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
