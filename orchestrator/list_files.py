"""``list_files``: a read-only directory listing, so ``--deny-bash`` still leaves a way to look.

Without bash the model had no way to find out what files exist. This tool lists one directory
(or, with ``recursive``, its tree) beneath the work directory, through the same confinement as
the file tools, skipping version-control and virtual-environment folders, and capped in size.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from orchestrator.protocols import JSONObject, ToolError, ToolResult
from orchestrator.tools import Workdir

SKIPPED = frozenset({".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__"})
MAX_ENTRIES = 500


@attrs.frozen
class ListFilesTool:
    """Lists the entries of a directory in the work directory, folders with a trailing ``/``."""

    workdir: Workdir

    @property
    def name(self) -> str:
        return "list_files"

    @property
    def schema(self) -> JSONObject:
        return {
            "name": self.name,
            "description": (
                "List the files in a directory of the work directory (folders end in '/'). "
                f"recursive lists the whole tree, skipping {', '.join(sorted(SKIPPED))}; at "
                f"most {MAX_ENTRIES} entries."
            ),
            "input_schema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory; default '.'."},
                    "recursive": {"type": "boolean", "description": "List the whole tree."},
                },
            },
        }

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        path = arguments.get("path", ".")
        recursive = arguments.get("recursive", False)
        if not isinstance(recursive, bool):
            raise ToolError("Error: list_files: field 'recursive' must be true or false")
        folder = self.workdir.resolve(path)
        if not folder.is_dir():
            raise ToolError(
                f"Error: list_files: {path!r} is not a directory; list '.' to see what exists"
            )
        entries = _walk(folder, recursive)
        if not entries:
            return ToolResult("(empty directory)")
        shown = entries[:MAX_ENTRIES]
        text = "\n".join(shown)
        if len(entries) > MAX_ENTRIES:
            text += f"\n... [{len(entries) - MAX_ENTRIES} more; list a subdirectory]"
        return ToolResult(text)


def _walk(folder: Path, recursive: bool) -> list[str]:
    entries: list[str] = []
    for current, folders, files in os.walk(folder):
        folders[:] = sorted(name for name in folders if name not in SKIPPED)
        base = Path(current).relative_to(folder)
        for name in folders:
            entries.append((base / name).as_posix() + "/")
        entries.extend((base / name).as_posix() for name in sorted(files))
        if not recursive or len(entries) > MAX_ENTRIES:
            break
    return sorted(entries)
