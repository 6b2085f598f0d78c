"""docs/api.md's examples run as written, against the package's loopback Messages API."""

from __future__ import annotations

import json
import os
import re
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer

DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"

_PLAN = {"items": [{"id": "1", "text": "Do the work", "status": "in_progress"}]}
_DONE = {"items": [{"id": "1", "status": "completed"}], "merge": True}
#: What the test server answers each example with, in the order the examples appear.
SCRIPTS: list[list[Mapping[str, Any]]] = [
    [{"tool_calls": [{"name": "add", "input": {"a": 2, "b": 3}}]}, {"text": "The sum is 5."}],
    [
        {"tool_calls": [{"name": "lookup_city", "input": {"city": "Oslo"}}]},
        {"tool_calls": [{"name": "convert", "input": {"celsius": -3.0, "to": "fahrenheit"}}]},
        {"text": "26.6 °F"},
    ],
    [{"text": "Hello."}],
    [{"text": "Hello."}],
    [
        {"tool_calls": [{"name": "todo", "input": _PLAN}]},
        {"tool_calls": [{"name": "todo", "input": _DONE}]},
        {"text": "Done now."},
    ],
]
#: What each example must have sent back to the model (a tool's result), if anything.
SENT: list[str | None] = ['"5"', "26.6", None, None, None]


def _examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def test_every_example_has_a_script() -> None:
    assert len(_examples()) == len(SCRIPTS) == len(SENT)


@pytest.mark.parametrize("index", range(len(SCRIPTS)))
def test_the_example_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "ORCHESTRATOR_")) and name != "ORCHESTRATOR_TEST_HOME":
            monkeypatch.delenv(name)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-docs")
    monkeypatch.setenv("ORCHESTRATOR_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ORCHESTRATOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "proj").mkdir()
    script = parse_script({"name": f"docs-{index}", "turns": SCRIPTS[index]}, source="docs")
    with MessagesServer(script) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        # A real module, as a user's would be: pydantic reads the hints from its namespace.
        module = types.ModuleType(f"api_example_{index}")
        monkeypatch.setitem(sys.modules, module.__name__, module)
        exec(compile(_examples()[index], f"docs/api.md example {index + 1}", "exec"), vars(module))
    assert server.violations == []
    assert server.served == len(SCRIPTS[index])
    expected = SENT[index]
    if expected is not None:
        assert expected in json.dumps(server.requests[-1]["messages"][-1], ensure_ascii=False)
