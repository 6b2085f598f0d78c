"""The model's context window: asked of the Models API, overridden by a setting, or assumed.

A model client that can look its limits up offers ``limits(name)``; anything else (the scripted
and replay models) gets the fallback. Whatever happens, the result says where its numbers came
from and, for the fallback, why, so the trace's ``context.window`` event never hides a guess.
"""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

from orchestrator.protocols import ModelError, ModelLimits

#: Most Claude models' input window; assumed only when nothing better is known, and said so.
DEFAULT_WINDOW = 200_000
#: A smaller window than this cannot hold a task, a plan and one round; it is not believed.
MIN_WINDOW = 1000


#: How the service words the real limit in a refusal: ``prompt is too long: 64858 tokens >
#: 60000 maximum``.
_REFUSAL_LIMIT = re.compile(r"(\d+) tokens > (\d+) maximum")


def window_from_refusal(message: str) -> int | None:
    """The window a "prompt is too long" refusal names, or None when it names none."""
    found = _REFUSAL_LIMIT.search(message)
    return int(found.group(2)) if found else None


@runtime_checkable
class LimitsSource(Protocol):
    """A model client that can ask the Models API about a model."""

    def limits(self, model: str) -> ModelLimits: ...


def window_label(limits: ModelLimits) -> str:
    """The window and where it came from, for a person: ``200,000 tokens (Models API)``."""
    source = {
        "models.retrieve": "Models API",
        "fallback": "assumed: the Models API did not say",
        "refusal": "learned from a refusal",
    }
    return f"{limits.max_input_tokens:,} tokens ({source.get(limits.source, limits.source)})"


def resolve_limits(
    model_client: object,
    model: str,
    override: int | None,
    override_source: str = "--context-window",
) -> ModelLimits:
    """The limits a run works within; ``override`` (``--context-window``) wins over the API.

    ``override_source`` names where the override came from (a flag, a variable, the file).
    """
    learned: ModelLimits | None = None
    reason = ""
    if isinstance(model_client, LimitsSource):
        try:
            learned = model_client.limits(model)
        except ModelError as error:
            reason = str(error)
        if learned is not None and learned.max_input_tokens < MIN_WINDOW:
            reason = f"the Models API gave a window of {learned.max_input_tokens} tokens"
            learned = None
    else:
        reason = f"the {type(model_client).__name__} client has no Models API to ask"
    if override is not None:
        base = learned or ModelLimits(max_input_tokens=override)
        return ModelLimits(
            max_input_tokens=override,
            max_tokens=base.max_tokens,
            capabilities=base.capabilities,
            source=override_source,
        )
    if learned is not None:
        return learned
    return ModelLimits(
        max_input_tokens=DEFAULT_WINDOW,
        source="fallback",
        reason=f"assumed {DEFAULT_WINDOW:,} tokens: {reason}",
    )
