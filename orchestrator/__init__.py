"""orchestrator: an agent harness that keeps a coding agent on course through multi-step work.

The model keeps its plan on a todo board (:mod:`orchestrator.plan`) whose rules the harness
enforces, and a loop machine (:mod:`orchestrator.loop`) audits every round for a stale plan.

The public API is :class:`Agent` and :func:`tool` (see ``docs/api.md``). They are imported on
first use, so ``import orchestrator`` (and every CLI start) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator._lazy import lazy_exports

__version__ = "0.1.0"

__all__ = ["Agent", "FunctionTool", "RunResult", "SettingsError", "__version__", "tool"]

if TYPE_CHECKING:
    from orchestrator.agent import Agent, RunResult
    from orchestrator.config import SettingsError
    from orchestrator.tools.python import FunctionTool, tool

_HOMES = {
    "Agent": "orchestrator.agent",
    "RunResult": "orchestrator.agent",
    "SettingsError": "orchestrator.config",
    "FunctionTool": "orchestrator.tools.python",
    "tool": "orchestrator.tools.python",
}


__getattr__ = lazy_exports(__name__, _HOMES)


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
