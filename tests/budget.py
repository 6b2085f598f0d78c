"""What a property may spend: hypothesis examples under the suite's two profiles.

``tests/conftest.py`` registers them. ``ci`` is the default (``make test``, ``make test-fast``,
a bare ``pytest``): every property runs, each with a quarter of the examples it asks for (at
least ten). ``deep`` (``make test-deep``, ``--hypothesis-profile=deep``) gives each the number
written at its ``@settings``, and the long-run tests their full length. Neither has a deadline:
a busy machine must not fail a property for being slow.
"""

from __future__ import annotations

from hypothesis import settings

CI = "ci"
DEEP = "deep"
#: Under ``ci`` a property gets this fraction of the examples it asks for.
CI_SHARE = 4
CI_LEAST = 10


def deep() -> bool:
    """Whether this session runs under the ``deep`` profile."""
    return settings.get_current_profile_name() == DEEP


def examples(asked: int) -> int:
    """``asked`` under ``deep``; a quarter of it (at least ten) under ``ci``."""
    return asked if deep() else min(asked, max(CI_LEAST, asked // CI_SHARE))
