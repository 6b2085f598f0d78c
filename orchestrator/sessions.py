"""Where sessions live and how to find them again: the per-user state directory.

Traces go to ``<state dir>/sessions/<workdir as a folder name>/<time>-<run id>.jsonl``, grouped
by work directory as Claude Code keeps ``~/.claude/projects/``, so the user's repository stays
clean. The state directory is ``platformdirs``' user state dir (on Linux ``$XDG_STATE_HOME/
orchestrator`` or ``~/.local/state/orchestrator``), or ``$ORCHESTRATOR_STATE_DIR``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from orchestrator.approval import is_refusal
from orchestrator.inert import inert
from orchestrator.pricing import Prices, UsageTotals

STATE_DIR_VARIABLE = "ORCHESTRATOR_STATE_DIR"
_FOLDER_NAME_LIMIT = 80


class SessionError(Exception):
    """A trace place that cannot be used; ``str()`` is one line for a person."""


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get(STATE_DIR_VARIABLE):
        return Path(env[STATE_DIR_VARIABLE])
    import platformdirs

    return Path(platformdirs.user_state_dir("orchestrator"))


def sessions_dir(env: Mapping[str, str] | None = None) -> Path:
    return state_dir(env) / "sessions"


def workdir_folder(workdir: Path, env: Mapping[str, str] | None = None) -> Path:
    """The folder holding one work directory's traces: its path, made a folder name."""
    resolved = str(workdir.resolve())
    name = re.sub(r"[^A-Za-z0-9._]+", "-", resolved).strip("-") or "root"
    if len(name) > _FOLDER_NAME_LIMIT:
        digest = hashlib.sha256(resolved.encode()).hexdigest()[:10]
        name = name[-(_FOLDER_NAME_LIMIT - 11) :] + "-" + digest
    return sessions_dir(env) / name


def new_trace_path(workdir: Path, run_id: str, env: Mapping[str, str] | None = None) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return workdir_folder(workdir, env) / f"{stamp}-{run_id}.jsonl"


def check_new_trace(path: Path, *, flag: str = "--trace") -> None:
    """Refuse a trace place that exists already (never overwrite a run) or cannot be written."""
    if path.exists():
        raise SessionError(
            f"{flag} {path}: already exists; a run never overwrites another. Pick a new path, "
            f"or continue that session with `orchestrator resume {path}`"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SessionError(f"{flag} {path}: cannot create its folder: {error.strerror}") from None
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise SessionError(f"{flag} {path}: cannot write into {path.parent} (permission denied)")


def check_trace_appendable(path: Path) -> None:
    if not os.access(path, os.W_OK):
        raise SessionError(f"{path}: cannot append to it (permission denied)")


class SessionLock:
    """A running session's lock: ``TRACE.lock`` beside the trace, holding the owner's pid.

    Taken before the trace is opened and given back at the end, so a second process (a
    ``resume`` typed in another terminal) cannot write the same trace or run tools in the same
    folder at once. The lock is an ``flock``: a dead owner's goes with its process, and the
    next session takes it over.
    """

    def __init__(self, trace: Path) -> None:
        self.path = trace.with_name(trace.name + ".lock")
        self._handle: int | None = None

    def take(self) -> None:
        """Hold the lock, or raise :class:`SessionError` naming the pid that holds it."""
        import fcntl

        while True:
            handle = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.read(handle, 32).decode("ascii", "replace").strip() or "?"
                os.close(handle)
                raise SessionError(
                    f"{self.path.name.removesuffix('.lock')} is running in another process "
                    f"(pid {holder}); wait for it to end, or start a new session"
                ) from None
            # The holder before us may have removed the file as it let go: lock the new one.
            try:
                same = os.fstat(handle).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(handle)
        os.ftruncate(handle, 0)
        os.write(handle, f"{os.getpid()}\n".encode())
        self._handle = handle

    def fileno(self) -> int:
        """The held lock's descriptor (a child given it holds the lock until it ends too)."""
        if self._handle is None:
            raise SessionError(f"{self.path.name} is not held")
        return self._handle

    def release(self) -> None:
        if self._handle is None:
            return
        self.path.unlink(missing_ok=True)
        os.close(self._handle)
        self._handle = None


def killed_note(trace: Path) -> str | None:
    """A line saying the trace's last run never finished (killed), or None when it did."""
    open_run = False
    for event in _events(trace):
        name = event.get("event")
        if name == "run.started":
            open_run = True
        elif name == "run.finished":
            open_run = False
    if not open_run:
        return None
    if running_pid(trace) is not None:
        return f"{trace.name}: its run is still going (no run.finished yet)"
    return f"{trace.name}: its last run has no run.finished: it was killed before it could end"


def check_not_running(trace: Path) -> None:
    """Refuse a session another process is running now, naming its pid."""
    pid = running_pid(trace)
    if pid is not None:
        raise SessionError(
            f"{trace.name} is running in another process (pid {pid or '?'}); wait for it to "
            "end, or start a new session"
        )


def running_pid(trace: Path) -> int | None:
    """The pid of the process running the session in ``trace`` now, or None."""
    import fcntl

    lock = trace.with_name(trace.name + ".lock")
    try:
        handle = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        text = os.read(handle, 32).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else 0
    finally:
        os.close(handle)
    return None


@attrs.frozen
class SessionSummary:
    """One session as ``orchestrator sessions`` lists it."""

    path: Path
    started: str
    workdir: str
    task: str
    status: str
    rounds: int
    usage: Mapping[str, int]
    cost: float | None
    refused: int = 0
    run_id: str = ""

    def as_dict(self) -> dict[str, Any]:
        """``sessions --json``: one object per session."""
        return {
            "run_id": self.run_id,
            "trace": str(self.path),
            "status": self.status,
            "rounds": self.rounds,
            "cost_usd": None if self.cost is None else round(self.cost, 6),
            "workdir": self.workdir,
            "task": self.task,
            "started": self.started,
            "refused": self.refused,
        }

    @property
    def outcome(self) -> str:
        """The status, with the refusals that keep a done run from being a clean success."""
        return f"{self.status}, {self.refused} refused" if self.refused else self.status


def summarize(path: Path, prices: Prices | None = None) -> SessionSummary:
    """Read one trace into a summary (``prices`` overrides the table); bad lines are skipped."""
    started, workdir, task, model, status, run_id = "", "", "", "", "unfinished", ""
    rounds = refused = 0
    totals = UsageTotals()
    for event in _events(path):
        name = event.get("event")
        run_id = run_id or str(event.get("run_id") or "")
        if name == "run.started":
            started = started or str(event.get("ts", ""))
            settings = _mapping(event.get("settings"))
            workdir = workdir or str(settings.get("workdir", ""))
            model = str(settings.get("model") or model)
            if not task and event.get("task"):
                task = str(event["task"])
            status = "unfinished"
        elif name == "run.finished":
            status = str(event.get("status", "unfinished"))
            finished_at = event.get("rounds")
            if isinstance(finished_at, int):
                rounds = max(rounds, finished_at)
        elif name == "tool.result" and event.get("is_error"):
            refused += is_refusal(str(event.get("output", "")))
        elif name == "model.response":
            totals(event)  # each round priced at the model that served it
    cost = totals.cost(prices, model)
    pid = running_pid(path)
    if pid is not None:
        status = f"running (pid {pid})"
    elif status == "unfinished" and started:
        status = "killed"  # no run.finished, and no process holds it: it was cut off
    return SessionSummary(
        path, started, workdir, task, status, rounds, totals.usage, cost, refused, run_id
    )


def _mapping(value: object) -> Mapping[str, Any]:
    # A listing reads every trace in the state dir, hand-edited ones too: odd shapes count as empty.
    return value if isinstance(value, Mapping) else {}


def _events(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with path.open(encoding="utf-8", errors="replace") as stream:
            for line in stream:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    yield event
    except OSError:
        return


def recent_traces(
    *, workdir: Path | None = None, env: Mapping[str, str] | None = None
) -> list[Path]:
    """Every trace in the state directory (one work directory's, if given), newest first."""
    root = workdir_folder(workdir, env) if workdir is not None else sessions_dir(env)
    pattern = "*.jsonl" if workdir is not None else "*/*.jsonl"
    found = [path for path in root.glob(pattern) if path.is_file()]
    return sorted(found, key=lambda path: path.stat().st_mtime, reverse=True)


def latest_trace(workdir: Path, env: Mapping[str, str] | None = None) -> Path | None:
    traces = recent_traces(workdir=workdir, env=env)
    return traces[0] if traces else None


def trace_named(name: str, env: Mapping[str, str] | None = None) -> Path | None:
    """The trace ``name`` means: a path to a trace, or a run id (as printed everywhere)."""
    path = Path(name)
    if path.is_file():
        return path
    if not re.fullmatch(r"[0-9a-f]{6,32}", name):
        return None
    found = [
        trace
        for trace in sessions_dir(env).glob(f"*/*-{name}*.jsonl")
        if trace.is_file() and trace.stem.rsplit("-", 1)[-1].startswith(name)
    ]
    return max(found, key=lambda trace: trace.stat().st_mtime) if found else None


def print_sessions(
    workdir: Path | None, limit: int, prices: Prices | None = None, *, as_json: bool = False
) -> None:
    """``orchestrator sessions``: one line per session, newest first, then how to resume."""
    import click

    traces = recent_traces(workdir=workdir)[:limit]
    if as_json:
        rows = [summarize(path, prices).as_dict() for path in traces]
        click.echo(json.dumps(rows, ensure_ascii=False))
        return
    if not traces:
        where = f"for {workdir.resolve()} " if workdir is not None else ""
        click.echo(f"no sessions {where}yet (they are kept in {sessions_dir()})")
        return
    for path in traces:
        summary = summarize(path, prices)
        when = summary.started[:19].replace("T", " ") or "?"
        cost = "?" if summary.cost is None else f"${summary.cost:.4f}"
        task = " ".join(summary.task.split())
        task = task if len(task) <= 48 else task[:47] + "…"
        click.echo(
            f"{when}  {summary.outcome:<18} {summary.rounds:>3} rounds  {cost:>9}  "
            f"{inert(summary.workdir)}  {inert(task)}\n    {inert(str(path))}"
        )
    click.echo('\ncontinue one: orchestrator resume TRACE "next instruction" (or resume --last)')
