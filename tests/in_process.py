"""The real CLI run inside the test's own process, for tests where the process boundary is not
what they test.

A subprocess pays over a second importing the ``anthropic`` SDK and the loop before it does
anything; in here they are imported once per xdist worker. Everything else stays real: the
same ``main`` entry point (its exit codes, its one-line errors), the real SDK over HTTP to the
loopback server, real tools and files. The environment, working directory and standard streams
are swapped in for the call only (click's :class:`~click.testing.CliRunner` isolation), so the
result has a subprocess's shape: ``returncode``, ``stdout``, ``stderr``.

Tests of signals, a closed terminal, a pty, the sandbox's view of its parent, or what a fresh
interpreter imports keep a real subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path

from click.testing import CliRunner

from orchestrator.cli import main


def run_cli(
    args: Sequence[str | Path],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``orchestrator ARGS`` as ``subprocess.run(..., capture_output=True, text=True)`` gives it.

    ``env`` replaces the whole environment, as ``subprocess.run(env=...)`` does; ``input`` is
    stdin (empty when None, like ``stdin=DEVNULL``). An exception ``main`` lets escape becomes
    a traceback on stderr and exit code 1, as the interpreter would make it, so a test's
    ``"Traceback" not in stderr`` still catches it.
    """
    argv = [str(arg) for arg in args]
    saved_environment = dict(os.environ)
    saved_cwd = os.getcwd()
    runner = CliRunner()
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        with runner.isolation(input=input or "") as (stdout, stderr, _mixed):
            try:
                main(argv)
                code = 0
            except SystemExit as exit:
                code = _exit_code(exit.code)
            except Exception:
                # As the interpreter prints an uncaught exception.
                sys.stderr.write(traceback.format_exc())
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            out, err = stdout.getvalue(), stderr.getvalue()
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environment)
    return subprocess.CompletedProcess(
        ["orchestrator", *argv],
        code,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
    )


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"): the message on stderr, exit 1
    return 1
