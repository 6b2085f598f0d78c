"""The team's live view: the board with its holders, each agent's action, lines prefixed."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pexpect
import pytest
from rich.console import Console

from orchestrator.board.stores import open_store
from orchestrator.team.view import TeamBoardView


def _board(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'board.db'}"
    store = open_store(url)
    with store.change() as change:
        change.add("Write the API", agent="lead", item_id="1")
        change.add("Write the UI", agent="lead", item_id="2")
    with store.change() as change:
        change.claim("worker-1", lease=60, item_id="1")
    store.close()
    return url


def _shown(view: TeamBoardView, console: Console) -> str:
    lines = console.render_lines(view._renderable(), console.options, pad=False)
    return "\n".join("".join(segment.text for segment in line) for line in lines)


def test_the_region_shows_the_board_with_holders_and_each_agents_action(tmp_path: Path) -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=100, height=30)
    view = TeamBoardView(console, _board(tmp_path), ["lead", "worker-1", "worker-2"])
    feed = view.feed("worker-2")
    feed({"event": "tool.call", "id": "t1", "name": "bash", "input": {"command": "make test"}})
    shown = _shown(view, console)
    assert "[>] #1: Write the API (worker-1)" in shown
    assert "[ ] #2: Write the UI" in shown
    assert "board 0/2" in shown
    assert "worker-2 │ running bash make test" in shown
    assert "worker-1 │ idle" in shown


def test_an_agents_lines_print_above_with_its_name_and_stay_inert(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, height=30)
    view = TeamBoardView(console, _board(tmp_path), ["worker-1"])
    feed = view.feed("worker-1")
    with view.shown():
        feed.on_text("I will start.\x1b]0;pwned\x07\n")
        feed.on_line("orchestrator: a notice")
    text = out.getvalue()
    assert "worker-1 │ I will start." in text
    assert "worker-1 │ orchestrator: a notice" in text
    assert "\x1b]0;" not in text


@pytest.mark.e2e
def test_on_a_terminal_the_team_runs_under_the_live_view(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "ORCHESTRATOR_STATE_DIR": str(tmp_path / "state"),
        "TERM": "xterm",
    }
    child = pexpect.spawn(
        sys.executable,
        ["-m", "orchestrator", "team", "--scripted", "--workdir", str(tmp_path / "repo")],
        env=env,
        encoding="utf-8",
        timeout=240,
        dimensions=(30, 120),
    )
    child.logfile_read = seen = io.StringIO()
    child.expect_exact("(board check: ")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, seen.getvalue()[-3000:]
    assert "worker-1 │" in seen.getvalue()
    assert "board: " in seen.getvalue()
