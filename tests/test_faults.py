"""Faults from the API, end to end: every kind the loopback server can inject, transient and
persistent, through the real CLI and the real anthropic SDK; then ``resume`` on the failed run.

No tool result may be lost or run twice: the scripted bash call appends a line to a counter
file, which must hold exactly one line however often requests were retried or resumed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.cli import main
from orchestrator.replay import Replay
from orchestrator.script import Script, parse_script
from orchestrator.testing import MessagesServer, check_request
from orchestrator.trace_file import read_trace
from tests.conftest import HardeningRecorder

FAULTS: dict[str, dict[str, Any]] = {
    "429-retry-after": {"fault": "status", "status": 429, "retry_after": 0.01},
    "529-overloaded": {"fault": "status", "status": 529, "retry_after": 0.01},
    "500-api-error": {"fault": "status", "status": 500, "retry_after": 0.01},
    "dropped-connection": {"fault": "disconnect"},
    "stream-cut": {"fault": "cut_stream"},
    "body-not-json": {"fault": "bad_json"},
    "slower-than-timeout": {"fault": "slow", "seconds": 3},
}
RETRIES = 2
COUNTER = "counter.txt"
BASH_TURN = {
    "text": "Recording that I ran.",
    "tool_calls": [{"name": "bash", "input": {"command": f"echo ran >> {COUNTER}"}}],
}


def _final(text: str) -> dict[str, Any]:
    # Whatever happened on the wire, the request answered here must carry the bash result.
    return {"text": text, "expect": [{"is_error": False, "contains": "(no output)"}]}


def _run_cli(args: list[str], server: MessagesServer, monkeypatch: pytest.MonkeyPatch) -> int:
    """Run the real CLI in-process against ``server``; every request must keep the API rules."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    monkeypatch.setenv("ORCHESTRATOR_TIMEOUT", "1")
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert server.violations == []
    for body in server.requests:
        assert check_request(body) == []
    code = exited.value.code
    return code if isinstance(code, int) else 1


def _run_task(workdir: Path, trace: Path, script: Script, monkeypatch: pytest.MonkeyPatch) -> int:
    with MessagesServer(script) as server:
        return _run_cli(
            [
                "run",
                "count once",
                "--yes",
                "--workdir",
                str(workdir),
                "--trace",
                str(trace),
                "--max-retries",
                str(RETRIES),
            ],
            server,
            monkeypatch,
        )


def _trace_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("fault", list(FAULTS), ids=list(FAULTS))
def test_a_transient_fault_is_retried_and_the_run_completes(
    fault: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    hardening: HardeningRecorder,
) -> None:
    script = parse_script(
        {"name": fault, "turns": [BASH_TURN, FAULTS[fault], _final("Done.")]}, source=fault
    )
    trace = tmp_path / "trace.jsonl"
    code = _run_task(tmp_path, trace, script, monkeypatch)
    ran = (tmp_path / COUNTER).read_text().splitlines()
    hardening.record("fault", ok=code == 0, what=f"transient {fault}")
    hardening.record("lost", ok=ran == ["ran"], what=f"transient {fault}")
    assert code == 0, capsys.readouterr().err
    assert ran == ["ran"]
    assert Replay(read_trace(trace)).check() is None


@pytest.mark.parametrize("fault", list(FAULTS), ids=list(FAULTS))
def test_a_persistent_fault_fails_cleanly_and_resume_goes_on(
    fault: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    hardening: HardeningRecorder,
) -> None:
    trace = tmp_path / "trace.jsonl"
    failing = parse_script(
        {"name": fault, "turns": [BASH_TURN, *[FAULTS[fault]] * (RETRIES + 1)]}, source=fault
    )
    code = _run_task(tmp_path, trace, failing, monkeypatch)
    err = capsys.readouterr().err
    failed_cleanly = code == 1 and "Traceback" not in err
    assert code == 1
    # Besides the start's two lines (checking model…, the header), one line: the failure.
    start = ("orchestrator: checking model ", "orchestrator: model ")
    failure_lines = [
        line
        for line in err.splitlines()
        if line.startswith("orchestrator:") and not line.startswith(start)
    ]
    assert len(failure_lines) == 1 and "run failed" in failure_lines[0]
    last = _trace_events(trace)[-1]
    assert last["event"] == "run.finished" and last["status"] == "failed"
    assert last["reason"], "the trace's last event must say why the run failed"

    resumed = parse_script(
        {"name": f"{fault}-resumed", "turns": [_final("Done after resuming.")]}, source=fault
    )
    with MessagesServer(resumed) as server:
        code = _run_cli(["resume", str(trace), "--yes"], server, monkeypatch)
        assert server.served == 1
    ran = (tmp_path / COUNTER).read_text().splitlines()
    events = _trace_events(trace)
    hardening.record("fault", ok=failed_cleanly and code == 0, what=f"persistent {fault}")
    hardening.record("lost", ok=ran == ["ran"], what=f"persistent {fault}")
    assert code == 0, capsys.readouterr().err
    assert ran == ["ran"], "a tool call of the first part ran again"
    assert {e["run_id"] for e in events} == {events[0]["run_id"]}
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["event"] == "run.finished" and events[-1]["status"] == "done"
    assert Replay(read_trace(trace)).check() is None
