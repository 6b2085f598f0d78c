"""``orchestrator work``: one worker process on any board, its commits, its stops, its conflicts."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from orchestrator.board.check import check_log
from orchestrator.board.stores import open_store
from orchestrator.harness_git import run_git
from orchestrator.team import integration
from orchestrator.team.scripted import ScriptedItem, note_path
from tests.test_team import Running, _cli

if TYPE_CHECKING:
    from orchestrator.protocols import Model
    from orchestrator.team.worker import WorkPlan

# Worker processes on real boards (one on PostgreSQL): the e2e layer (docs/development.md).
pytestmark = pytest.mark.e2e

ITEMS = (
    ("Write notes/a.md about a", ()),
    ("Write notes/b.md about b", ()),
    ("Write notes/c.md after a and b", ("1", "2")),
)


def _board(path: Path, items: tuple[tuple[str, tuple[str, ...]], ...] = ITEMS) -> str:
    url = f"sqlite:///{path}"
    with open_store(url) as store, store.change() as change:
        for text, blockers in items:
            change.add(text, agent="person", blocked_by=blockers)
    return url


def _repository(folder: Path) -> Path:
    folder.mkdir()
    (folder / "README.md").write_text("# r\n", encoding="utf-8")
    run_git(folder, "init", "-q", "-b", "main")
    run_git(folder, "add", "-A")
    run_git(folder, "commit", "-q", "-m", "start")
    return folder


def _statuses(url: str) -> dict[str, tuple[str, str | None]]:
    with open_store(url) as store:
        return {item.id: (str(item.status), item.owner) for item in store.items()}


def test_a_scripted_worker_commits_each_item_on_its_own_and_ends_when_none_is_left(
    tmp_path: Path,
) -> None:
    url = _board(tmp_path / "board.db")
    repo = _repository(tmp_path / "repo")
    done = _cli(["work", url, "--agent", "me", "--workdir", str(repo), "--scripted"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _statuses(url) == {n: ("completed", "me") for n in ("1", "2", "3")}
    messages = run_git(repo, "log", "--format=%B%x00", "HEAD").stdout.split("\0")
    for number, (text, _) in enumerate(ITEMS, start=1):
        mine = [m for m in messages if m.strip().startswith(f"#{number}: {text}")]
        assert len(mine) == 1 and f"Board-Item: {number}" in mine[0], messages
    assert run_git(repo, "status", "--porcelain").stdout == ""
    assert sorted(p.name for p in (repo / "notes").iterdir()) == ["a.md", "b.md", "c.md"]
    # Outside a repository the items are done all the same, with nothing committed.
    plain = tmp_path / "plain"
    plain.mkdir()
    other = _board(tmp_path / "other.db")
    done = _cli(["work", other, "--agent", "you", "--workdir", str(plain), "--scripted"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in (plain / "notes").iterdir()) == ["a.md", "b.md", "c.md"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--lease", "inf"], "--lease inf: expected"),
        (["--agent", ""], "--agent: an agent's name is empty"),
        (["--agent", "person:me"], "marks a person"),
        (["--integrate", "nowhere"], "--integrate nowhere: no such branch"),
        (["--pace", "-1"], "--pace"),
    ],
)
def test_bad_work_input_is_one_line_and_claims_nothing(
    tmp_path: Path, args: list[str], said: str
) -> None:
    url = _board(tmp_path / "board.db")
    repo = _repository(tmp_path / "repo")
    base = ["work", url, "--agent", "me", "--workdir", str(repo), "--scripted"]
    done = _cli([*base, *args], tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and said in done.stderr, done.stderr
    assert all(status == "pending" for status, _ in _statuses(url).values())


@pytest.mark.parametrize("where", ["bare", "git dir", "pace nan"])
def test_a_git_directory_or_a_pace_of_nan_is_refused_before_anything_is_claimed(
    tmp_path: Path, where: str
) -> None:
    # A bare repository or a folder inside .git has no work tree: the items' files would land
    # among git's own. A pace of nan passed click's range (every comparison with nan is false).
    from tests.in_process import run_cli
    from tests.test_cli import _environment

    url = _board(tmp_path / "board.db")
    repo = _repository(tmp_path / "repo")
    bare = tmp_path / "bare.git"
    run_git(tmp_path, "init", "-q", "--bare", str(bare))
    workdir, extra = {
        "bare": (bare, []),
        "git dir": (repo / ".git", []),
        "pace nan": (repo, ["--pace", "nan"]),
    }[where]
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    env = _environment(ORCHESTRATOR_STATE_DIR=str(tmp_path / "state"))
    args = ["work", url, "--agent", "me", "--workdir", str(workdir), "--scripted", *extra]
    done = run_cli(args, env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    said = "is not a finite number" if extra else "is a git directory, not a work tree"
    assert done.stderr.count("\n") == 1 and said in done.stderr, done.stderr
    assert all(status == "pending" for status, _ in _statuses(url).values())
    after = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert [p for p in after if p not in before and not p.startswith("state")] == []


def test_a_work_line_naming_a_folder_with_a_newline_stays_one_line() -> None:
    from orchestrator.team.worker import describe

    line = describe(
        {
            "event": "work.started",
            "agent": "me",
            "board": "sqlite:///b.db",
            "workdir": "/tmp/w\x1b[31m\nforged line",
            "pid": 1,
            "lease": 30.0,
        }
    )
    assert "\n" not in line and "\x1b" not in line
    assert "/tmp/w␛[31m\\nforged line" in line


def test_a_dirty_work_directory_is_refused_before_anything_is_claimed(tmp_path: Path) -> None:
    url = _board(tmp_path / "board.db")
    repo = _repository(tmp_path / "repo")
    (repo / "mine.txt").write_text("uncommitted\n", encoding="utf-8")
    done = _cli(["work", url, "--agent", "me", "--workdir", str(repo), "--scripted"], tmp_path)
    assert done.returncode == 2 and "uncommitted changes" in done.stderr
    assert all(status == "pending" for status, _ in _statuses(url).values())


def test_a_stopped_worker_commits_its_work_and_gives_its_item_back(tmp_path: Path) -> None:
    url = _board(tmp_path / "board.db", (("Write notes/slow.md slowly", ()),))
    repo = _repository(tmp_path / "repo")
    args = ["work", url, "--agent", "me", "--workdir", str(repo), "--scripted", "--pace", "2"]
    worker = Running(args, tmp_path)
    # Its file is written; the scripted model waits before completing: stop it there.
    worker.wait_for(worker.line_matching(r"✓ write_file notes/slow\.md"))
    worker.process.send_signal(signal.SIGTERM)
    assert worker.finish() == 143, worker.text
    assert "released #1" in worker.text
    assert _statuses(url) == {"1": ("pending", None)}
    with open_store(url) as store:
        triggers = [entry.trigger for entry in store.log()]
    assert triggers == ["add", "start", "pause"]  # given back at once, not left to expire
    last = run_git(repo, "log", "-1", "--format=%s").stdout
    assert "unfinished, the worker was stopped" in last
    assert "notes/slow.md" in run_git(repo, "show", "--name-only", "--format=", "HEAD").stdout
    assert run_git(repo, "status", "--porcelain").stdout == ""


class _Meanwhile(ScriptedItem):
    """A scripted item whose first turn is preceded by another worker's conflicting merge."""

    def __init__(self, other: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._other = other

    def respond(self, request: Any, on_text: Any) -> Any:
        if self._other is not None:
            self._other()
            self._other = None
        return super().respond(request, on_text)


def test_a_conflict_puts_the_item_back_and_a_try_from_the_new_tip_completes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.team.worker import Worker, WorkOutput

    monkeypatch.setenv("ORCHESTRATOR_STATE_DIR", str(tmp_path / "state"))
    url = _board(tmp_path / "board.db", (("Write notes/same.md", ()),))
    repo = _repository(tmp_path / "repo")
    run_git(repo, "branch", "integration", "HEAD")
    mine = integration.add_worktree(repo, tmp_path / "mine", "w/mine", "integration")
    other = integration.add_worktree(repo, tmp_path / "other", "w/other", "integration")

    def other_worker_lands_first() -> None:
        (other.work_tree / "notes").mkdir()
        (other.work_tree / "notes" / "same.md").write_text("theirs\n", encoding="utf-8")
        commit = integration.commit_all(other, "#9: theirs", on="w/other")
        assert commit is not None
        assert integration.merge_into(other, "integration", commit, "merge #9").ok

    calls = [other_worker_lands_first, None]
    out = io.StringIO()
    plan = _integrating_plan(
        url, mine.work_tree, tmp_path, lambda item, text: _Meanwhile(calls.pop(0), "me", item, text)
    )
    (tmp_path / "traces").mkdir()
    result = Worker(plan, WorkOutput(out, as_json=True)).run(lambda: 130)
    assert result.exit_code == 0, out.getvalue()
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    outcomes = [(r["outcome"], r.get("why", "")) for r in records if r["event"] == "work.item"]
    assert outcomes[0][0] == "conflict" and "notes/same.md" in outcomes[0][1], outcomes
    assert outcomes[1][0] == "completed", outcomes
    with open_store(url) as store:
        entries = list(store.log())
        contents = store.contents()
    assert [e.trigger for e in entries] == ["add", "start", "check", "pause", "start", "complete"]
    # The conflict is on the board, in the log beside the item, and the log still holds.
    noted = entries[2]
    assert noted.exit_code == 1 and "notes/same.md" in str(noted.check)
    assert check_log(contents.log, contents.items, checks=contents.checks) is None
    # The second try started from the tip that held the other worker's file, and merged.
    tip = run_git(repo, "show", "integration:notes/same.md").stdout
    assert "Written by me" in tip
    kept = [r for r in records if r["event"] == "work.caught_up" and r.get("kept")]
    assert kept, "the conflicting commit was kept on a branch of its own"
    assert "theirs" not in run_git(repo, "show", f"{kept[0]['kept']}:notes/same.md").stdout


def _integrating_plan(
    url: str, work_tree: Path, tmp_path: Path, model: Callable[[str, str], Model]
) -> WorkPlan:
    """Worker ``me`` in ``work_tree``, merging into ``integration``, traces in tmp/traces."""
    from orchestrator.agent import load_options
    from orchestrator.team.worker import WorkPlan

    settings = {"board": url, "agent": "me", "approval": "auto", "lease": 30}
    return WorkPlan(
        url,
        "me",
        work_tree,
        30.0,
        lambda trace: load_options(work_tree, settings, trace=trace),
        model,
        integrate="integration",
        trace_dir=tmp_path / "traces",
    )


def test_a_stop_before_an_item_s_session_names_no_commit_of_another_item_as_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C while the worker brings its worktree up to the integration branch for its second
    # item (signals are held there, so it lands as that ends): nothing of #2 was done, and
    # #2's record must not give #1's commit as the work it left.
    from orchestrator.team.worker import Worker, WorkOutput

    monkeypatch.setenv("ORCHESTRATOR_STATE_DIR", str(tmp_path / "state"))
    url = _board(tmp_path / "board.db", ITEMS[:2])
    repo = _repository(tmp_path / "repo")
    run_git(repo, "branch", "integration", "HEAD")
    mine = integration.add_worktree(repo, tmp_path / "mine", "w/mine", "integration")
    real_catch_up = integration.catch_up
    calls: list[str] = []

    def catch_up(*args: Any) -> str | None:
        calls.append("catch_up")
        kept = real_catch_up(*args)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return kept

    monkeypatch.setattr(integration, "catch_up", catch_up)
    out = io.StringIO()
    plan = _integrating_plan(
        url, mine.work_tree, tmp_path, lambda item, text: ScriptedItem("me", item, text)
    )
    (tmp_path / "traces").mkdir()
    result = Worker(plan, WorkOutput(out, as_json=True)).run(lambda: 130)
    assert result.exit_code == 130, out.getvalue()
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    items = {r["item"]: r for r in records if r["event"] == "work.item"}
    assert items["1"]["outcome"] == "completed" and items["1"]["commit"]
    assert items["2"]["outcome"] == "interrupted", items
    assert not items["2"]["commit"], items  # was #1's commit
    assert _statuses(url)["2"] == ("pending", None)


@pytest.mark.xdist_group("pg")  # the session's one cluster (tests/conftest.py)
def test_two_workers_in_two_clones_share_one_postgresql_board(
    tmp_path: Path, postgres_cluster: str
) -> None:
    from tests.postgres import fresh_database

    url = fresh_database(postgres_cluster)
    texts = [(f"Write notes/n{n}.md", ()) for n in range(1, 7)]
    with open_store(url) as store, store.change() as change:
        for text, _ in texts:
            change.add(text, agent="person")
    origin = _repository(tmp_path / "origin")
    for name in ("one", "two"):  # the person's own git (the harness's refuses file://)
        subprocess.run(["git", "clone", "-q", str(origin), name], cwd=tmp_path, check=True)
    workers = [
        Running(
            ["work", url, "--agent", name, "--workdir", str(tmp_path / name), "--scripted"],
            tmp_path,
        )
        for name in ("one", "two")
    ]
    assert [worker.finish() for worker in workers] == [0, 0], [w.text for w in workers]
    with open_store(url) as store:
        entries = list(store.log())
        items = store.items()
    assert all(str(item.status) == "completed" for item in items)
    completions = [e for e in entries if e.trigger == "complete"]
    assert sorted(e.item for e in completions) == [str(n) for n in range(1, 7)]
    # Each clone holds, as its own commits, exactly the items its worker completed.
    for name in ("one", "two"):
        done = {e.item for e in completions if e.agent == name}
        subjects = run_git(tmp_path / name, "log", "--format=%s", "HEAD").stdout.splitlines()
        committed = {m[1] for s in subjects if (m := re.match(r"#(\d+): ", s))}
        assert committed == done
        for item in done:
            path = note_path(texts[int(item) - 1][0], item)
            assert (tmp_path / name / path).is_file()


def _work_with_model(
    tmp_path: Path, url: str, repo: Path, turns: list[dict[str, object]], sandbox: str = "workdir"
) -> subprocess.CompletedProcess[str]:
    """``orchestrator work`` whose sessions talk to a scripted model over the real SDK."""
    from orchestrator.script import parse_script
    from orchestrator.testing import MessagesServer
    from tests.test_cli import _environment

    script = parse_script({"name": "worker", "turns": turns}, source="test")
    with MessagesServer(script) as server:
        return subprocess.run(
            [sys.executable, "-m", "orchestrator", "work", url, "--agent", "me", "--workdir", repo],
            env=_environment(
                ORCHESTRATOR_STATE_DIR=str(tmp_path / "state"),
                ANTHROPIC_API_KEY="test-key",
                ANTHROPIC_BASE_URL=server.base_url,
                ORCHESTRATOR_SANDBOX=sandbox,
                TMPDIR=str(tmp_path),
            ),
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )


def test_an_item_left_in_progress_is_given_back_and_the_worker_does_not_say_done(
    tmp_path: Path,
) -> None:
    """The model marks its item completed, the person's check fails, and its session ends:
    the item goes back on the board, and the worker says so and exits 3, never "done"."""
    url = f"sqlite:///{tmp_path / 'board.db'}"
    with open_store(url) as store, store.change() as change:
        change.add("Write notes/a.md", agent="person", check="test -s notes/b.md")
    repo = _repository(tmp_path / "repo")
    complete = {"merge": True, "items": [{"id": "1", "status": "completed"}]}
    turns: list[dict[str, object]] = [
        {"tool_calls": [{"name": "write_file", "input": {"path": "notes/a.md", "content": "a\n"}}]},
        {"tool_calls": [{"name": "todo", "input": complete}]},
        {"text": "Done."},
    ]
    done = _work_with_model(tmp_path, url, repo, turns)
    assert done.returncode == 3, done.stdout + done.stderr
    assert _statuses(url) == {"1": ("pending", None)}
    assert "released #1: the session ended without completing it" in done.stdout
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("work: unfinished: not finished, given back to the board: #1"), last
    assert last.endswith("(exit 3)"), last
    # Its work is kept, committed on the branch, for whoever takes the item next.
    assert "notes/a.md" in run_git(repo, "show", "--name-only", "--format=", "HEAD").stdout


@pytest.mark.parametrize("sandbox", ["workdir", "bwrap"])
def test_a_branch_the_model_switches_to_itself_is_followed_and_the_item_lands(
    tmp_path: Path, sandbox: str
) -> None:
    """``git switch -c`` and a commit of the model's own: ordinary git, still committed on
    the worker's branch, and the item completes."""
    from tests.test_team import _bwrap_works

    if sandbox == "bwrap" and not _bwrap_works():
        pytest.skip("bwrap cannot run here")
    url = _board(tmp_path / "board.db", (("Write notes/a.md", ()),))
    repo = _repository(tmp_path / "repo")
    mine = (
        "git switch -q -c fix && mkdir -p notes && echo a > notes/a.md && git add notes"
        " && git -c user.name=m -c user.email=m@m commit -qm 'my own commit'"
    )
    complete = {"merge": True, "items": [{"id": "1", "status": "completed"}]}
    turns: list[dict[str, object]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": mine}}]},
        {"tool_calls": [{"name": "todo", "input": complete}]},
        {"text": "Done."},
    ]
    done = _work_with_model(tmp_path, url, repo, turns, sandbox)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _statuses(url) == {"1": ("completed", "me")}
    assert (
        "HEAD was on fix, a branch made in this item; main now points where it did" in done.stdout
    )
    assert run_git(repo, "symbolic-ref", "--short", "HEAD").stdout.strip() == "main"
    assert "my own commit" in run_git(repo, "log", "--format=%s", "main").stdout
    assert (repo / "notes" / "a.md").is_file()
    assert run_git(repo, "status", "--porcelain").stdout == ""


def _work(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``orchestrator work ARGS`` in this process (the process boundary is not the point)."""
    from tests.in_process import run_cli
    from tests.test_cli import _environment

    env = _environment(ORCHESTRATOR_STATE_DIR=str(tmp_path / "state"), TMPDIR=str(tmp_path))
    return run_cli(["work", *args], env=env, cwd=tmp_path)


def test_a_board_that_is_not_there_is_one_line_and_none_is_made(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    typo = tmp_path / "typo.db"
    done = _work(
        [f"sqlite:///{typo}", "--agent", "a", "--workdir", str(plain), "--scripted"], tmp_path
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and f"{typo}: no board there" in done.stderr, done.stderr
    assert not typo.exists()
    assert "work: done" not in done.stdout


def test_a_scripted_worker_says_it_is_scripted_and_ends_naming_its_traces(
    tmp_path: Path,
) -> None:
    url = _board(tmp_path / "board.db", ITEMS[:2])
    plain = tmp_path / "plain"
    plain.mkdir()
    done = _work([url, "--agent", "me", "--workdir", str(plain), "--scripted"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    headers = [line for line in done.stdout.splitlines() if line.startswith("orchestrator: model")]
    assert len(headers) == 2 and all(
        h.startswith("orchestrator: model scripted ·") for h in headers
    )
    assert "claude" not in done.stdout
    lines = done.stdout.splitlines()
    traces = [line.removeprefix("trace: ") for line in lines if line.startswith("trace: ")]
    # One per item session, each a real trace of that session, and before the last line.
    assert len(traces) == 2, done.stdout
    for trace in traces:
        first = json.loads(Path(trace).read_text(encoding="utf-8").splitlines()[0])
        assert first["event"] == "run.started" and first["settings"]["model"] == "scripted"
    assert lines[-1] == "work: done (exit 0)"
    assert lines.index(f"trace: {traces[-1]}") == len(lines) - 2


def test_items_waiting_on_a_cancelled_item_are_named_and_the_worker_is_unfinished(
    tmp_path: Path,
) -> None:
    items = (
        ("Write notes/gone.md", ()),
        ("Write notes/after.md once gone.md is there", ("1",)),
        ("Write notes/last.md after that", ("2",)),
        ("Write notes/free.md", ()),
    )
    url = _board(tmp_path / "board.db", items)
    with open_store(url) as store:
        store.cancel("1", agent="person")
    plain = tmp_path / "plain"
    plain.mkdir()
    done = _work([url, "--agent", "me", "--workdir", str(plain), "--scripted"], tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("work: unfinished: "), last
    assert "#2 waits on #1, which is cancelled" in last, last
    assert "#3 waits on #2, which can never start" in last, last
    assert "#4" not in last and last.endswith("(exit 3)"), last
    # What it could do, it did; what can never start is left as it was.
    assert _statuses(url) == {
        "1": ("cancelled", None),
        "2": ("pending", None),
        "3": ("pending", None),
        "4": ("completed", "me"),
    }


def test_never_ready_follows_chains_and_names_a_blocker_the_board_does_not_hold() -> None:
    """The store refuses a blocker it does not hold; a board read another way may still have
    one, and an item waiting on it can never start either."""
    from orchestrator.board.store import BoardItem
    from orchestrator.plan import Status
    from orchestrator.team.worker import never_ready

    items = [
        BoardItem("3", "after 2", Status.PENDING, blocked_by=("2",)),
        BoardItem("2", "after 9", Status.PENDING, blocked_by=("9",)),
        BoardItem("4", "after 5", Status.PENDING, blocked_by=("5",)),
        BoardItem("5", "held", Status.IN_PROGRESS, owner="you"),
        BoardItem("6", "done first", Status.PENDING, blocked_by=("7",)),
        BoardItem("7", "done", Status.COMPLETED),
    ]
    # Board order, whichever way round the chain was found; what may still start is not named.
    assert never_ready(items) == [
        "#3 waits on #2, which can never start",
        "#2 waits on #9, which is not on the board",
    ]
