"""The public Python API: ``Agent(model=…, workdir=…, tools=[…]).run(task)``.

Settings take the CLI's names (``max_rounds``, ``sandbox``, ``approval``…) and the
environment and config files apply as they do for the CLI; a run is a :class:`Session`.
An embedded agent is silent: nothing reaches stderr unless ``console=`` asks for it. The
person's lines a CLI run prints go to the ``orchestrator`` logger instead (warnings), which
has a ``NullHandler``, so they show only where the program has configured logging. Errors name
settings as keywords (``max_rounds=``, ``trust=True``), not as the CLI's flags.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any, TextIO

import attrs

from orchestrator import report
from orchestrator.agent._parts import anthropic_model, new_board
from orchestrator.agent.options import RunOptions, load_options
from orchestrator.agent.result import RunResult, run_status
from orchestrator.agent.session import Session
from orchestrator.config import (
    SETTINGS,
    SettingsError,
    given,
    relabel,
)
from orchestrator.console import View, choose_view
from orchestrator.plan import PlanBoard
from orchestrator.protocols import (
    Model,
    Tool,
)
from orchestrator.sessions import SessionError
from orchestrator.tools.python import FunctionTool, tool
from orchestrator.trace import EventSink

_log = logging.getLogger("orchestrator")


def _quiet_logger() -> None:
    """A library's logger has a handler of its own, so Python's last resort never prints it."""
    if not any(isinstance(handler, logging.NullHandler) for handler in _log.handlers):
        _log.addHandler(logging.NullHandler())


class _SilentView:
    """The console of an embedded agent: nothing on the terminal unless asked for."""

    def __call__(self, event: Mapping[str, Any]) -> None:
        pass

    def on_text(self, text: str) -> None:
        pass

    def __enter__(self) -> _SilentView:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def paused(self) -> nullcontext[None]:
        return nullcontext()


def silent_view() -> View:
    """A console that shows nothing (an embedded agent, an eval's runs)."""
    return _SilentView()


def _api_label(name: str) -> str:
    """How the API names a setting in a message: as the keyword (``max_rounds=``)."""
    return f"{name}="


class _OnClassOrInstance:
    """``Agent.resume(trace)`` (a default agent) and ``agent.resume(trace)`` (this one's)."""

    def __init__(self, method: Callable[..., RunResult]) -> None:
        self.method = method
        self.__doc__ = method.__doc__

    def __get__(self, instance: Agent | None, owner: type[Agent]) -> Callable[..., RunResult]:
        target = instance if instance is not None else owner()
        return functools.partial(self.method, target)


class Agent:
    """A coding agent with a guarded todo board, embedded in a program.

    ``Agent(model="claude-…", workdir="proj", tools=[add], approval="auto").run(task)``.

    Keyword settings are the CLI's, under the same names (``max_rounds``, ``sandbox``,
    ``approval``, ``board``, ``context_window``, ``thinking``…); what is not given comes from
    the environment and config files as for the CLI. ``tools`` takes ``@tool`` functions,
    plain typed functions, objects with the tool protocol, and module names (as the ``tools``
    setting does). ``on_event`` (``Callable[[Mapping[str, Any]], None]``) receives every trace
    event as it is written, in the run's thread. ``trust``: ``True`` trusts the work
    directory's files (their hooks and MCP servers run), ``False`` runs without them; not
    given, a folder whose files name hooks or MCP servers and are not trusted is a
    :class:`SettingsError`. ``console``: ``True`` (stderr) or a stream shows the run as the CLI
    does; otherwise nothing is printed. ``client`` replaces the Messages-API client with any
    :class:`~orchestrator.protocols.Model` (a scripted model, for tests). Each :meth:`run` is
    a session of its own, with its own trace; :meth:`resume` continues one.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        workdir: str | os.PathLike[str] = ".",
        tools: Iterable[Tool | Callable[..., Any] | str] = (),
        on_event: EventSink | None = None,
        trace: str | os.PathLike[str] | None = None,
        trust: bool | None = None,
        console: bool | TextIO = False,
        client: Model | None = None,
        **settings: Any,
    ) -> None:
        known = {setting.name for setting in SETTINGS if not setting.secret}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise TypeError(
                f"Agent() got unknown setting(s) {', '.join(unknown)}; "
                f"the settings are: {', '.join(sorted(known))}"
            )
        tools = list(tools)
        modules = tuple(item for item in tools if isinstance(item, str))
        if modules:
            settings["tools"] = modules
        if model is not None:
            settings["model"] = model
        self.settings: dict[str, Any] = settings
        self.workdir = Path(workdir)
        self._workdir_given = workdir != "."
        self.tools = tuple(_as_tool(item) for item in tools if not isinstance(item, str))
        self.on_event = on_event
        self.trace = None if trace is None else Path(trace)
        self.trust = trust
        self.console = console
        self.client = client
        _quiet_logger()

    def run(self, task: str) -> RunResult:
        """Run ``task`` until it is done, fails or is interrupted; the result says which.

        A setting that cannot work here raises :class:`SettingsError`; everything that goes
        wrong during the run (a tool, the model, the API) ends in the result's ``status``.
        """
        if not task.strip():
            raise SettingsError("the task is empty; say what the agent should do")
        return self._run(self._session(self._options(self.trace)), task.strip())

    async def arun(self, task: str) -> RunResult:
        """:meth:`run` without blocking the event loop; async tools run on the caller's loop."""
        loop = asyncio.get_running_loop()
        for item in self.tools:
            if isinstance(item, FunctionTool):
                item.bind_loop(loop)
        try:
            return await asyncio.to_thread(self.run, task)
        finally:
            for item in self.tools:
                if isinstance(item, FunctionTool):
                    item.bind_loop(None)

    def _resume(self, trace: str | os.PathLike[str], instruction: str | None = None) -> RunResult:
        """Continue the session recorded in ``trace``, with ``instruction`` as the next message.

        ``Agent.resume(trace)`` goes on as the run was set up; ``agent.resume(trace)`` with
        this agent's settings and tools. An interrupted or failed run picks up where it
        stopped; a finished one needs the next ``instruction``. It keeps what ``orchestrator
        resume`` keeps (its help says it once): the work directory and the settings in
        :data:`KEPT_ON_RESUME` unless this agent was given them; never approval or sandbox.
        """
        from orchestrator.replay import rebuild
        from orchestrator.sessions import check_not_running, check_trace_appendable
        from orchestrator.trace_file import TraceError, read_trace

        path = Path(trace)
        try:
            rebuilt = rebuild(read_trace(path))
            check_trace_appendable(path)
            check_not_running(path)
        except (TraceError, SessionError) as error:
            raise SettingsError(str(error)) from None
        next_message = instruction.strip() if instruction and instruction.strip() else None
        if next_message is None and rebuilt.status == "done":
            raise SettingsError(f"{path}: that run finished (done); give the next instruction")
        if not self._workdir_given and rebuilt.settings.workdir:
            self.workdir = Path(rebuilt.settings.workdir)
        options = self._options(path)
        kept = {
            name: getattr(rebuilt.settings, name)
            for name in KEPT_ON_RESUME
            if name not in self.settings
        }
        options = attrs.evolve(
            options, config=options.config.updated(kept, source=f"{path} [run.started]")
        )
        board: dict[str, Any] = {"board": rebuilt.board}
        if not isinstance(rebuilt.board, PlanBoard):  # a shared board goes on in its store
            if options.config.board is None:
                raise SettingsError(f"{path}: the run worked a shared board; give board= again")
            board = {}
        session = self._session(
            options,
            **board,
            conversation=rebuilt.conversation,
            settings=attrs.evolve(
                rebuilt.settings, max_rounds=rebuilt.last_round + options.config.max_rounds
            ),
            resume_from=rebuilt,
        )
        return self._run(session, next_message)

    resume = _OnClassOrInstance(_resume)

    def _options(self, trace: Path | None) -> RunOptions:
        try:
            options = load_options(
                self.workdir,
                self.settings,
                trust=bool(self.trust),
                label=_api_label,
                trace=trace,
                quiet=not self.console,
            )
        except SettingsError as error:
            raise SettingsError(relabel(str(error), _api_label)) from None
        if self.trust is None:
            _refuse_untrusted(options)
        return options

    def _session(self, options: RunOptions, **kwargs: Any) -> Session:
        view: View = _SilentView()
        write, notice = _nowhere, _log.warning
        if self.console:
            stream = sys.stderr if isinstance(self.console, bool) else self.console
            view = choose_view(quiet=False, as_json=False, stream=stream)
            write = notice = functools.partial(_write_line, stream)
        if "board" not in kwargs:
            kwargs["board"] = new_board(options.config, notice, _api_label)
        model = self.client if self.client is not None else anthropic_model(options.config)
        return Session(
            options,
            model,
            extra_sinks=() if self.on_event is None else (self.on_event,),
            extra_tools=self.tools,
            view=view,
            say=write,
            notice=notice,
            header=write,
            interactive=False,
            **kwargs,
        )

    @staticmethod
    def _run(session: Session, task: str | None) -> RunResult:
        try:
            outcome = session.turn(task)
            run_id = session.run_id
        except SettingsError as error:  # what only the start can tell (the model's limits)
            raise SettingsError(relabel(str(error), _api_label)) from None
        finally:
            session.close()
        ended = session.report_for(outcome, report.EXIT_INTERRUPTED)
        if ended.picture_command:  # on the console, when the agent has one
            session.say(f"picture: {ended.picture_command}")
        conversation = session.conversation_now
        return RunResult(
            status=run_status(outcome.status),
            answer=outcome.text,
            rounds=outcome.rounds,
            plan=tuple(item.as_dict() for item in session.board.items),
            usage=dict(session.totals.usage),
            cost_usd=None if ended.cost is None else round(ended.cost, 6),
            trace=session.trace_path,
            reason=ended.reason,
            exit_code=ended.exit_code,
            run_id=run_id,
            messages=tuple(conversation.messages) if conversation is not None else (),
            unfinished=outcome.unfinished,
            refused=tuple(ended.refused),
        )


def _nowhere(_text: str) -> None:
    pass


def _write_line(stream: TextIO, text: str) -> None:
    stream.write(text + "\n")
    stream.flush()


def _refuse_untrusted(options: RunOptions) -> None:
    """Hooks or MCP servers the folder's untrusted files name: the program must say ``trust=``.

    The CLI asks on a terminal, or goes on without them and says so; a program has neither,
    and a run that silently lacks the project's hooks is not the run it asked for.
    """
    files = list(options.hooks_untrusted)
    if not options.mcp_trusted:
        files.extend(server.origin for server in options.mcp_servers if server.project)
    if files:
        shown = ", ".join(dict.fromkeys(files))
        raise SettingsError(
            f"{shown}: this folder's files name hooks or MCP servers, and the folder is not "
            f"trusted; pass {given(_api_label, 'trust', True)} to run them, or "
            f"{given(_api_label, 'trust', False)} to run without them"
        )


def _as_tool(item: Tool | Callable[..., Any]) -> Tool:
    if isinstance(item, FunctionTool):
        return item
    if all(hasattr(item, name) for name in ("name", "schema", "run")):
        return item  # type: ignore[return-value]
    if callable(item):
        return tool(item)
    raise TypeError(f"tools: expected a @tool function, a Tool or a module name, got {item!r}")


#: What a resumed run keeps from its trace's settings unless this resume says otherwise; the
#: permissions (approval, sandbox) are never among them: a trace is a file, not a person's word.
#: ``orchestrator resume``'s help lists them (a test holds the two together).
KEPT_ON_RESUME = ("model", "max_tokens", "reminder_threshold", "thinking", "effort", "compaction")
