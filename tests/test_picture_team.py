"""A team's picture: a real SQLite board's log as lanes, its agents' traces found and linked."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.board.stores import open_store
from orchestrator.cli import cli
from orchestrator.picture.team import TeamPicture, read_team, same_board
from tests.picture_traces import response, started, write_events


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ORCHESTRATOR_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def board(tmp_path: Path) -> str:
    """Two workers' work on a real board: #2 waits for #1; each worker's trace beside it."""
    folder = tmp_path / "team"
    folder.mkdir()
    url = f"sqlite:///{folder / 'board.db'}"
    with open_store(url) as store:
        store.add("write the <parser>", agent="lead")  # log 1
        store.add("test it", agent="lead", blocked_by=["1"])  # log 2
        store.add("write the docs", agent="lead")  # log 3
        store.claim("worker-1", item_id="1")  # log 4
        store.claim("worker-2", item_id="3")  # log 5
        store.complete("1", agent="worker-1")  # log 6
        store.claim("worker-1", item_id="2")  # log 7
        store.complete("3", agent="worker-2")  # log 8
        store.complete("2", agent="worker-1")  # log 9
    for number, agent in enumerate(("lead", "worker-1", "worker-2"), start=1):
        plan = {"shared": url, "agent": agent, "lease": 60}
        write_events(
            folder / f"{agent}.jsonl",
            [
                started(plan=plan),
                response(1),
                {"event": "run.finished", "status": "done", "rounds": 1},
            ],
            run_id=f"{number:012x}",
        )
    return url


def _lanes(team: TeamPicture, which: str) -> dict[str, list[tuple[str, int, int]]]:
    lanes = team.item_lanes if which == "items" else team.agent_lanes
    return {lane.label: [(s, a, b) for s, a, b, _ in lane.segments] for lane in lanes}


def test_the_log_becomes_a_lane_per_item_and_per_agent(board: str) -> None:
    team = read_team(board)
    assert team.error is None and len(team.log) == 9
    assert _lanes(team, "items") == {
        "#1 write the <parser>": [("pending", 0, 3), ("in_progress", 3, 5), ("completed", 5, 9)],
        "#2 test it": [
            ("blocked", 1, 5),
            ("pending", 5, 6),
            ("in_progress", 6, 8),
            ("completed", 8, 9),
        ],
        "#3 write the docs": [("pending", 2, 4), ("in_progress", 4, 7), ("completed", 7, 9)],
    }
    assert _lanes(team, "agents") == {
        "worker-1": [("holding", 3, 5), ("holding", 6, 8)],
        "worker-2": [("holding", 4, 7)],
    }
    notes = [note for lane in team.agent_lanes for *_, note in lane.segments]
    assert notes == ["holds #1 write the <parser>", "holds #2 test it", "holds #3 write the docs"]


def test_each_agent_s_trace_is_found_by_the_board_it_names(board: str, tmp_path: Path) -> None:
    elsewhere = tmp_path / "other.jsonl"
    write_events(elsewhere, [started(plan={"shared": "sqlite:////x/other.db", "agent": "x"})])
    team = read_team(board, [tmp_path])
    assert [(a.agent, a.run_id, a.status) for a in team.agents] == [
        ("lead", "000000000001", "done"),
        ("worker-1", "000000000002", "done"),
        ("worker-2", "000000000003", "done"),
    ]
    assert team.agents[1].page == tmp_path / "team" / "000000000002.html"


def test_one_board_has_many_names() -> None:
    assert same_board("team/board.db", f"sqlite:///{Path('team/board.db').resolve()}")
    # Read as open_store reads them (SQLAlchemy's rules): three slashes relative, four absolute.
    assert same_board("sqlite:////a/b.db", "/a/b.db")
    assert same_board("sqlite:///a/b.db", "a/b.db")
    assert same_board("sqlite:////a/b.db", "sqlite:///a/b.db") is False
    assert same_board("sqlite:///a/b.db", "sqlite:///a/c.db") is False
    assert same_board("postgresql://h/db", "postgresql://h/db")


def test_drawing_the_board_leaves_it_as_it_was(board: str, tmp_path: Path) -> None:
    database = tmp_path / "team" / "board.db"
    before = hashlib.sha256(database.read_bytes()).hexdigest()
    read_team(board)
    assert hashlib.sha256(database.read_bytes()).hexdigest() == before


def _data(page: Path) -> dict[str, object]:
    text = page.read_text(encoding="utf-8")
    match = re.search(r'id="picture-data">(.*?)</script>', text)
    assert match is not None
    found: dict[str, object] = json.loads(match.group(1))
    return found


def test_board_show_html_writes_the_board_s_page_and_each_agent_s(
    board: str, tmp_path: Path
) -> None:
    done = CliRunner().invoke(cli, ["board", "show", board, "--html"])
    folder = tmp_path / "team"
    pages = [folder / "board.html", *(folder / f"00000000000{n}.html" for n in (1, 2, 3))]
    assert (done.exit_code, done.stdout) == (0, "".join(f"{page}\n" for page in pages)), done.stderr
    data = _data(pages[0])
    team = data["team"]
    assert data["kind"] == "team" and isinstance(team, dict)
    assert [agent["page_uri"] for agent in team["agents"]] == [page.as_uri() for page in pages[1:]]
    agent_page = _data(pages[2])
    assert agent_page["kind"] == "run"
    assert isinstance(agent_page["team"], dict) and agent_page["team"]["columns"] == 9


def test_show_html_on_an_agent_s_trace_draws_the_team_beside_its_run(
    board: str, tmp_path: Path
) -> None:
    trace = tmp_path / "team" / "worker-1.jsonl"
    done = CliRunner().invoke(cli, ["show", str(trace), "--html"])
    assert done.exit_code == 0, done.stderr
    assert done.stdout.splitlines()[0] == str(tmp_path / "team" / "000000000002.html")
    assert len(done.stdout.splitlines()) == 3  # the other two agents' pages
    data = _data(tmp_path / "team" / "000000000002.html")
    header, team = data["header"], data["team"]
    assert isinstance(header, dict) and header["agent"] == "worker-1"
    assert isinstance(team, dict) and team["error"] is None and len(team["item_lanes"]) == 3


def test_a_board_that_is_gone_is_said_on_the_run_s_page_and_refused_by_board_show(
    board: str, tmp_path: Path
) -> None:
    (tmp_path / "team" / "board.db").unlink()
    done = CliRunner().invoke(cli, ["board", "show", board, "--html"])
    assert (
        done.exit_code == 2
        and f"no board at {tmp_path / 'team' / 'board.db'} (no such file)" in done.stderr
    )
    assert not (tmp_path / "team" / "board.db").exists()  # not created by looking
    done = CliRunner().invoke(cli, ["show", str(tmp_path / "team" / "lead.jsonl"), "--html"])
    assert done.exit_code == 0, done.stderr
    team = _data(tmp_path / "team" / "000000000001.html")["team"]
    assert isinstance(team, dict) and "no board at " in str(team["error"])


def test_no_page_goes_where_the_board_or_an_agent_s_trace_is(board: str, tmp_path: Path) -> None:
    folder = tmp_path / "team"
    kept = {path: path.read_bytes() for path in folder.iterdir()}
    for args in (
        ["board", "show", board, "--html", str(folder / "board.db")],
        ["board", "show", board, "--html", str(folder / "worker-2.jsonl")],
        ["show", str(folder / "lead.jsonl"), "--html", str(folder / "worker-1.jsonl")],
    ):
        done = CliRunner().invoke(cli, args)
        assert done.exit_code == 2 and "which this page is drawn from" in done.stderr, args
        assert done.stderr.count("\n") == 1
    assert {path: path.read_bytes() for path in folder.iterdir()} == kept


def test_board_show_html_on_no_board_says_there_is_none(tmp_path: Path) -> None:
    done = CliRunner().invoke(cli, ["board", "show", str(tmp_path / "nonexist.db"), "--html"])
    assert done.exit_code == 2
    assert done.stderr.count("\n") == 1
    assert f"no board at {tmp_path / 'nonexist.db'} (no such file)" in done.stderr
    assert not (tmp_path / "nonexist.db").exists()
