"""Tests for settings: flag > environment > orchestrator.toml > default, and one-line refusals."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from orchestrator.config import (
    CONFIG_FILE,
    DEFAULT_MODEL,
    SETTINGS,
    ConfigError,
    UntrustedConfig,
    inspect_config,
    load_config,
)
from tests.in_process import run_cli

API_KEY = "sk-ant-api03-" + "Q" * 40 + "-tail9XYZ"
SETTINGS_BY_NAME = {setting.name: setting for setting in SETTINGS}


def _toml(workdir: Path, text: str) -> Path:
    path = workdir / CONFIG_FILE
    path.write_text(text, encoding="utf-8")
    return path


def _clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without any setting, plus ``extra``."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))
    }
    return {**env, **extra}


def _orchestrator(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env=env, cwd=cwd)


# --- precedence ----------------------------------------------------------------------------


def test_flag_beats_environment_beats_file_beats_default(tmp_path: Path) -> None:
    file = _toml(tmp_path, 'model = "file-model"\nmax_rounds = 5\nmax_tokens = 1000\n')
    env = {"ORCHESTRATOR_MODEL": "env-model", "ORCHESTRATOR_MAX_ROUNDS": "7"}
    config = load_config(tmp_path, {"model": "flag-model", "max_rounds": None}, env=env)

    assert (config.model, config.sources["model"]) == ("flag-model", "--model")
    assert (config.max_rounds, config.sources["max_rounds"]) == (7, "ORCHESTRATOR_MAX_ROUNDS")
    assert config.max_tokens == 1000
    assert config.sources["max_tokens"] == f"{file} [max_tokens]"
    assert (config.max_retries, config.sources["max_retries"]) == (2, "default")
    assert config.api_key is None

    without_flag = load_config(tmp_path, {"model": None}, env=env)
    assert (without_flag.model, without_flag.sources["model"]) == (
        "env-model",
        "ORCHESTRATOR_MODEL",
    )
    file_only = load_config(tmp_path, env={})
    assert (file_only.model, file_only.max_rounds) == ("file-model", 5)
    assert load_config(tmp_path / "nowhere", env={}).model == DEFAULT_MODEL


def test_orchestrator_variable_beats_anthropic_model(tmp_path: Path) -> None:
    both = {"ORCHESTRATOR_MODEL": "ours", "ANTHROPIC_MODEL": "sdk-wide"}
    assert load_config(tmp_path, env=both).model == "ours"
    config = load_config(tmp_path, env={"ANTHROPIC_MODEL": "sdk-wide"})
    assert (config.model, config.sources["model"]) == ("sdk-wide", "ANTHROPIC_MODEL")


def test_an_empty_variable_counts_as_unset(tmp_path: Path) -> None:
    _toml(tmp_path, "max_rounds = 5\n")
    config = load_config(tmp_path, env={"ORCHESTRATOR_MAX_ROUNDS": "", "ANTHROPIC_API_KEY": ""})
    assert config.max_rounds == 5
    assert config.api_key is None
    assert config.sources["api_key"] == "default"


def test_values_are_parsed_to_their_types(tmp_path: Path) -> None:
    _toml(tmp_path, 'deny_bash = true\ntimeout = 30\nplan_policy = "LENIENT"\n')
    config = load_config(tmp_path, env={"ORCHESTRATOR_MAX_RETRIES": " 0 "})
    assert config.deny_bash is True
    assert config.timeout == 30.0
    assert isinstance(config.timeout, float)
    assert config.plan_policy == "lenient"
    assert config.max_retries == 0
    for text, expected in (("yes", True), ("1", True), ("off", False), ("False", False)):
        assert load_config(tmp_path, env={"ORCHESTRATOR_DENY_BASH": text}).deny_bash is expected
    assert load_config(tmp_path, env={"ORCHESTRATOR_TIMEOUT": "2.5"}).timeout == 2.5


@pytest.mark.parametrize(
    ("env", "named", "expected"),
    [
        ({"ORCHESTRATOR_MAX_ROUNDS": "zero"}, "max_rounds", "a whole number"),
        ({"ORCHESTRATOR_MAX_ROUNDS": "0"}, "max_rounds", "at least 1"),
        ({"ORCHESTRATOR_MAX_ROUNDS": "--5"}, "max_rounds", "a whole number"),
        ({"ORCHESTRATOR_MAX_ROUNDS": "²"}, "max_rounds", "a whole number"),
        ({"ORCHESTRATOR_MAX_RETRIES": "-1"}, "max_retries", "at least 0"),
        ({"ORCHESTRATOR_TIMEOUT": "soon"}, "timeout", "a number of seconds"),
        ({"ORCHESTRATOR_TIMEOUT": "nan"}, "timeout", "above 0"),
        ({"ORCHESTRATOR_TIMEOUT": "inf"}, "timeout", "above 0"),
        ({"ORCHESTRATOR_DENY_BASH": "maybe"}, "deny_bash", "true or false"),
        ({"ORCHESTRATOR_SANDBOX": "docker"}, "sandbox", "one of auto, bwrap, workdir, none"),
        ({"ORCHESTRATOR_PLAN_POLICY": "loose"}, "plan_policy", "one of strict, lenient"),
        ({"ANTHROPIC_MODEL": "   "}, "model", "a non-empty string"),
        ({"ORCHESTRATOR_MAX_PROCESSES": "3"}, "max_processes", "of processes, at least 8"),
        ({"ORCHESTRATOR_MAX_MEMORY": "16"}, "max_memory", "of MiB, at least 64"),
    ],
)
def test_a_wrong_value_is_one_line_naming_source_and_setting(
    tmp_path: Path, env: dict[str, str], named: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path, env=env)
    message = str(raised.value)
    (variable,) = env
    assert message.startswith(f"{variable}: {named} must be ")
    assert expected in message
    assert "\n" not in message


def test_wrong_values_in_the_file_name_the_file_and_key(tmp_path: Path) -> None:
    file = _toml(tmp_path, 'max_rounds = "many"\n')
    with pytest.raises(ConfigError, match=re.escape(f"{file} [max_rounds]: max_rounds must be")):
        load_config(tmp_path, env={})
    _toml(tmp_path, "deny_bash = 1.5\n")
    with pytest.raises(ConfigError, match=r"\[deny_bash\]: deny_bash must be true or false"):
        load_config(tmp_path, env={})
    _toml(tmp_path, "timeout = true\n")
    with pytest.raises(ConfigError, match=r"\[timeout\]: timeout must be a number of seconds"):
        load_config(tmp_path, env={})


def test_a_flag_value_is_checked_too(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--model: model must be a non-empty string"):
        load_config(tmp_path, {"model": ""}, env={"ANTHROPIC_MODEL": "fine"})


def test_the_file_refuses_unknown_keys_api_keys_and_bad_toml(tmp_path: Path) -> None:
    file = _toml(tmp_path, "max_round = 3\n")
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path, env={})
    assert str(raised.value).startswith(f"{file}: unknown setting 'max_round'; known settings: ")
    assert "max_rounds" in str(raised.value)
    assert "api_key" not in str(raised.value)

    _toml(tmp_path, f'api_key = "{API_KEY}"\n')
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path, env={})
    assert "api_key does not belong in a file; use ANTHROPIC_API_KEY" in str(raised.value)
    assert API_KEY not in str(raised.value)

    _toml(tmp_path, "max_rounds = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path, env={})


def test_a_bad_api_key_value_is_not_echoed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path, env={"ANTHROPIC_API_KEY": " \t "})
    assert str(raised.value) == "ANTHROPIC_API_KEY: api_key must be a non-empty string"


def test_inspect_collects_every_bad_value_where_load_refuses_the_first(tmp_path: Path) -> None:
    _toml(tmp_path, 'sandbox = "jail"\nplan_limit = 4\n')
    env = {"ORCHESTRATOR_MAX_ROUNDS": "-5", "ANTHROPIC_API_KEY": " \t "}
    config, invalid = inspect_config(tmp_path, env=env, user_file=False)
    assert [bad.name for bad in invalid] == ["max_rounds", "sandbox", "api_key"]
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path, env=env, user_file=False)
    assert str(raised.value) == str(invalid[0])
    assert str(invalid[0]) == (
        "ORCHESTRATOR_MAX_ROUNDS: max_rounds must be a whole number of at least 1, got '-5'"
    )
    # A bad value's default stands in; where the bad value came from is kept.
    assert (config.max_rounds, config.sources["max_rounds"]) == (50, "ORCHESTRATOR_MAX_ROUNDS")
    assert (config.plan_limit, config.sandbox) == (4, "auto")
    assert str(invalid[2]) == "ANTHROPIC_API_KEY: api_key must be a non-empty string"
    rows = {name: (value, source) for name, value, source in config.shown(invalid)}
    assert rows["max_rounds"] == ("'-5'", "ORCHESTRATOR_MAX_ROUNDS")
    assert rows["sandbox"] == ("'jail'", f"{tmp_path / CONFIG_FILE} [sandbox]")
    assert rows["plan_limit"][0] == "4"
    assert rows["api_key"][0] == "…" * 3  # masked even when it is only blanks


def test_inspect_still_refuses_an_untrusted_widening(tmp_path: Path) -> None:
    _toml(tmp_path, 'sandbox = "none"\nmax_rounds = 0\n')
    with pytest.raises(UntrustedConfig):
        inspect_config(tmp_path, env={}, user_file=False, trusted=False)
    # load_config names the bad value first, as it always did.
    with pytest.raises(ConfigError, match="max_rounds must be"):
        load_config(tmp_path, env={}, user_file=False, trusted=False)


def test_shown_masks_the_key_and_lists_every_setting(tmp_path: Path) -> None:
    rows = load_config(tmp_path, env={"ANTHROPIC_API_KEY": API_KEY}).shown()
    assert [name for name, _, _ in rows] == [setting.name for setting in SETTINGS]
    shown = dict((name, value) for name, value, _ in rows)
    assert API_KEY not in repr(rows)
    assert shown["api_key"].startswith("sk-ant")
    assert shown["api_key"].endswith("XYZ")
    assert shown["base_url"] == "(not set)"
    short = load_config(tmp_path, env={"ANTHROPIC_API_KEY": "test-key"}).shown()
    assert "test-key" not in repr(short)


# --- through the command line --------------------------------------------------------------


def test_config_command_shows_values_and_sources_with_the_key_masked(tmp_path: Path) -> None:
    _toml(tmp_path, 'model = "file-model"\nmax_rounds = 5\nmax_tokens = 1000\n')
    env = _clean_env(
        ANTHROPIC_API_KEY=API_KEY, ORCHESTRATOR_MAX_ROUNDS="7", ANTHROPIC_BASE_URL="http://x:1"
    )
    done = _orchestrator("config", "--workdir", str(tmp_path), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = {}
    settings_part, files_part = done.stdout.split("\n\n")
    for line in settings_part.splitlines():
        match = re.fullmatch(r"(\w+) +(.+?)  \((.+)\)  \[env: (.+)\]", line)
        assert match, line
        rows[match[1]] = (match[2], match[3])
        assert match[4] == ", ".join(SETTINGS_BY_NAME[match[1]].env)
    assert f"project file: {tmp_path / CONFIG_FILE}" in files_part
    assert "user file:" in files_part
    assert list(rows) == [setting.name for setting in SETTINGS]
    assert "sandbox in effect: " in files_part
    assert rows["model"] == ("file-model", f"{tmp_path / CONFIG_FILE} [model]")
    assert rows["max_rounds"] == ("7", "ORCHESTRATOR_MAX_ROUNDS")
    assert rows["max_tokens"] == ("1000", f"{tmp_path / CONFIG_FILE} [max_tokens]")
    assert rows["max_retries"] == ("2", "default")
    assert rows["base_url"] == ("http://x:1", "ANTHROPIC_BASE_URL")
    assert rows["api_key"][1] == "ANTHROPIC_API_KEY"
    assert API_KEY not in done.stdout + done.stderr
    assert API_KEY[-20:] not in done.stdout


@pytest.mark.parametrize(
    ("args", "toml", "env", "named"),
    [
        (["run", "task", "--model", ""], None, {}, "--model: model must be a non-empty string"),
        (
            # ``config`` shows the table as well (tests/test_doctor.py); a run says one line.
            ["run", "task"],
            None,
            {"ORCHESTRATOR_MAX_TOKENS": "lots"},
            "ORCHESTRATOR_MAX_TOKENS: max_tokens must be a whole number, got 'lots'",
        ),
        (["run", "task"], 'sandbox = "jail"\n', {}, "[sandbox]: sandbox must be one of"),
        (["config"], "[model\n", {}, "not valid TOML"),
    ],
    ids=["flag", "env", "toml", "bad-toml"],
)
def test_a_wrong_setting_exits_2_with_one_line(
    tmp_path: Path, args: list[str], toml: str | None, env: dict[str, str], named: str
) -> None:
    if toml is not None:
        _toml(tmp_path, toml)
    done = _orchestrator(
        *args,
        "--workdir",
        str(tmp_path),
        env=_clean_env(ANTHROPIC_API_KEY=API_KEY, **env),
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("orchestrator: error: ")
    assert named in lines[0]
    assert "Traceback" not in done.stderr
    assert API_KEY not in done.stderr


def test_the_user_file_is_below_the_project_file_and_can_be_left_out(tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    (user / "config.toml").write_text('max_rounds = 7\nplan_policy = "lenient"\n', "utf-8")
    _toml(tmp_path, "max_rounds = 5\n")
    env = {"ORCHESTRATOR_CONFIG_DIR": str(user)}
    config = load_config(tmp_path, env=env)
    assert (config.max_rounds, config.plan_policy) == (5, "lenient")
    assert config.sources["plan_policy"] == f"{user / 'config.toml'} [plan_policy]"
    assert load_config(tmp_path, env=env, user_file=False).plan_policy == "strict"
    (user / "config.toml").write_text('auth_token = "secret-value"\n', "utf-8")
    with pytest.raises(
        ConfigError, match="auth_token does not belong in a file; use ANTHROPIC_AUTH_TOKEN"
    ):
        load_config(tmp_path, env=env)


@pytest.mark.parametrize(
    ("given", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("15m", 900.0), ("2h", 7200.0), ("1.5m", 90.0)],
)
def test_a_duration_is_seconds_or_has_a_unit(tmp_path: Path, given: str, seconds: float) -> None:
    assert load_config(tmp_path, {"max_duration": given}, env={}).max_duration == seconds


@pytest.mark.parametrize("given", ["0", "-5", "soon", "5d", "inf"])
def test_a_bad_duration_is_refused_with_an_example(tmp_path: Path, given: str) -> None:
    with pytest.raises(ConfigError, match="such as 90, 90s, 15m or 2h"):
        load_config(tmp_path, {"max_duration": given}, env={})
