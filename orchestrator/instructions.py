"""Project instructions: the workdir's ``AGENTS.md`` and ``CLAUDE.md`` join the system prompt.

The anchors (Codex CLI, Claude Code) read these files so a repository can tell any agent how
it builds and tests. They are the repository's words, not the user's, so they are added as
a clearly marked section after the harness's own instructions, and capped in size.
"""

from __future__ import annotations

from pathlib import Path

import attrs

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
MAX_INSTRUCTION_BYTES = 32_000


@attrs.frozen
class ProjectInstructions:
    """The instruction files found, and the text to append to the system prompt."""

    files: tuple[str, ...]
    text: str

    def system_prompt(self, base: str) -> str:
        return base + self.text if self.text else base


def load_instructions(workdir: Path) -> ProjectInstructions:
    """Read the instruction files present in ``workdir`` (regular files only, not links out)."""
    found: list[str] = []
    parts: list[str] = []
    for name in INSTRUCTION_FILES:
        path = workdir / name
        if path.is_symlink() or not path.is_file():
            continue
        try:
            data = path.read_bytes()[:MAX_INSTRUCTION_BYTES]
        except OSError:
            continue
        text = data.decode("utf-8", "replace").strip()
        if text:
            found.append(name)
            parts.append(
                f'\n\n<project-instructions file="{name}">\n{text}\n</project-instructions>'
            )
    return ProjectInstructions(tuple(found), "".join(parts))
