"""Keeping a long run inside the model's context window without losing the plan.

Tier 1 clears old tool results to short stubs; tier 2 summarises older history with one
tool-less model call and rebuilds the conversation from the task, the summary, the board (as the
plan machines render it) and the last rounds verbatim. :class:`ContextManager` is the one
object the loop sees, through :class:`orchestrator.protocols.ContextKeeper`.
"""

from orchestrator.context.manager import (
    COMPACTION_MODES,
    ContextCleared,
    ContextCompacted,
    ContextManager,
)
from orchestrator.context.window import DEFAULT_WINDOW, LimitsSource, resolve_limits, window_label

__all__ = [
    "COMPACTION_MODES",
    "DEFAULT_WINDOW",
    "ContextCleared",
    "ContextCompacted",
    "ContextManager",
    "LimitsSource",
    "resolve_limits",
    "window_label",
]
