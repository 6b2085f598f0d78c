"""``orchestrator team``: worker processes, work that builds on work, stops, resumes, two teams.

Every test runs the real CLI in a subprocess (signals and kills are the point) on real git
repositories and SQLite boards, and reads the outcome from outside: the repository with git,
the board with ``board log``/``board check``, and the traces with ``replay --check``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.harness_git import run_git
from tests.test_cli import _environment

# Every team is real processes (the CLI, its workers, git): the e2e layer (docs/development.md).
pytestmark = pytest.mark.e2e

TIMEOUT = 300
NOTES = ["goodbye.md", "hello.md", "index.md", "testing.md", "usage.md"]


def _cli(args: list[str], tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        env=_environment(ORCHESTRATOR_STATE_DIR=str(tmp_path / "state"), **extra),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def _team_in_process(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``orchestrator team ARGS`` in this process: for what it refuses before any worker runs."""
    from tests.in_process import run_cli

    env = _environment(ORCHESTRATOR_STATE_DIR=str(tmp_path / "state"), TMPDIR=str(tmp_path))
    return run_cli(["team", *args], env=env, cwd=tmp_path)


class Running:
    """A CLI process whose output is read line by line as it comes (for signals mid-run)."""

    def __init__(self, args: list[str], tmp_path: Path, **extra: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", *args],
            env=_environment(ORCHESTRATOR_STATE_DIR=str(tmp_path / "state"), **extra),
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, what: Callable[[], object], timeout: float = TIMEOUT) -> object:
        """Until ``what()`` is truthy (its value), or the process ends first (a failure)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = what()
            if found:
                return found
            if self.process.poll() is not None:
                self._reader.join(10)
                found = what()
                if found:
                    return found
                pytest.fail(f"the process ended first ({self.process.returncode}):\n{self.text}")
            time.sleep(0.02)
        pytest.fail(f"timed out waiting:\n{self.text[-4000:]}")

    def line_matching(self, pattern: str) -> Callable[[], re.Match[str] | None]:
        compiled = re.compile(pattern)
        return lambda: next((m for line in list(self.lines) if (m := compiled.search(line))), None)

    def finish(self) -> int:
        code = self.process.wait(TIMEOUT)
        self._reader.join(10)
        return code


def _board_of(output: str) -> str:
    board = next(line for line in output.splitlines() if line.startswith("board: "))
    return board.removeprefix("board: ").split(" (")[0]


def _log(url: str, tmp_path: Path) -> list[dict[str, object]]:
    done = _cli(["board", "log", url, "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _files_at(repo: Path, ref: str) -> set[str]:
    return set(run_git(repo, "ls-tree", "-r", "--name-only", ref).stdout.split())


def test_the_scripted_team_builds_work_on_work_and_merges_it_back(tmp_path: Path) -> None:
    work = tmp_path / "repo"
    done = _cli(["team", "--scripted", "--workers", "3", "--workdir", str(work)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "[SCRIPTED team demo" in done.stdout
    # The lead's and every item session's header say the model is scripted, never a real one.
    headers = [x for x in done.stdout.splitlines() if "│ orchestrator: model " in x]
    assert len(headers) == 6 and all("│ orchestrator: model scripted ·" in x for x in headers)
    team = re.search(r"^team (\w+):$", done.stdout, re.MULTILINE)
    assert team is not None
    url = _board_of(done.stdout)
    assert "(board check: ok)" in done.stdout
    # The log: every item completed exactly once, by an agent named with the team's id.
    entries = _log(url, tmp_path)
    completed = [e for e in entries if e["dst"] == "completed"]
    assert Counter(e["item"] for e in completed) == Counter({str(n): 1 for n in range(1, 6)})
    assert all(str(e["agent"]).startswith(f"{team[1]}/worker-") for e in completed)
    assert _cli(["board", "check", url], tmp_path).returncode == 0
    # Credit from the log: each worker's closing line names what the log says it completed.
    for agent in {str(e["agent"]) for e in completed}:
        mine = sorted(str(e["item"]) for e in completed if e["agent"] == agent)
        line = next(x for x in done.stdout.splitlines() if x.strip().startswith(agent + " "))
        assert ", ".join(f"#{i}" for i in mine) in line
    # Every session's trace replays clean.
    traces = [x.split(": ", 2)[2] for x in done.stdout.splitlines() if x.startswith("trace: ")]
    assert len(traces) == 6  # the lead, and one per item
    for trace in traces:
        assert _cli(["replay", "--check", trace], tmp_path).returncode == 0, trace
    # Each item is a commit of its own naming it; the first commit that holds the index
    # (blocked by #1-#4) holds the four notes it links: it was written on top of them.
    subjects = run_git(work, "log", "--format=%s", "HEAD").stdout.splitlines()
    for number in range(1, 6):
        assert any(s.startswith(f"#{number}: Write notes/") for s in subjects), subjects
    first = run_git(work, "log", "--reverse", "--format=%H", "HEAD", "--", "notes/index.md")
    holding = _files_at(work, first.stdout.split()[0])
    assert {f"notes/{n}" for n in NOTES} <= holding
    assert sorted(p.name for p in (work / "notes").iterdir()) == NOTES
    assert run_git(work, "status", "--porcelain").stdout == ""
    assert len(run_git(work, "worktree", "list").stdout.splitlines()) == 1
    assert f"merged: team/{team[1]}/integration" in done.stdout


def test_a_team_needs_a_repository_and_says_so_in_one_line(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    done = _cli(["team", "Do it", "--workdir", str(plain)], tmp_path, ANTHROPIC_API_KEY="k")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "not a git repository" in done.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--lease", "nan"], "--lease nan: expected"),
        (["--lease", "0"], "--lease 0: expected"),
        (["--price-per-mtok", "1,2"], "--price-per-mtok 1,2: expected"),
        (["--resume"], "--resume needs the board"),
        (["--board", "team.json"], "not a board store"),
    ],
)
def test_bad_team_flags_are_one_line(tmp_path: Path, args: list[str], said: str) -> None:
    done = _cli(["team", "--scripted", "--workdir", str(tmp_path / "r"), *args], tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and said in done.stderr, done.stderr
    assert not (tmp_path / "r").exists()


def test_a_task_of_blanks_or_a_pace_of_nan_is_one_line_and_starts_nothing(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "commit", "-q", "--allow-empty", "-m", "start")
    env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    for args, said in (
        (["   ", "--workdir", str(repo)], "give the TASK the team works on"),
        (["--scripted", "--pace", "nan", "--workdir", str(tmp_path / "r")], "not a finite"),
    ):
        done = _team_env(args, tmp_path, env)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.count("\n") == 1 and said in done.stderr, done.stderr
    assert not (tmp_path / "r").exists() and not (tmp_path / "state").exists()
    assert run_git(repo, "branch", "--list").stdout.split() == ["*", "main"]


def _team_env(
    args: list[str], tmp_path: Path, extra: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    from tests.in_process import run_cli

    env = _environment(ORCHESTRATOR_STATE_DIR=str(tmp_path / "state"), **extra)
    return run_cli(["team", *args], env=env, cwd=tmp_path)


def test_the_scripted_demo_will_not_write_into_a_folder_with_files(tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine", encoding="utf-8")
    done = _cli(["team", "--scripted", "--workdir", str(busy)], tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "not empty" in done.stderr
    assert sorted(p.name for p in busy.iterdir()) == ["keep.txt"]


@pytest.mark.parametrize("marked", [None, "0" * 40])
def test_the_scripted_demo_never_runs_in_a_user_s_repository(
    tmp_path: Path, marked: str | None
) -> None:
    """A repository with the user's files (whatever its config claims, unless it names the
    repository's own first commit as only the demo's setup does) is refused in one line,
    before a board, a branch or a note is made."""
    repo = _repository(tmp_path / "repo", {"mine.py": "print('mine')\n"})
    if marked is not None:
        run_git(repo, "config", "--local", "orchestrator.teamdemo", marked)
    head = run_git(repo, "rev-parse", "HEAD").stdout
    board = tmp_path / "new.db"
    for extra in ([], ["--board", f"sqlite:///{board}"]):
        done = _team_in_process(["--scripted", "--workdir", str(repo), *extra], tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert "not a repository the scripted demo set up" in done.stderr
        assert "new or empty folder" in done.stderr
    assert run_git(repo, "rev-parse", "HEAD").stdout == head
    assert run_git(repo, "branch", "--format=%(refname:short)").stdout.split() == ["main"]
    assert sorted(p.name for p in repo.iterdir()) == [".git", "mine.py"]
    assert not board.exists()


def test_only_the_repository_the_demo_set_up_is_marked_as_the_demo_s(tmp_path: Path) -> None:
    from orchestrator.team.scripted import made_by_demo, prepare_scripted_repository

    demo = tmp_path / "demo"
    prepare_scripted_repository(demo)
    assert made_by_demo(demo)
    # The mark is the repository's own config: a clone of it, or a tree copied, has none.
    subprocess.run(["git", "clone", "-q", str(demo), "clone"], cwd=tmp_path, check=True)
    assert not made_by_demo(tmp_path / "clone")
    assert not made_by_demo(tmp_path / "nowhere")


def test_a_lead_that_fails_ends_the_team_before_any_worker_starts(tmp_path: Path) -> None:
    from orchestrator.script import parse_script
    from orchestrator.testing import MessagesServer

    repo = _repository(tmp_path / "repo", {"a.txt": "a\n"})
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    fault = {"fault": "status", "status": 529, "body": overloaded}
    script = parse_script({"name": "lead", "turns": [fault]}, source="test")
    with MessagesServer(script) as server:
        done = _cli(
            ["team", "Plan it", "--workdir", str(repo)],
            tmp_path,
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=server.base_url,
            ORCHESTRATOR_MAX_RETRIES="0",
        )
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"/lead +failed", done.stdout)
    assert "worker-" not in done.stdout.split("team ")[-1]
    assert len(run_git(repo, "worktree", "list").stdout.splitlines()) == 1


def test_a_work_directory_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    done = _cli(["team", "Do it", "--workdir", str(tmp_path / "nowhere")], tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no such directory" in done.stderr
    assert not (tmp_path / "state" / "team").exists() or not any(
        (tmp_path / "state" / "team").iterdir()
    )


def test_ctrl_c_keeps_every_finished_item_and_a_resume_finishes_the_rest(
    tmp_path: Path,
) -> None:
    work = tmp_path / "repo"
    args = ["team", "--scripted", "--workers", "2", "--pace", "0.3", "--lease", "3"]
    team = Running([*args, "--workdir", str(work)], tmp_path)
    team.wait_for(team.line_matching(r"#\d+ completed · commit"))
    # Then a fresh claim: that item is in progress for three paced turns when the stop comes.
    seen = len(team.lines)
    team.wait_for(lambda: any("│ claimed #" in line for line in team.lines[seen:]))
    team.process.send_signal(signal.SIGINT)
    assert team.finish() == 130, team.text
    url = _board_of(team.text)
    assert f"resume: orchestrator team --resume --board {url}" in team.text
    name = re.search(r"^team (\w+):$", team.text, re.MULTILINE)
    assert name is not None
    integration = f"team/{name[1]}/integration"
    # Read with git: every item the board says is completed has its note on the integration
    # branch; the work directory is untouched (nothing merged into it yet) and clean.
    entries = _log(url, tmp_path)
    completed = {str(e["item"]) for e in entries if e["dst"] == "completed"}
    assert completed and len(completed) < 5
    texts = {str(e["item"]): str(e["text"]) for e in entries if e["trigger"] == "add"}
    merged = _files_at(work, integration)
    for item in completed:
        path = re.search(r"notes/[\w.]+", texts[item])
        assert path is not None and path[0] in merged, (item, merged)
    assert not (work / "notes").exists()
    assert run_git(work, "status", "--porcelain").stdout == ""
    # Items in progress when the workers stopped were given back at once, their work kept.
    assert all(e["trigger"] != "expire" for e in entries)
    stopped = [e for e in entries if e["trigger"] == "pause"]
    assert len(stopped) >= 1, entries
    assert len(run_git(work, "worktree", "list").stdout.splitlines()) == 1
    # The same command again on that board resumes the team (no new plan): it picks up the
    # unfinished items and the branches, and finishes.
    again = _cli(["team", "--scripted", "--board", url, "--workdir", str(work)], tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"resuming team {name[1]}" in again.stdout
    assert sorted(p.name for p in (work / "notes").iterdir()) == NOTES
    adds = [e for e in _log(url, tmp_path) if e["trigger"] == "add"]
    assert len(adds) == 5  # the plan was not written twice
    assert "(board check: ok)" in again.stdout


def test_a_second_ctrl_c_stops_the_wait_and_still_loses_nothing(tmp_path: Path) -> None:
    work = tmp_path / "repo"
    args = ["team", "--scripted", "--workers", "2", "--pace", "0.3", "--lease", "3"]
    team = Running([*args, "--workdir", str(work)], tmp_path)
    team.wait_for(team.line_matching(r"✓ write_file notes/"))
    team.process.send_signal(signal.SIGINT)
    team.wait_for(team.line_matching(r"stopping \d+ workers"))
    team.process.send_signal(signal.SIGINT)
    assert team.finish() == 130, team.text
    # Every file a worker wrote is on a branch, or still in a worktree the team kept.
    written = set(re.findall(r"✓ write_file (notes/\S+)", team.text))
    refs = run_git(work, "for-each-ref", "--format=%(refname)", "refs/heads/team")
    saved = set().union(*(_files_at(work, ref) for ref in refs.stdout.split()))
    kept = {
        str(path.relative_to(tree))
        for tree in (tmp_path / "state" / "team").glob("*/worker-*")
        for path in tree.rglob("notes/*")
    }
    assert written and written <= saved | kept, (written, saved, kept)


def test_a_killed_worker_s_item_is_finished_by_another_within_the_lease(
    tmp_path: Path,
) -> None:
    work = tmp_path / "repo"
    args = ["team", "--scripted", "--workers", "2", "--pace", "0.3", "--lease", "2"]
    team = Running([*args, "--workdir", str(work)], tmp_path)
    pid = team.wait_for(team.line_matching(r"/worker-2: pid (\d+) "))
    assert isinstance(pid, re.Match)
    claimed = team.wait_for(team.line_matching(r"worker-2 │ claimed #(\d+)"))
    assert isinstance(claimed, re.Match)
    # Killed once its session has a trace and a round (the write comes after the model's
    # first answer), and before its paced second turn completes the item.
    team.wait_for(team.line_matching(r"worker-2 │ ✓ write_file notes/"))
    os.kill(int(pid[1]), signal.SIGKILL)
    code = team.finish()
    assert code == 0, team.text
    item = claimed[1]
    # Its closing line is told from the records the team saw: the item it held, its rounds,
    # and the trace of the session it started, which is there and replays.
    line = re.search(r"/worker-2 +killed: SIGKILL (.*)$", team.text, re.MULTILINE)
    assert line is not None, team.text
    assert line[1].startswith(f"while it held #{item}, which the board gives back"), line[0]
    rounds = re.search(r" · (\d+) rounds · ([\d,]+) tokens", line[0])
    assert rounds is not None and int(rounds[1]) >= 1 and rounds[2] != "0", line[0]
    traces = re.findall(r"^trace: \w+/worker-2: (.+)$", team.text, re.MULTILINE)
    assert traces and Path(traces[-1]).is_file(), team.text
    assert f"item-{item}-" in traces[-1]
    url = _board_of(team.text)
    entries = _log(url, tmp_path)
    moves = [(e["trigger"], str(e["agent"])) for e in entries if e["item"] == item]
    # Its lease ran out, and the other worker claimed it again and completed it.
    assert moves[-3:][0][0] == "expire", moves
    assert moves[-2][0] == "start" and moves[-2][1].endswith("/worker-1"), moves
    assert moves[-1][0] == "complete" and moves[-1][1].endswith("/worker-1"), moves
    assert sorted(p.name for p in (work / "notes").iterdir()) == NOTES
    assert "(board check: ok)" in team.text


@pytest.mark.parametrize("how", [["--resume"], ["--resume", "--board"]])
def test_resuming_a_board_that_is_not_there_is_one_line_and_makes_none(
    tmp_path: Path, how: list[str]
) -> None:
    repo = _repository(tmp_path / "repo", {"a.txt": "a\n"})
    typo = tmp_path / "typo.db"
    done = _team_in_process([*how, f"sqlite:///{typo}", "--workdir", str(repo)], tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and f"{typo}: no board there" in done.stderr
    assert not typo.exists()
    assert len(run_git(repo, "worktree", "list").stdout.splitlines()) == 1


def test_a_second_team_on_a_board_another_team_works_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    first = Running(
        ["team", "--scripted", "--pace", "0.3", "--board", url, "--workdir", str(tmp_path / "a")],
        tmp_path,
    )
    first.wait_for(first.line_matching(r"/worker-1: pid \d+"))
    name = re.search(r"(\w+)/worker-1: pid", first.text)
    assert name is not None
    second = _cli(
        ["team", "--scripted", "--board", url, "--workdir", str(tmp_path / "b")], tmp_path
    )
    assert second.returncode == 2, second.stdout + second.stderr
    assert second.stderr.count("\n") == 1
    assert f"team {name[1]}, still running" in second.stderr
    assert not (tmp_path / "b").exists()  # refused before anything was written
    assert first.finish() == 0, first.text
    entries = _log(url, tmp_path)
    assert {str(e["agent"]).split("/")[0] for e in entries if e["agent"]} == {name[1]}


def test_a_team_is_refused_while_another_is_still_planning_on_the_board(tmp_path: Path) -> None:
    from orchestrator.board.stores import open_store
    from tests.in_process import run_cli

    url = f"sqlite:///{tmp_path / 'shared.db'}"
    # Another team's lead (on this machine or another) holds the board but has planned
    # nothing yet: no item says whose the board is.
    with open_store(url) as store:
        store.hold_for_team("feedface", lease=600)
    env = _environment(ORCHESTRATOR_STATE_DIR=str(tmp_path / "state"))
    second = run_cli(
        ["team", "--scripted", "--board", url, "--workdir", tmp_path / "b"], env=env, cwd=tmp_path
    )
    assert second.returncode == 2, second.stdout + second.stderr
    assert second.stderr.count("\n") == 1, second.stderr
    assert "team feedface is starting on it" in second.stderr
    assert not (tmp_path / "b").exists()  # refused before the demo wrote anything
    assert not any((tmp_path / "state" / "team").glob("*/team.json"))
    with open_store(url) as store:
        assert store.items() == ()


def test_a_killed_lead_takes_its_workers_with_it_and_a_resume_finishes(tmp_path: Path) -> None:
    work = tmp_path / "repo"
    args = ["team", "--scripted", "--workers", "2", "--pace", "0.3", "--lease", "2"]
    team = Running([*args, "--workdir", str(work)], tmp_path)
    pids = [team.wait_for(team.line_matching(rf"/worker-{n}: pid (\d+) ")) for n in (1, 2)]
    # Killed once an item has merged: the merges its workers told it of must outlive it, or
    # the resume takes the integration branch for something the harness did not make.
    team.wait_for(team.line_matching(r"│ #\d+ completed · commit \w+ · merged into"))
    team.process.kill()  # SIGKILL: the lead cannot pass anything on
    team.finish()
    for found in pids:
        assert isinstance(found, re.Match)
        _wait_gone(int(found[1]))  # each worker stopped when its lead died
    url = f"sqlite:///{next((tmp_path / 'state' / 'team').glob('*/board.db'))}"
    # The same command again (no --board) goes on with that team, on its board.
    resumed = _cli([*args, "--workdir", str(work)], tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming team" in resumed.stdout
    assert sorted(p.name for p in (work / "notes").iterdir()) == NOTES
    assert "(board check: ok)" in resumed.stdout
    assert len(list((tmp_path / "state" / "team").glob("*/team.json"))) == 1
    # A team whose items are all done but which never merged them (its lead killed in
    # between) is still a team to resume: its record says it did not end.
    record = next((tmp_path / "state" / "team").glob("*/team.json"))
    data = json.loads(record.read_text(encoding="utf-8"))
    assert data["finished"] is True
    record.write_text(json.dumps({**data, "finished": False}), encoding="utf-8")
    run_git(work, "reset", "-q", "--hard", data["start"])
    assert not (work / "notes").exists()
    again = _cli(["team", "--resume", url, "--workdir", str(work)], tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"resuming team {data['id']}" in again.stdout
    assert sorted(p.name for p in (work / "notes").iterdir()) == NOTES
    nothing = _cli(["team", "--resume", url, "--workdir", str(work)], tmp_path)
    assert nothing.returncode == 2 and "no unfinished team" in nothing.stderr, nothing.stderr


def _wait_gone(pid: int) -> None:
    """Until ``pid`` has ended (a zombie nobody reaps counts as ended)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
        except OSError:
            return
        if re.search(r"^State:\s+Z", status, re.MULTILINE):
            return
        time.sleep(0.05)
    pytest.fail(f"worker {pid} outlived its lead")


def test_two_teams_at_once_share_one_store_each_on_its_own_board(tmp_path: Path) -> None:
    store = tmp_path / "shared.db"
    teams = [
        Running(
            [
                *("team", "--scripted", "--board", f"sqlite:///{store}?board={name}"),
                *("--workdir", str(tmp_path / name)),
            ],
            tmp_path,
        )
        for name in ("a", "b")
    ]
    assert [team.finish() for team in teams] == [0, 0], [team.text for team in teams]
    for name, team in zip(("a", "b"), teams, strict=True):
        found = re.search(r"^team (\w+):$", team.text, re.MULTILINE)
        assert found is not None
        entries = _log(_board_of(team.text), tmp_path)
        assert len([e for e in entries if e["trigger"] == "complete"]) == 5
        assert {str(e["agent"]).split("/")[0] for e in entries if e["agent"]} == {found[1]}
        assert sorted(p.name for p in (tmp_path / name / "notes").iterdir()) == NOTES


def _repository(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    run_git(folder, "init", "-q", "-b", "main")
    run_git(folder, "add", "-A")
    run_git(folder, "commit", "-q", "-m", "start")
    return folder


def _bwrap_works() -> bool:
    from orchestrator.tools.sandbox import find_bwrap, probe_bwrap

    binary = find_bwrap()
    return binary is not None and probe_bwrap(binary) is None


@pytest.mark.parametrize("sandbox", ["workdir", "bwrap"])
def test_a_hostile_worker_gets_nothing_run_outside_and_its_work_is_not_merged(
    tmp_path: Path, sandbox: str
) -> None:
    """A worker (a scripted model over the real SDK) plants a nested repository with its own
    fsmonitor, as a gitlink, a post-merge hook in the repository's own git dir, and a file
    beside its worktree (where the other workers' are). Under bwrap none of it lands: the
    nested repository's ``.git`` is moved out of the worktree after the call (a git dir below
    the top, docs/sandbox.md), so ``vendor/`` merges as plain files. Under ``workdir``, which
    cannot stop bash, all of it does, and the work is not merged. Either way the harness's git
    runs none of it."""
    from orchestrator.script import parse_script
    from orchestrator.testing import MessagesServer

    if sandbox == "bwrap" and not _bwrap_works():
        pytest.skip("bwrap cannot run here")
    repo = _repository(tmp_path / "repo", {"README.md": "# r\n"})
    marks = tmp_path / "marks"
    marks.mkdir()
    hook = repo / ".git" / "hooks" / "post-merge"
    plant = (
        "touch ../planted-beside; "
        "git init -q vendor && cd vendor && echo x > x && git add x && "
        "git -c user.name=m -c user.email=m@m commit -qm v && cd .. && "
        f"printf '[core]\\n\\tfsmonitor = touch {marks}/nested; false\\n' >> vendor/.git/config"
        f" && printf '#!/bin/sh\\ntouch {marks}/post-merge\\n' > {hook} && chmod +x {hook}"
    )
    items = [
        {"id": "1", "text": "Write notes/a.md", "status": "pending"},
        {"id": "2", "text": "Vendor the library", "status": "pending", "blocked_by": ["1"]},
    ]

    def complete(item: str) -> dict[str, object]:
        return {
            "name": "todo",
            "input": {"merge": True, "items": [{"id": item, "status": "completed"}]},
        }

    turns = [
        {"tool_calls": [{"name": "todo", "input": {"items": items}}]},
        {"text": "Planned."},
        {"tool_calls": [{"name": "write_file", "input": {"path": "notes/a.md", "content": "a\n"}}]},
        {"tool_calls": [complete("1")]},
        {"text": "Done."},
        {"tool_calls": [{"name": "bash", "input": {"command": plant}}]},
        {"tool_calls": [complete("2")]},
        {"text": "Done too."},
    ]
    script = parse_script({"name": "hostile", "turns": turns}, source="test")
    with MessagesServer(script) as server:
        done = _cli(
            ["team", "Do it", "--workers", "1", "--lease", "30", "--workdir", str(repo)],
            tmp_path,
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=server.base_url,
            ORCHESTRATOR_SANDBOX=sandbox,
            TMPDIR=str(tmp_path),  # where the worker moves the nested .git: the test's own
        )
    beside = list((tmp_path / "state" / "team").glob("*/planted-beside"))
    if sandbox == "bwrap":
        assert done.returncode == 0, done.stdout + done.stderr
        assert sorted(p.name for p in marks.iterdir()) == []
        assert not hook.exists() and not beside
        assert "vendor/.git: it made a git dir" in done.stdout
        assert (repo / "vendor" / "x").is_file() and not (repo / "vendor" / ".git").exists()
        assert "160000" not in run_git(repo, "ls-tree", "-r", "HEAD").stdout
        return
    assert done.returncode == 3, done.stdout + done.stderr
    assert sorted(p.name for p in marks.iterdir()) == []
    refused = re.search(r"! not merged: #2 \(\w+/worker-1\).*", done.stdout)
    assert refused is not None, done.stdout
    assert "vendor is a gitlink" in refused[0]
    assert hook.exists() and beside, "the plants failed: the test proves nothing"
    assert ".git/hooks" in refused[0]
    # The honest item merged; nothing of the hostile one reached the work directory.
    assert (repo / "notes" / "a.md").is_file() and not (repo / "vendor").exists()
    assert "160000" not in run_git(repo, "ls-tree", "-r", "HEAD").stdout
    # Its work is still on the worker's branch, for a person to look at.
    branch = re.search(r"branch (team/\w+/worker-1)", done.stdout)
    assert branch is not None
    assert "160000 commit" in run_git(repo, "ls-tree", branch[1], "vendor").stdout


def test_a_planted_orchestrator_py_never_runs_in_a_worker(tmp_path: Path) -> None:
    from orchestrator.team.scripted import FILES, prepare_scripted_repository

    # A model's ``orchestrator.py`` in the work directory, run from there as a person would:
    # the worker processes the team starts import the real package, never that file.
    marker = tmp_path / "planted-ran"
    planted = f"open({str(marker)!r}, 'w').write('ran')\n"
    # The demo's own repository (the scripted team runs in no other), with the file planted.
    work = tmp_path / "repo"
    prepare_scripted_repository(work, {**FILES, "orchestrator.py": planted})
    done = subprocess.run(
        [sys.executable, "-P", "-m", "orchestrator", "team", "--scripted", "--workers", "1"],
        env=_environment(ORCHESTRATOR_STATE_DIR=str(tmp_path / "state")),
        cwd=work,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not marker.exists()
    assert "(board check: ok)" in done.stdout


def _user_git(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The user's own git (their config, fsmonitor and all), as after a team."""
    return subprocess.run(
        ["git", *args],
        cwd=where,
        env=_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def _hostile_team(
    tmp_path: Path, sandbox: str, attacks: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], Path, str]:
    """``team`` with one worker whose model runs one bash command per item, then completes it.

    The repository includes ``../.gitconfig`` (tracked) from its git config. Returns the run,
    the repository and the team's id.
    """
    from orchestrator.script import parse_script
    from orchestrator.testing import MessagesServer

    if sandbox == "bwrap" and not _bwrap_works():
        pytest.skip("bwrap cannot run here")
    repo = _repository(
        tmp_path / "repo", {"README.md": "# r\n", ".gitconfig": "[core]\n\tquotePath = false\n"}
    )
    run_git(repo, "config", "include.path", "../.gitconfig")
    plan = [
        {"id": str(n), "text": text, "status": "pending"} for n, text in enumerate(attacks, start=1)
    ]
    turns: list[dict[str, object]] = [
        {"tool_calls": [{"name": "todo", "input": {"items": plan}}]},
        {"text": "Planned."},
    ]
    for number, command in enumerate(attacks.values(), start=1):
        done_item = {"merge": True, "items": [{"id": str(number), "status": "completed"}]}
        turns += [
            {"tool_calls": [{"name": "bash", "input": {"command": command}}]},
            {"tool_calls": [{"name": "todo", "input": done_item}]},
            {"text": "Done."},
        ]
    script = parse_script({"name": "hostile", "turns": turns}, source="test")
    with MessagesServer(script) as server:
        done = _cli(
            ["team", "Do it", "--workers", "1", "--lease", "30", "--workdir", str(repo)],
            tmp_path,
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=server.base_url,
            ORCHESTRATOR_SANDBOX=sandbox,
            TMPDIR=str(tmp_path),  # where the sandbox moves a planted git dir: the test's own
        )
    team = re.search(r"^team (\w+):$", done.stdout, re.MULTILINE)
    assert team is not None, done.stdout + done.stderr
    return done, repo, team[1]


def _refused_items(out: str) -> dict[str, str]:
    """Each item's ``! not merged: #N (…)`` line in the closing lines, by item id."""
    return {m[1]: m[0] for m in re.finditer(r"^! not merged: #(\d+) \(\w+/worker-1\).*", out, re.M)}


@pytest.mark.parametrize("sandbox", ["workdir", "bwrap"])
def test_a_worker_s_files_that_git_would_obey_never_reach_the_work_directory(
    tmp_path: Path, sandbox: str
) -> None:
    """A hostile worker edits the git config file the repository includes, then commits a
    folder shaped like a git dir with its own fsmonitor. Neither merges, the user's git runs
    neither, each is named, and the team exits 3. Under ``workdir`` nothing stops bash, so
    both reach the harness's checks of the item's commit; under bwrap the sandbox may stop
    them first."""
    marks = tmp_path / "marks"
    marks.mkdir()
    attacks = {
        "Tune the git config": (
            f"printf '\\tfsmonitor = \"touch {marks}/included; false\"\\n' >> .gitconfig"
        ),
        "Add the fixture": (
            "mkdir -p src/objects/info src/refs/heads && echo 'ref: refs/heads/main' > src/HEAD"
            " && : > src/objects/info/packs && : > src/refs/heads/.keep && printf '[core]\\n"
            "\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tworktree = .\\n"
            f'\\tfsmonitor = "touch {marks}/gitdir; false"\\n\' > src/config'
        ),
    }
    done, repo, _team = _hostile_team(tmp_path, sandbox, attacks)
    out = done.stdout
    assert done.returncode == 3, out + done.stderr
    # From outside: the user's git runs nothing of the worker's, in the repository or below.
    assert _user_git(repo, "status").returncode == 0
    if (repo / "src").exists():
        _user_git(repo / "src", "status")
    assert sorted(p.name for p in marks.iterdir()) == []
    assert (repo / ".gitconfig").read_text(encoding="utf-8") == "[core]\n\tquotePath = false\n"
    files = _files_at(repo, "HEAD")
    if sandbox == "workdir":
        assert files == {"README.md", ".gitconfig"}
    else:  # the sandbox may move the git dir's HEAD out: the rest is plain files
        assert "src/HEAD" not in files, files
    assert run_git(repo, "status", "--porcelain").stdout == ""
    refused = _refused_items(out)
    if sandbox == "workdir" or "1" in refused:
        assert ".gitconfig is named by git config" in refused["1"], out
        commit = re.search(r"\(commit (\w+) on", refused["1"])
        assert commit is not None
        assert "fsmonitor" in run_git(repo, "show", f"{commit[1]}:.gitconfig").stdout
    if sandbox == "workdir" or "2" in refused:
        assert "src/" in refused["2"] and "git dir" in refused["2"], out
        # The payload was real: the user's git, in a checkout of that commit, runs it.
        commit = re.search(r"\(commit (\w+) on", refused["2"])
        assert commit is not None
        scratch = tmp_path / "scratch"
        added = _user_git(repo, "worktree", "add", "-q", "--detach", str(scratch), commit[1])
        assert added.returncode == 0, added.stderr
        _user_git(scratch / "src", "status")
        assert (marks / "gitdir").exists(), "the planted git dir did not run: proves nothing"


@pytest.mark.parametrize("sandbox", ["workdir", "bwrap"])
def test_a_worker_that_moves_the_team_s_branches_has_nothing_merged(
    tmp_path: Path, sandbox: str
) -> None:
    """A hostile worker moves the integration branch to a commit of its own with git's
    plumbing (under which its next item's merge lands), then points its worktree's HEAD at
    that branch. Nothing of the branch merges into the work directory, the worker is named,
    and the team exits 3. Under ``workdir`` nothing stops bash, so the team's own checks
    catch both; under bwrap the sandbox may stop the writes first, and says so."""
    integration = "I=$(git for-each-ref --format='%(refname)' 'refs/heads/team/*/integration')"
    attacks = {
        "Write notes/c.md": (
            f"mkdir -p notes && echo c > notes/c.md && {integration} && echo evil > backdoor.py"
            " && git add backdoor.py && C=$(git -c user.name=m -c user.email=m@m commit-tree"
            " $(git write-tree) -p $I -m sneaky) && git update-ref $I $C"
            " && git rm -q --cached backdoor.py && rm backdoor.py"
        ),
        "Write notes/d.md": f"{integration} && git symbolic-ref HEAD $I && echo d > notes/d.md",
    }
    done, repo, team = _hostile_team(tmp_path, sandbox, attacks)
    out = done.stdout
    assert done.returncode == 3, out + done.stderr
    assert "backdoor.py" not in _files_at(repo, "HEAD")
    assert run_git(repo, "status", "--porcelain").stdout == ""
    refused = _refused_items(out)
    moved = re.search(rf"^! not merged: team/{team}/integration was moved to commit .*", out, re.M)
    if sandbox == "workdir" or moved is not None:
        assert moved is not None, out
        assert f"('sneaky') by {team}/worker-1's own git" in moved[0]
        assert "; nothing of it is merged" in moved[0]
        assert _files_at(repo, "HEAD") == {"README.md", ".gitconfig"}
        assert run_git(repo, "log", "--format=%s", "-1").stdout.strip() == "start"
    else:  # the sandbox stopped the move, and the worker's item is refused for trying
        assert f"refs/heads/team/{team}/integration" in refused["1"], out
        assert "the sandbox stopped the session's git from moving branches" in refused["1"]
    if sandbox == "workdir" or "2" in refused:
        assert f"HEAD names branch team/{team}/integration" in refused["2"], out
        assert re.search(r"^! worktree left: .*HEAD names branch", out, re.M), out


def test_a_killed_worker_that_held_no_item_is_said_to_have_held_none() -> None:
    """Its last item ended before it died: its closing line says it held none, and still lists
    the trace it started, its rounds and tokens, and where it kept earlier commits."""
    from orchestrator.harness_git import GitPlace
    from orchestrator.team.lead import _Child, _follow, _report_of

    process = subprocess.Popen(
        [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    process.wait(TIMEOUT)
    place = GitPlace(Path("/nowhere"), Path("/nowhere/.git"))
    child = _Child("t/worker-1", "worker-1", place, "team/t/worker-1", process)
    records = [
        {"event": "work.claimed", "item": "1", "text": "Write notes/a.md"},
        {"event": "work.caught_up", "item": "1", "branch": "b", "tip": "1", "kept": "t/kept/w"},
        {"event": "work.session", "agent": "t/worker-1", "item": "1", "trace": "/t/w-1.jsonl"},
        {"event": "work.item", "item": "1", "outcome": "completed"},
    ]
    for record in records:
        _follow(child, record)
    usage = {"input_tokens": 100, "output_tokens": 20}
    child.totals({"event": "model.response", "usage": usage, "model": "scripted"})
    report = _report_of(child)
    assert report.status == "killed"
    assert report.reason == "SIGKILL; it held no item; earlier commits kept on t/kept/w"
    assert (report.rounds, report.tokens, report.traces) == (1, 120, ("/t/w-1.jsonl",))
    # Claimed again and killed while holding it: that item is named.
    _follow(child, {"event": "work.claimed", "item": "2", "text": "Write notes/b.md"})
    assert _report_of(child).reason.startswith("SIGKILL while it held #2, ")


def test_team_items_completed_outside_the_team_are_named_not_counted_as_merged(
    tmp_path: Path,
) -> None:
    from orchestrator.board.stores import open_store
    from orchestrator.team.lead import _board_verdict

    url = f"sqlite:///{tmp_path / 'board.db'}"
    with open_store(url) as store:
        for text in ("one", "two", "three"):
            store.add(text, agent="T1/lead")
        store.claim("T1/worker-1", item_id="1")
        store.complete("1", agent="T1/worker-1")
        # Someone else's `orchestrator work` on the same board: its work is in its own
        # folder, never on the team's integration branch.
        store.claim("bob", item_id="2")
        store.complete("2", agent="bob")
        store.claim("T2/worker-1", item_id="3")
        store.complete("3", agent="T2/worker-1")
    verdict = _board_verdict(url, "T1")
    assert verdict.check == "ok"
    assert verdict.unfinished == ()
    assert verdict.outsiders == (("2", "bob"), ("3", "T2/worker-1"))
