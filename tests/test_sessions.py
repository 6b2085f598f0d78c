"""Sessions you can find again: traces in the per-user state dir, ``sessions``, ``resume``.

The real CLI runs in this process (:func:`tests.in_process.run_cli`) against the loopback
Messages API, with its own state
directory (``ORCHESTRATOR_STATE_DIR``) so no test touches another's sessions or the real home.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from orchestrator.script import parse_script
from orchestrator.sessions import summarize, workdir_folder
from orchestrator.testing import MessagesServer, check_request
from tests.in_process import run_cli
from tests.test_cli import _environment

TIMEOUT = 60


def _cli(
    args: Sequence[str], env: Mapping[str, str], cwd: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env=env, cwd=cwd, input=stdin)


def _server(*turns: Mapping[str, Any]) -> MessagesServer:
    return MessagesServer(parse_script({"name": "sessions", "turns": list(turns)}, source="t"))


def _env(server: MessagesServer, state: Path, **extra: str) -> dict[str, str]:
    return _environment(
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL=server.base_url,
        ORCHESTRATOR_STATE_DIR=str(state),
        ORCHESTRATOR_MAX_RETRIES="0",
        **extra,
    )


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def test_a_run_keeps_its_trace_in_the_state_dir_and_resume_last_continues_it(
    tmp_path: Path, work: Path
) -> None:
    state = tmp_path / "state"
    with _server(
        {"text": "First answer.", "usage": {"input_tokens": 1000, "output_tokens": 100}},
        {"text": "Second answer."},
    ) as server:
        env = _env(server, state)
        first = _cli(["run", "Say something", "--workdir", str(work)], env, tmp_path)
        assert first.returncode == 0, first.stderr
        # The work directory stays clean; the trace is grouped under the work directory.
        assert list(work.iterdir()) == []
        (trace,) = workdir_folder(work, {"ORCHESTRATOR_STATE_DIR": str(state)}).glob("*.jsonl")
        # The closing lines name the trace and the exact resume command.
        assert f"trace: {trace}" in first.stdout
        assert f'resume {trace} "next instruction"' in first.stdout
        assert "done · 1 rounds · tokens 1,000 in · 100 out" in first.stdout

        listed = _cli(["sessions"], env, tmp_path)
        assert listed.returncode == 0, listed.stderr
        line = listed.stdout.splitlines()[0]
        assert "done" in line and "1 rounds" in line
        assert str(work) in line and "Say something" in line
        cost = summarize(trace).cost
        assert cost is not None and cost > 0.0045  # 1000 in, 100 out, cache writes: sonnet prices
        assert f"${cost:.4f}" in line
        assert listed.stdout.splitlines()[1].strip() == str(trace)

        # A finished session goes on with a next instruction, in the same trace.
        second = _cli(["resume", "--last", "Now say more"], env, work)
        assert second.returncode == 0, second.stderr
        assert "Second answer." in second.stdout
        requests = server.requests
    assert [check_request(body) for body in requests] == [[], []]
    messages = requests[1]["messages"]
    assert messages[0]["content"][0]["text"] == "Say something"
    assert messages[-1]["content"][-1]["text"] == "Now say more"
    events = _events(trace)
    assert [e["status"] for e in events if e["event"] == "run.finished"] == ["done", "done"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert summarize(trace).rounds == 2


def test_resume_needs_a_next_instruction_for_a_finished_run_and_last_needs_a_session(
    tmp_path: Path, work: Path
) -> None:
    state = tmp_path / "state"
    with _server({"text": "unused"}) as server:
        env = _env(server, state)
        none_yet = _cli(["resume", "--last"], env, work)
    assert none_yet.returncode == 2
    assert none_yet.stderr.startswith(f"orchestrator: error: no sessions for {work} yet")


def test_resume_keeps_the_runs_settings_and_a_flag_given_to_it_wins(
    tmp_path: Path, work: Path
) -> None:
    state = tmp_path / "state"
    with _server({"text": "First."}, {"text": "Second."}, {"text": "Third."}) as server:
        env = _env(server, state)
        flags = ["--model", "claude-haiku-4-5", "--max-tokens", "1000", "--reminder-threshold", "5"]
        first = _cli(["run", "Go", "--workdir", str(work), *flags], env, tmp_path)
        assert first.returncode == 0, first.stderr
        (trace,) = workdir_folder(work, {"ORCHESTRATOR_STATE_DIR": str(state)}).glob("*.jsonl")
        # "raise --max-tokens and resume" is the advice for an answer cut off at max_tokens.
        kept = _cli(["resume", str(trace), "Again"], env, tmp_path)
        raised = _cli(["resume", str(trace), "More", "--max-tokens", "4000"], env, tmp_path)
        assert kept.returncode == 0 and raised.returncode == 0, kept.stderr + raised.stderr
        requests = server.requests
    sent = [(body["model"], body["max_tokens"]) for body in requests]
    assert sent == [("claude-haiku-4-5", 1000)] * 2 + [("claude-haiku-4-5", 4000)]
    started = [e["settings"] for e in _events(trace) if e["event"] == "run.started"]
    assert [s["reminder_threshold"] for s in started] == [5, 5, 5]
    assert [s["max_tokens"] for s in started] == [1000, 1000, 4000]


def test_resume_after_a_chat_clear_asks_for_the_next_instruction(
    tmp_path: Path, work: Path
) -> None:
    state = tmp_path / "state"
    looping = {"tool_calls": [{"name": "bash", "input": {"command": "true"}}]}
    with _server(looping, looping) as server:
        env = _env(server, state)
        stopped = _cli(["run", "Work", "--workdir", str(work), "--max-rounds", "1"], env, tmp_path)
        assert stopped.returncode == 1, stopped.stderr
        (trace,) = workdir_folder(work, {"ORCHESTRATOR_STATE_DIR": str(state)}).glob("*.jsonl")
        last = _events(trace)[-1]
        assert last["event"] == "run.finished" and last["status"] == "failed"
        # What the chat's /clear writes between turns: the board and the conversation are gone.
        cleared = {**last, "event": "plan.updated", "seq": last["seq"] + 1, "revision": 2}
        cleared.update(items=[], changes=[], merge=False, reset=True)
        with trace.open("a", encoding="utf-8") as out:
            out.write(json.dumps(cleared) + "\n")
        again = _cli(["resume", str(trace)], env, tmp_path)
        assert len(server.requests) == 1
    assert again.returncode == 2
    assert again.stderr.count("\n") == 1
    assert "the session was cleared (/clear) after its last run" in again.stderr
    assert "give the next instruction" in again.stderr


def test_an_existing_trace_is_never_overwritten(tmp_path: Path, work: Path) -> None:
    trace = tmp_path / "earlier.jsonl"
    trace.write_text('{"event": "run.started"}\n', encoding="utf-8")
    with _server({"text": "unused"}) as server:
        done = _cli(
            ["run", "task", "--workdir", str(work), "--trace", str(trace)],
            _env(server, tmp_path / "state"),
            tmp_path,
        )
        assert server.requests == []
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "already exists; a run never overwrites another" in done.stderr
    assert trace.read_text(encoding="utf-8") == '{"event": "run.started"}\n'


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
def test_an_unwritable_trace_place_is_one_line_and_a_read_only_workdir_still_runs(
    tmp_path: Path, work: Path
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    work.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with _server({"text": "Read-only is fine."}) as server:
            env = _env(server, tmp_path / "state")
            refused = _cli(
                ["run", "task", "--workdir", str(work), "--trace", str(locked / "t.jsonl")],
                env,
                tmp_path,
            )
            ran = _cli(["run", "Explain the code", "--workdir", str(work)], env, tmp_path)
    finally:
        locked.chmod(stat.S_IRWXU)
        work.chmod(stat.S_IRWXU)
    assert refused.returncode == 2
    assert refused.stderr == (
        f"orchestrator: error: --trace {locked / 't.jsonl'}: cannot write into {locked} "
        "(permission denied)\n"
    )
    assert ran.returncode == 0, ran.stderr
    assert "Traceback" not in ran.stderr


@pytest.mark.parametrize("place", ["under a file", "in /proc"])
def test_a_trace_place_that_cannot_be_made_is_one_line(
    tmp_path: Path, work: Path, place: str
) -> None:
    # Both fail even for root: a folder cannot be made under a file, nor a file in /proc.
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    target = blocker / "sub" / "t.jsonl" if place == "under a file" else Path("/proc/self/t.jsonl")
    with _server({"text": "unused"}) as server:
        done = _cli(
            ["run", "task", "--workdir", str(work), "--trace", str(target)],
            _env(server, tmp_path / "state"),
            tmp_path,
        )
        assert server.requests == []
    assert done.returncode == 2
    assert done.stderr.startswith("orchestrator: error: "), done.stderr
    assert str(target) in done.stderr
    assert done.stderr.count("\n") == 1


def test_sessions_with_none_says_where_they_are_kept(tmp_path: Path) -> None:
    done = _cli(["sessions"], _environment(ORCHESTRATOR_STATE_DIR=str(tmp_path / "s")), tmp_path)
    assert done.returncode == 0
    assert done.stdout == f"no sessions yet (they are kept in {tmp_path / 's' / 'sessions'})\n"


def test_sessions_show_the_refusals_of_a_done_run(tmp_path: Path, work: Path) -> None:
    state = tmp_path / "state"
    with _server(
        {"tool_calls": [{"name": "bash", "input": {"command": "make"}}]}, {"text": "Done."}
    ) as server:
        env = _env(server, state)
        ran = _cli(["run", "Build it", "--workdir", str(work)], env, tmp_path)
        listed = _cli(["sessions", "--workdir", str(work)], env, tmp_path)
    assert ran.returncode == 3, ran.stderr
    assert "done, 1 refused" in listed.stdout.splitlines()[0]


def test_an_unusable_state_dir_says_how_to_pick_another(tmp_path: Path, work: Path) -> None:
    blocker = tmp_path / "state-file"
    blocker.write_text("", encoding="utf-8")
    with _server({"text": "unused"}) as server:
        done = _cli(["run", "task", "--workdir", str(work)], _env(server, blocker), tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.rstrip().endswith(
        "set ORCHESTRATOR_STATE_DIR to a writable folder, or pass --trace FILE"
    )
