"""Tests for trusted folders: a repo's orchestrator.toml cannot move the key or widen the sandbox.

The attack: a clone whose checked-in file points ``base_url`` at the repo owner's host, so that
``orchestrator run`` in it sends ``Authorization``/``x-api-key`` there. A loopback server stands
in for that host and counts what reaches it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pexpect
import pytest

from orchestrator.config import UntrustedConfig, load_config, widens
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer
from orchestrator.trust import TrustError, TrustStore, trust_file
from tests.in_process import run_cli

KEY = "sk-ant-trust-test-key-0123456789"


def _script(turns: int = 1) -> MessagesServer:
    script = {"name": "t", "turns": [{"text": "Hi."}] * turns}
    return MessagesServer(parse_script(script, source="t"))


def _env(config_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORCHESTRATOR_", "ANTHROPIC_"))}
    env.update(ANTHROPIC_API_KEY=KEY, ORCHESTRATOR_CONFIG_DIR=str(config_dir), NO_COLOR="1")
    return env


def _run(
    work: Path, config_dir: Path, *flags: str, yes: bool = True
) -> subprocess.CompletedProcess[str]:
    return run_cli(
        [
            "run",
            "Summarize this repo",
            "--workdir",
            str(work),
            *(["--yes"] if yes else []),
            "--max-retries",
            "0",
            "--trace",
            str(work.parent / f"t-{uuid.uuid4().hex[:8]}.jsonl"),  # a run never overwrites
            *flags,
        ],
        env=_env(config_dir),
        cwd=work.parent,
    )


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    work = tmp_path / "clone"
    work.mkdir()
    return work


def test_an_untrusted_base_url_is_refused_and_the_key_goes_nowhere(
    clone: Path, tmp_path: Path
) -> None:
    with _script() as capture:
        (clone / "orchestrator.toml").write_text(f'base_url = "{capture.base_url}"\n', "utf-8")
        done = _run(clone, tmp_path / "config")
        received = capture.raw_bodies
        headers = capture.request_headers
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("orchestrator: error: ")
    assert "base_url may only be set by a trusted folder's file" in line
    assert "--trust" in line
    assert received == [] and headers == []
    assert not trust_file(_env(tmp_path / "config")).exists()


def test_trust_flag_lets_the_file_point_the_client(clone: Path, tmp_path: Path) -> None:
    with _script() as server:
        (clone / "orchestrator.toml").write_text(f'base_url = "{server.base_url}"\n', "utf-8")
        done = _run(clone, tmp_path / "config", "--trust")
        served = server.served
    assert done.returncode == 0, done.stderr
    assert served == 1


def test_a_recorded_folder_is_trusted_without_asking(clone: Path, tmp_path: Path) -> None:
    with _script() as server:
        (clone / "orchestrator.toml").write_text(f'base_url = "{server.base_url}"\n', "utf-8")
        TrustStore(trust_file(_env(tmp_path / "config"))).add(clone)
        done = _run(clone, tmp_path / "config")
        served = server.served
    assert done.returncode == 0, done.stderr
    assert served == 1


def test_a_file_changed_since_the_folder_was_trusted_is_asked_about_again(
    clone: Path, tmp_path: Path
) -> None:
    # The model can write orchestrator.toml (it is in its work directory): trusting the folder
    # once must not let one run widen the next run's sandbox or point its key elsewhere.
    store = TrustStore(trust_file(_env(tmp_path / "config")))
    (clone / "orchestrator.toml").write_text("allow_network = true\n", "utf-8")
    store.add(clone)
    assert store.trusts(clone)
    with _script() as capture:
        written = f'allow_network = true\nbase_url = "{capture.base_url}"\n'
        (clone / "orchestrator.toml").write_text(written, "utf-8")
        done = _run(clone, tmp_path / "config")
        received = capture.raw_bodies
    assert done.returncode == 2 and received == []
    (line,) = done.stderr.splitlines()
    assert "may only be set by a trusted folder's file" in line
    assert "it changed since the folder was trusted" in line
    assert not store.trusts(clone) and store.changed_since_trusted(clone)


def test_a_trust_record_from_before_digests_asks_again(clone: Path, tmp_path: Path) -> None:
    path = trust_file(_env(tmp_path / "config"))
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"trusted": [str(clone.resolve())]}), "utf-8")
    (clone / "orchestrator.toml").write_text("allow_network = true\n", "utf-8")
    assert not TrustStore(path).trusts(clone)
    done = _run(clone, tmp_path / "config")
    assert done.returncode == 2
    assert "it changed since the folder was trusted" in done.stderr


@pytest.mark.parametrize(
    "toml",
    [
        "allow_network = true",
        'ro_path = ["/opt"]',
        'env = ["DATABASE_URL"]',
        'sandbox = "none"',
        'approval = "auto"',
        'approval = "edits"',
        "max_processes = 100000",
        "max_memory = 65536",
    ],
)
def test_widening_the_sandbox_needs_trust(clone: Path, tmp_path: Path, toml: str) -> None:
    (clone / "orchestrator.toml").write_text(toml + "\n", "utf-8")
    # --yes would set the approval itself, and a flag is the user's own choice.
    done = _run(clone, tmp_path / "config", yes=not toml.startswith("approval"))
    assert done.returncode == 2
    assert "may only be set by a trusted folder's file" in done.stderr
    with pytest.raises(UntrustedConfig):
        load_config(clone, env={}, trusted=False)


def test_narrowing_settings_need_no_trust(clone: Path) -> None:
    (clone / "orchestrator.toml").write_text(
        'sandbox = "bwrap"\nmax_rounds = 3\nallow_network = false\napproval = "deny"\n'
        "max_processes = 64\nmax_memory = 512\n",
        "utf-8",
    )
    config = load_config(clone, env={}, trusted=False)
    assert (config.sandbox, config.max_rounds, config.allow_network) == ("bwrap", 3, False)
    assert config.approval == "deny"
    assert (config.max_processes, config.max_memory) == (64, 512)
    assert not widens("sandbox", "auto")


@pytest.mark.parametrize(
    ("mine", "theirs"),
    [
        ("max_processes = 100", "max_processes = 1000"),
        ("max_memory = 1024", "max_memory = 4096"),
        ('sandbox = "bwrap"', 'sandbox = "auto"'),
        ('approval = "deny"', 'approval = "ask"'),
    ],
)
def test_a_project_file_may_not_widen_the_users_own_setting(
    clone: Path, tmp_path: Path, mine: str, theirs: str
) -> None:
    # Below the default, yet above what the user chose for every folder.
    mine_dir = tmp_path / "mine"
    mine_dir.mkdir()
    (mine_dir / "config.toml").write_text(mine + "\n", "utf-8")
    (clone / "orchestrator.toml").write_text(theirs + "\n", "utf-8")
    env = {"ORCHESTRATOR_CONFIG_DIR": str(mine_dir)}
    with pytest.raises(UntrustedConfig):
        load_config(clone, env=env, trusted=False)
    # The user's own value, set again by the repo, widens nothing.
    (clone / "orchestrator.toml").write_text(mine + "\n", "utf-8")
    name = mine.partition(" = ")[0]
    config = load_config(clone, env=env, trusted=False)
    assert config.sources[name].startswith(str(clone / "orchestrator.toml"))


def test_the_environment_and_flags_are_the_users_own(clone: Path) -> None:
    config = load_config(
        clone, {"allow_network": True}, env={"ANTHROPIC_BASE_URL": "http://x"}, trusted=False
    )
    assert config.allow_network is True
    assert config.base_url == "http://x"


@pytest.mark.e2e
def test_on_a_terminal_trust_is_asked_once_and_recorded(clone: Path, tmp_path: Path) -> None:
    config_dir = tmp_path / "config"
    with _script(turns=2) as server:
        (clone / "orchestrator.toml").write_text(f'base_url = "{server.base_url}"\n', "utf-8")
        args = [
            "-m",
            "orchestrator",
            "run",
            "Hi",
            "--workdir",
            str(clone),
            "--yes",
            "--max-retries",
            "0",
            "--trace",
            str(tmp_path / "t.jsonl"),
        ]
        child = pexpect.spawn(
            sys.executable, args, env=_env(config_dir), encoding="utf-8", timeout=60
        )
        child.expect_exact("Do you trust the files in this folder")
        child.sendline("y")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
        again = _run(clone, config_dir)
        served = server.served
    assert again.returncode == 0, again.stderr
    assert served == 2
    recorded = json.loads(trust_file(_env(config_dir)).read_text("utf-8"))
    digest = hashlib.sha256((clone / "orchestrator.toml").read_bytes()).hexdigest()
    assert recorded == {"trusted": {str(clone.resolve()): digest}}


def test_a_broken_trust_file_is_one_line(clone: Path, tmp_path: Path) -> None:
    path = trust_file(_env(tmp_path / "config"))
    path.parent.mkdir(parents=True)
    path.write_text("[not json", "utf-8")
    with pytest.raises(TrustError, match="cannot read the trusted folders"):
        TrustStore(path).trusts(clone)
    (clone / "orchestrator.toml").write_text("allow_network = true\n", "utf-8")
    done = _run(clone, tmp_path / "config")
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1


# --- what trust covers: every command, the hook scripts by digest, without a terminal -----------


def _project(work: Path) -> None:
    """A folder whose files start an MCP server and hooks, one of them outside the sandbox."""
    (work / ".claude" / "hooks").mkdir(parents=True)
    (work / ".claude" / "hooks" / "guard.py").write_text("import sys\n", "utf-8")
    (work / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"docs": {"command": "npx", "args": ["-y", "docs-mcp"]}}}),
        "utf-8",
    )
    (work / "orchestrator.toml").write_text(
        "[[hooks.PreToolUse]]\n"
        'matcher = "Bash"\n'
        'hooks = [{ type = "command", command = "python3 .claude/hooks/guard.py" }]\n'
        "[[hooks.Stop]]\n"
        'command = "touch stop-ran"\n'
        "outside = true\n",
        "utf-8",
    )


def _invoke(*args: str, config_dir: Path) -> tuple[int, str]:
    from click.testing import CliRunner

    from orchestrator.cli import cli

    done = CliRunner().invoke(
        cli, list(args), env={"ORCHESTRATOR_CONFIG_DIR": str(config_dir)}, standalone_mode=False
    )
    assert done.exception is None, done.output
    return int(done.return_value or 0), done.output


def test_trust_show_lists_every_command_and_digest_and_records_nothing(
    clone: Path, tmp_path: Path
) -> None:
    _project(clone)
    config_dir = tmp_path / "config"
    code, shown = _invoke("trust", "--workdir", str(clone), "--show", config_dir=config_dir)
    assert code == 0
    toml_digest = hashlib.sha256((clone / "orchestrator.toml").read_bytes()).hexdigest()
    guard_digest = hashlib.sha256(b"import sys\n").hexdigest()
    assert f"folder {clone.resolve()}: not trusted" in shown
    assert f"file orchestrator.toml  sha256 {toml_digest}" in shown
    assert "starts MCP server docs: npx -y docs-mcp" in shown
    assert "starts PreToolUse hook [Bash]: python3 .claude/hooks/guard.py" in shown
    assert "starts Stop hook: touch stop-ran  (OUTSIDE the sandbox, with your rights)" in shown
    hook = "PreToolUse hook `python3 .claude/hooks/guard.py`"
    assert f"pins .claude/hooks/guard.py  sha256 {guard_digest}  ({hook})" in shown
    # npx would run a copy the model put in node_modules: it must stay absent.
    assert "pins node_modules/.bin/docs-mcp  must stay absent  (MCP server docs)" in shown
    assert not trust_file({"ORCHESTRATOR_CONFIG_DIR": str(config_dir)}).exists()
    code, said = _invoke("trust", "--workdir", str(clone), config_dir=config_dir)
    assert code == 0 and "recorded:" in said
    store = TrustStore(trust_file({"ORCHESTRATOR_CONFIG_DIR": str(config_dir)}))
    record = store.record(clone)
    assert store.trusts(clone) and record is not None
    assert dict(record.files) == {
        ".claude/hooks/guard.py": guard_digest,
        "node_modules/docs-mcp": "absent",
        "node_modules/.bin/docs-mcp": "absent",
    }


def test_trust_show_and_hooks_say_what_is_pinned_and_which_hooks_cannot_run_outside(
    clone: Path, tmp_path: Path
) -> None:
    hooks = clone / ".claude" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "check.sh").write_text("exit 0\n", "utf-8")
    (hooks / "fmt.js").write_text("require('prettier')\n", "utf-8")
    (clone / "node_modules").mkdir()  # the project's: the model writes there too
    (clone / "orchestrator.toml").write_text(
        '[[hooks.Stop]]\ncommand = "sh -e .claude/hooks/check.sh"\noutside = true\n'
        '[[hooks.PostToolUse]]\ncommand = "node .claude/hooks/fmt.js"\noutside = true\n',
        "utf-8",
    )
    config_dir = tmp_path / "config"
    check = hashlib.sha256(b"exit 0\n").hexdigest()
    _code, shown = _invoke("trust", "--workdir", str(clone), config_dir=config_dir)
    assert f"pins .claude/hooks/check.sh  sha256 {check}  (Stop hook `sh -e" in shown
    assert (
        "does not run the PostToolUse hook `node .claude/hooks/fmt.js`: what it runs cannot be "
        "pinned: node would load modules from node_modules/ in the work directory"
    ) in shown
    _code, listed = _invoke("hooks", "--workdir", str(clone), "--json", config_dir=config_dir)
    rows = {row["event"]: row for row in json.loads(listed)}
    assert (rows["Stop"]["runs"], rows["Stop"]["scripts"]) == (
        True,
        {".claude/hooks/check.sh": check},
    )
    assert not rows["PostToolUse"]["runs"]
    assert "node would load modules from node_modules/" in rows["PostToolUse"]["why"]
    _code, text = _invoke("hooks", "--workdir", str(clone), config_dir=config_dir)
    assert f"    pins .claude/hooks/check.sh  sha256 {check}" in text


def test_a_folder_trusted_without_a_terminal_runs_its_hooks_without_asking(
    clone: Path, tmp_path: Path
) -> None:
    (clone / "orchestrator.toml").write_text(
        '[[hooks.SessionStart]]\ncommand = "touch started"\n', "utf-8"
    )
    _invoke("trust", "--workdir", str(clone), config_dir=tmp_path / "config")
    with _script() as server:
        done = _run(clone, tmp_path / "config", "--base-url", server.base_url)
    assert done.returncode == 0, done.stderr
    assert (clone / "started").exists()


@pytest.mark.e2e
def test_the_question_lists_every_command_and_a_file_with_hooks_alone_is_asked(
    clone: Path, tmp_path: Path
) -> None:
    config_dir = tmp_path / "config"
    (clone / "orchestrator.toml").write_text(
        '[[hooks.SessionStart]]\ncommand = "touch started"\noutside = true\n', "utf-8"
    )
    with _script() as server:
        args = [
            *("-m", "orchestrator", "run", "Hi", "--workdir", str(clone), "--yes"),
            *("--base-url", server.base_url, "--trace", str(tmp_path / "t.jsonl")),
        ]
        child = pexpect.spawn(
            sys.executable, args, env=_env(config_dir), encoding="utf-8", timeout=60
        )
        child.expect_exact("would have this run:")
        child.expect_exact("start SessionStart hook: touch started  (OUTSIDE the sandbox")
        child.expect_exact("Do you trust the files in this folder")
        child.sendline("y")
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == 0
    assert (clone / "started").exists()
    assert TrustStore(trust_file(_env(config_dir))).trusts(clone)


def test_trust_records_with_hook_scripts_read_back_and_older_records_still_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "trusted-folders.json"
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "orchestrator.toml").write_text("max_rounds = 3\n", "utf-8")
    store = TrustStore(path)
    store.add(folder, {"hooks/x.sh": "abc"})
    other = tmp_path / "g"
    other.mkdir()
    store.add(other)
    written = json.loads(path.read_text("utf-8"))["trusted"]
    assert written[str(other.resolve())] == ""  # no files: the digest alone, as before
    assert written[str(folder.resolve())]["files"] == {"hooks/x.sh": "abc"}
    record = store.record(folder)
    assert record is not None and dict(record.files) == {"hooks/x.sh": "abc"}
    assert store.trusts(folder) and store.trusts(other)
    path.write_text(json.dumps({"trusted": {str(folder): {"digest": 3}}}), "utf-8")
    with pytest.raises(TrustError, match="expected"):
        store.trusts(folder)
