"""The warm interpreter's forked runs against fresh ``python -m`` processes: same outside."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.warm_harness import WarmHarness

# A warm interpreter and fresh harness processes: the e2e layer (docs/development.md).
pytestmark = pytest.mark.e2e

# A module the child runs as ``python -m probe``: it says what it sees, then ends as told.
_PROBE = """
import json, os, signal, sys, tempfile, time
print(json.dumps({
    "pid": os.getpid(), "cwd": os.getcwd(), "argv": sys.argv[1:], "path0": sys.path[0],
    "marker": os.environ.get("WARM_MARKER"), "stray": os.environ.get("WARM_HARNESS_STRAY"),
    "tmp": tempfile.gettempdir(), "name": __name__, "stdin": sys.stdin.read(),
}))
print("to stderr", file=sys.stderr)
how = sys.argv[1]
if how == "exit":
    sys.exit(int(sys.argv[2]))
if how == "raise":
    raise LookupError("the probe's own error")
if how == "signal":
    os.kill(os.getpid(), signal.SIGTERM)
if how == "hang":
    time.sleep(600)
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "probe.py").write_text(_PROBE, encoding="utf-8")
    (tmp_path / "tmp").mkdir()
    return tmp_path


def _env(folder: Path) -> dict[str, str]:
    return {**os.environ, "WARM_MARKER": "this run's", "TMPDIR": str(folder / "tmp")}


def _both(
    warm: WarmHarness,
    folder: Path,
    *args: str,
    module: str = "probe",
    env: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """``python -m MODULE ARGS`` in ``folder``, forked warm and started fresh."""
    env = _env(folder) if env is None else env
    forked = warm.run(args, env=env, cwd=folder, timeout=60, module=module)
    fresh = subprocess.run(
        [sys.executable, "-m", module, *args],
        env=env,
        cwd=folder,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return forked, fresh


@pytest.mark.parametrize(
    ("args", "code"),
    [(("exit", "0"), 0), (("exit", "3"), 3), (("raise",), 1), (("signal",), -signal.SIGTERM)],
)
def test_a_forked_run_ends_and_sees_what_a_fresh_one_does(
    warm_harness: WarmHarness, folder: Path, args: tuple[str, ...], code: int
) -> None:
    forked, fresh = _both(warm_harness, folder, *args)
    assert forked.returncode == fresh.returncode == code
    seen = [json.loads(run.stdout.splitlines()[0]) for run in (forked, fresh)]
    for one in seen:
        assert one["pid"] not in (os.getpid(), warm_harness.pid)
        del one["pid"]
    assert seen[0] == seen[1]
    assert seen[0]["cwd"] == str(folder) and seen[0]["tmp"] == str(folder / "tmp")
    assert seen[0]["marker"] == "this run's" and seen[0]["stray"] is None
    assert forked.stderr.splitlines()[0] == "to stderr"
    if code == 1:
        assert forked.stderr.rstrip().endswith("LookupError: the probe's own error")
        assert "Traceback" in forked.stderr


def test_a_run_past_its_timeout_is_killed_and_the_next_run_works(
    warm_harness: WarmHarness, folder: Path
) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        warm_harness.run(["hang"], env=_env(folder), cwd=folder, timeout=0.5, module="probe")
    again = _both(warm_harness, folder, "exit", "0")[0]
    assert again.returncode == 0


@pytest.mark.parametrize(
    "args", [["--version"], ["run", "x", "--workdir", "/nonexistent-folder"], ["nosuch"]]
)
def test_the_harness_cli_forked_says_what_a_fresh_one_says(
    warm_harness: WarmHarness, tmp_path: Path, args: list[str]
) -> None:
    forked, fresh = _both(
        warm_harness, tmp_path, *args, module="orchestrator", env=dict(os.environ)
    )
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        fresh.returncode,
        fresh.stdout,
        fresh.stderr,
    )
