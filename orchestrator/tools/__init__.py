"""The model's tools: the registry, the work directory, the file tools and bash.

Every tool is confined to one work directory (:mod:`orchestrator.tools.workdir`); bash runs
under the sandbox policy (:mod:`orchestrator.tools.sandbox`). The names other modules use are
importable from here.
"""

from __future__ import annotations

from orchestrator.protocols import Tool
from orchestrator.tools.bash import BashTool
from orchestrator.tools.files import EditFileTool, ReadFileTool, WriteFileTool
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


def standard_tools(
    workdir: Workdir, *, bash: bool = True, sandbox: Sandbox | None = None
) -> list[Tool]:
    """The model's file and shell tools over ``workdir`` (``bash=False`` for ``--deny-bash``).

    ``sandbox`` is where bash runs; by default the ``workdir`` mode (``none`` when ``workdir``
    is unconfined).
    """
    tools: list[Tool] = [ReadFileTool(workdir), WriteFileTool(workdir), EditFileTool(workdir)]
    if not bash:
        return tools
    return [BashTool(workdir) if sandbox is None else BashTool(workdir, sandbox=sandbox), *tools]
