"""``orchestrator doctor`` and ``orchestrator config`` diagnose a first run (issue 26, item 10).

Each test runs the real CLI in a second process. The model check asks the package's own
Messages-API test server, which answers ``GET /v1/models/{id}`` (404 for a name outside its
``known_models``); the silent endpoint is a loopback socket that takes connections and never
answers a byte. The sandbox lines are covered in tests/test_sandbox.py.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.config import SETTINGS
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer, ServerLimits

API_KEY = "sk-ant-api03-" + "Q" * 40 + "-tail9XYZ"
MODEL = "claude-test-model"


def _environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No setting from the test's own environment; config and state inside ``tmp_path``."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))
    }
    env.update(
        NO_COLOR="1",
        ORCHESTRATOR_CONFIG_DIR=str(tmp_path / "config"),
        ORCHESTRATOR_STATE_DIR=str(tmp_path / "state"),
        ORCHESTRATOR_MODEL=MODEL,
    )
    env.update(extra)
    return env


def _orchestrator(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # The bound is a safety net against a hang, not an assertion about how long doctor takes.
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


def _doctor(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    env = _environment(tmp_path, **extra)
    return _orchestrator("doctor", "--workdir", str(workdir), env=env, cwd=workdir)


def _line(output: str, prefix: str) -> str:
    (line,) = [line for line in output.splitlines() if line.startswith(prefix)]
    return line


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    script = parse_script({"name": "doctor", "turns": [{"text": "unused"}]}, source="test")
    limits = ServerLimits(max_input_tokens=123_456, known_models=frozenset({MODEL}))
    with MessagesServer(script, limits=limits) as running:
        yield running


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A loopback port whose backlog takes the connection; nothing ever reads or answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def test_doctor_with_a_known_model_passes_every_check_and_masks_the_key(
    tmp_path: Path, server: MessagesServer
) -> None:
    done = _doctor(tmp_path, ANTHROPIC_API_KEY=API_KEY, ANTHROPIC_BASE_URL=server.base_url)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "key: ANTHROPIC_API_KEY set (sk-ant…9XYZ)"
    assert lines[1] == f"base URL: {server.base_url} (ANTHROPIC_BASE_URL)"
    assert lines[2] == (
        f"model: {MODEL} (ORCHESTRATOR_MODEL) known to the endpoint "
        "(window 123,456 tokens, output up to 64,000)"
    )
    state = tmp_path / "state"
    assert lines[3] == (
        f"state directory: {state} (ORCHESTRATOR_STATE_DIR): writable, created on first run"
    )
    assert not state.exists()  # checked, not created
    assert _line(done.stdout, "in effect (sandbox = auto, default): ")  # the sandbox, as before
    assert server.model_lookups == [MODEL]
    assert API_KEY not in done.stdout + done.stderr
    assert API_KEY[13:-4] not in done.stdout + done.stderr


def test_doctor_says_when_the_endpoint_does_not_know_the_model(
    tmp_path: Path, server: MessagesServer
) -> None:
    done = _doctor(
        tmp_path,
        ANTHROPIC_AUTH_TOKEN=API_KEY,
        ANTHROPIC_BASE_URL=server.base_url,
        ORCHESTRATOR_MODEL="claude-nobody-serves",
    )
    assert done.returncode == 1
    assert _line(done.stdout, "key: ") == "key: ANTHROPIC_AUTH_TOKEN set (sk-ant…9XYZ)"
    model = _line(done.stdout, "model: ")
    assert model.startswith("model: the endpoint does not know 'claude-nobody-serves' (")
    assert "404" in model
    assert server.model_lookups == ["claude-nobody-serves"]
    assert "Traceback" not in done.stderr


def test_doctor_without_a_key_names_both_variables_and_asks_nothing(tmp_path: Path) -> None:
    # A base URL nobody listens on: were the model asked, the line would say it failed.
    done = _doctor(tmp_path, ANTHROPIC_BASE_URL="http://127.0.0.1:9")
    assert done.returncode == 1
    assert _line(done.stdout, "key: ") == (
        "key: missing: set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN"
    )
    assert _line(done.stdout, "base URL: ") == "base URL: http://127.0.0.1:9 (ANTHROPIC_BASE_URL)"
    assert (
        _line(done.stdout, "model: ") == f"model: {MODEL} (ORCHESTRATOR_MODEL) not checked: no key"
    )


def test_doctor_against_a_silent_endpoint_ends_and_says_it_did_not_answer(
    tmp_path: Path, silent_endpoint: str
) -> None:
    done = _doctor(tmp_path, ANTHROPIC_API_KEY=API_KEY, ANTHROPIC_BASE_URL=silent_endpoint)
    assert done.returncode == 1
    assert _line(done.stdout, "model: ") == (
        f"model: {MODEL} (ORCHESTRATOR_MODEL) not checked: the endpoint did not answer "
        "(timed out, 2 tries of 4.5 s)"
    )
    assert _line(done.stdout, "in effect (sandbox = ")  # the checks after it still ran


def test_doctor_names_why_an_endpoint_cannot_be_reached(tmp_path: Path) -> None:
    # A port just freed: connecting is refused at once.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = _doctor(
        tmp_path, ANTHROPIC_API_KEY=API_KEY, ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}"
    )
    assert done.returncode == 1
    model = _line(done.stdout, "model: ")
    assert model.startswith(f"model: {MODEL} (ORCHESTRATOR_MODEL) not checked: the endpoint cannot")
    assert "Connection refused" in model


def test_doctor_fails_a_state_directory_that_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    done = _doctor(tmp_path, ORCHESTRATOR_STATE_DIR=str(blocker / "state"))
    assert done.returncode == 1
    assert _line(done.stdout, "state directory: ") == (
        f"state directory: {blocker / 'state'} (ORCHESTRATOR_STATE_DIR): cannot be created: "
        f"{blocker} is not a directory"
    )


def test_doctor_shows_an_existing_state_directory_as_writable(tmp_path: Path) -> None:
    from orchestrator.sessions import workdir_folder

    workdir = tmp_path / "work"
    workdir.mkdir()
    folder = workdir_folder(workdir, {"ORCHESTRATOR_STATE_DIR": str(tmp_path / "state")})
    folder.mkdir(parents=True)
    done = _doctor(tmp_path)
    assert _line(done.stdout, "state directory: ") == (
        f"state directory: {tmp_path / 'state'} (ORCHESTRATOR_STATE_DIR): writable"
    )
    assert list(folder.iterdir()) == []  # the probe left nothing behind


def test_doctor_flags_a_bad_setting_on_its_check_and_shows_the_rest(tmp_path: Path) -> None:
    done = _doctor(
        tmp_path,
        ANTHROPIC_API_KEY=API_KEY,
        ANTHROPIC_BASE_URL="ftp://\x1b]52;c;evil\x07host",
        ORCHESTRATOR_MAX_ROUNDS="-5",
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert _line(done.stdout, "settings: invalid: ") == (
        "settings: invalid: ORCHESTRATOR_MAX_ROUNDS: max_rounds must be a whole number of at "
        "least 1, got '-5'"
    )
    url = _line(done.stdout, "base URL: invalid: ANTHROPIC_BASE_URL: base_url must be an http(s)")
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "'ftp://\\x1b]52;c;evil\\x07host'" in url  # shown as visible escapes
    assert _line(done.stdout, "model: ").endswith("not checked: the base URL is invalid")
    assert _line(done.stdout, "key: ") == "key: ANTHROPIC_API_KEY set (sk-ant…9XYZ)"


def test_doctor_never_sends_the_key_to_an_untrusted_project_files_base_url(
    tmp_path: Path, server: MessagesServer
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "orchestrator.toml").write_text(
        f'base_url = "{server.base_url}"\n', encoding="utf-8"
    )
    (workdir / ".mcp.json").write_text('{"mcpServers": {"notes": {"command": "/no/such"}}}')
    done = _doctor(tmp_path, ANTHROPIC_API_KEY=API_KEY)
    assert done.returncode == 1
    assert "base_url may only be set by a trusted folder's file" in done.stderr
    # doctor takes no --trust: it names the command that does, for the file and the servers.
    said = done.stdout + done.stderr
    assert "pass --trust" not in said and "with --trust" not in said
    assert said.count(f"`orchestrator trust --workdir {workdir}`") == 2
    assert _line(done.stdout, "base URL: ").endswith(
        ": the folder is not trusted, so a run refuses it"
    )
    assert _line(done.stdout, "model: ").endswith(
        "not checked: the base URL comes from an untrusted project file"
    )
    assert server.model_lookups == [] and server.request_headers == []


# --- config -------------------------------------------------------------------------------------


def test_config_with_a_bad_value_prints_the_whole_table_flags_the_row_and_exits_2(
    tmp_path: Path,
) -> None:
    env = _environment(tmp_path, ORCHESTRATOR_MAX_ROUNDS="-5", ANTHROPIC_API_KEY=API_KEY)
    done = _orchestrator("config", "--workdir", str(tmp_path), env=env, cwd=tmp_path)
    assert done.returncode == 2
    table = done.stdout.split("\n\n")[0].splitlines()
    assert [line.split()[0] for line in table] == [setting.name for setting in SETTINGS]
    rows = {line.split()[0]: line for line in table}
    assert rows["max_rounds"].split()[1] == "'-5'"
    assert rows["max_rounds"].endswith("  ← invalid: must be a whole number of at least 1")
    flagged = [name for name, row in rows.items() if "invalid" in row]
    assert flagged == ["max_rounds"]
    assert rows["model"].split()[1:3] == [MODEL, "(ORCHESTRATOR_MODEL)"]  # good rows unchanged
    assert rows["max_tokens"].split()[1:3] == ["8192", "(default)"]
    assert done.stderr.splitlines() == [
        "orchestrator: error: ORCHESTRATOR_MAX_ROUNDS: max_rounds must be a whole number of at "
        "least 1, got '-5'"
    ]
    assert API_KEY not in done.stdout + done.stderr


def test_config_flags_every_bad_row_and_names_the_first_on_stderr(tmp_path: Path) -> None:
    env = _environment(
        tmp_path, ORCHESTRATOR_MAX_ROUNDS="-5", ANTHROPIC_API_KEY=" ", ORCHESTRATOR_SANDBOX="jail"
    )
    done = _orchestrator("config", "--workdir", str(tmp_path), env=env, cwd=tmp_path)
    assert done.returncode == 2
    rows = {line.split()[0]: line for line in done.stdout.split("\n\n")[0].splitlines()}
    flagged = [name for name, row in rows.items() if "← invalid: " in row]
    assert flagged == ["max_rounds", "sandbox", "api_key"]
    assert "must be one of auto, bwrap, workdir, none" in rows["sandbox"]
    assert "sandbox in effect: not checked while a setting is invalid" in done.stdout
    (line,) = done.stderr.splitlines()
    assert line.startswith("orchestrator: error: ORCHESTRATOR_MAX_ROUNDS: ")
    assert line.endswith("(and 2 more, flagged above)")
