"""Tests for the trace: the per-run structlog processor chain, crash safety and redaction."""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import types
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer
from orchestrator.trace import (
    REDACTED,
    EventTee,
    RedactSecrets,
    TraceRenderer,
    TraceStamps,
    default_trace_path,
    open_trace,
    secrets_from_environment,
)
from orchestrator.trace_file import TRACE_FORMAT, read_trace
from tests.budget import examples
from tests.in_process import run_cli

PLANTED_KEY = "sk-ant-planted-SECRET-123456"


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _call(processor: Any, event: Mapping[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = processor(None, "info", dict(event))
    return result


# --- the chain, through open_trace -------------------------------------------------------------


def test_every_line_carries_the_contract_fields(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    with open_trace(path, run_id="run-1") as trace:
        trace.log.info("run.started", task="t")
        trace.log.info("loop.transition", src="idle", dst="call_model", trigger="start")
        trace.log.info("tool.result", id="toolu_1", output="ünïcode ✓\nsecond line")
        trace.log.info("run.finished", status="done")
    raw = path.read_text(encoding="utf-8")
    assert raw.endswith("\n")
    events = _events(path)
    assert [e["event"] for e in events] == [
        "run.started",
        "loop.transition",
        "tool.result",
        "run.finished",
    ]
    assert [e["seq"] for e in events] == [1, 2, 3, 4]
    for event in events:
        assert event["run_id"] == "run-1"
        assert event["trace_format"] == TRACE_FORMAT
        stamp = dt.datetime.fromisoformat(event["ts"].replace("Z", "+00:00"))
        assert stamp.utcoffset() == dt.timedelta(0)
    assert events[1] | {"ts": None} == {
        "event": "loop.transition",
        "src": "idle",
        "dst": "call_model",
        "trigger": "start",
        "run_id": "run-1",
        "seq": 2,
        "ts": None,
        "trace_format": TRACE_FORMAT,
    }
    assert events[2]["output"] == "ünïcode ✓\nsecond line"


def test_a_lone_surrogate_is_written_as_its_json_escape_and_reads_back(tmp_path: Path) -> None:
    """Half a UTF-16 pair (``"\\udc80"`` in a response's JSON) cannot be UTF-8; it once ended
    the run with a traceback from the trace writer. Its JSON escape means the same string."""
    path = tmp_path / "trace.jsonl"
    text = "lone \ud800 and \udc80 halves, ünïcode ✓"
    with open_trace(path, run_id="run-1") as trace:
        trace.log.info("tool.result", id="toolu_1", output=text)
        trace.log.info("tool.result", id="toolu_2", output={3: text})  # the exact path
    raw = path.read_bytes().decode("utf-8")  # valid UTF-8 throughout
    assert "\\ud800" in raw and "ünïcode ✓" in raw
    events = _events(path)
    assert events[0]["output"] == text
    assert events[1]["output"] == {"3": text}


def test_a_model_that_sends_half_a_surrogate_pair_ends_its_run_and_the_run_shows(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    turns = [
        {
            "text": "Looking.",
            "tool_calls": [{"name": "bash", "input": {"command": "echo ok"}}],
        },
        {"text": "lone \ud800, end \udc80"},
    ]
    script = parse_script({"name": "surrogates", "turns": turns}, source="surrogates.json")
    trace_path = tmp_path / "trace.jsonl"
    with MessagesServer(script) as server:
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-x", "ANTHROPIC_BASE_URL": server.base_url}
        env["ORCHESTRATOR_STATE_DIR"] = str(tmp_path / "state")
        args: list[str | Path] = [
            "run",
            "Go",
            "--workdir",
            work,
            "--trace",
            trace_path,
            "--yes",
            "--max-retries",
            "0",
        ]
        done = run_cli(args, env=env)
    assert done.returncode == 0, done.stderr
    assert "end \\udc80" in done.stdout
    assert _events(trace_path)[-1]["event"] == "run.finished"
    shown = run_cli(["show", trace_path], env=env)
    assert shown.returncode == 0 and "lone \\ud800, end" in shown.stdout, shown.stderr
    page = run_cli(["show", trace_path, "--html", tmp_path / "page.html"], env=env)
    assert page.returncode == 0, page.stderr
    assert "udc80" in (tmp_path / "page.html").read_text(encoding="utf-8")


def test_a_run_id_is_made_up_when_none_is_given(tmp_path: Path) -> None:
    with open_trace(tmp_path / "a.jsonl") as first, open_trace(tmp_path / "b.jsonl") as second:
        first.log.info("run.started")
        second.log.info("run.started")
    assert first.run_id and second.run_id and first.run_id != second.run_id
    assert _events(first.path)[0]["run_id"] == first.run_id


def test_two_open_traces_number_their_events_independently(tmp_path: Path) -> None:
    with open_trace(tmp_path / "a.jsonl") as first, open_trace(tmp_path / "b.jsonl") as second:
        for _ in range(3):
            first.log.info("tool.call")
            second.log.info("tool.call")
            second.log.info("tool.result")
    assert [e["seq"] for e in _events(first.path)] == [1, 2, 3]
    assert [e["seq"] for e in _events(second.path)] == [1, 2, 3, 4, 5, 6]


def test_appending_goes_on_from_the_last_sequence_number(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    with open_trace(path, run_id="r") as trace:
        trace.log.info("run.started")
        trace.log.info("run.finished", status="failed")
    with open_trace(path, run_id="r", append=True, first_seq=2) as trace:
        trace.log.info("run.started")
        trace.log.info("run.finished", status="done")
    events = _events(path)
    assert [e["seq"] for e in events] == [1, 2, 3, 4]
    assert [e.get("status") for e in events] == [None, "failed", None, "done"]


def test_the_trace_directory_is_created(tmp_path: Path) -> None:
    path = default_trace_path(tmp_path, "abc123")
    assert path.parent == tmp_path / ".orchestrator" / "traces"
    assert path.name.endswith("-abc123.jsonl")
    with open_trace(path, run_id="abc123") as trace:
        trace.log.info("run.started")
    assert _events(path)[0]["run_id"] == "abc123"


def test_sinks_see_the_finished_event_after_redaction(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    with open_trace(
        tmp_path / "t.jsonl",
        run_id="r",
        secrets=["hunter2-very-secret"],
        sinks=[lambda event: seen.append(dict(event))],
    ) as trace:
        trace.log.info("tool.result", output="the password is hunter2-very-secret")
    (event,) = seen
    assert event["output"] == f"the password is {REDACTED}"
    assert event["seq"] == 1
    assert event["run_id"] == "r"
    assert event["trace_format"] == TRACE_FORMAT
    assert "ts" in event


# --- nothing global ----------------------------------------------------------------------------


def test_open_trace_configures_nothing_globally(tmp_path: Path) -> None:
    before = structlog.get_config()
    assert not structlog.is_configured()
    with open_trace(tmp_path / "t.jsonl") as trace:
        trace.log.info("run.started")
    assert not structlog.is_configured()
    assert structlog.get_config() == before


def test_a_global_structlog_configuration_does_not_reach_the_trace(tmp_path: Path) -> None:
    def stamp(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> Mapping[str, Any]:
        event["from_global_config"] = True
        return event

    structlog.configure(processors=[stamp, structlog.processors.KeyValueRenderer()])
    try:
        with open_trace(tmp_path / "t.jsonl", run_id="r") as trace:
            trace.log.info("run.started")
    finally:
        structlog.reset_defaults()
    (event,) = _events(tmp_path / "t.jsonl")
    assert "from_global_config" not in event
    assert event["seq"] == 1


def test_importing_the_modules_configures_nothing() -> None:
    code = (
        "import structlog, orchestrator.trace, orchestrator.replay, orchestrator.cli\n"
        "print(structlog.is_configured())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False"


# --- the processors one by one -----------------------------------------------------------------


def test_sequence_number_counts_on_from_its_start() -> None:
    fresh, resumed = TraceStamps(), TraceStamps(start=41)
    assert [_call(fresh, {"event": "e"})["seq"] for _ in range(3)] == [1, 2, 3]
    assert [_call(resumed, {"event": "e"})["seq"] for _ in range(2)] == [42, 43]


def test_the_stamps_come_after_the_fields_in_order() -> None:
    stamped = _call(TraceStamps(), {"event": "e"})
    assert list(stamped) == ["event", "seq", "ts", "trace_format"]
    assert stamped["trace_format"] == TRACE_FORMAT


@pytest.mark.parametrize(
    "key", ["x-api-key", "X-Api-Key", "authorization", "Authorization", "api_key", "API-KEY"]
)
def test_redaction_by_key_name(key: str) -> None:
    event = _call(
        RedactSecrets(),
        {
            "event": "model.request",
            key: "opaque-credential",
            "body": {"headers": {key: "Bearer opaque-credential"}},
            "attempts": [{key: "opaque-credential", "status": 401}],
        },
    )
    assert event[key] == REDACTED
    assert event["body"] == {"headers": {key: REDACTED}}
    assert event["attempts"] == [{key: REDACTED, "status": 401}]
    assert "opaque-credential" not in json.dumps(event)


def test_redaction_of_a_known_value_anywhere() -> None:
    secret = "correct-horse-battery-staple"
    event = _call(
        RedactSecrets([secret, "short"]),
        {
            "event": "tool.result",
            "output": f"HOME=/root\nSOMETHING={secret}\n",
            "content": [
                {"type": "text", "text": f"found {secret} twice: {secret}"},
                {"type": "tool_use", "input": {"command": f"echo {secret}", "args": [secret]}},
            ],
            "note": "short words stay",
        },
    )
    assert secret not in json.dumps(event)
    assert event["output"] == f"HOME=/root\nSOMETHING={REDACTED}\n"
    assert event["content"][0]["text"] == f"found {REDACTED} twice: {REDACTED}"
    assert event["content"][1]["input"] == {"command": f"echo {REDACTED}", "args": [REDACTED]}
    assert event["note"] == "short words stay"  # values under 8 characters are not secrets


def test_redaction_by_the_shape_of_an_anthropic_key() -> None:
    event = _call(
        RedactSecrets(),
        {"event": "tool.result", "output": "key=sk-ant-api03-AbC_dEf-123456789 done", "n": 3},
    )
    assert event == {"event": "tool.result", "output": f"key={REDACTED} done", "n": 3}


def test_usage_and_ordinary_fields_are_not_redacted() -> None:
    usage = {
        "input_tokens": 120,
        "output_tokens": 30,
        "cache_read_input_tokens": 7,
        "cache_creation_input_tokens": 50,
    }
    event = {
        "event": "model.response",
        "usage": usage,
        "stop_reason": "max_tokens",
        "settings": {"max_tokens": 8192, "model": "claude-test"},
        "content": [{"type": "text", "text": "the tokenizer and the keyboard"}],
    }
    assert _call(RedactSecrets(["not-in-this-event"]), event) == event


# --- the fast path writes what the walk would have -----------------------------------------------

_SECRET = "correct-horse-battery-staple"
_KEYS = st.sampled_from(
    [
        "text",
        "input",
        "items",
        "id",
        "api_key",
        "X-Api-Key",
        "token",
        "max_tokens",
        "input_tokens",
        "session_secret_id",
        "cookie",
        "token\n",
        "\u017fecret",
        "\u212aooky",
        "\u0131d",
        1,
        None,
    ]
)
_TEXT = st.text(max_size=12) | st.sampled_from(
    [
        _SECRET,
        f"a {_SECRET} b",
        "sk-ant-api03-AbCdEf12345678",
        "secret",
        "password: x",
        "é✓😀",
        '"quoted" \\ back',
        "line\nbreak",
    ]
)
_SCALARS = (
    _TEXT
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x == 0 or abs(x) >= 1e-4)
    | st.booleans()
    | st.none()
)
_Pair = collections.namedtuple("_Pair", "first second")
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(_KEYS, inner, max_size=3)
        # What orjson hands to its default: json.dumps writes a namedtuple as a list.
        | st.builds(_Pair, inner, inner)
        | st.dictionaries(_KEYS, inner, max_size=3).map(types.MappingProxyType)
    ),
    max_leaves=12,
)


def _exact_line(event: dict[str, Any]) -> bytes:
    """What the chain wrote before the fast path: the walk, then json.dumps."""
    walked = _call(RedactSecrets([_SECRET]), event)
    return json.dumps(walked, ensure_ascii=False, default=str, separators=(",", ":")).encode()


@settings(max_examples=examples(300), deadline=None)
@given(
    fields=st.dictionaries(
        st.sampled_from(["output", "input", "api_key", "usage", "body"]), _VALUES
    )
)
def test_the_rendered_line_is_the_walk_and_json_dumps_byte_for_byte(fields: dict[str, Any]) -> None:
    seen: list[Mapping[str, Any]] = []
    renderer = TraceRenderer(RedactSecrets([_SECRET]), EventTee([seen.append]))
    event = {"run_id": "r", **fields, "event": "tool.result", "seq": 1}
    expected = _exact_line(dict(event)) + b"\n"
    assert renderer(None, "info", dict(event)) == expected
    assert _exact_line(dict(seen[0])) + b"\n" == expected  # the sinks saw the redacted event


@pytest.mark.parametrize("secret", ["sk-ant-x1", "sk-ant-api03-AbCdEf12345678", "my-sk-ant-key"])
def test_a_known_secret_shaped_like_a_key_is_redacted_where_its_shape_is_not(secret: str) -> None:
    # Such a secret is looked for through the key shape's search alone; one too short for the
    # shape's pattern ("sk-ant-x1") must still go, as the walk would have it.
    renderer = TraceRenderer(RedactSecrets([secret]), None)
    line = renderer(None, "info", {"event": "tool.result", "output": f"got {secret}."})
    assert secret.encode() not in line
    assert json.loads(line)["output"] == f"got {REDACTED}."


def test_a_float_below_one_ten_thousandth_keeps_its_value_not_its_spelling() -> None:
    """The one known difference from json.dumps: orjson writes 0.00001 where it wrote 1e-05."""
    renderer = TraceRenderer(RedactSecrets(), None)
    line = renderer(None, "info", {"event": "tool.call", "input": {"timeout": 1e-05}})
    assert line == b'{"event":"tool.call","input":{"timeout":0.00001}}\n'
    assert json.loads(line)["input"]["timeout"] == 1e-05


def test_the_timestamp_is_iso_utc_with_microseconds() -> None:
    before = dt.datetime.now(dt.UTC)
    stamps = [_call(TraceStamps(), {"event": "e"})["ts"] for _ in range(3)]
    after = dt.datetime.now(dt.UTC)
    for stamp in stamps:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", stamp), stamp
        parsed = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        assert before - dt.timedelta(milliseconds=1) <= parsed <= after


def test_secrets_from_the_environment() -> None:
    env = {
        "ANTHROPIC_API_KEY": PLANTED_KEY,
        "GITHUB_TOKEN": "ghp_abcdefgh",
        "DB_PASSWORD": "pw-123456789",
        "EMPTY_SECRET": "",
        "PATH": "/usr/bin",
        "HOME": "/root",
    }
    assert sorted(secrets_from_environment(env)) == sorted(
        [PLANTED_KEY, "ghp_abcdefgh", "pw-123456789"]
    )


def test_event_tee_hands_each_event_to_every_sink() -> None:
    first: list[Mapping[str, Any]] = []
    second: list[Mapping[str, Any]] = []
    tee = EventTee([first.append, second.append])
    event = _call(tee, {"event": "tool.call", "seq": 1})
    assert event == {"event": "tool.call", "seq": 1}
    assert first == second == [event]


# --- crash safety ------------------------------------------------------------------------------

_CHILD = """
import sys, time
from pathlib import Path
from orchestrator.trace import open_trace

trace = open_trace(Path(sys.argv[1]), run_id="killed")
for number in range(int(sys.argv[2])):
    trace.log.info("tool.result", number=number, output="ünïcode ✓ " + "x" * 300)
print("ready", flush=True)
if sys.argv[3] == "busy":
    number = 0
    while True:
        number += 1
        trace.log.info("tool.result", number=number, output="y" * 20000)
time.sleep(60)
"""


def _kill_child_after_ready(path: Path, count: int, mode: str) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path), str(count), mode],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        assert child.stdout is not None
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL


def test_a_killed_run_leaves_every_logged_event_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    _kill_child_after_ready(path, 50, "sleep")
    raw = path.read_text(encoding="utf-8")
    assert raw.endswith("\n")
    events = _events(path)
    assert [e["seq"] for e in events] == list(range(1, 51))
    assert all(e["output"].startswith("ünïcode ✓ ") for e in events)


def test_a_run_killed_while_writing_leaves_only_whole_lines_that_parse(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    _kill_child_after_ready(path, 20, "busy")
    raw = path.read_bytes()
    complete = raw.split(b"\n")[:-1]  # what follows the last newline may be cut off
    events = [json.loads(line) for line in complete]
    assert len(events) >= 20
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    parsed = read_trace(path)
    assert len(parsed.lines) == len(events)
    assert parsed.truncated_tail == (not raw.endswith(b"\n"))


# --- a planted key never reaches the trace -----------------------------------------------------


def test_a_planted_api_key_never_reaches_the_trace(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "config.txt").write_text(f"api_key = {PLANTED_KEY}\n", encoding="utf-8")
    script = parse_script(
        {
            "name": "planted-key",
            "turns": [
                {
                    "text": "Let me look at the environment.",
                    "tool_calls": [
                        {"name": "bash", "input": {"command": "echo $ANTHROPIC_API_KEY; env"}},
                        {"name": "read_file", "input": {"path": "config.txt"}},
                    ],
                },
                {"text": f"I found the key {PLANTED_KEY} in config.txt."},
            ],
        },
        source="planted-key.json",
    )
    trace_path = tmp_path / "trace.jsonl"
    with MessagesServer(script) as server:
        env = dict(os.environ)
        env |= {
            "ANTHROPIC_API_KEY": PLANTED_KEY,
            "ANTHROPIC_BASE_URL": server.base_url,
            # A variable passed into bash with --env, so the key does come back in its output.
            "LEAKED_VIA_ENV": PLANTED_KEY,
        }
        done = run_cli(
            [
                "run",
                "Show me the configuration",
                "--workdir",
                str(work),
                "--trace",
                str(trace_path),
                "--trace-requests",
                "--env",
                "LEAKED_VIA_ENV",
                "--yes",
                "--max-retries",
                "0",
            ],
            env=env,
        )
        assert done.returncode == 0, done.stderr
        assert server.violations == []
        # The SDK did send the key (as a header), so the trace had a chance to record it.
        headers = server.request_headers[0]
        assert PLANTED_KEY in headers.get("x-api-key", "") + headers.get("authorization", "")
    lines = trace_path.read_text(encoding="utf-8").splitlines()
    assert len(lines) > 10
    for number, line in enumerate(lines, start=1):
        assert "planted-SECRET" not in line, f"line {number} leaks the key: {line[:200]}"
        assert "sk-ant-" not in line, f"line {number} leaks a key prefix: {line[:200]}"
    events = [json.loads(line) for line in lines]
    names = [e["event"] for e in events]
    assert names.count("model.request") == 2
    assert all("body" in e for e in events if e["event"] == "model.request")
    results = [e["output"] for e in events if e["event"] == "tool.result"]
    assert f"LEAKED_VIA_ENV={REDACTED}" in results[0]
    assert REDACTED in results[1]
    assert events[-1]["event"] == "run.finished"
    assert events[-1]["status"] == "done"


# --- the bytes on disk stay the same -------------------------------------------------------------

GOLDEN = Path(__file__).resolve().parent / "data" / "demo_trace_golden.jsonl"


def _normalised(raw: bytes, workdir: Path) -> bytes:
    """A trace with its times, run id and work directory replaced by placeholders."""
    raw = raw.replace(str(workdir).encode(), b"{WORKDIR}")
    raw = re.sub(rb'"ts":"[^"]*"', b'"ts":"{TS}"', raw)
    raw = re.sub(rb'"run_id":"[0-9a-f]+"', b'"run_id":"{RUN_ID}"', raw)
    # The sandbox ``auto`` chose depends on the machine (bwrap where it can run).
    raw = re.sub(rb'"sandbox":"(bwrap|workdir|none)"', b'"sandbox":"{SANDBOX}"', raw)
    return re.sub(rb'"duration_ms":[0-9.eE+-]+', b'"duration_ms":0', raw)


def demo_trace(scratch: Path) -> tuple[bytes, Path]:
    """The demo's trace, run in a work directory whose path is as long as the golden one's.

    The request sizes and the usage the scripted model estimates count the path's length.
    """
    workdir = Path(tempfile.mkdtemp(dir="/tmp", prefix="g")) / "w"  # 16 characters
    try:
        trace = scratch / "demo.jsonl"
        command = ["demo", "--quiet", "--workdir", str(workdir), "--trace", str(trace)]
        done = run_cli(command)
        assert done.returncode == 0, done.stderr
        return trace.read_bytes(), workdir
    finally:
        shutil.rmtree(workdir.parent)


def test_the_demo_trace_is_byte_identical_to_the_golden_one_but_for_times_and_ids(
    tmp_path: Path,
) -> None:
    """The golden trace was written before the fast path (orjson, prebuilt redaction).

    Changes to what is recorded are edited into it by hand, as small as they are: since then,
    ``"reminders":true`` in the settings (the eval's no-board arm); the request sizes and the
    scripted usage after the bash tool's description said background processes end with their
    command (issue 14); the todo schema's dependencies, priority and explanation (issue 17);
    the context settings (``context_window``, ``compaction``, ``thinking``, ``effort``), the
    ``context.window`` event after ``run.started``, ``fixed_tokens`` in ``model.request`` and
    ``context_tokens`` and ``context_window`` in ``model.response`` (issue 13; checked to be
    the only changes); ``settle_plan``, ``done_check`` and ``done_check_retries`` in the
    settings, and the request sizes after the todo schema gained ``check`` (issue 24; checked
    to be the only changes); ``sandbox`` and ``approval`` in ``run.started`` (issue 34, for
    the page's header).
    """
    raw, workdir = demo_trace(tmp_path)
    ours = _normalised(raw, workdir).splitlines()
    golden = GOLDEN.read_bytes().splitlines()
    assert len(ours) == len(golden)
    for number, (line, expected) in enumerate(zip(ours, golden, strict=True), start=1):
        assert line == expected, f"line {number} differs"
