"""The model's tools: the registry, the work directory, the file tools and bash.

Every tool is confined to one work directory (:mod:`orchestrator.tools.workdir`); bash runs
under the sandbox policy (:mod:`orchestrator.tools.sandbox`). The names other modules use are
importable from here; each is imported on first use, so a command that needs only the sandbox
probe (``config``, ``doctor``) or a helper module does not load bash and the file tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator._lazy import lazy_exports

if TYPE_CHECKING:
    from orchestrator.protocols import Tool
    from orchestrator.tools.bash import BashTool
    from orchestrator.tools.files import EditFileTool, ReadFileTool, WriteFileTool
    from orchestrator.tools.products.guard import ProductGuard
    from orchestrator.tools.registry import SIDE_EFFECT_TOOLS, ToolRegistry
    from orchestrator.tools.sandbox import Sandbox, SandboxPolicy
    from orchestrator.tools.secrets import looks_secret, scrub_environment
    from orchestrator.tools.workdir import Workdir

__all__ = [
    "SIDE_EFFECT_TOOLS",
    "BashTool",
    "EditFileTool",
    "ReadFileTool",
    "Sandbox",
    "SandboxPolicy",
    "ToolRegistry",
    "Workdir",
    "WriteFileTool",
    "looks_secret",
    "scrub_environment",
    "standard_tools",
]

_HOMES = {
    "BashTool": "bash",
    "EditFileTool": "files",
    "ReadFileTool": "files",
    "WriteFileTool": "files",
    "SIDE_EFFECT_TOOLS": "registry",
    "ToolRegistry": "registry",
    "Sandbox": "sandbox",
    "SandboxPolicy": "sandbox",
    "looks_secret": "secrets",
    "scrub_environment": "secrets",
    "Workdir": "workdir",
}


__getattr__ = lazy_exports(__name__, {name: f"{__name__}.{home}" for name, home in _HOMES.items()})


def standard_tools(
    workdir: Workdir,
    *,
    bash: bool = True,
    sandbox: Sandbox | None = None,
    guard: ProductGuard | None = None,
) -> list[Tool]:
    """The model's file and shell tools over ``workdir`` (``bash=False`` for ``--deny-bash``).

    ``sandbox`` is where bash runs; by default the ``workdir`` mode (``none`` when ``workdir``
    is unconfined). ``guard`` (a session's) lands bash's git writes and names protected changes.
    """
    from orchestrator.tools.bash import BashTool
    from orchestrator.tools.files import EditFileTool, ReadFileTool, WriteFileTool

    tools: list[Tool] = [ReadFileTool(workdir), WriteFileTool(workdir), EditFileTool(workdir)]
    if not bash:
        return tools
    shell = (
        BashTool(workdir, guard=guard)
        if sandbox is None
        else BashTool(workdir, sandbox=sandbox, guard=guard)
    )
    return [shell, *tools]
