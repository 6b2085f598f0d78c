"""Which environment variables are credentials, and keeping their values out of tool results.

Redaction works on the values the process actually holds, not on names: a command that reads
the key from the harness's memory or from a file still cannot send it to the model in clear.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from orchestrator.protocols import ToolResult

_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
#: Shorter values would redact ordinary words; no real credential is this short.
MIN_SECRET_LENGTH = 8
REDACTED = "[REDACTED]"


def scrub_environment(env: Mapping[str, str]) -> dict[str, str]:
    """Copy ``env`` without anything that looks like a credential.

    A variable is dropped when its name contains KEY, TOKEN, SECRET or PASSWORD in any case,
    which covers ``ANTHROPIC_API_KEY`` and the usual cloud and CI credentials.
    """
    return {name: value for name, value in env.items() if not looks_secret(name)}


def looks_secret(name: str) -> bool:
    """Whether an environment variable's name marks a credential (the one rule for it)."""
    upper = name.upper()
    return any(marker in upper for marker in _SECRET_MARKERS)


def redactable(values: Iterable[str]) -> tuple[str, ...]:
    """The values worth redacting, longest first so a secret inside another goes whole."""
    return tuple(sorted({v for v in values if len(v) >= MIN_SECRET_LENGTH}, key=len, reverse=True))


def redact(result: ToolResult, secrets: tuple[str, ...]) -> ToolResult:
    """``result`` with every occurrence of a secret value replaced by ``[REDACTED]``."""
    text, diff = result.text, result.diff
    for secret in secrets:
        text = text.replace(secret, REDACTED)
        diff = diff.replace(secret, REDACTED)
    if text == result.text and diff == result.diff:
        return result
    return attrs.evolve(result, text=text, diff=diff)
