"""Protected paths and their digests: moved to :mod:`orchestrator.tools.products`.

The names other modules import from here stay importable: the paths from
:mod:`~orchestrator.tools.products.paths`, the snapshot from
:mod:`~orchestrator.tools.products.snapshot`.
"""

from __future__ import annotations

from orchestrator.tools.products.paths import (
    HOOK_MANAGER_FILES,
    OWN_FILES,
    ProtectGlobs,
    in_git_dir,
    is_protected,
    protected_paths,
    why_protected,
)
from orchestrator.tools.products.snapshot import (
    DIFF_LINES,
    ProtectedChange,
    ProtectedSet,
    ProtectedSnapshot,
)

__all__ = [
    "DIFF_LINES",
    "HOOK_MANAGER_FILES",
    "OWN_FILES",
    "ProtectGlobs",
    "ProtectedChange",
    "ProtectedSet",
    "ProtectedSnapshot",
    "in_git_dir",
    "is_protected",
    "protected_paths",
    "why_protected",
]
