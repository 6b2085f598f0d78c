"""Running hooks: Claude Code's JSON in, its exit codes and JSON decisions out.

Each hook gets Claude Code's common fields (``session_id``, ``transcript_path``, ``cwd``,
``permission_mode``, ``hook_event_name``) and the event's own, with ours under
``orchestrator``. Exit 2 blocks (stderr is the reason); a JSON object on stdout decides on any
exit code, read from its first megabyte; anything else is an error shown to the person that
blocks nothing. What a hook says is cut to the tool output cap, head and tail. Every hook that
matches an event runs, side by side, and their answers are combined as Claude Code combines
them (:func:`_combined`), in the order the hooks are configured.

Hooks run inside the sandbox bash runs in, by default: the work directory writable, the trace
and the files the command names readable, an environment without the key or any secret, and
nothing it starts outliving it (a per-call subreaper, which under bwrap also waits out the pid
namespace). A hook with ``outside = true`` runs with the user's rights instead (still without
the secrets). Every hook runs with ``PYTHONSAFEPATH=1``: a ``python3 hook.py`` never imports a
module the model planted beside it. A hook whose script in the work directory differs from what
a person trusted, or changed during the run, does not run; nor does an outside hook whose
command runs something from the work directory that cannot be pinned
(:mod:`orchestrator.pinning`). The run says so and ends with exit code 3.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import attrs

from orchestrator.hooks.loading import Hook
from orchestrator.hooks.payload import PERMISSION_MODES
from orchestrator.inert import inert
from orchestrator.pinning import pin_problem
from orchestrator.protocols import JSONObject
from orchestrator.tools.arguments import OUTPUT_LIMIT, cut_middle
from orchestrator.tools.processes import (
    kill_everything,
    kill_group,
    launcher,
    wait_unreaped,
    with_reaper,
)
from orchestrator.tools.sandbox import Sandbox, SandboxPolicy
from orchestrator.tools.secrets import scrub_environment

#: How a call a ``PreToolUse`` hook refused begins (replay knows the tool never ran).
PRE_TOOL_USE_BLOCKED = "Error: a PreToolUse hook blocked this"
#: How a ``TaskCompleted`` hook's outcome is named in ``plan.check`` (replay finds it so).
TASK_COMPLETED_HOOK = "TaskCompleted hook"
#: How much of stdout a JSON decision is read from.
JSON_LIMIT = 1 << 20
#: The variable every hook finds the project in, as in Claude Code.
PROJECT_DIR = "CLAUDE_PROJECT_DIR"
BLOCKING_EXIT = 2
#: Set for every hook: ``python3 .claude/hooks/x.py`` does not put the script's folder first
#: on ``sys.path``, so a ``json.py`` the model writes beside it is never imported.
SAFE_PYTHON = {"PYTHONSAFEPATH": "1"}
#: Events whose plain stdout (not JSON) joins the conversation, as in Claude Code.
_PLAIN_TEXT_CONTEXT = frozenset({"UserPromptSubmit", "SessionStart"})
#: Events a hook can refuse: one whose script was tampered with refuses too (fails closed).
_GATES = frozenset({"PreToolUse", "UserPromptSubmit", "Stop", "TaskCompleted"})
#: PreToolUse's permission decisions, weakest first: the strongest of several hooks wins.
_PERMISSIONS = ("", "allow", "ask", "deny")
_TEXT_BYTES = 2 * OUTPUT_LIMIT


@attrs.frozen
class HookOutcome:
    """What the hooks of one event said: whether one blocked, why, and what to tell whom."""

    blocked: bool = False
    #: Why: every blocking hook's reason, one after another on lines of their own.
    reason: str = ""
    #: Non-blocking failures, one line each, for the person.
    errors: tuple[str, ...] = ()
    #: Words for the model: ``additionalContext`` (plain stdout for two events).
    context: str = ""
    #: The hook commands that blocked (comma-separated).
    command: str = ""
    #: ``PreToolUse``: ``allow`` or ``ask`` ("" when no hook decided; ``deny`` blocks).
    permission: str = ""
    permission_reason: str = ""
    #: ``PreToolUse``: the call's new input, in Claude Code's names, and the hook that gave it.
    updated_input: JSONObject | None = None
    updated_by: str = ""


@attrs.frozen
class HookRefusal:
    """A hook that did not run because its script is not what a person trusted."""

    event: str
    command: str
    reason: str


@attrs.frozen
class _Said:
    """One hook's answer, read."""

    blocked: bool = False
    reason: str = ""
    context: str = ""
    permission: str = ""
    permission_reason: str = ""
    updated_input: JSONObject | None = None


@attrs.frozen
class _Ran:
    """A finished hook: its exit code (None: timed out), stdout's head, both streams as text."""

    code: int | None
    head: bytes = b""
    stdout: str = ""
    stderr: str = ""


@attrs.define
class _Started:
    """A hook on its way: its process, when its time is up, where its output goes."""

    process: subprocess.Popen[bytes]
    deadline: float
    out: IO[bytes]
    err: IO[bytes]
    timed_out: bool = False


def _default_sandbox(self: HookRunner) -> Sandbox:
    return Sandbox("workdir", SandboxPolicy(self.cwd))


@attrs.define
class HookRunner:
    """Runs the hooks of a session; mutation is the point (what was refused, said, pinned)."""

    hooks: tuple[Hook, ...]
    cwd: Path = attrs.field(converter=Path)
    session_id: str = ""
    transcript_path: str = ""
    #: Values never to show (keys): hook output is redacted as tool output is, and no hook's
    #: environment holds them.
    secrets: tuple[str, ...] = ()
    #: Where a non-blocking error goes (a line on stderr in the CLI).
    notice: Callable[[str], None] = lambda _line: None
    #: The sandbox bash runs in; hooks without ``outside`` run in it.
    sandbox: Sandbox = attrs.field(
        default=attrs.Factory(_default_sandbox, takes_self=True), kw_only=True
    )
    #: Our ``--approval`` mode (``permission_mode`` in Claude Code's words).
    approval: str = attrs.field(default="ask", kw_only=True)
    #: The digests of the work directory's files a person trusted (relative path → sha256).
    trusted_files: Mapping[str, str] = attrs.field(factory=dict, kw_only=True)
    #: Hooks that did not run because of their scripts; each counts in the exit code.
    refused: list[HookRefusal] = attrs.field(factory=list, init=False)
    _pins: dict[Hook, dict[str, str]] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        # What every hook's scripts hold now: a change during the run is the model's.
        for hook in self.hooks:
            if hook.runs:
                self._pins[hook] = hook.reading(self.cwd).pins(self.cwd)

    def has(self, event: str) -> bool:
        return any(hook.event == event and hook.runs for hook in self.hooks)

    def check_scripts(self) -> None:
        """Say now, once each, which hooks will not run because of their scripts."""
        for hook in self.hooks:
            if hook.runs:
                self._tampered(hook)

    def run(
        self,
        event: str,
        fields: Mapping[str, Any],
        match: str | None = None,
        *,
        ours: Mapping[str, Any] | None = None,
        input_problem: Callable[[JSONObject], str] | None = None,
    ) -> HookOutcome:
        """Every hook of ``event`` that matches ``match``, side by side; their answers combined.

        As in Claude Code, one hook's block stops none of the others (a logger beside a
        validator still logs): the strongest decision wins (deny, ask, allow), every blocking
        reason and every context is kept, in the order the hooks are configured, whichever
        finished first. Identical commands run once. ``fields`` are Claude Code's; ``ours``
        go under ``orchestrator`` beside them. ``input_problem`` says what is wrong with a
        ``PreToolUse`` hook's ``updatedInput`` for the tool ("" when nothing is).
        """
        payload = {
            "session_id": self.session_id,
            "transcript_path": self.transcript_path,
            "cwd": str(self.cwd),
            "permission_mode": PERMISSION_MODES.get(self.approval, "default"),
            "hook_event_name": event,
            **fields,
            "orchestrator": {"approval": self.approval, **(ours or {})},
        }
        stdin = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        hooks = self._matching(event, match)
        # What a script pins is checked first, in order; the rest start together.
        refused = {hook: self._tampered(hook) for hook in hooks}
        ready = [hook for hook in hooks if refused[hook] is None]
        finished = dict(zip(ready, self._execute_all(ready, stdin), strict=True))
        errors: list[str] = []
        said: list[tuple[Hook, _Said]] = []
        for hook in hooks:
            name = f"{hook.event} hook `{hook.shown}`"
            tampered = refused[hook]
            if tampered is not None:
                if hook.event in _GATES:
                    reason = f"{name} did not run: {tampered}; nothing it guards may pass"
                    said.append((hook, _Said(True, reason)))
                continue
            answer = self._read(hook, finished[hook], errors)
            if answer.updated_input is not None and input_problem is not None:
                answer = _checked_input(answer, input_problem, name, match, errors)
            said.append((hook, answer))
        self._say(errors)
        return _combined(said, errors)

    def _matching(self, event: str, match: str | None) -> list[Hook]:
        """The hooks that run for ``event`` and ``match``, in order; a repeated command once."""
        chosen: dict[tuple[str, bool], Hook] = {}
        for hook in self.hooks:
            if hook.event == event and hook.runs and hook.matches(match):
                chosen.setdefault((hook.shell_command(self.cwd), hook.outside), hook)
        return list(chosen.values())

    def _say(self, errors: Sequence[str]) -> None:
        for line in errors:
            self.notice(line)

    # --- one hook's answer ---------------------------------------------------------------------

    def _read(self, hook: Hook, ran: _Ran | OSError, errors: list[str]) -> _Said:
        """What one finished hook said, by its exit code and JSON; its errors into ``errors``."""
        name = f"{hook.event} hook `{hook.shown}`"
        if isinstance(ran, OSError):
            errors.append(inert(f"orchestrator: {name} could not start: {ran}"))
            return _Said()
        if ran.code is None:
            errors.append(inert(f"orchestrator: {name} timed out after {hook.timeout:g} s; killed"))
            return _Said()
        document, problem = _json_of(ran)
        if problem:
            errors.append(inert(f"orchestrator: {name} {problem}"))
        said = _Said() if document is None else _read_decision(document, hook.event, name)
        if document is not None:
            self._show_message(document, name)
        if ran.code == BLOCKING_EXIT:
            # Exit 2 blocks whatever the JSON says; its blocking reason is the JSON's, or stderr.
            reason = said.reason if said.blocked else ran.stderr.strip()
            return attrs.evolve(said, blocked=True, reason=reason or f"blocked by {name}")
        if document is not None:
            return said  # on any other exit code a JSON object alone decides
        if ran.code != 0:
            detail = ran.stderr.strip().splitlines()[-1:] or ["no message"]
            errors.append(inert(f"orchestrator: {name} failed (exit {ran.code}): {detail[0]}"))
            return _Said()
        if hook.event in _PLAIN_TEXT_CONTEXT and not problem:
            return _Said(context=ran.stdout.strip())
        return _Said()

    def _show_message(self, document: JSONObject, name: str) -> None:
        message = document.get("systemMessage")
        if isinstance(message, str) and message.strip():
            self.notice(inert(f"orchestrator: {name}: {cut_middle(message.strip())}"))

    # --- scripts -------------------------------------------------------------------------------

    def _tampered(self, hook: Hook) -> str | None:
        """Why ``hook`` may not run now because of what it runs from the work directory."""
        reading = hook.reading(self.cwd)
        if hook.outside and reading.refusal:
            self._refuse(
                hook,
                reading.refusal,
                fix="drop outside = true, or move what it runs out of the work directory",
            )
            return reading.refusal
        reason = pin_problem(
            reading.pins(self.cwd),
            self.cwd,
            trusted=self.trusted_files,
            started=self._pins.get(hook, {}),
            outside=hook.outside,
        )
        if reason is not None:
            self._refuse(hook, reason, fix="review it, then `orchestrator trust` records it")
        return reason

    def _refuse(self, hook: Hook, reason: str, *, fix: str) -> None:
        refusal = HookRefusal(hook.event, hook.shown, reason)
        if refusal in self.refused:
            return
        self.refused.append(refusal)
        self.notice(
            inert(f"! {hook.event} hook `{hook.shown}` does not run: {reason}; {fix} (exit code 3)")
        )

    # --- starting it ---------------------------------------------------------------------------

    def _execute_all(self, hooks: Sequence[Hook], stdin: bytes) -> list[_Ran | OSError]:
        """Run ``hooks`` side by side, each in its own session, each killed at its own timeout.

        Each reads the payload from a file of its own and writes to files, not pipes: nothing
        blocks on a hook that does not read, a child it leaves behind cannot hold a pipe open
        for ever, and the hook's verdict is its own exit, not its children's. They are waited
        for soonest deadline first, so a hook is killed as its time runs out, whichever of the
        others is still running.
        """
        with contextlib.ExitStack() as files:
            started: list[_Started | OSError] = []
            try:
                for hook in hooks:
                    started.append(self._start(hook, stdin, files))
                running = [entry for entry in started if isinstance(entry, _Started)]
                for hook_run in sorted(running, key=lambda entry: entry.deadline):
                    # Left unreaped, so the kill by its group in _ran reaches its group only.
                    remaining = max(hook_run.deadline - time.monotonic(), 0)
                    if not wait_unreaped(hook_run.process, remaining):
                        kill_everything(hook_run.process, None)  # what it started, setsid too
                        hook_run.process.wait()
                        hook_run.timed_out = True
            except BaseException:
                # Ctrl-C mid-hook: nothing any of them started outlives it.
                for left in started:
                    if isinstance(left, _Started):
                        kill_everything(left.process, None)
                        left.process.wait()
                raise
            return [entry if isinstance(entry, OSError) else self._ran(entry) for entry in started]

    def _start(self, hook: Hook, stdin: bytes, files: contextlib.ExitStack) -> _Started | OSError:
        try:
            argv, env = self._command(hook)
            source = _scratch(files)
            source.write(stdin)
            source.seek(0)
            out = _scratch(files)
            err = _scratch(files)
            process = subprocess.Popen(
                argv,
                cwd=self.cwd,
                env=env,
                stdin=source,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its children are killed with it
            )
        except OSError as error:
            return error
        return _Started(process, time.monotonic() + hook.timeout, out, err)

    def _ran(self, entry: _Started) -> _Ran:
        if entry.timed_out:
            return _Ran(None)
        kill_group(entry.process.pid)  # the reaper or bwrap ended the rest; a straggler goes too
        code = entry.process.wait()
        head, stdout = _captured(entry.out)
        return _Ran(code, head, self._redacted(stdout), self._redacted(_captured(entry.err)[1]))

    def _command(self, hook: Hook) -> tuple[list[str], dict[str, str]]:
        """The argv and environment one hook starts with: in the sandbox, or outside it."""
        command = hook.shell_command(self.cwd)
        if hook.outside:
            env = {**scrub_environment(os.environ), PROJECT_DIR: str(self.cwd), **SAFE_PYTHON}
            return with_reaper(["/bin/sh", "-c", command]), self._without_secrets(env)
        sandbox = self._sandbox_for(hook)
        source = {**os.environ, PROJECT_DIR: str(self.cwd)}
        argv, env = sandbox.command(command, source, extra_env=SAFE_PYTHON)
        # Under bwrap too: bwrap ends as soon as the hook's own process does, while the kernel
        # is still killing what the hook left in its pid namespace. The reaper adopts the
        # namespace's init and returns once all of it is gone.
        argv = with_reaper(argv)
        return launcher(argv, sandbox.policy.limits, None), self._without_secrets(env)

    def _sandbox_for(self, hook: Hook) -> Sandbox:
        """Bash's sandbox, showing the trace and the files the command names, read-only."""
        policy = self.sandbox.policy
        trace = Path(self.transcript_path) if self.transcript_path else None
        readable = [*hook.reading(self.cwd).outside]
        if trace is not None and trace.exists():
            readable.append(trace)
        hooked = attrs.evolve(
            policy,
            env_names=(*policy.env_names, PROJECT_DIR),
            ro_paths=(*policy.ro_paths, *readable),
            hidden=tuple(path for path in policy.hidden if path != trace),
            home=_hook_home(policy.home) if self.sandbox.mode == "bwrap" else policy.home,
        )
        return attrs.evolve(self.sandbox, policy=hooked)

    def _without_secrets(self, env: dict[str, str]) -> dict[str, str]:
        hidden = set(self.secrets)
        return {name: value for name, value in env.items() if value not in hidden}

    def _redacted(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[REDACTED]")
        return text


def _scratch(files: contextlib.ExitStack) -> IO[bytes]:
    """A temporary file, closed (and gone) with ``files``."""
    return files.enter_context(tempfile.TemporaryFile())


def _hook_home(fallback: str) -> str:
    """Where a hook's sandbox mounts its empty home: the user's home path, not ``/``.

    ``~/…`` in the command then finds the files it names, bound there read-only.
    """
    try:
        home = Path.home()
    except RuntimeError:  # no HOME and no passwd entry
        return fallback
    return str(home) if home.is_absolute() and home != Path("/") else fallback


def _captured(file: IO[bytes]) -> tuple[bytes, str]:
    """A stream's first megabyte (and one byte more), and its text cut to the output cap."""
    size = file.seek(0, os.SEEK_END)
    file.seek(0)
    head = file.read(JSON_LIMIT + 1)
    if size <= _TEXT_BYTES:
        return head, cut_middle(head.decode("utf-8", errors="replace"))
    first = head[:_TEXT_BYTES].decode("utf-8", errors="replace")[: OUTPUT_LIMIT // 2]
    file.seek(size - _TEXT_BYTES)
    last = file.read().decode("utf-8", errors="replace")[-(OUTPUT_LIMIT // 2) :]
    shown = len(first.encode("utf-8")) + len(last.encode("utf-8"))
    return head, cut_middle(first + last, cut=max(size - shown, 1))


def _json_of(ran: _Ran) -> tuple[JSONObject | None, str]:
    """The JSON object stdout holds (read from its first megabyte), and any problem with it."""
    text = ran.head.decode("utf-8", errors="replace").strip()
    if not text.startswith("{"):
        return None, ""
    if len(ran.head) > JSON_LIMIT:
        return None, "printed more than 1 MB; its JSON was not read"
    try:
        document = json.loads(text)
    except ValueError:
        return None, "printed something that is not JSON; ignored"
    return (document, "") if isinstance(document, dict) else (None, "")


def _checked_input(
    said: _Said,
    problem_of: Callable[[JSONObject], str],
    name: str,
    tool: str | None,
    errors: list[str],
) -> _Said:
    """``said`` without an ``updatedInput`` the tool cannot take: the hook's mistake, said.

    The call then goes on with the model's own input, as it does when a hook's answer cannot
    be read at all; the ``allow`` that came with the input is dropped with it (it was given
    for that input), while ``ask`` and ``deny`` still count.
    """
    assert said.updated_input is not None
    problem = problem_of(said.updated_input)
    if not problem:
        return said
    errors.append(
        inert(
            f"orchestrator: {name} gave an updatedInput {tool or 'the tool'} cannot take "
            f"({problem}); the call goes on with the model's input"
        )
    )
    permission = "" if said.permission == "allow" else said.permission
    return attrs.evolve(said, updated_input=None, permission=permission)


def _combined(said: Sequence[tuple[Hook, _Said]], errors: Sequence[str]) -> HookOutcome:
    """One event's answers as Claude Code combines them, in the order the hooks are configured.

    Any block blocks, with every blocking reason; the strongest permission wins (deny, ask,
    allow); every context is kept; of several new inputs the last hook's is used.
    """
    blocking = [(hook, answer) for hook, answer in said if answer.blocked]
    context = "\n".join(answer.context for _hook, answer in said if answer.context)
    if blocking:
        reasons = dict.fromkeys(answer.reason for _hook, answer in blocking)
        commands = dict.fromkeys(hook.shown for hook, _answer in blocking)
        return HookOutcome(True, "\n".join(reasons), tuple(errors), context, ", ".join(commands))
    permission, permission_reason = "", ""
    updated: JSONObject | None = None
    updated_by = ""
    for hook, answer in said:
        if _PERMISSIONS.index(answer.permission) > _PERMISSIONS.index(permission):
            permission, permission_reason = answer.permission, answer.permission_reason
        if answer.updated_input is not None:
            updated, updated_by = answer.updated_input, hook.shown
    return HookOutcome(
        False,
        "",
        tuple(errors),
        context,
        permission=permission,
        permission_reason=permission_reason,
        updated_input=updated,
        updated_by=updated_by,
    )


def _read_decision(document: JSONObject, event: str, name: str) -> _Said:
    """Claude Code's JSON decision, as that event reads it."""
    specific = document.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    context = specific.get("additionalContext")
    context = cut_middle(context.strip()) if isinstance(context, str) else ""
    reason = str(document.get("reason") or specific.get("permissionDecisionReason") or "")
    reason = cut_middle(reason)
    if document.get("continue") is False:
        # It outranks "decision", as in Claude Code, which then stops working altogether: a
        # Stop hook's lets the run end; elsewhere the step the hook guards is refused.
        if event == "Stop":
            return _Said()
        stop = cut_middle(str(document.get("stopReason") or ""))
        return _Said(True, stop or reason or f"stopped by {name}", context)
    decision = document.get("decision")
    permission = specific.get("permissionDecision")
    if event == "PreToolUse" and permission is None:
        # The deprecated top-level form: "approve" is allow, "block" is deny.
        permission = {"approve": "allow", "block": "deny"}.get(str(decision))
    if decision == "block" or permission == "deny":
        return _Said(True, reason or f"blocked by {name}", context)
    if event != "PreToolUse":
        return _Said(context=context)
    updated = specific.get("updatedInput")
    return _Said(
        context=context,
        permission=permission if permission in ("allow", "ask") else "",
        permission_reason=reason,
        updated_input=dict(updated) if isinstance(updated, dict) else None,
    )
