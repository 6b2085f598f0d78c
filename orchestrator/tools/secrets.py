"""Which environment variables are credentials, and the environment bash may see."""

from __future__ import annotations

from collections.abc import Mapping

_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


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
