"""One eval run: a fresh workdir, the real loop and tools under one arm, its own trace, the check.

:func:`execute_run` is a plain function of a frozen :class:`RunSpec` that returns the run's
result row, so any ``concurrent.futures`` executor can run it (threads here; a process pool or a
cluster's executor elsewhere). Every run is bounded: rounds by the loop's own limit, spending by
``max_cost`` and time by ``run_timeout``, both checked before each model call, so a runaway run
ends ``failed`` with a reason rather than hanging. A run that could not be judged (the API kept
failing, or the eval was interrupted) raises :class:`RunAborted` and is not recorded, so resuming
the eval runs it again.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import os
import selectors
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from orchestrator.config import SettingsError, load_config
from orchestrator.eval.arms import Arm, system_for
from orchestrator.eval.scripted import SCRIPTED_MODELS, scripted_model
from orchestrator.eval.suite import Task
from orchestrator.guard import canonical_call
from orchestrator.loop import DEFAULT_SYSTEM, LoopSettings, RunOutcome
from orchestrator.plan import EdgePolicy, PlanBoard
from orchestrator.protocols import JSONObject, Model, ModelError, ModelLimits, ModelTurn
from orchestrator.tools.processes import (
    has_exited,
    kill_group,
    launcher,
    wait_unreaped,
    with_reaper,
)
from orchestrator.tools.sandbox import Limits as SandboxLimits
from orchestrator.tools.sandbox import Sandbox, SandboxPolicy, choose_sandbox

#: Kept of a check's output in the result row: enough to see why it failed.
CHECK_OUTPUT_LIMIT = 2000
#: As an item's check: a ``pytest.py`` the model wrote does not shadow ``python -m pytest``.
_CHECK_ENVIRONMENT = {"PYTHONSAFEPATH": "1", "PYTHONDONTWRITEBYTECODE": "1"}


class RunAborted(Exception):
    """The run could not be judged (API failure, interrupted eval); it is not recorded."""


@attrs.frozen
class Pricing:
    """US dollars per million tokens; the defaults are Sonnet-class list prices."""

    input: float = 3.0
    output: float = 15.0
    cache_read: float = 0.30
    cache_write: float = 3.75

    def cost(self, tokens: Mapping[str, int]) -> float:
        return (
            tokens.get("input_tokens", 0) * self.input
            + tokens.get("output_tokens", 0) * self.output
            + tokens.get("cache_read_input_tokens", 0) * self.cache_read
            + tokens.get("cache_creation_input_tokens", 0) * self.cache_write
        ) / 1_000_000


@attrs.frozen
class ModelChoice:
    """Which model answers: ``api`` (the SDK) or a scripted one (``forgetful``, ``diligent``)."""

    kind: str = attrs.field()
    name: str
    base_url: str | None = None
    api_key: str | None = attrs.field(default=None, repr=False)
    #: A bearer token instead of the key (``ANTHROPIC_AUTH_TOKEN``), as ``orchestrator run``.
    auth_token: str | None = attrs.field(default=None, repr=False)
    max_retries: int = 4
    timeout: float = 600.0

    @kind.validator
    def _known_kind(self, _attribute: attrs.Attribute[str], value: str) -> None:
        if value not in ("api", *SCRIPTED_MODELS):
            known = ", ".join(("api", *SCRIPTED_MODELS))
            raise ValueError(f"kind must be one of {known}, got {value!r}")

    @property
    def scripted(self) -> bool:
        return self.kind != "api"


@attrs.frozen
class Limits:
    """The bounds of one run; ``max_rounds`` of None means the task's own."""

    max_rounds: int | None = None
    max_cost: float = 2.0
    run_timeout: float = 1800.0
    max_tokens: int = 8192
    pricing: Pricing = Pricing()


@attrs.frozen
class Harness:
    """The settings every arm shares (an arm overrides reminder threshold and policy)."""

    reminder_threshold: int = 3
    plan_policy: str = "strict"
    plan_limit: int = 20
    sandbox: str = "auto"
    deny_bash: bool = False
    #: The caps on each bash command, as the settings of the same names (memory in MiB).
    max_processes: int = SandboxLimits().max_processes
    max_memory: int = SandboxLimits().max_memory_bytes >> 20


@attrs.frozen
class RunSpec:
    """Everything one run needs, as a value that can travel to another worker."""

    task: Task
    arm: Arm
    repeat: int
    model: ModelChoice
    trace: str
    limits: Limits = Limits()
    harness: Harness = Harness()
    keep_workdir: bool = False

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.task.name, self.arm.name, self.repeat)

    @property
    def seed(self) -> int:
        """The same for every arm of a (task, repeat), so scripted arms share their luck."""
        digest = hashlib.sha256(f"{self.task.name}:{self.repeat}".encode()).digest()
        return int.from_bytes(digest[:8], "big")


class TraceTally:
    """Counts what the report needs from a run's trace events, as they are written."""

    def __init__(self) -> None:
        self.tokens = {
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
        self.repeated_calls = 0
        self.rejected_updates = 0
        self.reminders = 0
        self.blocked_calls = 0
        self._previous_call: str | None = None

    def __call__(self, event: Mapping[str, Any]) -> None:
        name = event.get("event")
        if name == "model.response":
            usage = event.get("usage") or {}
            for key in self.tokens:
                value = usage.get(key, 0)
                self.tokens[key] += value if isinstance(value, int) else 0
        elif name == "tool.call":
            call = canonical_call(str(event.get("name")), event.get("input"))
            self.repeated_calls += call == self._previous_call
            self._previous_call = call
        elif name == "plan.rejected":
            self.rejected_updates += 1
        elif name == "audit.reminder":
            self.reminders += 1
        elif name == "guard.blocked":
            self.blocked_calls += 1

    def fields(self) -> JSONObject:
        return {
            "input_tokens": self.tokens["input_tokens"],
            "output_tokens": self.tokens["output_tokens"],
            "cache_read_tokens": self.tokens["cache_read_input_tokens"],
            "cache_write_tokens": self.tokens["cache_creation_input_tokens"],
            "repeated_calls": self.repeated_calls,
            "rejected_updates": self.rejected_updates,
            "reminders": self.reminders,
            "blocked_calls": self.blocked_calls,
        }


class BoundedModel:
    """Wraps a model with the run's budget: each call first checks cost, time and a stop flag."""

    def __init__(
        self,
        inner: Model,
        limits: Limits,
        *,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._inner, self._limits, self._stop, self._clock = inner, limits, stop, clock
        self._deadline = clock() + limits.run_timeout
        self._usage: dict[str, int] = {}
        self.aborted: str | None = None

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def cost(self) -> float:
        return self._limits.pricing.cost(self._usage)

    def limits(self, model: str) -> ModelLimits:
        """The inner client's answer from the Models API, so the window is the real one."""
        ask = getattr(self._inner, "limits", None)
        if ask is None:
            raise ModelError(f"the {type(self._inner).__name__} client has no Models API to ask")
        limits: ModelLimits = ask(model)
        return limits

    def respond(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        if self._stop is not None and self._stop.is_set():
            self.aborted = "the eval was interrupted"
            raise ModelError(self.aborted)
        if self.cost >= self._limits.max_cost:
            raise ModelError(
                f"the run spent ${self.cost:.4f}, reaching --max-cost ${self._limits.max_cost:g}"
            )
        if self._clock() >= self._deadline:
            raise ModelError(
                f"the run took longer than --run-timeout {self._limits.run_timeout:g}s"
            )
        try:
            turn = self._inner.respond(request, on_text)
        except ModelError as error:
            self.aborted = f"the model failed: {error}"
            raise
        for key, value in turn.usage.items():
            self._usage[key] = self._usage.get(key, 0) + int(value)
        return turn


def execute_run(spec: RunSpec, stop: threading.Event | None = None) -> JSONObject:
    """Run ``spec`` in a fresh temporary workdir and return its result row.

    A failure of this machine rather than of the run (a full disk, a trace folder that cannot
    be written) raises :class:`RunAborted` naming it, so the eval reports it in one line and a
    resume runs it again.
    """
    try:
        return _execute_run(spec, stop)
    except OSError as error:
        detail = f"{error.strerror or error}" + (f": {error.filename}" if error.filename else "")
        raise RunAborted(f"{'/'.join(map(str, spec.key))}: {detail}") from error


def _execute_run(spec: RunSpec, stop: threading.Event | None) -> JSONObject:
    task, arm = spec.task, spec.arm
    workdir = Path(tempfile.mkdtemp(prefix=f"orchestrator-eval-{task.name}-"))
    try:
        _write_files(workdir, {**task.files, **task.check_files})
        started = time.monotonic()
        model = BoundedModel(_model_for(spec), spec.limits, stop=stop)
        tally = TraceTally()
        outcome, sandbox = _session(spec, workdir, model, tally)
        if model.aborted is not None:
            raise RunAborted(f"{'/'.join(map(str, spec.key))}: {model.aborted}")
        _write_files(workdir, task.check_files)
        check_exit, check_output = run_check(task.check, workdir, task.check_timeout, sandbox)
        return {
            "task": task.name,
            "arm": arm.name,
            "repeat": spec.repeat,
            "model": spec.model.name,
            "scripted": spec.model.scripted,
            "seed": spec.seed,
            "task_digest": task.digest,
            "status": outcome.status,
            "reason": outcome.reason,
            "success": outcome.status == "done" and check_exit == 0,
            "check_exit": check_exit,
            "check_output": check_output,
            "rounds": outcome.rounds,
            "duration_s": round(time.monotonic() - started, 3),
            **tally.fields(),
            "cost_usd": round(model.cost, 6),
            "trace": spec.trace,
            "workdir": str(workdir) if spec.keep_workdir else None,
            "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
    finally:
        if not spec.keep_workdir and workdir.is_symlink():
            workdir.unlink()  # the agent's link in its place; what it points at is not ours
        elif not spec.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def run_check(
    command: str, workdir: Path, timeout: float, sandbox: Sandbox | None = None
) -> tuple[int, str]:
    """Run a task's check command where the model's bash ran; its exit code and output's tail.

    The check runs the model's code, so it runs in ``sandbox``, the run's own (None: the one
    ``auto`` picks for ``workdir``), with its limits and ``PYTHONSAFEPATH=1`` as an item's check
    has them: never ``bash -c`` with the user's rights. ``python`` on its path is the
    interpreter orchestrator runs on, so a suite's checks work on a machine whose only Python
    is the one orchestrator was installed into. The verdict is the shell's exit, within
    ``timeout`` (then 124): only the tail of the output is kept (a check printing without end
    costs no memory), and a process the check left behind that still holds the output open
    (``setsid server &``) is not waited for.
    """
    if sandbox is None:
        sandbox = choose_sandbox("auto", SandboxPolicy(workdir)).sandbox
    python = shlex.quote(str(Path(sys.executable).parent))
    line = f'export PATH={python}:"$PATH"\n{command}'
    argv, env = sandbox.command(line, os.environ, extra_env=_CHECK_ENVIRONMENT)
    if sandbox.mode != "bwrap":
        argv = with_reaper(argv)  # bwrap's pid namespace ends what the check started
    process = subprocess.Popen(
        launcher(argv, sandbox.policy.limits, None),
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )
    assert process.stdout is not None
    tail = bytearray()
    deadline = time.monotonic() + timeout
    with process.stdout as stream, selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        try:
            # Never reaped before the kill by group below: a reaped pid may be a stranger's.
            while not has_exited(process) and time.monotonic() < deadline:
                wait = min(deadline - time.monotonic(), 0.1)
                if selector.get_map() and selector.select(max(wait, 0)):
                    if not _read_into(stream.fileno(), tail):
                        selector.unregister(stream)
                elif not selector.get_map():
                    wait_unreaped(process, max(wait, 0))
        finally:
            kill_group(process.pid)  # on timeout, and whatever the check left running
        code = process.wait()
        timed_out = code < 0 and time.monotonic() >= deadline
        # What the check wrote before it ended is still in the pipe; take it, but briefly.
        grace = time.monotonic() + 0.5
        while selector.get_map() and selector.select(max(grace - time.monotonic(), 0)):
            if not _read_into(stream.fileno(), tail):
                break
    if timed_out:
        tail += f"\n[check timed out after {timeout:g}s]".encode()
        code = 124
    text = bytes(tail).decode("utf-8", "replace")
    return code, text[-CHECK_OUTPUT_LIMIT:]


def _read_into(descriptor: int, tail: bytearray) -> bool:
    """Read what is there into ``tail``, keeping its end only; False at end of output."""
    chunk = os.read(descriptor, 1 << 16)
    tail += chunk
    # Four bytes a character at most, so the last CHECK_OUTPUT_LIMIT characters survive.
    del tail[: max(0, len(tail) - 4 * CHECK_OUTPUT_LIMIT)]
    return bool(chunk)


def _write_files(workdir: Path, files: Mapping[str, str]) -> None:
    """Write ``files`` inside ``workdir``, never through a link the agent may have left there.

    The check files are written after the agent's run, into a folder its commands could change:
    a ``check.py`` made a symlink to ``~/.bashrc`` must be replaced, not written through. So each
    folder on the way, the work directory itself included, is opened without following links
    (a link or a file in its place is removed, a missing one made again), and the file is
    created fresh beside them.
    """
    # The agent may have removed its work directory, or put a link in its place.
    parent = os.open(workdir.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        root = _open_folder(parent, workdir.name)
    finally:
        os.close(parent)
    try:
        for relative, content in files.items():
            *folders, name = PurePosixPath(relative).parts
            folder = os.dup(root)
            try:
                for part in folders:
                    inner = _open_folder(folder, part)
                    os.close(folder)
                    folder = inner
                _remove(folder, name)
                handle = os.open(
                    name,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                    0o644,
                    dir_fd=folder,
                )
                with open(handle, "w", encoding="utf-8") as stream:
                    stream.write(content)
            finally:
                os.close(folder)
    finally:
        os.close(root)


def _open_folder(parent: int, name: str) -> int:
    """The folder ``name`` in ``parent``, made a real folder if it is missing, a file or a link."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        pass
    except OSError as error:
        if error.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        _remove(parent, name)
    os.mkdir(name, 0o755, dir_fd=parent)
    return os.open(name, flags, dir_fd=parent)


def _remove(parent: int, name: str) -> None:
    """Remove ``name`` from ``parent`` whatever it is; a link is removed, not followed."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(name, dir_fd=parent)
    else:
        os.unlink(name, dir_fd=parent)


def _model_for(spec: RunSpec) -> Model:
    choice = spec.model
    if choice.scripted:
        return scripted_model(choice.kind, spec.task, spec.seed)
    from orchestrator.anthropic_model import AnthropicModel

    return AnthropicModel(
        api_key=choice.api_key,
        auth_token=choice.auth_token,
        base_url=choice.base_url,
        max_retries=choice.max_retries,
        timeout=min(choice.timeout, spec.limits.run_timeout),
    )


def _session(
    spec: RunSpec, workdir: Path, model: Model, tally: TraceTally
) -> tuple[RunOutcome, Sandbox | None]:
    """Run the task through the same session wiring as ``orchestrator run`` (the API's).

    Its outcome, and the sandbox its bash ran in (where the task's check runs too).
    """
    from orchestrator.agent import RunOptions, Session, silent_view

    harness, arm = spec.harness, spec.arm
    flags = {
        "model": spec.model.name,
        "max_tokens": spec.limits.max_tokens,
        "reminder_threshold": arm.reminder_threshold or harness.reminder_threshold,
        "plan_limit": harness.plan_limit,
        "plan_policy": arm.plan_policy or harness.plan_policy,
        # No approver: an eval runs unattended, as ``run --yes`` does, in a throwaway workdir.
        "approval": "auto",
        # auto falls back to workdir quietly here; `eval` refuses an unusable bwrap up front.
        "sandbox": harness.sandbox,
        "deny_bash": harness.deny_bash,
        "max_processes": harness.max_processes,
        "max_memory": harness.max_memory,
    }
    if arm.checks:
        # The check runs where bash runs; `python` in it is orchestrator's, as in run_check.
        python = shlex.quote(str(Path(sys.executable).parent))
        flags["completion_check"] = f'PATH={python}:"$PATH" {spec.task.check}'
        flags["check_timeout"] = spec.task.check_timeout
    config = load_config(workdir, flags, env={}, user_file=False)
    trace = Path(spec.trace)
    trace.parent.mkdir(parents=True, exist_ok=True)
    trace.unlink(missing_ok=True)  # an earlier attempt's, cut off before it was recorded
    session = Session(
        RunOptions(workdir.resolve(), config, trace=trace),
        model,
        board=PlanBoard(limit=config.plan_limit, policy=EdgePolicy(config.plan_policy)),
        board_tool=arm.board,
        settings=_settings(spec, workdir),
        extra_sinks=(tally,),
        view=silent_view(),
        say=_nowhere,
        notice=_nowhere,
        header=_nowhere,
        interactive=False,
        # The arms are judged by the task's check, as before plan_settled (issue 24).
        settle_plan=False,
    )
    try:
        outcome = session.turn(spec.task.prompt)
        return outcome, session.sandbox.sandbox if session.sandbox is not None else None
    except SettingsError as error:
        raise RunAborted(f"{'/'.join(map(str, spec.key))}: {error}") from None
    finally:
        session.close()


def _nowhere(_text: str) -> None:
    pass


def _settings(spec: RunSpec, workdir: Path) -> LoopSettings:
    arm = spec.arm
    return LoopSettings(
        model=spec.model.name,
        system=system_for(arm, DEFAULT_SYSTEM.format(workdir=workdir)),
        max_tokens=spec.limits.max_tokens,
        max_rounds=spec.limits.max_rounds or spec.task.max_rounds,
        reminder_threshold=arm.reminder_threshold or spec.harness.reminder_threshold,
        workdir=str(workdir),
        reminders=arm.board,
    )
