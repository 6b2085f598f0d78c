"""list_files: the listing `--deny-bash` leaves the model, confined like the file tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.list_files import MAX_ENTRIES, ListFilesTool
from orchestrator.protocols import ToolError
from orchestrator.tools import Workdir


def test_lists_one_level_or_the_tree_without_vcs_and_venv_folders(tmp_path: Path) -> None:
    (tmp_path / "src" / "__pycache__").mkdir(parents=True)
    (tmp_path / ".venv").mkdir()
    (tmp_path / "src" / "a.py").write_text("", encoding="utf-8")
    (tmp_path / "b.txt").write_text("", encoding="utf-8")
    tool = ListFilesTool(Workdir(tmp_path))
    assert tool.run({}).text == "b.txt\nsrc/"
    assert tool.run({"recursive": True}).text == "b.txt\nsrc/\nsrc/a.py"
    assert tool.run({"path": "src"}).text == "a.py"


def test_refuses_paths_outside_and_files_and_caps_the_output(tmp_path: Path) -> None:
    tool = ListFilesTool(Workdir(tmp_path))
    with pytest.raises(ToolError, match="escapes the work directory"):
        tool.run({"path": ".."})
    (tmp_path / "f").write_text("", encoding="utf-8")
    with pytest.raises(ToolError, match="is not a directory"):
        tool.run({"path": "f"})
    with pytest.raises(ToolError, match="'recursive' must be true or false"):
        tool.run({"recursive": "yes"})
    for number in range(MAX_ENTRIES + 5):
        (tmp_path / f"n{number:04d}").write_text("", encoding="utf-8")
    text = tool.run({}).text
    assert text.endswith("... [6 more; list a subdirectory]")
    assert len(text.splitlines()) == MAX_ENTRIES + 1
