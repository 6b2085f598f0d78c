"""Running git on a repository the model may have written, without believing any of it.

Every git command the harness runs here goes through :func:`run_git`: hooks point at
``/dev/null``, ``core.fsmonitor`` is empty, ``file://`` transport is refused, submodules are
never recursed into, and the system and global config files are not read (the user's
``~/.gitconfig`` may name hooks or helpers that live in the work directory). The repository's own
config is still read by git, so only plumbing that runs nothing from config is used: ``update-ref``,
``symbolic-ref``, ``cat-file``, ``ls-files -s``, ``diff-tree --raw``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import attrs

#: Options before the subcommand; the settings that keep config from running anything are
#: :func:`orchestrator.harness_git.with_settings`, in git's environment.
SAFE_OPTIONS: tuple[str, ...] = ("--no-pager", "--no-replace-objects")
_TIMEOUT = 60.0


class GitFailed(Exception):
    """A git command the harness ran failed; ``str()`` is git's last line."""


@attrs.frozen
class GitOutput:
    code: int
    stdout: bytes
    stderr: str


def run_git(
    args: Sequence[str],
    *,
    git_dir: Path | None = None,
    cwd: Path | None = None,
    index: Path | None = None,
    stdin: bytes | None = None,
    check: bool = False,
) -> GitOutput:
    """Run ``git SAFE_OPTIONS ARGS``; :class:`GitFailed` when ``check`` and it fails.

    The environment is the team's (:func:`orchestrator.harness_git.git_environment`: an
    allow-list, so no key or token reaches git; no system or global config) with its fixed
    settings: hooks point at nowhere, no fsmonitor, no submodule recursion, no ``file://``.
    Only plumbing that runs nothing from the repository's config is used here.
    """
    from orchestrator.harness_git import git_environment, with_settings

    env = with_settings(git_environment())
    if git_dir is not None:
        env["GIT_DIR"] = str(git_dir)
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    try:
        done = subprocess.run(
            ["git", *SAFE_OPTIONS, *args],
            cwd=cwd if cwd is not None else (git_dir if git_dir is not None else None),
            env=env,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise GitFailed(f"git {args[0] if args else ''}: {error}") from None
    stderr = done.stderr.decode("utf-8", "replace").strip()
    if check and done.returncode != 0:
        last = stderr.splitlines()[-1] if stderr else f"exit code {done.returncode}"
        raise GitFailed(f"git {args[0] if args else ''}: {last}")
    return GitOutput(done.returncode, done.stdout, stderr)


def user_config_values(cwd: Path) -> list[tuple[str, str, str]]:
    """Every ``(origin file, key, value)`` git's config has here, at every level.

    Read with the user's own environment (their ``HOME``, ``GIT_CONFIG_GLOBAL``, the system
    file), because that is what their git will run with; reading config runs nothing. An
    origin that is not a file (a command line, a blob) is given as ``""``.
    """
    env = {name: value for name, value in os.environ.items() if name not in ("GIT_DIR",)}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    try:
        done = subprocess.run(
            ["git", "config", "--list", "--show-origin", "-z"],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    # -z: "ORIGIN\0KEY\nVALUE\0" for each entry.
    parts = done.stdout.split(b"\0")
    for origin, entry in zip(parts[0::2], parts[1::2], strict=False):
        text = entry.decode("utf-8", "replace")
        key, _, value = text.partition("\n")
        where = origin.decode("utf-8", "replace")
        found.append((where.removeprefix("file:") if where.startswith("file:") else "", key, value))
    return found


def toplevel(cwd: Path) -> Path | None:
    """The top of the work tree git sees from ``cwd`` (None outside a repository)."""
    try:
        out = run_git(["rev-parse", "--show-toplevel"], cwd=cwd)
    except GitFailed:
        return None
    text = out.stdout.decode("utf-8", "replace").strip()
    return Path(text) if out.code == 0 and text else None
