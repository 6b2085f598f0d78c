"""Suites: tasks in a TOML file, each with a prompt, starting files and a check command.

A suite file looks like this (every key but a task's ``name``, ``prompt`` and ``check`` may be
left out)::

    name = "my-suite"
    arms = ["board", "no-board"]      # the arms when --arms is not given
    max_rounds = 30                   # per task, unless the task says otherwise
    check_timeout = 120               # seconds the check command may take

    [[tasks]]
    name = "fix-the-parser"
    prompt = "The tests in test_parser.py fail. Fix parser.py so they pass."
    check = "python -m pytest -q"     # exit code 0 means success
    files_from = "fix-the-parser"     # a folder beside the suite, copied into the workdir
    max_rounds = 20
    tags = ["fix"]
    [tasks.files]                     # inline files (these win over files_from)
    "notes.txt" = "..."
    [tasks.check_files]               # written just before the check, over anything the agent wrote
    "check.py" = "..."

``[[tasks.steps]]`` (``title``, ``tool``, ``input``) is what the scripted models play; a real
model never sees it. Everything is read at load time, so a :class:`Task` is a self-contained
value that can travel to another process or machine.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from orchestrator.eval.arms import ArmError, parse_arms
from orchestrator.protocols import JSONObject
from orchestrator.script import reject_unknown_keys

DEFAULT_MAX_ROUNDS = 30
DEFAULT_CHECK_TIMEOUT = 120.0
#: A suite's files are source code, not data sets: this much in one task is surely a mistake.
MAX_TASK_BYTES = 8 << 20
#: A suite file holds its tasks' inline files too: room for several tasks at the limit above.
MAX_SUITE_BYTES = 64 << 20
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_SUITE_KEYS = frozenset({"name", "description", "arms", "max_rounds", "check_timeout", "tasks"})
_TASK_KEYS = frozenset(
    {
        "name",
        "prompt",
        "check",
        "files",
        "files_from",
        "check_files",
        "max_rounds",
        "check_timeout",
        "tags",
        "steps",
    }
)
_STEP_KEYS = frozenset({"title", "tool", "input"})


class SuiteError(ValueError):
    """A suite that cannot be used; the message names the file, the task and the field."""


@attrs.frozen
class Step:
    """One step of a task's known solution: what the scripted models call, and its title."""

    title: str
    tool: str
    input: JSONObject


@attrs.frozen
class Task:
    """One task: where it starts (files), what is asked (prompt), and what counts (check)."""

    name: str
    prompt: str
    check: str
    files: Mapping[str, str] = attrs.field(factory=dict)
    check_files: Mapping[str, str] = attrs.field(factory=dict)
    max_rounds: int = DEFAULT_MAX_ROUNDS
    check_timeout: float = DEFAULT_CHECK_TIMEOUT
    tags: tuple[str, ...] = ()
    steps: tuple[Step, ...] = ()

    @property
    def digest(self) -> str:
        """A short hash of everything that defines the task, so a changed task is noticed."""
        document = attrs.asdict(self, recurse=True)
        encoded = json.dumps(document, sort_keys=True, ensure_ascii=False).encode("utf-8")
        return hashlib.sha256(encoded).hexdigest()[:16]


@attrs.frozen
class Suite:
    """A named list of tasks, and the arms it compares unless told otherwise."""

    name: str
    source: str
    tasks: tuple[Task, ...]
    arms: tuple[str, ...] = ()
    description: str = ""

    @property
    def digest(self) -> str:
        return hashlib.sha256(" ".join(t.digest for t in self.tasks).encode()).hexdigest()[:16]

    def select(self, names: tuple[str, ...]) -> Suite:
        """The suite cut down to the named tasks, in the suite's order."""
        unknown = [name for name in names if name not in {t.name for t in self.tasks}]
        if unknown:
            known = ", ".join(t.name for t in self.tasks)
            raise SuiteError(f"{self.source}: no task named {unknown[0]!r}; tasks: {known}")
        return attrs.evolve(self, tasks=tuple(t for t in self.tasks if t.name in names))


def bundled_suite_path() -> Path:
    """The suite that ships with the package (six small multi-step coding tasks)."""
    return Path(str(resources.files("orchestrator.eval").joinpath("bundled", "suite.toml")))


def load_suite(path: Path) -> Suite:
    """Read and check a suite file; every problem raises :class:`SuiteError`."""
    source = str(path)
    try:
        # A device or a pipe (`/dev/zero`, `<(…)`) would be read without end.
        if path.exists() and not path.is_file():
            raise SuiteError(f"{source}: not a regular file")
        if path.exists() and path.stat().st_size > MAX_SUITE_BYTES:
            raise SuiteError(f"{source}: over the {MAX_SUITE_BYTES} bytes a suite file may hold")
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SuiteError(f"{source}: no such suite file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SuiteError(f"{source}: cannot read it: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise SuiteError(f"{source}: not valid TOML: {error}") from None
    return parse_suite(data, source=source, base=path.parent)


def parse_suite(data: Mapping[str, Any], *, source: str, base: Path) -> Suite:
    """Build a :class:`Suite` from decoded TOML; ``base`` is where ``files_from`` folders are."""
    _reject_unknown_keys(data, _SUITE_KEYS, f"{source}: ")
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not name.strip():
        raise SuiteError(f"{source}: name must be a non-empty string")
    default_rounds = _positive_int(data, "max_rounds", DEFAULT_MAX_ROUNDS, f"{source}: ")
    default_timeout = _positive_number(data, "check_timeout", DEFAULT_CHECK_TIMEOUT, f"{source}: ")
    arms = data.get("arms", [])
    if not isinstance(arms, list) or not all(isinstance(a, str) for a in arms):
        raise SuiteError(f"{source}: arms must be a list of arm names")
    if arms:
        try:
            parse_arms(arms)
        except ArmError as error:
            raise SuiteError(f"{source}: arms: {error}") from None
    raw_tasks = data.get("tasks")
    if not isinstance(raw_tasks, list) or not raw_tasks:
        raise SuiteError(f"{source}: a suite needs at least one [[tasks]] table")
    tasks: list[Task] = []
    for number, raw in enumerate(raw_tasks, start=1):
        if not isinstance(raw, Mapping):
            raise SuiteError(f"{source}: task {number} must be a table")
        task = _parse_task(raw, f"{source}: task {number}: ", base, default_rounds, default_timeout)
        if any(t.name == task.name for t in tasks):
            raise SuiteError(f"{source}: task {number}: name {task.name!r} is used twice")
        tasks.append(task)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise SuiteError(f"{source}: description must be a string")
    return Suite(name.strip(), source, tuple(tasks), tuple(arms), description)


def _parse_task(
    raw: Mapping[str, Any], prefix: str, base: Path, default_rounds: int, default_timeout: float
) -> Task:
    _reject_unknown_keys(raw, _TASK_KEYS, prefix)
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SuiteError(
            f"{prefix}name must be 1-64 letters, digits, '.', '_' or '-' (it names folders), "
            f"got {name!r}"
        )
    prefix = f"{prefix[: -len(': ')]} ({name}): "
    texts = {}
    for key in ("prompt", "check"):
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            raise SuiteError(f"{prefix}{key} must be a non-empty string")
        texts[key] = value.strip()
    files: dict[str, str] = {}
    if "files_from" in raw:
        files.update(_read_folder(raw["files_from"], base, prefix))
    files.update(_file_table(raw.get("files", {}), "files", prefix))
    check_files = _file_table(raw.get("check_files", {}), "check_files", prefix)
    _refuse_file_under_file({*files, *check_files}, prefix)
    size = sum(len(text.encode("utf-8")) for text in (*files.values(), *check_files.values()))
    if size > MAX_TASK_BYTES:
        raise SuiteError(f"{prefix}its files hold {size} bytes, over the {MAX_TASK_BYTES} limit")
    tags = raw.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise SuiteError(f"{prefix}tags must be a list of strings")
    return Task(
        name=name,
        prompt=texts["prompt"],
        check=texts["check"],
        files=files,
        check_files=check_files,
        max_rounds=_positive_int(raw, "max_rounds", default_rounds, prefix),
        check_timeout=_positive_number(raw, "check_timeout", default_timeout, prefix),
        tags=tuple(tags),
        steps=_parse_steps(raw.get("steps", []), prefix),
    )


def _parse_steps(raw: object, prefix: str) -> tuple[Step, ...]:
    if not isinstance(raw, list):
        raise SuiteError(f"{prefix}steps must be a list of [[tasks.steps]] tables")
    steps = []
    for number, item in enumerate(raw, start=1):
        where = f"{prefix}step {number}: "
        if not isinstance(item, Mapping):
            raise SuiteError(f"{where}must be a table with title, tool and input")
        _reject_unknown_keys(item, _STEP_KEYS, where)
        title, tool, arguments = item.get("title"), item.get("tool"), item.get("input", {})
        if not isinstance(title, str) or not title.strip():
            raise SuiteError(f"{where}title must be a non-empty string")
        if not isinstance(tool, str) or not tool:
            raise SuiteError(f"{where}tool must be a tool name such as edit_file")
        if not isinstance(arguments, Mapping):
            raise SuiteError(f"{where}input must be a table of the tool's arguments")
        steps.append(Step(title.strip(), tool, dict(arguments)))
    return tuple(steps)


def _file_table(raw: object, key: str, prefix: str) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        raise SuiteError(f'{prefix}{key} must be a table of path = "content"')
    files = {}
    for path, content in raw.items():
        if not isinstance(content, str):
            raise SuiteError(f"{prefix}{key}.{path}: the content must be a string")
        files[_relative_path(path, f"{prefix}{key}: ")] = content
    return files


def _read_folder(raw: object, base: Path, prefix: str) -> dict[str, str]:
    if not isinstance(raw, str) or not raw.strip():
        raise SuiteError(f"{prefix}files_from must be a folder name beside the suite")
    folder = (base / _relative_path(raw, f"{prefix}files_from: ")).resolve()
    if not folder.is_dir():
        raise SuiteError(f"{prefix}files_from: {folder} is not a folder")
    files = {}
    size = 0
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file() or "__pycache__" in path.parts:
            continue
        relative = path.relative_to(folder).as_posix()
        try:
            # Sized before it is read, so a stray disk image is refused, not loaded.
            size += path.stat().st_size
            if size > MAX_TASK_BYTES:
                raise SuiteError(
                    f"{prefix}files_from: {relative} takes the folder over the "
                    f"{MAX_TASK_BYTES} bytes a task may hold"
                )
            files[relative] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise SuiteError(f"{prefix}files_from: cannot read {relative}: {error}") from None
    return files


def _relative_path(path: str, prefix: str) -> str:
    pure = PurePosixPath(path)
    if not pure.parts or "\x00" in path or pure.is_absolute() or ".." in pure.parts or "\\" in path:
        raise SuiteError(f"{prefix}{path!r} must be a relative path without '..', naming a file")
    return pure.as_posix()


def _refuse_file_under_file(paths: set[str], prefix: str) -> None:
    """A path cannot be both a file and the folder of another file (``a`` and ``a/b``)."""
    for path in sorted(paths):
        clash = next((str(p) for p in PurePosixPath(path).parents if str(p) in paths), None)
        if clash is not None:
            raise SuiteError(f"{prefix}{clash!r} is a file, so {path!r} cannot be inside it")


def _reject_unknown_keys(raw: Mapping[str, Any], allowed: frozenset[str], prefix: str) -> None:
    reject_unknown_keys(raw, allowed, prefix, SuiteError)


def _positive_int(raw: Mapping[str, Any], key: str, default: int, prefix: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SuiteError(f"{prefix}{key} must be a whole number of at least 1, got {value!r}")
    return value


def _positive_number(raw: Mapping[str, Any], key: str, default: float, prefix: str) -> float:
    value = raw.get(key, default)
    # TOML has nan and inf; either would leave a check without a time bound.
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise SuiteError(f"{prefix}{key} must be a finite number of seconds above 0, got {value!r}")
    return float(value)
