"""``orchestrator team``: a lead plans on a shared board, worker processes do the items.

The lead runs the task once, in this process, on a board (``--board``, else a new SQLite file
in the team's state folder) and writes the plan as items. The team then makes an integration
branch at the work directory's ``HEAD``, and gives each of N workers a ``git worktree`` on its
own branch and an ``orchestrator work`` child process of its own (its own sandbox, sessions,
traces and lease). Each worker claims ready items until none is left; an item's commit merges
into the integration branch before the board marks it completed (:mod:`.integration`), so an
item blocked by others starts from their work. At the end the integration branch merges into
the work directory, once every step of it is known to be a merge a worker's harness made (each
worker tells the lead of each) and the whole change since the team's start has passed an
item's refusals again (:func:`.integration.merge_check`).

A team has an id; its agents are ``ID/lead`` and ``ID/worker-K``, so teams that share a store
never mix their credit, and a second team on a board whose items belong to another unfinished
team is refused. Ctrl-C (or SIGTERM) is passed to every worker, which commits its work and
gives its item back; a second Ctrl-C stops the waiting. Before any worktree is removed, its
changes are committed on its branch, whatever ended the team. ``team --resume`` (or the same
command again on the same board) picks up the unfinished items and the branches there are.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

import attrs

from orchestrator.harness_git import GitError, GitPlace, run_git
from orchestrator.inert import inert
from orchestrator.pricing import UsageTotals
from orchestrator.team import _lifeline, integration
from orchestrator.team.integration import TeamError
from orchestrator.tools.protected import ProtectGlobs

if TYPE_CHECKING:
    from orchestrator.agent import RunOptions, Session
    from orchestrator.board.store import TeamBusy
    from orchestrator.console import EventLines, View
    from orchestrator.protocols import Model
    from orchestrator.team.view import TeamBoardView

#: How long an interrupted team waits for its workers to commit and give their items back.
GRACE = 30.0
#: A worker's lease unless ``--lease`` says otherwise.
DEFAULT_LEASE = 30.0
_RECORD = "team.json"
#: Each move of the integration branch the team was told of, one JSON object a line, written
#: as it comes: a team killed before its end leaves them for its resume to vouch for.
_MOVES = "moves.jsonl"
_EXIT_BY_CODE = {130: signal.SIGINT, 143: signal.SIGTERM, 129: signal.SIGHUP}

__all__ = [
    "LEAD_PROMPT",
    "AgentReport",
    "TeamError",
    "TeamPlan",
    "TeamResult",
    "run_team",
]

LEAD_PROMPT = (
    "You lead a team of {workers} workers who share the todo board. Plan this task as small "
    "items on the board (the todo tool), each one a worker can do on its own in its own copy "
    "of the repository; mark dependencies with blocked_by. Do not do the items yourself and do "
    "not mark any in progress: the workers claim them. End your turn once the plan is "
    "written.\n\nTask: {task}"
)


@attrs.frozen
class AgentReport:
    """One agent's part: its items completed, rounds, tokens and cost, and how it ended."""

    agent: str
    status: str
    completed: tuple[str, ...]
    rounds: int
    tokens: int
    cost: float | None
    traces: tuple[str, ...]
    reason: str = ""

    def line(self, width: int = 10) -> str:
        from orchestrator.pricing import format_cost

        items = ", ".join(f"#{item}" for item in self.completed) or "none"
        why = f": {self.reason}" if self.reason else ""
        return inert(
            f"{self.agent:<{width}} {self.status}{why} · items {items} · {self.rounds} rounds · "
            f"{self.tokens:,} tokens · {format_cost(self.cost)}"
        )


@attrs.frozen
class TeamResult:
    """How the team ended: each agent, what merged and what did not, the board's verdict."""

    team: str
    agents: tuple[AgentReport, ...]
    merged: tuple[str, ...]
    conflicts: tuple[tuple[str, tuple[str, ...]], ...]
    board: str
    board_check: str
    unfinished: tuple[str, ...]
    #: One line per item or branch whose work was not merged, with why.
    not_merged: tuple[str, ...] = ()
    #: Branches holding work that did not merge (kept aside, never deleted).
    kept: tuple[str, ...] = ()
    #: Worktrees left in place (their changes could not be committed), with why.
    left: tuple[str, ...] = ()
    #: 130 or 143 when the team was stopped by a signal.
    stopped: int | None = None
    #: Why the team stopped before its workers (a lead that changed what may not merge).
    refused: str = ""

    @property
    def exit_code(self) -> int:
        if self.stopped is not None:
            return self.stopped
        if any(agent.status == "failed" for agent in self.agents):
            return 1
        trouble = self.conflicts or self.unfinished or self.not_merged or self.refused
        return 3 if trouble or self.board_check != "ok" else 0

    def closing_lines(self) -> list[str]:
        lines = ["", f"team {self.team}:"]
        width = max((len(agent.agent) for agent in self.agents), default=10)
        lines.extend("  " + agent.line(width) for agent in self.agents)
        if self.refused:
            lines.append(inert(f"! {self.refused}"))
        lines.extend(inert(f"! not merged: {line}") for line in self.not_merged)
        if self.merged:
            lines.append(f"merged: {', '.join(self.merged)}")
        for branch, files in self.conflicts:
            shown = ", ".join(files) or "(git named no file)"
            lines.append(inert(f"! not merged: {branch} conflicts in {shown}; merge it by hand"))
        if self.kept:
            lines.append(inert(f"kept (work that did not merge): {', '.join(self.kept)}"))
        lines.extend(inert(f"! worktree left: {line}") for line in self.left)
        if self.unfinished:
            names = ", ".join(f"#{item}" for item in self.unfinished)
            lines.append(f"! board unfinished: {names}")
        lines.append(f"board: {self.board} (board check: {self.board_check})")
        if self.stopped is not None or self.unfinished:
            lines.append(f"resume: orchestrator team --resume --board {self.board}")
        for agent in self.agents:
            lines.extend(f"trace: {agent.agent}: {trace}" for trace in agent.traces)
        lead = next((a for a in self.agents if a.agent.endswith("/lead") and a.traces), None)
        if lead is not None:
            # The lead's page carries the board's lanes and links every agent's page.
            lines.append(f"picture: orchestrator show {shlex.quote(lead.traces[0])} --html")
        return lines


@attrs.frozen
class TeamPlan:
    """What a team run needs: the task, the place, the board, and how each agent runs."""

    task: str | None
    workers: int | None
    workdir: Path
    #: The board the person named (None: a new SQLite board in the team's folder).
    board: str | None
    #: The state folder teams live in (``STATE/team``); each team gets ``ID/`` there.
    base: Path
    #: ``options(workdir, agent, trace, board)``: the lead's run options.
    options: Callable[[Path, str, Path, str], RunOptions]
    #: ``model(agent)``: the model the lead talks to (scripted or the API).
    model: Callable[[str], Model]
    out: TextIO
    #: ``view(agents)``: the live board-and-agents view on a terminal (None: prefixed lines).
    live: Callable[[str, Sequence[str]], TeamBoardView] | None = None
    lease: float = DEFAULT_LEASE
    scripted: bool = False
    resume: bool = False
    #: The options every worker process gets besides its own (``--model``, ``--trust``…).
    worker_flags: tuple[str, ...] = ()
    #: Which signal stopped the team, as an exit code (130 unless told otherwise).
    stopped: Callable[[], int] = lambda: 130
    #: A new team's id (None: a fresh one).
    team_id: str | None = None
    #: Sets up the work directory once the board is known to be free (the scripted demo).
    prepare: Callable[[], None] | None = None


@attrs.frozen
class _Team:
    """A team's record (``STATE/team/ID/team.json``): what a resume needs."""

    id: str
    folder: Path
    board: str
    workdir: str
    task: str
    workers: int
    scripted: bool
    #: The commit the integration branch started at: what the final merge is checked from.
    start: str = ""
    #: The latest tip of the integration branch known to be all the harness's merges.
    verified: str = ""
    #: The team ran to its end (not stopped, its lead not killed): nothing left to resume.
    finished: bool = False
    fresh: bool = attrs.field(default=True, eq=False)

    @property
    def integration(self) -> str:
        return f"team/{self.id}/integration"

    def agent(self, role: str) -> str:
        return f"{self.id}/{role}"

    def save(self) -> None:
        data = {k: v for k, v in attrs.asdict(self).items() if k not in ("folder", "fresh")}
        (self.folder / _RECORD).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def run_team(plan: TeamPlan) -> TeamResult:
    """Lead, worker processes in their worktrees, merges; every worktree committed on the way."""
    from orchestrator.sessions import SessionError, SessionLock

    team = _the_team(plan)
    team.folder.mkdir(parents=True, exist_ok=True)
    lock = SessionLock(team.folder / "team")
    try:
        lock.take()
    except SessionError:
        raise TeamError(_running(team, _holder(team) or "?")) from None
    saved = False
    try:
        # Held before anything is written to the work directory: of two teams started at
        # once on one board, the second is refused here, whatever either has planned yet.
        with _BoardHold(team, plan.lease):
            if plan.prepare is not None:
                plan.prepare()
            integration.require_clean_repository(plan.workdir)
            team.save()
            saved = True
            workers = plan.workers or team.workers
            agents = ["lead", *(f"worker-{n}" for n in range(1, workers + 1))]
            live = plan.live(team.board, agents) if plan.live is not None else None
            with live.shown() if live is not None else nullcontext():
                return _Run(plan, team, workers, live, lock.fileno()).run()
    finally:
        lock.release()
        if team.fresh and not saved:
            # A team refused before it began leaves no folder (nor a board it made there).
            shutil.rmtree(team.folder, ignore_errors=True)


class _BoardHold:
    """The team's hold on its board, renewed every third of the lease while the team runs.

    Taken at the start (:meth:`SqlBoardStore.hold_for_team`, one transaction), so a second
    team is refused even while this one's lead is still planning and the board has no items
    of its; given up at the end. A lead that dies stops renewing, and the hold runs out.
    """

    def __init__(self, team: _Team, lease: float) -> None:
        self._team, self._lease = team, lease
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="team-hold", daemon=True)

    def __enter__(self) -> None:
        from orchestrator.board.store import TeamBusy
        from orchestrator.board.stores import open_store

        team = self._team
        with open_store(team.board) as store:
            try:
                store.hold_for_team(team.id, lease=self._lease)
            except TeamBusy as busy:
                raise TeamError(_busy(team.board, busy)) from None
        self._thread.start()

    def __exit__(self, *exc: object) -> None:
        from orchestrator.board.store import BoardError
        from orchestrator.board.stores import open_store

        self._done.set()
        self._thread.join()
        with suppress(BoardError), open_store(self._team.board) as store:
            store.let_go_for_team(self._team.id)

    def _renew(self) -> None:
        from orchestrator.board.store import BoardError
        from orchestrator.board.stores import open_store

        while not self._done.wait(self._lease / 3):
            # A failed renewal (the database away a moment) is tried again next time; the
            # team's items keep other teams away meanwhile once there are any.
            with suppress(BoardError), open_store(self._team.board) as store:
                store.hold_for_team(self._team.id, lease=self._lease)


def _busy(board: str, busy: TeamBusy) -> str:
    own = "give this team its own board (another file, or ?board=NAME in a PostgreSQL URL)"
    if busy.items:
        names = ", ".join(f"#{item}" for item in busy.items[:8])
        return f"{board}: items {names} belong to team {busy.team}, unfinished; {own}"
    return f"{board}: team {busy.team} is starting on it (its lead is planning); wait, or {own}"


# --- which team: a new one, or the unfinished one on this board ------------------------------


def _the_team(plan: TeamPlan) -> _Team:
    """A new team, or the unfinished team on ``--board`` this run resumes; else TeamError."""
    from orchestrator.board.stores import sqlite_url
    from orchestrator.trace import new_run_id

    board, again = plan.board, False
    if board is None and not plan.resume and plan.task:
        # The same command again: without --board each new team makes a board of its own, so
        # the team that ran this task here and never ended is found by its record instead.
        same = [team for team in _unended(plan.base, None, plan.workdir) if team.task == plan.task]
        if same:
            board, again = same[-1].board, True
    owners = _unfinished_teams(board, resume=plan.resume or again) if board is not None else {}
    if (plan.resume or again) and not owners and board is not None:
        # Every item done, but the team never ended (its lead was killed before the merge):
        # its record says so, and a resume merges what its workers did.
        owners = {record.id: () for record in _unended(plan.base, board, plan.workdir)}
    if plan.resume and not owners:
        shown = board or "(no --board)"
        raise TeamError(f"--resume {shown}: no unfinished team on that board to resume")
    if owners:
        found, items = next(iter(owners.items()))
        record = _load(plan.base / found)
        names = ", ".join(f"#{item}" for item in items[:8]) or "(all done, not merged)"
        if record is None:
            raise TeamError(
                f"{board}: items {names} belong to team {found}, unfinished, which did "
                f"not start here; resume it where it runs, or give this team its own board "
                "(another file, or ?board=NAME in a PostgreSQL URL)"
            )
        if (holder := _holder(record)) is not None:
            raise TeamError(_running(record, holder))
        if Path(record.workdir) != plan.workdir.resolve():
            raise TeamError(
                f"{board}: items {names} belong to team {found}, unfinished, working in "
                f"{record.workdir}; resume it there, or give this team its own board"
            )
        return attrs.evolve(record, fresh=False)
    if not plan.task:
        raise TeamError("give the TASK the team works on (no unfinished team on that board)")
    team_id = plan.team_id or new_run_id()[:8]
    folder = plan.base / team_id
    board = plan.board or sqlite_url(folder / "board.db")
    task = plan.task or ""
    return _Team(
        team_id, folder, board, str(plan.workdir.resolve()), task, plan.workers or 2, plan.scripted
    )


def _unfinished_teams(url: str, *, resume: bool = False) -> dict[str, tuple[str, ...]]:
    """Each team with unfinished items on the board, and their ids (the store's own reading).

    A resume reads a board that must be there (a mistyped URL is
    :class:`~orchestrator.board.store.NoBoard`, and nothing is made); a new team's
    ``--board`` may name a new one.
    """
    from orchestrator.board.stores import open_existing, open_store

    with open_existing(url) if resume else open_store(url) as store:
        return store.teams()


def _unended(base: Path, board: str | None, workdir: Path) -> list[_Team]:
    """The teams recorded here that never ran to their end, the latest recorded last.

    Those that worked in ``workdir``, on ``board`` when it is given.
    """
    try:
        records = sorted(
            (record.stat().st_mtime, record.parent) for record in base.glob(f"*/{_RECORD}")
        )
    except OSError:
        return []
    where = str(workdir.resolve())
    found = (_load(folder) for _, folder in records)
    return [
        team
        for team in found
        if team is not None
        and board in (None, team.board)
        and team.workdir == where
        and not team.finished
    ]


def _load(folder: Path) -> _Team | None:
    try:
        data = json.loads((folder / _RECORD).read_text(encoding="utf-8"))
        return _Team(
            str(data["id"]),
            folder,
            str(data["board"]),
            str(data["workdir"]),
            str(data["task"]),
            int(data["workers"]),
            bool(data["scripted"]),
            str(data.get("start") or ""),
            str(data.get("verified") or ""),
            data.get("finished") is True,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _remember_move(path: Path, found: integration.Move | integration.Sighting) -> None:
    kind = "move" if isinstance(found, integration.Move) else "sighting"
    line = json.dumps({"kind": kind, **attrs.asdict(found)}) + "\n"
    # A record lost to a full disk costs the resume's trust in one step, never the team.
    with suppress(OSError), path.open("a", encoding="utf-8") as file:
        file.write(line)
        file.flush()
        os.fsync(file.fileno())


def _moves_of(path: Path) -> tuple[list[integration.Move], list[integration.Sighting]]:
    """The moves and sightings earlier runs of the team kept (:func:`_remember_move`)."""
    moves: list[integration.Move] = []
    sightings: list[integration.Sighting] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return moves, sightings
    for line in lines:
        try:
            data = json.loads(line)
            if data.get("kind") == "move":
                moves.append(
                    integration.Move(
                        str(data["onto"]), str(data["tip"]), str(data["agent"]), str(data["item"])
                    )
                )
            elif data.get("kind") == "sighting":
                sightings.append(
                    integration.Sighting(
                        str(data["agent"]), str(data["before"]), str(data["after"])
                    )
                )
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # a line cut short by a kill mid-write: that step stays unvouched for
    return moves, sightings


def _holder(team: _Team) -> str | None:
    """The pid running ``team`` now (its lock is held), or None."""
    from orchestrator.sessions import SessionError, SessionLock

    lock = SessionLock(team.folder / "team")
    try:
        lock.take()
    except SessionError:
        try:
            return lock.path.read_text(encoding="ascii").strip() or "?"
        except OSError:
            return "?"
    lock.release()
    return None


def _running(team: _Team, holder: str) -> str:
    from orchestrator.tools._reaper import running as process_running

    if holder.isdigit() and not process_running(int(holder)):
        # The lock outlives its lead while workers it started still hold it (:mod:`._lifeline`).
        return (
            f"{team.board}: team {team.id}'s lead (pid {holder}) is gone but its workers are "
            "still stopping (each commits its work and gives its item back); resume it once "
            "they have"
        )
    return (
        f"{team.board}: its items belong to team {team.id}, still running (pid {holder}); "
        "wait for it, or give this team its own board (another file, or ?board=NAME in a "
        "PostgreSQL URL)"
    )


# --- one run of the team ---------------------------------------------------------------------


@attrs.define
class _Child:
    """One worker process as the lead sees it: its pipe, its last words, its final record."""

    agent: str
    short: str
    place: GitPlace
    branch: str
    process: subprocess.Popen[str]
    reader: threading.Thread | None = None
    finished: dict[str, Any] | None = None
    last_lines: list[str] = attrs.Factory(list)
    items: list[dict[str, Any]] = attrs.Factory(list)
    #: What its records said as they came, for a worker that dies without its final one:
    #: the item it holds now (claimed, not yet ended or released), each session's trace,
    #: the branches its earlier commits were kept on, and its sessions' rounds and tokens.
    held: str | None = None
    traces: list[str] = attrs.Factory(list)
    kept: list[str] = attrs.Factory(list)
    totals: UsageTotals = attrs.Factory(UsageTotals)


class _Run:
    def __init__(
        self,
        plan: TeamPlan,
        team: _Team,
        workers: int,
        live: TeamBoardView | None,
        lock_fd: int,
    ) -> None:
        self.plan, self.team, self.workers, self.live = plan, team, workers, live
        #: The team's lock: each worker holds it too until it ends (:mod:`._lifeline`).
        self.lock_fd = lock_fd
        # The work directory's work tree and git dir, read before any agent has run there:
        # every later git command names both, so a rewritten ``.git`` file points nowhere new.
        home = integration.place_of(plan.workdir)
        if home is None:
            raise TeamError(f"{plan.workdir}: git cannot read the repository there")
        self.home = home
        #: The branch the work directory has checked out: the lead's commit goes only there.
        self.home_branch = integration.head_branch(home)
        config = plan.options(
            plan.workdir, team.agent("lead"), team.folder / "lead.jsonl", team.board
        ).config
        self.protect = ProtectGlobs(tuple(config.protect))
        self.allow = tuple(Path(path) for path in config.allow_write)
        #: What the single run's guard protects in the work directory (as tree paths), read
        #: before any agent has run: what the lead's commit and the final merge may not change.
        self.protected = integration.protected_of(home.work_tree, self.allow)
        #: Each move of the integration branch a worker's harness made, as they come (a
        #: resumed team's earlier runs' too: its lead may have been killed before it checked).
        self.moves: list[integration.Move] = []
        #: Each move of it a worker saw during one of its tool calls.
        self.sightings: list[integration.Sighting] = []
        if not team.fresh:
            self.moves, self.sightings = _moves_of(team.folder / _MOVES)
        self._moves_lock = threading.Lock()
        self.children: list[_Child] = []
        self.places: list[tuple[str, GitPlace]] = []
        self.reports: list[AgentReport] = []
        self.stopped: int | None = None
        #: Worktrees left in place, with why (their changes could not be committed, or they
        #: hold a nested repository).
        self.left: list[str] = []
        #: What the team refused besides an item's work: a worktree whose HEAD was moved, an
        #: integration branch that is not the harness's own.
        self.refusals: list[str] = []

    def run(self) -> TeamResult:
        plan, team = self.plan, self.team
        refused = ""
        if team.fresh:
            report, refused = self._lead()
            self.reports.append(report)
            if report.status != "done" or refused:
                return self._result(refused=refused)
        else:
            self._say("team", f"resuming team {team.id} on {team.board}")
        if integration.rev(self.home, f"refs/heads/{team.integration}") is None:
            run_git(plan.workdir, "branch", team.integration, "HEAD", place=self.home)
            start = integration.rev(self.home, f"refs/heads/{team.integration}") or ""
            self.team = team = attrs.evolve(team, start=start, verified=start)
            team.save()
        try:
            self._start_workers()
            self._join(None)
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM: every worker is told, and waited for
            self.stopped = self.plan.stopped()
            self._stop_workers(_EXIT_BY_CODE.get(self.stopped, signal.SIGINT))
        except BaseException:  # the lead itself broke: its workers stop too, then it says why
            with suppress(KeyboardInterrupt):
                self._stop_workers(signal.SIGTERM)
            raise
        finally:
            self._commit_worktrees()
        result = self._result()
        if self.stopped is None:
            self.team = attrs.evolve(self.team, finished=True)
            self.team.save()
        return result

    # -- the lead ---------------------------------------------------------------------------

    def _lead(self) -> tuple[AgentReport, str]:
        """The lead plans; what it changed is committed unless it may not be merged."""
        plan, team = self.plan, self.team
        agent = team.agent("lead")
        trace = team.folder / "lead.jsonl"
        session = self._lead_session(agent, trace)
        prompt = LEAD_PROMPT.format(workers=self.workers, task=team.task)
        report = _run_session(session, agent, prompt)
        if report.status == "interrupted":
            self.stopped = self.plan.stopped()
        if session.protected_changes:
            shown = ", ".join(c.describe(plan.workdir) for c in session.protected_changes)
            return report, f"the lead changed protected paths ({shown}); the team did not start"
        if not integration.dirty(self.home):
            return report, ""
        before = integration.rev(self.home, "HEAD")
        assert before is not None
        try:
            commit = integration.commit_all(
                self.home, "lead: files changed while planning", on=self.home_branch
            )
        except integration.HeadMoved as error:
            return (
                report,
                f"the lead moved the work directory's HEAD ({error}); the team did not start",
            )
        problems = integration.refusals(
            self.home, before, commit or before, self.protect, self.protected
        )
        if problems:
            # Not merged into the team's base: the commit is moved to a branch of its own.
            kept = f"team/{team.id}/kept/lead"
            run_git(plan.workdir, "branch", "-f", kept, "HEAD", place=self.home)
            run_git(plan.workdir, "reset", "-q", "--keep", before, place=self.home)
            why = "; ".join(problems)
            return report, f"the lead's changes were not merged ({why}); kept on {kept}"
        return report, ""

    def _lead_session(self, agent: str, trace: Path) -> Session:
        from orchestrator.agent import Session, new_board
        from orchestrator.console import PlainView

        plan = self.plan
        options = plan.options(plan.workdir, agent, trace, self.team.board)
        stream = _Prefixed(plan.out, "lead")
        view: View = PlainView(cast("TextIO", stream))
        say = stream.line
        if self.live is not None:
            feed = self.live.feed("lead")
            view, say = feed, feed.on_line
        return Session(
            options,
            plan.model(agent),
            board=new_board(options.config),
            view=view,
            say=say,
            notice=say,
            header=say,
            interactive=False,
        )

    # -- the workers --------------------------------------------------------------------------

    def _start_workers(self) -> None:
        team = self.team
        tip = integration.rev(self.home, f"refs/heads/{team.integration}")
        assert tip is not None
        for number in range(1, self.workers + 1):
            short = f"worker-{number}"
            branch = f"team/{team.id}/{short}"
            place = integration.add_worktree(self.home, team.folder / short, branch, tip)
            self.places.append((branch, place))
            try:
                # A worktree a stopped team left with changes: committed before anyone works on.
                integration.commit_all(
                    place, f"{team.agent(short)}: work left when the team stopped", on=branch
                )
            except integration.HeadMoved as error:
                self.refusals.append(f"{team.agent(short)} not started: {place.work_tree}: {error}")
                continue
            self.children.append(self._spawn(short, branch, place))

    def _spawn(self, short: str, branch: str, place: GitPlace) -> _Child:
        plan, team = self.plan, self.team
        agent = team.agent(short)
        command = [
            sys.executable,
            # -P: the work directory (a model's files) never comes first on the worker's
            # sys.path, so an ``orchestrator.py`` planted there is not what runs.
            "-P",
            "-m",
            "orchestrator",
            "work",
            team.board,
            "--agent",
            agent,
            "--workdir",
            str(place.work_tree),
            "--integrate",
            team.integration,
            "--lease",
            f"{plan.lease:g}",
            "--trace-dir",
            str(team.folder),
            "--json",
            *(("--scripted",) if team.scripted else ()),
            *plan.worker_flags,
        ]
        process = subprocess.Popen(
            command,
            cwd=team.folder,  # the team's own folder: nothing of the model's is looked up there
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
            # Its own session: a terminal's Ctrl-C reaches the lead, which passes it on once;
            # a person can stop one worker alone by its pid.
            start_new_session=True,
            env={**os.environ, **_lifeline.worker_environment(self.lock_fd)},
            pass_fds=(self.lock_fd,),
        )
        child = _Child(agent, short, place, branch, process)
        child.reader = threading.Thread(
            target=self._pump, args=(child,), name=f"{short}-output", daemon=True
        )
        child.reader.start()
        self._say(
            short,
            f"{agent}: pid {process.pid} · worktree {place.work_tree} · branch {branch}",
        )
        return child

    def _pump(self, child: _Child) -> None:
        """Each line a worker prints: its events drive the view, its records become lines."""
        from orchestrator.console import EventLines
        from orchestrator.team.worker import describe

        lines = EventLines()
        feed = self.live.feed(child.short) if self.live is not None else None
        assert child.process.stdout is not None
        for raw in child.process.stdout:
            text = raw.rstrip("\n")
            event = _event(text)
            if event is None:
                child.last_lines = [*child.last_lines[-4:], text]
                self._say(child.short, text)
                continue
            name = str(event.get("event", ""))
            if name.startswith("work."):
                _follow(child, event)
                if name == "work.finished":
                    child.finished = event
                elif name == "work.item":
                    child.items.append(event)
                elif name in ("work.merged", "work.moved"):
                    self._record_move(child, event)
                said = describe(event)
                if said and name != "work.finished":
                    self._say(child.short, said)
                continue
            child.totals(event)  # its sessions' rounds and tokens, as they come
            if feed is not None:
                feed(event)
                continue
            self._show(child.short, lines, event)

    def _record_move(self, child: _Child, event: Mapping[str, Any]) -> None:
        """A worker's merge into the integration branch, or a move one of its tool calls saw.

        Kept under the worker's name as the lead knows it (the pipe it came by), never the
        name the record gives.
        """
        if event.get("branch") != self.team.integration:
            return
        found: integration.Move | integration.Sighting
        if event["event"] == "work.merged":
            onto, tip = str(event.get("onto") or ""), str(event.get("tip") or "")
            if not (onto and tip):
                return
            found = integration.Move(onto, tip, child.agent, str(event.get("item") or "?"))
        else:
            before, after = str(event.get("before") or ""), str(event.get("after") or "")
            if not (before and after):
                return
            found = integration.Sighting(child.agent, before, after)
        with self._moves_lock:
            if isinstance(found, integration.Move):
                self.moves.append(found)
            else:
                self.sightings.append(found)
            # Kept in the team's folder (outside every worker's sandbox) before anything else:
            # a lead killed now leaves its resume the steps it cannot see again.
            _remember_move(self.team.folder / _MOVES, found)

    def _show(self, short: str, lines: EventLines, event: Mapping[str, Any]) -> None:
        for text, _style in lines.lines(event):
            self._say(short, text)

    def _stop_workers(self, stop: signal.Signals) -> None:
        """Pass ``stop`` on to every worker and wait for them; a second Ctrl-C skips the wait.

        A worker still running then is killed: its item's lease runs out by itself, and its
        worktree's changes are committed by the team before the worktree is removed.
        """
        from orchestrator.tools.processes import kill_group

        try:
            running = [child for child in self.children if child.process.poll() is None]
            for child in running:
                _signal(child.process.pid, stop)
            if running:
                self._say(
                    "team",
                    f"stopping {len(running)} workers: each commits its work and gives its "
                    f"item back (up to {GRACE:g} s; Ctrl-C again stops waiting)",
                )
            self._join(time.monotonic() + GRACE)
        except KeyboardInterrupt:
            pass  # a second Ctrl-C: no more waiting
        finally:
            with _no_interrupts():
                for child in self.children:
                    if child.process.poll() is None:
                        kill_group(child.process.pid)
                        child.process.wait()
                    if child.reader is not None:
                        # Its last records (a merge it made) are read before the end is judged.
                        child.reader.join(5)

    def _join(self, deadline: float | None) -> None:
        for child in self.children:
            while child.process.poll() is None:
                if deadline is not None and time.monotonic() > deadline:
                    return
                try:
                    child.process.wait(0.2)  # in slices: Ctrl-C reaches this thread
                except subprocess.TimeoutExpired:
                    continue
            if child.reader is not None:
                child.reader.join(5)

    def _commit_worktrees(self) -> None:
        """Every worktree's changes committed on its branch, before any worktree is removed.

        Ctrl-C is ignored meanwhile: a third one must not cut a commit short.
        """
        with _no_interrupts():
            self._commit_each()

    def _commit_each(self) -> None:
        for branch, place in self.places:
            try:
                integration.commit_all(place, f"{branch}: work left when the team ended", on=branch)
                # Committed: the worktree can go (its branch stays; a resume adds it back).
                why = integration.remove_worktree(self.home, place.work_tree)
            except (GitError, TeamError) as error:
                why = str(error)
            if why is not None:
                self.left.append(f"{place.work_tree}: {why}")

    # -- the end ------------------------------------------------------------------------------

    def _result(self, *, refused: str = "") -> TeamResult:
        team = self.team
        for child in self.children:
            self.reports.append(_report_of(child))
        not_merged, kept = _not_merged(self.children)
        merged: tuple[str, ...] = ()
        conflicts: tuple[tuple[str, tuple[str, ...]], ...] = ()
        tip = integration.rev(self.home, f"refs/heads/{team.integration}")
        head = integration.rev(self.home, "HEAD")
        problems: tuple[str, ...] = ()
        if tip is not None and not refused:
            problems = self._check_integration(tip)
        elif tip is None and not refused and team.start:
            problems = (
                f"{team.integration} is gone: something other than the harness deleted it, and "
                "the work merged there is not in the work directory",
            )
        if self.stopped is None and not refused and not problems and tip not in (None, head):
            assert tip is not None
            # The commit checked, not the branch's name: nothing can move it in between.
            files = integration.merge_branch(
                self.home, tip, f"Merge the work of team {team.id} ({team.integration})"
            )
            if files:
                conflicts = ((team.integration, files),)
            else:
                merged = (team.integration,)
        verdict = _board_verdict(team.board, team.id)
        outside = tuple(
            f"#{item} was completed by {agent}, not by a worker of this team: its work is not "
            f"on {team.integration}"
            for item, agent in verdict.outsiders
        )
        not_merged = (*self.refusals, *not_merged, *problems, *outside)
        # Credit is the board's: each report with the items its agent completed, by the log.
        credit = verdict.completed
        reports = [attrs.evolve(r, completed=credit.get(r.agent, ())) for r in self.reports]
        return TeamResult(
            team.id,
            tuple(reports),
            merged,
            conflicts,
            team.board,
            verdict.check,
            verdict.unfinished,
            not_merged,
            kept,
            tuple(self.left),
            self.stopped,
            refused,
        )

    def _check_integration(self, tip: str) -> tuple[str, ...]:
        """Why the integration branch at ``tip`` may not merge into the work directory.

        Every step of it from the team's start must be a merge a worker's harness made (a
        worker's own git can move the branch past every refusal), and the whole change from
        the start gets the refusals an item's commit gets. A tip found clean is recorded, so
        a resumed team checks only what came after it.
        """
        team = self.team
        start = team.start or integration.merge_base(self.home, "HEAD", tip) or tip
        problems, own = integration.merge_check(
            self.home,
            team.integration,
            start=start,
            since=team.verified or start,
            tip=tip,
            moves=self.moves,
            sightings=self.sightings,
            protect=self.protect,
            # Read again now as well: a config change meanwhile protects what it names too.
            protected=self.protected | integration.protected_of(self.home.work_tree, self.allow),
        )
        if own and tip != team.verified:
            self.team = attrs.evolve(team, verified=tip)
            self.team.save()
        return problems

    def _say(self, who: str, text: str) -> None:
        lines = text.splitlines() or [""]
        if self.live is not None:
            for line in lines:
                self.live.say(who, line)
            return
        with _Prefixed.lock:
            self.plan.out.write("".join(f"{who:>9} │ {inert(line)}\n" for line in lines))
            self.plan.out.flush()


@contextmanager
def _no_interrupts() -> Iterator[None]:
    """Ctrl-C ignored while the team saves work or stops its workers.

    Neither may be cut short. Signals reach the main thread only: elsewhere nothing is held.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _event(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        found = json.loads(line)
    except ValueError:
        return None
    return found if isinstance(found, dict) and "event" in found else None


def _signal(pid: int, stop: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.kill(pid, stop)


def _follow(child: _Child, event: Mapping[str, Any]) -> None:
    """What a worker's ``work.*`` record says it holds, traces and keeps, as it comes."""
    name, item = event.get("event"), event.get("item")
    if name == "work.claimed" and item is not None:
        child.held = str(item)
    elif name in ("work.item", "work.released") and child.held == str(item):
        child.held = None
    elif name == "work.session" and event.get("trace"):
        child.traces.append(str(event["trace"]))
    if name in ("work.caught_up", "work.item") and event.get("kept"):
        child.kept.append(str(event["kept"]))


def _report_of(child: _Child) -> AgentReport:
    """The closing line's facts from the worker's final record, or how it died without one.

    A worker that died without its final record is told from the records the lead saw: the
    item it held (or none), the traces of the sessions it started, its rounds and tokens, and
    the branches it kept earlier commits on. Its cost is left unknown: the prices it would
    have used are its own.
    """
    code = child.process.returncode
    done = child.finished
    if done is None:
        if code is not None and code < 0:
            name = signal.Signals(-code).name
            status = "killed"
            if child.held is not None:
                reason = (
                    f"{name} while it held #{child.held}, which the board gives back when "
                    "its lease runs out"
                )
            else:
                reason = f"{name}; it held no item"
        else:
            last = child.last_lines[-1] if child.last_lines else f"exit status {code}"
            status, reason = "failed", last
            if child.held is not None:
                reason = f"{reason} (it held #{child.held})"
        if child.kept:
            reason += f"; earlier commits kept on {', '.join(dict.fromkeys(child.kept))}"
        return AgentReport(
            child.agent,
            status,
            (),
            child.totals.rounds,
            sum(child.totals.usage.values()),
            None,
            tuple(child.traces),
            reason,
        )
    status = str(done.get("status", "failed"))
    reason = str(done.get("reason", "")) if status != "done" else ""
    cost = done.get("cost")
    return AgentReport(
        child.agent,
        status,
        (),
        int(done.get("rounds", 0)),
        int(done.get("tokens", 0)),
        float(cost) if isinstance(cost, int | float) else None,
        tuple(str(trace) for trace in done.get("traces", ())),
        reason,
    )


def _not_merged(children: Sequence[_Child]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Each item whose work was refused, and the branches holding work that did not merge."""
    lines: list[str] = []
    kept: list[str] = []
    for child in children:
        for item in child.items:
            if item.get("kept"):
                kept.append(str(item["kept"]))
            if item.get("outcome") in ("refused",):
                commit = str(item.get("commit") or "")[:10]
                where = f" (commit {commit} on {child.branch})" if commit else ""
                lines.append(f"#{item.get('item')} ({child.agent}){where}: {item.get('why')}")
    return tuple(lines), tuple(dict.fromkeys(kept))


def _run_session(session: Session, agent: str, prompt: str) -> AgentReport:
    try:
        outcome = session.turn(prompt)
    except Exception as error:  # the lead's failure is reported, not raised
        session.close()
        return AgentReport(agent, "failed", (), 0, 0, None, (), f"{type(error).__name__}: {error}")
    trace = str(session.trace_path or "")
    totals = session.totals
    config = session.options.config
    session.close()
    return AgentReport(
        agent,
        outcome.status,
        (),
        outcome.rounds,
        sum(totals.usage.values()),
        totals.cost(config.price_per_mtok, config.model),
        (trace,) if trace else (),
        outcome.reason if outcome.status != "done" else "",
    )


@attrs.frozen
class _Verdict:
    """What the board says at the end: ``board check``'s verdict and this team's items."""

    check: str
    unfinished: tuple[str, ...]
    #: This team's items completed by an agent of no team's or another's: (item, agent).
    outsiders: tuple[tuple[str, str], ...]
    #: The items each agent completed, by the board's log (the closing lines' credit).
    completed: Mapping[str, tuple[str, ...]]


def _board_verdict(url: str, team: str) -> _Verdict:
    """``board check``'s verdict on the whole store, and this team's items left unfinished."""
    from orchestrator.board.check import check_contents
    from orchestrator.board.inputs import team_of
    from orchestrator.board.store import item_teams  # the team each item belongs to
    from orchestrator.board.stores import open_store

    with open_store(url) as store:
        contents = store.contents()  # what ``board check`` reads, in one transaction
    violation = check_contents(contents)
    ours = {item for item, owner in item_teams(contents.log).items() if owner == team}
    unfinished = tuple(
        item.id
        for item in contents.items
        if item.id in ours and str(item.status) not in ("completed", "cancelled")
    )
    completer: dict[str, str] = {}
    completed: dict[str, list[str]] = {}
    for entry in contents.log:
        if entry.dst != "completed":
            continue
        if entry.agent:
            completed.setdefault(entry.agent, []).append(entry.item)
        if entry.item in ours:
            completer[entry.item] = entry.agent or "?"
    done = {item.id for item in contents.items if str(item.status) == "completed"}
    # Their work is wherever they did it, not on this team's integration branch.
    outsiders = tuple(
        (item, agent)
        for item, agent in completer.items()
        if item in done and team_of(agent) != team
    )
    return _Verdict(
        "ok" if violation is None else str(violation),
        unfinished,
        outsiders,
        {agent: tuple(items) for agent, items in completed.items()},
    )


class _Prefixed:
    """A stream that starts every line with the agent's name, whole lines at a time."""

    #: One lock for every prefixed line the team prints, the lead's and its workers'.
    lock = threading.Lock()

    def __init__(self, stream: TextIO, agent: str) -> None:
        self._stream, self._prefix, self._partial = stream, f"{agent:>9} │ ", ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        if lines:
            with self.lock:
                self._stream.write("".join(f"{self._prefix}{line}\n" for line in lines))
                self._stream.flush()
        return len(text)

    def line(self, text: str) -> None:
        self.write(text + "\n")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
