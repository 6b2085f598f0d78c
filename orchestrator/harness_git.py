"""Git as the harness runs it, in trees a model wrote: nothing in them gets to run.

The team commits each worker's items, merges them into its integration branch and into the
work directory, and commits what the lead changed while planning. Those trees (and, outside
bwrap, their ``.git``) are the model's work, so every git command the harness runs goes
through :func:`run_git`, which gives git no way to start a program the model chose:

- hooks point at nowhere (``core.hooksPath=/dev/null``): no hook runs, neither the
  repository's nor the user's global ones;
- ``core.fsmonitor`` is off, and git never recurses into submodules, so a nested repository's
  own config (with its own fsmonitor) is never read by a git the harness started;
- neither the system nor the user's global config is read (``GIT_CONFIG_NOSYSTEM``,
  ``GIT_CONFIG_GLOBAL``); the repository's own config is read, but every key in it that names
  a program (filters, diff and merge drivers, pager, editor, gpg, credential helpers, ssh…)
  is overridden with one that runs nothing of the model's, in git's own environment
  settings, which outrank every file;
- where the caller knows the work tree and its git dir, both are given outright, so a
  ``.git`` file or ``core.worktree`` the model rewrote cannot point the harness elsewhere;
- ``refs/replace`` is ignored and the ``file://`` transport refused, so the model's refs cannot
  show the harness other objects than are there, nor fetch from a path it chose;
- the environment is an allow-list: no API key reaches git or anything it might start.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

#: Who a commit made by the harness is from (no global config is read, so git knows nobody).
HARNESS_NAME = "orchestrator team"
HARNESS_EMAIL = "team@orchestrator.invalid"
#: How long one git command may take before it is given up (a hang guard).
GIT_TIMEOUT = 300.0

#: Settings every harness git command runs with (they outrank every config file).
_FIXED: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "false"),
    ("submodule.recurse", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("status.submoduleSummary", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("merge.verifySignatures", "false"),
    ("advice.addEmbeddedRepo", "false"),
    ("advice.detachedHead", "false"),
    ("core.quotePath", "false"),
    ("protocol.file.allow", "never"),
)
#: Config keys (lower case, as ``git config --name-only`` prints them) that name a program.
_PROGRAM_KEYS = re.compile(
    r"^(?:core\.(?:fsmonitor|hookspath|pager|editor|sshcommand|askpass|gitproxy"
    r"|alternaterefscommand)"
    r"|sequence\.editor|diff\.external|gpg\.program|gpg\..+\.program"
    r"|credential\.helper|credential\..+\.helper"
    r"|diff\..+\.(?:textconv|command)|merge\..+\.driver"
    r"|filter\..+\.(?:clean|smudge|process)"
    r"|pager\..+|uploadpack\.packobjectshook|remote\..+\.(?:uploadpack|receivepack))$",
    re.IGNORECASE,
)
#: The harness's environment names git may see; everything else (keys, tokens) stays out.
_PASSED = ("PATH", "HOME", "TZ", "TMPDIR")


class GitError(Exception):
    """A harness git command that could not run or failed; ``str()`` is one line."""


@attrs.frozen
class GitPlace:
    """A work tree and the git dir the harness knows it has (from ``git worktree list``)."""

    work_tree: Path
    git_dir: Path


def git_environment(source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed environment every harness git command runs with."""
    source = os.environ if source is None else source
    env = {name: source[name] for name in _PASSED if name in source}
    env.update(
        LC_ALL="C",
        LANG="C",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_SYSTEM=os.devnull,
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_ATTR_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        GIT_EDITOR=":",
        GIT_SEQUENCE_EDITOR=":",
        GIT_OPTIONAL_LOCKS="0",
        # ``refs/replace`` the model wrote would show the harness other content than is there.
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_AUTHOR_NAME=HARNESS_NAME,
        GIT_AUTHOR_EMAIL=HARNESS_EMAIL,
        GIT_COMMITTER_NAME=HARNESS_NAME,
        GIT_COMMITTER_EMAIL=HARNESS_EMAIL,
    )
    return env


def run_git(
    cwd: Path,
    *args: str,
    place: GitPlace | None = None,
    check: bool = True,
    author: str | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``git ARGS`` in ``cwd`` as the harness runs it (see the module's docstring).

    ``place`` names the work tree and git dir outright; ``author`` is the name a commit is
    made under (the committer stays the harness). :class:`GitError` when git cannot start, or
    (with ``check``) when it fails.
    """
    environment = {**git_environment(), **(env or {})}
    if author is not None:
        environment["GIT_AUTHOR_NAME"] = author
    where = (
        [] if place is None else [f"--git-dir={place.git_dir}", f"--work-tree={place.work_tree}"]
    )
    environment = with_settings(environment, _program_keys(cwd, where, environment))
    command = ["git", *where, *args]
    done = _run(command, cwd, environment)
    if check and done.returncode != 0:
        said = " ".join(done.stderr.split())[-300:] or f"exit status {done.returncode}"
        raise GitError(f"git {' '.join(args)} failed in {cwd}: {said}")
    return done


def with_settings(environment: Mapping[str, str], programs: Sequence[str] = ()) -> dict[str, str]:
    """``environment`` with the harness's fixed git settings, and ``programs`` made harmless.

    The settings go in git's environment (``GIT_CONFIG_KEY_n``, ``_VALUE_n``), which outranks
    every config file and, unlike ``-c key=value``, cannot be misread when a model's key holds
    an ``=``. The fixed settings come last: of two values for one key, git takes the later.
    """
    overrides = [*(_harmless(key) for key in programs), *_FIXED]
    configured = dict(environment)
    configured["GIT_CONFIG_COUNT"] = str(len(overrides))
    for index, (key, value) in enumerate(overrides):
        configured[f"GIT_CONFIG_KEY_{index}"] = key
        configured[f"GIT_CONFIG_VALUE_{index}"] = value
    return configured


def _program_keys(cwd: Path, where: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The config keys in effect here that name a program: each is overridden empty.

    Reading the config runs nothing (git only parses files); includes are followed, so a key
    the model hid in an included file is found too.
    """
    listed = _run(["git", *where, "config", "--list", "--name-only", "-z"], cwd, env)
    if listed.returncode != 0:
        return []  # not a repository yet (``init``), or no config: nothing to override
    names = (name for name in listed.stdout.split("\0") if name)
    return sorted({name for name in names if _PROGRAM_KEYS.match(name)})


def _harmless(key: str) -> tuple[str, str]:
    """``key`` set to what runs nothing of the model's.

    Empty, where git reads empty as "none" (filters, helpers, pagers); ``cat`` for a diff
    driver's text conversion (the file as it is) and ``true`` for an external diff command,
    where an empty command would make git fail. An emptied merge driver fails its merge,
    which the harness reports as a conflict: a refusal, never the model's program.
    """
    lowered = key.lower()
    if lowered.endswith(".textconv"):
        return key, "cat"
    if (lowered.startswith("diff.") and lowered.endswith(".command")) or lowered == "diff.external":
        return key, "true"
    return key, ""


def _run(command: list[str], cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            command,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="surrogateescape",
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise GitError(
            f"git {' '.join(command[1:3])}… in {cwd} took over {GIT_TIMEOUT:g} s"
        ) from None
    except OSError as error:  # no such folder, or no git
        raise GitError(f"{cwd}: cannot run git there: {error.strerror or error}") from None
