"""``orchestrator work``: one worker process that claims a shared board's items until none is left.

The worker claims one ready item at a time (the item machine's guarded ``start`` edge, one
store transaction), runs it as a session of its own in its work directory, and goes on; while
nothing is ready but other agents hold items, it polls. Its lease is renewed by a heartbeat
thread of the harness (not by the model), so a lease can be short and a dead worker's item is
free again within it.

When the model marks its item completed, the harness lands the work *before* the board's
``complete`` edge is taken: it commits the work directory (when it is a repository) as one
commit naming the item, only while ``HEAD`` names the branch it named at the start, refuses a
commit that adds a gitlink, changes a file that decides what runs later or holds a folder
shaped like a git dir (:func:`.integration.refusals`), and, with an integration branch
(``--integrate``, what ``team`` gives each worker), merges the commit into it and says so
(``work.merged``). A refusal or a conflict refuses the completion and is logged on the board
(a failed ``check`` line naming why); when the session ends the item goes back on the board,
and the worker ends ``unfinished`` (exit 3) rather than ``done``. Before each item the
worktree is brought up to the integration branch's tip, so an item blocked by others starts
from their work. A move of the integration branch during one of its tool calls is told to
``team`` (``work.moved``), which puts a move no worker's harness made to the worker that made
it.

Stopped by SIGINT or SIGTERM, the worker commits what its session left, releases its item
(pending again at once, not left to expire) and exits 130 or 143. With ``json`` every line on
stdout is one JSON object: the sessions' trace events, and the worker's own ``work.*``
records, which is how ``team`` follows its workers.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import attrs

from orchestrator.board.shared import SharedBoard
from orchestrator.harness_git import GitError, GitPlace
from orchestrator.inert import inert, inert_line
from orchestrator.plan import Status
from orchestrator.protocols import CheckResult, JSONObject
from orchestrator.team import integration
from orchestrator.trace_file import json_text

if TYPE_CHECKING:
    from orchestrator.agent import RunOptions, Session
    from orchestrator.board.store import BoardItem, SqlBoardStore
    from orchestrator.console import View
    from orchestrator.loop import RunOutcome
    from orchestrator.protocols import BoardStore, Model
    from orchestrator.tools.protected import ProtectedSnapshot, ProtectGlobs

#: How often a worker with nothing ready looks at the board again, at most.
POLL_SECONDS = 0.5
#: An item whose commit conflicted is tried again once, from the new tip, before giving up.
CONFLICT_TRIES = 2

ITEM_PROMPT = (
    "You are {agent}, a worker on a shared todo board. This item is claimed for you and in "
    "progress: #{item}: {text}\n\nDo it in this work directory, then mark #{item} completed "
    "with the todo tool: the harness then commits your work and merges it for the team. Work "
    "on this item only; do not claim or change other items. If you cannot do it, say why and "
    "end your turn without completing it."
)


@attrs.frozen
class WorkPlan:
    """What a worker needs: the board, its name, where it works, and how each session runs."""

    board: str
    agent: str
    workdir: Path
    lease: float
    #: ``options(workdir, trace)``: one item session's run options.
    options: Callable[[Path | None], RunOptions]
    #: ``model(item_id, text)``: the model one item's session talks to.
    model: Callable[[str, str], Model]
    #: The integration branch each completed item merges into (None: commit only).
    integrate: str | None = None
    #: Where each item's trace goes (None: the state directory's usual place).
    trace_dir: Path | None = None
    poll: float = POLL_SECONDS


@attrs.frozen
class ItemOutcome:
    """How one item went for this worker."""

    item: str
    outcome: str  # completed | conflict | refused | unfinished | failed | interrupted
    commit: str | None = None
    why: str = ""
    kept: str | None = None


@attrs.frozen
class WorkResult:
    """How the worker ended, what it did, and what it spent."""

    status: str  # done | failed | refused | interrupted
    exit_code: int
    reason: str
    items: tuple[ItemOutcome, ...]
    rounds: int
    tokens: int
    cost: float | None
    traces: tuple[str, ...]

    def record(self, agent: str) -> JSONObject:
        return {
            "event": "work.finished",
            "agent": agent,
            "status": self.status,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "items": [attrs.asdict(item) for item in self.items],
            "rounds": self.rounds,
            "tokens": self.tokens,
            "cost": self.cost,
            "traces": list(self.traces),
        }


class WorkOutput:
    """Where a worker's words go: JSON lines for ``team``, plain lines for a person."""

    def __init__(self, stream: TextIO, *, as_json: bool) -> None:
        self._stream, self.as_json = stream, as_json

    def record(self, event: JSONObject) -> None:
        if self.as_json:
            self._write(json_text(event))
            return
        text = describe(event)
        if text:
            self._write(text)

    def line(self, text: str) -> None:
        """A notice or a header line from a session."""
        if self.as_json:
            self.record({"event": "work.line", "text": text})
        else:
            self._write(text)

    def view(self) -> View:
        from orchestrator.console import JsonView, PlainView

        return JsonView(self._stream) if self.as_json else PlainView(self._stream)

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text + "\n")
            self._stream.flush()
        except (BrokenPipeError, ValueError):
            pass  # the reader is gone (the team ended first): the trace still has it all


def describe(event: Mapping[str, Any]) -> str:
    """One line for a person for a ``work.*`` record ("" for none); untrusted text made inert."""
    kind = event.get("event")
    item = f"#{event.get('item')}"
    if kind == "work.started":
        where = f" · merges into {event['integrate']}" if event.get("integrate") else ""
        return inert_line(
            f"work: {event.get('agent')} on {event.get('board')} in {event.get('workdir')} "
            f"(pid {event.get('pid')}, lease {event.get('lease'):g} s){where}"
        )
    if kind == "work.claimed":
        again = " (held before: resumed)" if event.get("resumed") else ""
        return inert_line(f"claimed {item}: {event.get('text')}{again}")
    if kind == "work.caught_up":
        kept = f"; earlier commits kept on {event['kept']}" if event.get("kept") else ""
        return inert_line(f"{item} starts from {event.get('branch')} at {event.get('tip')}{kept}")
    if kind == "work.item":
        return inert_line(_item_line(event))
    if kind == "work.released":
        return inert_line(f"released {item}: {event.get('why')}")
    if kind == "work.waiting":
        return inert_line(f"waiting: {event.get('why')}")
    if kind == "work.line":
        return inert_line(str(event.get("text", "")))
    if kind == "work.finished":
        reason = f": {event['reason']}" if event.get("reason") else ""
        return inert_line(f"work: {event.get('status')}{reason} (exit {event.get('exit_code')})")
    return ""


def _item_line(event: Mapping[str, Any]) -> str:
    item, outcome = f"#{event.get('item')}", event.get("outcome")
    commit = f" · commit {str(event['commit'])[:10]}" if event.get("commit") else ""
    if outcome == "completed":
        merged = f" · merged into {event['merged']}" if event.get("merged") else ""
        return f"{item} completed{commit}{merged}"
    why = f": {event['why']}" if event.get("why") else ""
    kept = f" (kept on {event['kept']})" if event.get("kept") else ""
    return f"{item} {outcome}{commit}{why}{kept}"


def never_ready(items: Sequence[BoardItem]) -> list[str]:
    """Why each pending item can never start, one line each, in board order.

    It waits on a cancelled item, on one the board does not hold, or (in a chain) on an item
    that can never start.
    """
    by_id = {item.id: item for item in items}
    why: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for item in items:
            if item.status != Status.PENDING or item.id in why:
                continue
            for blocker_id in item.blocked_by:
                blocker = by_id.get(blocker_id)
                if blocker is None:
                    said = "which is not on the board"
                elif blocker.status == Status.CANCELLED:
                    said = "which is cancelled"
                elif blocker_id in why:
                    said = "which can never start"
                else:
                    continue
                why[item.id] = f"#{item.id} waits on #{blocker_id}, {said}"
                changed = True
                break
    return [why[item.id] for item in items if item.id in why]


class Worker:
    """The claim → catch up → session → land loop of one worker process."""

    def __init__(self, plan: WorkPlan, out: WorkOutput) -> None:
        self.plan, self.out = plan, out
        self._globs: ProtectGlobs | None = None
        #: What an item's commit may not change besides the fixed list: the single run's
        #: protected paths, here and in the main work tree its merges end up in (tree paths).
        self._protected_paths: frozenset[str] = frozenset()
        #: The branch ``HEAD`` named at the start: the only one the harness commits on.
        self._branch: str | None = None
        self._place = self._repository()
        self._protected = self._snapshot()
        self.store = self._open()
        # The worker's own view of the board: its heartbeat renews every claim it holds.
        self._board = SharedBoard(self.store, plan.agent, lease=plan.lease)
        self._outcomes: list[ItemOutcome] = []
        self._tried: dict[str, int] = {}
        self._given_up: set[str] = set()
        self._landed: dict[str, tuple[str, str | None]] = {}
        self._refusal: dict[str, tuple[str, str]] = {}
        self._traces: list[str] = []
        #: Why each pending item left when the worker ends can never start (see never_ready).
        self._stuck: list[str] = []
        self._rounds = self._tokens = 0
        self._cost: float | None = 0.0
        self._current: BoardItem | None = None
        self._started_at: str | None = None
        self._compromised = ""
        #: The integration branch's tip when the tool call running now started.
        self._tip_before: str | None = None
        #: The integration branch's last move this worker's harness made (told already).
        self._own_move: tuple[str, str] | None = None
        #: Writes of the model's git to branches not its own that the sandbox dropped.
        self._branch_writes: list[str] = []
        #: The repository's branches when the item's session started.
        self._branches_before: frozenset[str] = frozenset()

    def _open(self) -> SqlBoardStore:
        """A connection of its own (the heartbeat's, each session's), to a board that is there.

        Never a new one: a mistyped URL is :class:`~orchestrator.board.store.NoBoard` (one
        line naming it), not an empty board the worker would call done.
        """
        from orchestrator.board.stores import open_existing

        return open_existing(self.plan.board)

    # -- the loop -------------------------------------------------------------------------------

    def run(self, stopped: Callable[[], int]) -> WorkResult:
        """Work until the board has nothing left for this worker; ``stopped()`` gives 130/143."""
        plan = self.plan
        self._board.start_renewing(self._open)
        self.out.record(
            {
                "event": "work.started",
                "agent": plan.agent,
                "board": self.store.url,
                "workdir": str(plan.workdir),
                "pid": _pid(),
                "lease": plan.lease,
                "integrate": plan.integrate,
                "repository": self._place is not None,
            }
        )
        status, reason, code = "done", "", 0
        try:
            while True:
                found = self._next()
                if found is None:
                    break
                ended = self._work_on(*found)
                if ended == "interrupted":
                    status, code, reason = "interrupted", stopped(), "stopped by a signal"
                    break
                if ended == "failed":
                    status, code = "failed", 1
                    reason = self._outcomes[-1].why if self._outcomes else "the session failed"
                    break
                if self._compromised:
                    status, code, reason = "refused", 3, self._compromised
                    break
        except KeyboardInterrupt:
            self._stop_now()
            status, code, reason = "interrupted", stopped(), "stopped by a signal"
        except integration.HeadMoved as error:
            # The model moved this worktree's HEAD: the harness commits nothing there again.
            self._compromised = str(error)
            self._stop_now("the worker stopped: " + str(error))
            status, code, reason = "refused", 3, str(error)
        except (GitError, integration.TeamError) as error:
            # The repository would not do what the harness asked: its item goes back now.
            self._stop_now("the worker failed: " + str(error))
            status, code, reason = "failed", 1, str(error)
        finally:
            self._board.close()
        if code == 0 and any(o.outcome == "refused" for o in self._outcomes):
            status, code = "refused", 3
            reason = "an item's work was not merged (see above)"
        elif code == 0 and (left := self._not_finished()):
            # Given back to the board, not done: the board is not left for it to say so.
            status, code = "unfinished", 3
            named = "; ".join(f"#{o.item} ({o.why})" for o in left[:5])
            reason = f"not finished, given back to the board: {named}"
        elif code == 0 and self._stuck:
            # Pending items nobody can ever start: the board is not finished, and not by waiting.
            status, code = "unfinished", 3
            reason = "left on the board, never ready: " + "; ".join(self._stuck[:5])
        return WorkResult(
            status,
            code,
            reason,
            tuple(self._outcomes),
            self._rounds,
            self._tokens,
            self._cost,
            tuple(self._traces),
        )

    def _not_finished(self) -> list[ItemOutcome]:
        """The items this worker took and gave back without completing them (latest try)."""
        last: dict[str, ItemOutcome] = {}
        for outcome in self._outcomes:
            last[outcome.item] = outcome
        return [o for o in last.values() if o.outcome in ("unfinished", "conflict")]

    def _next(self) -> tuple[BoardItem, bool] | None:
        """The item to work on next, and whether this worker held it already; None: no more.

        An item this worker holds comes first (a restarted worker takes back what it held);
        then the first ready one it has not given up on. While nothing is ready but others
        hold items (whose completion may unblock more), it waits.
        """
        agent = self.plan.agent
        said = ""
        while True:
            items = self.store.items()
            for held in items:
                if held.status == Status.IN_PROGRESS and held.owner == agent:
                    if held.id not in self._given_up:
                        return held, True
                    self._give_back(held, "this worker gave up on it before")
            done = {i.id for i in items if i.status == Status.COMPLETED}
            ready = [
                i
                for i in items
                if i.status == Status.PENDING
                and i.id not in self._given_up
                and all(blocker in done for blocker in i.blocked_by)
            ]
            for item in ready:
                claimed = self._claim(item.id)
                if claimed is not None:
                    return claimed, False
            others = [i for i in items if i.status == Status.IN_PROGRESS and i.owner != agent]
            if not others:
                # Nothing ready for it, and nobody working on what could unblock; what waits on
                # a cancelled item is said, not left behind in silence.
                self._stuck = never_ready(items)
                return None
            why = f"{len(others)} item(s) held by others, nothing ready for {agent}"
            if why != said:
                self.out.record({"event": "work.waiting", "why": why})
                said = why
            time.sleep(self.plan.poll)

    def _claim(self, item_id: str) -> BoardItem | None:
        from orchestrator.board.store import BoardError

        try:
            return self.store.claim(self.plan.agent, lease=self.plan.lease, item_id=item_id)
        except BoardError:
            return None  # another worker was first, or it is no longer ready

    def _work_on(self, item: BoardItem, resumed: bool) -> str:
        """One item from claim to landing; "interrupted", "failed" or "" (go on)."""
        self._tried[item.id] = self._tried.get(item.id, 0) + 1
        self._current = item
        self.out.record(
            {"event": "work.claimed", "item": item.id, "text": item.text, "resumed": resumed}
        )
        # None until the item's own start is known: a stop while catching up has no commit of
        # this item to name (the previous item's start would name that item's commit).
        self._started_at = None
        kept = self._catch_up(item)
        self._started_at = self._head()
        if self._place is not None:
            self._branches_before = integration.branches(self._place)
        outcome = self._session(item)
        status = outcome.status if outcome is not None else "failed"
        if status == "interrupted":
            self._wrap_up(item, ItemOutcome(item.id, "interrupted", why="stopped by a signal"))
            self._current = None
            return "interrupted"
        result = self._settle(item, status, outcome.reason if outcome is not None else "")
        self._current = None
        if kept is not None:
            result = attrs.evolve(result, kept=result.kept or kept)
        self._outcomes.append(result)
        self.out.record(
            {"event": "work.item", **attrs.asdict(result), "merged": self._merged(item)}
        )
        return "failed" if result.outcome == "failed" else ""

    def _merged(self, item: BoardItem) -> str | None:
        landed = self._landed.get(item.id)
        return self.plan.integrate if landed is not None and landed[1] is not None else None

    def _catch_up(self, item: BoardItem) -> str | None:
        """Bring the worktree to the integration branch's tip; the branch earlier work went to."""
        place, branch = self._place, self.plan.integrate
        if place is None or branch is None:
            return None
        with _signals_held():
            integration.commit_all(
                place,
                f"{self.plan.agent}: work left in the worktree",
                on=self._branch,
                author=self.plan.agent,
            )
            keep_as = _kept_name(branch, self.plan.agent)
            kept = integration.catch_up(place, branch, keep_as)
        tip = self._head()
        self.out.record(
            {
                "event": "work.caught_up",
                "item": item.id,
                "branch": branch,
                "tip": (tip or "")[:10],
                "kept": kept,
            }
        )
        return kept

    def _session(self, item: BoardItem) -> RunOutcome | None:
        """Run the item's session to its end; its outcome, or None when it could not open."""
        from orchestrator.agent import Session
        from orchestrator.config import SettingsError

        plan = self.plan
        trace: Path | None = None
        if plan.trace_dir is not None:
            # A try of its own, numbered on from the traces there (a resumed team's included).
            stem = f"{_short(plan.agent)}-item-{_safe(item.id)}"
            tries = self._tried[item.id]
            while (plan.trace_dir / f"{stem}-{tries}.jsonl").exists():
                tries += 1
            trace = plan.trace_dir / f"{stem}-{tries}.jsonl"
        session: Session | None = None
        board: _ItemBoard | None = None
        told: list[Path] = []

        def header(text: str) -> None:
            # The session's header comes once its trace is open: the trace is told first, so
            # a reader of the records (``team``) has it even if this process dies next.
            opened = session.trace_path if session is not None else None
            if opened is not None and not told:
                told.append(opened)
                self.out.record(
                    {
                        "event": "work.session",
                        "agent": plan.agent,
                        "item": item.id,
                        "trace": str(opened),
                    }
                )
            self.out.line(text)

        try:
            options = plan.options(trace)
            board = _ItemBoard(self._open(), plan.agent, lease=plan.lease, land=self._land)
            session = Session(
                options,
                plan.model(item.id, item.text),
                board=board,
                view=self.out.view(),
                say=self.out.line,
                notice=self.out.line,
                header=header,
                interactive=False,
                extra_sinks=(self._watch,),
            )
            prompt = ITEM_PROMPT.format(agent=plan.agent, item=item.id, text=item.text)
            outcome = session.turn(prompt)
        except Exception as error:  # a model, tool or setting failure ends the item here
            known = isinstance(error, SettingsError | GitError | integration.TeamError)
            said = str(error) if known else f"{type(error).__name__}: {error}"
            self._refusal[item.id] = ("failed", said)
            return None
        finally:
            if session is not None:
                self._count(session)
                session.close()
            elif board is not None:
                board.close()
        if session.protected_changes:
            self._compromised = "the session changed protected paths: " + ", ".join(
                change.describe(plan.workdir) for change in session.protected_changes
            )
        elif self._branch_writes:
            self._compromised = _branch_writes_said(self._branch_writes)
        return outcome

    def _back_on_own_branch(self) -> None:
        """After ``git switch -c NEW`` in the session: its branch follows NEW, HEAD names it.

        Any other branch HEAD names is left as it is, and :func:`.integration.commit_all`
        refuses to commit there.
        """
        if self._place is None or self._branch is None:
            return
        try:
            followed = integration.follow_new_branch(
                self._place, self._branch, self._branches_before
            )
        except GitError:
            return
        if followed is not None:
            self.out.line(
                inert(
                    f"orchestrator: HEAD was on {followed}, a branch made in this item; "
                    f"{self._branch} now points where it did, and HEAD names {self._branch} again"
                )
            )

    def _watch(self, event: Mapping[str, Any]) -> None:
        """Around each tool call: whether the integration branch moved while it ran.

        A move is told to ``team`` (``work.moved``), which sets it beside the merges the
        workers made: one no worker's harness made is put to the worker whose tool call saw it.
        """
        name = event.get("event")
        if name == "git.landed":
            self._branch_writes += _branch_writes(event.get("dropped"))
            return
        if name not in ("tool.call", "tool.result") or self._place is None:
            return
        if self.plan.integrate is None:
            return
        try:
            tip = integration.rev(self._place, f"refs/heads/{self.plan.integrate}")
        except GitError:
            tip = None
        if name == "tool.call":
            self._tip_before = tip
            return
        before, self._tip_before = self._tip_before, None
        if before is not None and tip is not None and before != tip:
            if (before, tip) == self._own_move:
                return  # its own merge, in the call that completed its item
            self.out.record(
                {
                    "event": "work.moved",
                    "agent": self.plan.agent,
                    "branch": self.plan.integrate,
                    "before": before,
                    "after": tip,
                    "tool": event.get("name"),
                }
            )

    def _count(self, session: Session) -> None:
        totals = session.totals
        config = session.options.config
        self._rounds += totals.rounds
        self._tokens += sum(totals.usage.values())
        cost = totals.cost(config.price_per_mtok, config.model)
        self._cost = None if cost is None or self._cost is None else self._cost + cost
        if session.trace_path is not None:
            self._traces.append(str(session.trace_path))

    def _settle(self, item: BoardItem, status: str, reason: str) -> ItemOutcome:
        """After the session: completed, or back on the board with why (and the work kept)."""
        agent = self.plan.agent
        landed = self._landed.get(item.id)
        with _signals_held():
            now = self._finish_landed(item.id)
            after = None
            if self._place is not None:
                self._back_on_own_branch()
                try:
                    after = integration.commit_all(
                        self._place,
                        f"#{item.id} ({agent}): changes after the item's commit\n\n{item.text}",
                        on=self._branch,
                        author=agent,
                    )
                except integration.HeadMoved as error:
                    self._compromised = str(error)
            if now is not None and now.status == Status.COMPLETED and now.owner == agent:
                commit = landed[0] if landed is not None else None
                return ItemOutcome(item.id, "completed", commit)
            outcome, why = self._refusal.pop(item.id, ("", ""))
            if not outcome:
                outcome = "failed" if status == "failed" else "unfinished"
                why = reason if status == "failed" else "the session ended without completing it"
            if now is not None and now.owner != agent and now.status != Status.PENDING:
                why = f"{why}; meanwhile its claim passed to {now.owner or 'nobody'}"
            self._give_back(item, why)
        if outcome != "conflict" or self._tried[item.id] >= CONFLICT_TRIES:
            self._given_up.add(item.id)
        commit = after or (landed[0] if landed is not None else None) or self._new_head()
        return ItemOutcome(item.id, outcome, commit, why)

    def _finish_landed(self, item_id: str) -> BoardItem | None:
        """The item now; work that landed but whose board edge did not follow gets it first.

        The store may fail between the two, or a stop signal come: the work is merged, so the
        edge is the one it was about to take.
        """
        from orchestrator.board.store import BoardError

        now = self._item(item_id)
        agent = self.plan.agent
        if now is None or now.status != Status.IN_PROGRESS or now.owner != agent:
            return now
        if item_id in self._landed:
            with suppress(BoardError):
                now = self.store.complete(item_id, agent=agent)
        return now

    def _give_back(self, item: BoardItem, why: str) -> None:
        from orchestrator.board.store import BoardError

        now = self._item(item.id)
        if now is None or now.status != Status.IN_PROGRESS or now.owner != self.plan.agent:
            return
        try:
            self.store.release(item.id, agent=self.plan.agent)
        except BoardError:
            return  # its lease ran out meanwhile: it is free already
        self.out.record({"event": "work.released", "item": item.id, "why": why})

    def _wrap_up(self, item: BoardItem, result: ItemOutcome) -> None:
        """A stopped worker: its work committed first, then its item given back at once."""
        with _ignoring_stops():
            commit, kept = None, "its work so far is committed"
            if self._place is not None:
                self._back_on_own_branch()
                try:
                    commit = (
                        integration.commit_all(
                            self._place,
                            f"#{item.id} ({self.plan.agent}): unfinished, the worker was stopped"
                            f"\n\n{item.text}",
                            on=self._branch,
                            author=self.plan.agent,
                        )
                        or self._new_head()
                    )
                except (GitError, integration.TeamError) as error:
                    kept = f"its work so far is left in {self.plan.workdir} (not committed)"
                    self.out.line(f"orchestrator: could not commit the unfinished work: {error}")
            landed = self._landed.get(item.id)
            now = self._finish_landed(item.id)
            if now is not None and now.owner == self.plan.agent and now.status == Status.COMPLETED:
                result = ItemOutcome(item.id, "completed", landed[0] if landed else None)
            if result.outcome != "completed":
                self._give_back(item, f"{result.why}; {kept}")
                result = attrs.evolve(result, commit=commit)
            self._outcomes.append(result)
            self.out.record(
                {"event": "work.item", **attrs.asdict(result), "merged": self._merged(item)}
            )

    def _stop_now(self, why: str = "stopped by a signal") -> None:
        """A stop outside a session (waiting, claiming, catching up): held items go back."""
        with _ignoring_stops():
            held = [
                item
                for item in self.store.items()
                if item.status == Status.IN_PROGRESS and item.owner == self.plan.agent
            ]
        if self._current is not None and all(i.id != self._current.id for i in held):
            held.insert(0, self._current)
        outcome = "interrupted" if why == "stopped by a signal" else "failed"
        for item in held:
            self._wrap_up(item, ItemOutcome(item.id, outcome, why=why))
        self._current = None

    # -- landing a completed item ----------------------------------------------------------

    def _land(self, item_id: str, text: str) -> CheckResult | None:
        """Commit the item's work, refuse what may not merge, merge it; before ``complete``."""
        place, plan = self._place, self.plan
        if place is None:
            self._landed[item_id] = ("", None)
            return None
        target = plan.integrate or "the work directory's branch"
        now = self._item(item_id)
        if now is None or now.status != Status.IN_PROGRESS or now.owner != plan.agent:
            # Its lease ran out (a stalled machine) and another agent may be doing it now:
            # landing this work too would merge the item twice.
            holder = now.owner if now is not None and now.owner else "nobody"
            why = f"#{item_id} is no longer held by {plan.agent} (now: {holder})"
            self._refusal[item_id] = ("unfinished", why)
            return _refused(target, f"not landed: {why}")
        with _signals_held():
            problems: list[str] = []
            if self._protected is not None and (changes := self._protected.changes()):
                shown = ", ".join(change.describe(plan.workdir) for change in changes)
                self._compromised = f"protected paths changed: {shown}"
                problems.append(self._compromised)
            if self._branch_writes:
                self._compromised = _branch_writes_said(self._branch_writes)
                problems.append(self._compromised)
            message = f"#{item_id}: {text}\n\nBoard-Item: {item_id}\nAgent: {plan.agent}\n"
            self._back_on_own_branch()
            try:
                commit = (
                    integration.commit_all(place, message, on=self._branch, author=plan.agent)
                    or self._head()
                )
            except integration.HeadMoved as error:
                self._compromised = str(error)
                commit = None
                problems.append(str(error))
            if commit is None and not problems:
                problems.append(f"{plan.workdir}: HEAD names no commit")
            if commit is not None:
                problems.extend(
                    integration.refusals(
                        place,
                        self._started_at or commit,
                        commit,
                        self._globs,
                        self._protected_paths,
                    )
                )
            if problems:
                why = "; ".join(problems)
                self._refusal[item_id] = ("refused", why)
                self._note(item_id, f"not merged into {target}: {why}")
                return _refused(target, f"not merged: {why}")
            assert commit is not None  # a HEAD with no commit is refused above
            merged: str | None = None
            if plan.integrate is not None:
                outcome = integration.merge_into(
                    place, plan.integrate, commit, f"Merge #{item_id} ({plan.agent}): {text}"
                )
                if not outcome.ok:
                    why = f"conflicts with {plan.integrate} in " + ", ".join(outcome.conflicts)
                    self._refusal[item_id] = ("conflict", why)
                    self._note(item_id, f"merge into {plan.integrate}: {why}")
                    return _refused(target, why)
                merged = outcome.tip
                if outcome.onto is not None and merged is not None:
                    self._own_move = (outcome.onto, merged)
                    # Told at once: the team knows each move of its branch that is its own.
                    self.out.record(
                        {
                            "event": "work.merged",
                            "agent": plan.agent,
                            "item": item_id,
                            "branch": plan.integrate,
                            "onto": outcome.onto,
                            "tip": merged,
                        }
                    )
            self._refusal.pop(item_id, None)
            self._landed[item_id] = (commit, merged)
        return None

    def _note(self, item_id: str, what: str) -> None:
        """The board's own record of a landing that failed: a failed run of the item's guard.

        It goes in the log as a ``check`` line (the command says what was tried and why it
        failed), which ``board log`` and the picture show beside the item; the item goes back
        to pending when the session ends.
        """
        from orchestrator.board.inputs import one_line
        from orchestrator.board.store import BoardError

        shown = one_line(what)
        shown = shown if len(shown) <= 400 else shown[:399] + "…"
        with suppress(BoardError):  # the store refused the note: the output still says it
            self.store.record_check(
                item_id, agent=self.plan.agent, command=shown, exit_code=1, duration_s=0.0
            )

    # -- reading -----------------------------------------------------------------------------

    def _repository(self) -> GitPlace | None:
        """The work directory's repository when it is the top of one (the commits go there)."""
        place = integration.place_of(self.plan.workdir)
        if place is None or place.work_tree.resolve() != self.plan.workdir.resolve():
            if self.plan.integrate is not None:
                raise integration.TeamError(
                    f"--integrate {self.plan.integrate}: {self.plan.workdir} is not the top of a "
                    "git repository"
                )
            return None
        if integration.dirty(place):
            raise integration.TeamError(
                f"{self.plan.workdir}: uncommitted changes; commit or stash them first, so each "
                "item is a commit of its own"
            )
        self._branch = integration.head_branch(place)
        if self.plan.integrate is not None and (
            integration.rev(place, f"refs/heads/{self.plan.integrate}") is None
        ):
            raise integration.TeamError(
                f"--integrate {self.plan.integrate}: no such branch in {self.plan.workdir}"
            )
        return place

    def _snapshot(self) -> ProtectedSnapshot | None:
        """The protected files as they are before any item: what a session may not change.

        The same set a session's own guard watches (the git dir's config and hooks, our own
        files, the hook managers', the ``protect`` globs), read by the harness for itself.
        """
        if self._place is None:
            return None
        from orchestrator.doctor import sandbox_policy
        from orchestrator.tools.products.gitdir import find_layout
        from orchestrator.tools.protected import ProtectedSet, ProtectedSnapshot

        policy = sandbox_policy(self.plan.workdir, self.plan.options(None).config)
        covered = ProtectedSet(
            policy.workdir,
            policy.protected,
            policy.protect,
            find_layout(policy.workdir),
            (*policy.hidden, *policy.stores, policy.workdir / ".orchestrator"),
        )
        self._globs = policy.protect
        # Tree paths: what git config names here, and in the main work tree, where every
        # merge ends up (a worktree's config includes are read relative to the common dir).
        paths = set(integration.protected_in_tree(policy.workdir, policy.protected))
        main = integration.main_work_tree(self._place)
        if main is not None and main.resolve() != policy.workdir.resolve():
            allowed = [Path(p) for p in self.plan.options(None).config.allow_write]
            paths |= integration.protected_of(main, allowed)
        self._protected_paths = frozenset(paths)
        return ProtectedSnapshot.take(covered)

    def _item(self, item_id: str) -> BoardItem | None:
        return next((i for i in self.store.items() if i.id == item_id), None)

    def _head(self) -> str | None:
        return None if self._place is None else integration.rev(self._place, "HEAD")

    def _new_head(self) -> str | None:
        if self._started_at is None:
            return None
        head = self._head()
        return head if head is not None and head != self._started_at else None


class _ItemBoard(SharedBoard):
    """The board a worker's session sees: completing an item first lands its work.

    The session sets ``task_completed`` to the project's ``TaskCompleted`` hooks (when there
    are any); landing runs after them, and its refusal is the completion's refusal.
    """

    def __init__(
        self,
        store: BoardStore,
        agent: str,
        *,
        lease: float,
        land: Callable[[str, str], CheckResult | None],
    ) -> None:
        self._land = land
        self._hooks: Callable[[JSONObject], CheckResult | None] | None = None
        super().__init__(store, agent, lease=lease)

    @property
    def task_completed(self) -> Callable[[JSONObject], CheckResult | None]:
        return self._completing

    @task_completed.setter
    def task_completed(self, hooks: Callable[[JSONObject], CheckResult | None] | None) -> None:
        self._hooks = hooks

    def _completing(self, asked: JSONObject) -> CheckResult | None:
        hooked = self._hooks(asked) if self._hooks is not None else None
        if hooked is not None and not hooked.passed:
            return hooked
        landed = self._land(str(asked.get("id", "")), str(asked.get("text", "")))
        return landed if landed is not None else hooked


def _branch_writes(dropped: object) -> list[str]:
    """The branch writes in a ``git.landed`` event's ``dropped`` list, each with why.

    A branch (another worker's, the integration branch) the sandbox would not let the model's
    git move, or ``HEAD`` pointed at a team's branch: the work is not merged either way.
    """
    found = []
    for entry in dropped if isinstance(dropped, list) else ():
        if not isinstance(entry, Mapping):
            continue
        path, why = str(entry.get("path", "")), str(entry.get("why", ""))
        ref = path[path.find("refs/heads/") :] if "refs/heads/" in path else ""
        head = path == "HEAD" or path.endswith("/HEAD")
        if ref.startswith("refs/heads/") or (head and "refs/heads/team/" in why):
            found.append(f"{ref or 'HEAD'} ({why})")
    return found


def _branch_writes_said(writes: list[str]) -> str:
    shown = "; ".join(dict.fromkeys(writes))
    return f"the sandbox stopped the session's git from moving branches: {shown}"


def _refused(target: str, why: str) -> CheckResult:
    return CheckResult(
        f"land the work in {target}",
        1,
        f"{why}. The harness gives this item back to the board when your turn ends; end "
        "your turn now.",
    )


def _kept_name(integrate: str, agent: str) -> str:
    """Where a worker keeps commits that did not merge: beside the integration branch.

    ``team/ID/integration`` → ``team/ID/kept/worker-K-…``; a branch without a folder gets
    ``BRANCH-kept/…`` (a ref cannot live under another ref's name).
    """
    parent, _, _ = integrate.rpartition("/")
    return f"{parent}/kept/{_short(agent)}" if parent else f"{integrate}-kept/{_short(agent)}"


def _short(agent: str) -> str:
    return _safe(agent.rsplit("/", 1)[-1])


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name) or "item"


def _pid() -> int:
    return os.getpid()


@contextmanager
def _signals_held() -> Iterator[None]:
    """Stop signals wait until a landing (commit, merge, board edge) is whole."""
    stops = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def _ignoring_stops() -> Iterator[None]:
    """A second Ctrl-C while a stopped worker saves its work is not allowed to cut it short."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
