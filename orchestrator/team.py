"""``orchestrator team``: a lead plans on a shared board, workers claim and do the items.

The lead runs the task once on a fresh shared board (``--board``, else a SQLite file in the
state directory) and writes the plan as items. Each of N workers then gets its own
``git worktree`` on its own branch (so its own sandbox over its own files) and its own
session on the board, and claims ready items until none is left; the claim is the item
machine's guarded ``start`` edge in one store transaction, so no item is done twice. When the
workers end, the harness commits each worktree on its branch (outside the sandboxes, which
keep ``.git`` read-only) and merges the branches back into the work directory, stopping at a
conflict and naming its files. Every agent writes its own trace; the board keeps its log, and
``board check`` replays it.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

import attrs

from orchestrator.inert import inert

if TYPE_CHECKING:
    from orchestrator.agent import RunOptions, Session
    from orchestrator.console import View
    from orchestrator.protocols import Model
    from orchestrator.team_view import TeamBoardView

#: How long an interrupted team waits for each worker to end its round and close its trace.
_GRACE = 30.0
#: Who a git commit made by the harness is from, where the repository names nobody.
_IDENTITY = ("-c", "user.name=orchestrator team", "-c", "user.email=team@orchestrator.invalid")

LEAD_PROMPT = (
    "You lead a team of {workers} workers who share the todo board. Plan this task as small "
    "items on the board (the todo tool), each one a worker can do on its own in its own copy "
    "of the repository; mark dependencies with blocked_by. Do not do the items yourself and do "
    "not mark any in progress: the workers claim them. End your turn once the plan is "
    "written.\n\nTask: {task}"
)
WORKER_PROMPT = (
    "You are {agent}, one of {workers} workers sharing the todo board; the team's task is: "
    "{task}\n\nClaim one ready item at a time by marking it in_progress (a claim another "
    "worker holds is refused: pick another), do it in this work directory, then mark it "
    "completed. Repeat until no item is ready, then end your turn. The harness commits your "
    "work."
)


class TeamError(Exception):
    """A team that cannot start here; ``str()`` is one line for a person."""


@attrs.frozen
class AgentReport:
    """One agent's part: its items completed, rounds, tokens and cost, and how it ended."""

    agent: str
    status: str
    completed: tuple[str, ...]
    rounds: int
    tokens: int
    cost: float | None
    trace: str
    reason: str = ""

    def line(self) -> str:
        from orchestrator.pricing import format_cost

        items = ", ".join(f"#{item}" for item in self.completed) or "none"
        why = f": {self.reason}" if self.reason else ""
        return inert(
            f"{self.agent:<10} {self.status}{why} · items {items} · {self.rounds} rounds · "
            f"{self.tokens:,} tokens · {format_cost(self.cost)}"
        )


@attrs.frozen
class TeamResult:
    """How the team ended: each agent, the branches merged, the conflicts, the board check."""

    agents: tuple[AgentReport, ...]
    merged: tuple[str, ...]
    conflicts: tuple[tuple[str, tuple[str, ...]], ...]
    board: str
    board_check: str
    unfinished: tuple[str, ...]

    @property
    def exit_code(self) -> int:
        if any(agent.status not in ("done",) for agent in self.agents):
            return 1
        return 3 if self.conflicts or self.unfinished or self.board_check != "ok" else 0

    def closing_lines(self) -> list[str]:
        lines = ["", "team:"]
        lines.extend("  " + agent.line() for agent in self.agents)
        if self.merged:
            lines.append(f"merged: {', '.join(self.merged)}")
        for branch, files in self.conflicts:
            shown = ", ".join(files) or "(git named no file)"
            lines.append(inert(f"! not merged: {branch} conflicts in {shown}; merge it by hand"))
        if self.unfinished:
            names = ", ".join(f"#{item}" for item in self.unfinished)
            lines.append(f"! board unfinished: {names}")
        lines.append(f"board: {self.board} (board check: {self.board_check})")
        lines.extend(f"trace: {agent.agent}: {agent.trace}" for agent in self.agents)
        lead = next((agent for agent in self.agents if agent.agent == "lead" and agent.trace), None)
        if lead is not None:
            # The lead's page carries the board's lanes and links every agent's page.
            lines.append(f"picture: orchestrator show {shlex.quote(lead.trace)} --html")
        return lines


@attrs.frozen
class TeamPlan:
    """What a team run needs: the task, the place, the board, and how to make each model."""

    task: str
    workers: int
    workdir: Path
    board: str
    base: Path
    #: ``options(workdir, agent)``: the run options of one agent's session.
    options: Callable[[Path, str], RunOptions]
    #: ``model(agent)``: the model one agent talks to (scripted or the API).
    model: Callable[[str], Model]
    out: TextIO
    #: The live board-and-agents view on a terminal (None: prefixed lines).
    live: TeamBoardView | None = None


def run_team(plan: TeamPlan) -> TeamResult:
    """Lead, workers in their worktrees, commits, merges; every session closed on the way out."""
    _require_repository(plan.workdir)
    plan.base.mkdir(parents=True, exist_ok=True)
    if plan.live is None:
        return _run_team(plan)
    with plan.live.shown():
        return _run_team(plan)


def _run_team(plan: TeamPlan) -> TeamResult:
    lead = _session(plan, plan.workdir, "lead")
    reports = [_run(lead, "lead", LEAD_PROMPT.format(workers=plan.workers, task=plan.task))]
    # A lead that changed files (it was asked not to) has them committed, so the workers start
    # from them and their branches merge back onto a clean tree.
    _git(plan.workdir, "add", "-A")
    if _git(plan.workdir, "status", "--porcelain").stdout.strip():
        _git(plan.workdir, *_IDENTITY, "commit", "-q", "-m", "lead: files changed while planning")
    merged: tuple[str, ...] = ()
    conflicts: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Without a plan there is nothing to claim: a lead that failed ends the team.
    worktrees = (
        [_add_worktree(plan, f"worker-{n}") for n in range(1, plan.workers + 1)]
        if reports[0].status == "done"
        else []
    )
    try:
        reports.extend(_run_workers(plan, worktrees))
        merged, conflicts = _merge_back(plan, worktrees)
    finally:
        for worktree in worktrees:
            _git(plan.workdir, "worktree", "remove", "--force", str(worktree.path), check=False)
    verdict, unfinished = _board_verdict(plan.board)
    return TeamResult(
        tuple(_with_items(reports, plan.board)), merged, conflicts, plan.board, verdict, unfinished
    )


@attrs.frozen
class _Worktree:
    agent: str
    path: Path
    branch: str


def _require_repository(workdir: Path) -> None:
    inside = _git(workdir, "rev-parse", "--is-inside-work-tree", check=False)
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        raise TeamError(
            f"{workdir}: not a git repository; team gives each worker a git worktree "
            "(git init, then commit what is there), or use --scripted in an empty folder"
        )
    if _git(workdir, "rev-parse", "--verify", "HEAD", check=False).returncode != 0:
        raise TeamError(f"{workdir}: the repository has no commit yet; commit once first")
    if _git(workdir, "status", "--porcelain").stdout.strip():
        raise TeamError(
            f"{workdir}: uncommitted changes; commit or stash them first, so the workers' "
            "branches merge back onto a clean tree"
        )


def _add_worktree(plan: TeamPlan, agent: str) -> _Worktree:
    path = plan.base / agent
    branch = f"team/{plan.base.name}/{agent}"
    _git(plan.workdir, "worktree", "add", "-q", "-b", branch, str(path), "HEAD")
    return _Worktree(agent, path, branch)


def _run_workers(plan: TeamPlan, worktrees: Sequence[_Worktree]) -> list[AgentReport]:
    """Each worker in its own thread, its own worktree and session; all joined before merging."""
    reports: dict[str, AgentReport] = {}
    stop = threading.Event()

    def stopped() -> str | None:
        return "the team was interrupted" if stop.is_set() else None

    def work(tree: _Worktree) -> None:
        try:
            session = _session(plan, tree.path, tree.agent, stop_when=stopped)
        except Exception as error:  # a session that cannot open is this worker's failure
            reason = f"{type(error).__name__}: {error}"
            reports[tree.agent] = AgentReport(tree.agent, "failed", (), 0, 0, None, "", reason)
            return
        # The session puts the board in the first message, read by this agent's own view:
        # what the model is told is what the board will hold it to.
        prompt = WORKER_PROMPT.format(agent=tree.agent, workers=plan.workers, task=plan.task)
        reports[tree.agent] = _run(session, tree.agent, prompt)

    threads = [
        threading.Thread(target=work, args=(tree,), name=tree.agent, daemon=True)
        for tree in worktrees
    ]
    for thread in threads:
        thread.start()
    try:
        while any(thread.is_alive() for thread in threads):
            _first_alive(threads).join(0.2)  # in slices: Ctrl-C reaches this thread
    except KeyboardInterrupt:
        # Each worker ends at its next round (its trace closed), not mid-call; then we go.
        stop.set()
        for thread in threads:
            thread.join(_GRACE)
        raise
    return [
        reports.get(tree.agent)
        or AgentReport(tree.agent, "failed", (), 0, 0, None, "", "the worker did not report")
        for tree in worktrees
    ]


def _first_alive(threads: Sequence[threading.Thread]) -> threading.Thread:
    return next(thread for thread in threads if thread.is_alive())


def _session(
    plan: TeamPlan, workdir: Path, agent: str, *, stop_when: Callable[[], str | None] | None = None
) -> Session:
    from orchestrator.agent import Session, new_board
    from orchestrator.console import PlainView

    options = plan.options(workdir, agent)
    stream = _Prefixed(plan.out, agent)
    view: View = PlainView(cast("TextIO", stream))  # all a view uses: write, flush, isatty
    say = stream.line
    if plan.live is not None:
        feed = plan.live.feed(agent)
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
        stop_when=stop_when,
    )


def _run(session: Session, agent: str, prompt: str) -> AgentReport:
    try:
        outcome = session.turn(prompt)
    except Exception as error:  # one agent's failure must not take the others down
        session.close()
        return AgentReport(agent, "failed", (), 0, 0, None, "", f"{type(error).__name__}: {error}")
    trace = str(session.trace_path or "")
    totals = session.totals
    config = session.options.config
    session.close()
    tokens = sum(totals.usage.values())
    return AgentReport(
        agent,
        outcome.status,
        (),
        outcome.rounds,
        tokens,
        totals.cost(config.price_per_mtok, config.model),
        trace,
        outcome.reason if outcome.status != "done" else "",
    )


def _merge_back(
    plan: TeamPlan, worktrees: Sequence[_Worktree]
) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]:
    """Commit each worktree on its branch, then merge the branches in order; stop at none."""
    merged: list[str] = []
    conflicts: list[tuple[str, tuple[str, ...]]] = []
    for tree in worktrees:
        _git(tree.path, "add", "-A")
        if _git(tree.path, "status", "--porcelain").stdout.strip():
            _git(tree.path, *_IDENTITY, "commit", "-q", "-m", f"{tree.agent}: the team's items")
        done = _git(plan.workdir, *_IDENTITY, "merge", "--no-edit", "-q", tree.branch, check=False)
        if done.returncode == 0:
            merged.append(tree.branch)
            continue
        files = _git(plan.workdir, "diff", "--name-only", "--diff-filter=U", check=False)
        named = tuple(files.stdout.split())
        if not named:  # not a conflict: git refused the merge itself; say why
            named = (f"(git: {(done.stderr.strip().splitlines() or ['no reason'])[-1]})",)
        conflicts.append((tree.branch, named))
        _git(plan.workdir, "merge", "--abort", check=False)
    return tuple(merged), tuple(conflicts)


def _board_verdict(url: str) -> tuple[str, tuple[str, ...]]:
    """``board check``'s verdict on the board's log, and the items left unfinished."""
    from orchestrator.board.check import check_log
    from orchestrator.board.stores import open_store

    store = open_store(url)
    try:
        items = store.items()
        violation = check_log(store.log(), items)
    finally:
        store.close()
    verdict = "ok" if violation is None else str(violation)
    unfinished = tuple(
        item.id for item in items if str(item.status) not in ("completed", "cancelled")
    )
    return verdict, unfinished


def _with_items(reports: Sequence[AgentReport], url: str) -> list[AgentReport]:
    """Each report with the items its agent completed, as the board's log says."""
    from orchestrator.board.stores import open_store

    store = open_store(url)
    try:
        completed: dict[str, list[str]] = {}
        for entry in store.log():
            if entry.dst == "completed" and entry.agent:
                completed.setdefault(entry.agent, []).append(entry.item)
    finally:
        store.close()
    return [attrs.evolve(r, completed=tuple(completed.get(r.agent, ()))) for r in reports]


def _git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
        )
    except OSError as error:  # no such folder, or no git
        raise TeamError(f"{cwd}: cannot run git there: {error.strerror or error}") from None
    if check and done.returncode != 0:
        raise TeamError(f"git {' '.join(args)} failed in {cwd}: {done.stderr.strip()[-300:]}")
    return done


class _Prefixed:
    """A stream that starts every line with the agent's name, whole lines at a time."""

    _lock = threading.Lock()

    def __init__(self, stream: TextIO, agent: str) -> None:
        self._stream, self._prefix, self._partial = stream, f"{agent:>9} │ ", ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        if lines:
            with self._lock:
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


def prepare_scripted_repository(workdir: Path, files: dict[str, str]) -> None:
    """A small repository for the offline team demo, in a new or empty folder."""
    if workdir.exists() and any(workdir.iterdir()):
        raise TeamError(
            f"{workdir}: not empty; --scripted sets up its own small repository in a new or "
            "empty folder (pass another --workdir)"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (workdir / name).write_text(text, encoding="utf-8")
    _git(workdir, "init", "-q", "-b", "main")
    _git(workdir, "add", "-A")
    _git(workdir, *_IDENTITY, "commit", "-q", "-m", "The team demo's starting point")


def remove_team_folder(base: Path) -> None:
    """The worktrees' parent folder, once the worktrees are gone (the board file stays)."""
    for child in base.iterdir() if base.is_dir() else ():
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
