"""``board check``: replay a shared board's log through fresh item machines and check its rules.

From the log alone it proves, line by line, that:

- every item was added once, and every line names an item that exists;
- every edge is one the item machine has, from the state the item was in; an ``edit`` or a
  ``check`` line leaves the state as it was;
- no item was ever owned by two agents at once, and only the owner completed or released it
  (a forced release, and a person's cancel, are logged as such);
- no agent held two items in progress at once;
- no item started before its blockers completed;
- a checked item completed only after a passing run of its check, logged since it last
  started, or with ``--skip-check`` logged on the completion;
- an agent never cancelled an item carrying a check a person set;
- every line but an ``add`` names who acted (an ``add`` through the Python API may name no one);
- its lines are numbered 1, 2, 3… with none missing, and no line's time (``ts``) is earlier
  than a line before it (see :data:`CLOCK_SKEW` for a board on PostgreSQL);
- and that the state the log arrives at is the store's own, item for item: status, owner
  (``start`` makes the starter the owner, ``complete`` keeps them on record, ``pause``,
  ``expire`` and ``cancel`` leave no owner), text, blockers, check and who set it (which
  decides who may cancel the item), and the board's order (each item's position comes after
  those of the items added before it);
- and, given the store's counters, that they agree with the items: every id ``next_id``
  gave out is an item on the board, and ``next_position`` is one past the position of the
  item added last (so an item deleted together with the log's last lines is named too).

What it cannot prove: a log whose last lines were deleted with everything they changed in the
store, when they added no item (a trailing ``start`` and the item's row put back as it was), or
lines rewritten whole with every rule kept. The JSON board file (``--board FILE``) keeps no
log; ``board check`` reads SQL stores only.

An ``add`` line a store wrote before it recorded checks (schema 1) says nothing about the
item's check: such an item is held to the check rules only once an ``edit`` line names its
check.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence

import attrs
from transitions import EventData, MachineError

from orchestrator.board.inputs import is_person
from orchestrator.board.store import NOTE_TRIGGERS, BoardContents, BoardItem, LogEntry, log_time
from orchestrator.plan import ItemMachine, Status

#: How far (seconds) a line's time may be before an earlier line's on a PostgreSQL board. Each
#: writer stamps its lines by its own machine's clock, once it has the board's lock, and two
#: machines' clocks differ a little. A SQLite board's writers share one machine (its WAL needs
#: that) and so one clock: there no line may be earlier at all. A reordering of lines closer in
#: time than this on a PostgreSQL board is beyond what the times can show.
CLOCK_SKEW = 5.0


@attrs.frozen
class Violation:
    """The first log line (``seq``) where a rule broke, and which."""

    seq: int | None
    message: str

    def __str__(self) -> str:
        where = f"log line seq {self.seq}" if self.seq is not None else "the final state"
        return f"{where}: {self.message}"


@attrs.define(slots=False, eq=False)
class _Replayed:
    """An item as the log has built it so far; the machine's guards are judged by the log."""

    id: str
    text: str
    blocked_by: tuple[str, ...]
    #: Its check (``""``: none; None: the log does not say).
    check: str | None = None
    #: Who set the check (None: a person, or an old log that did not say).
    check_by: str | None = None
    #: Whether the log says who set the current check (an old log's add line does not).
    check_by_known: bool = False
    owner: str | None = None
    state: str = Status.PENDING.value
    #: Whether a passing run of the current check is logged since the item last started.
    passed: bool = False
    # What the log line being replayed claims; the guards accept it, the checks judge it.
    fired: list[str] = attrs.Factory(list)

    def no_other_item_in_progress(self, event: EventData) -> bool:
        return True

    def dependencies_completed(self, event: EventData) -> bool:
        return True

    def held_by_actor(self, event: EventData) -> bool:
        return True

    def lease_expired(self, event: EventData) -> bool:
        return True

    def check_passes(self, event: EventData) -> bool:
        return True

    def record_transition(self, event: EventData) -> None:
        self.fired.append(event.event.name)


class _Checker:
    def __init__(self) -> None:
        self.machine = ItemMachine()
        self.items: dict[str, _Replayed] = {}
        self.holding: dict[str, str] = {}  # agent → the item it holds in progress

    def apply(self, entry: LogEntry) -> str | None:
        """The rule ``entry`` breaks, or None."""
        if entry.trigger == "add":
            return self._add(entry)
        item = self.items.get(entry.item)
        if item is None:
            return f"{entry.trigger} of item #{entry.item}, which was never added"
        if entry.agent is None:
            return f"#{item.id}: a {entry.trigger} line that names no agent"
        if entry.src != item.state:
            return f"#{item.id} {entry.trigger} from {entry.src}, but the log has it {item.state}"
        if entry.trigger in NOTE_TRIGGERS:
            return self._note(entry, item)
        problem = self._rules(entry, item)
        if problem is not None:
            return problem
        try:
            took = getattr(item, entry.trigger)()
        except (AttributeError, MachineError):
            took = False
        if not took or item.state != entry.dst:
            return f"#{item.id}: {entry.src} → {entry.dst} by {entry.trigger} is not an edge"
        self._own(entry, item)
        return None

    def _add(self, entry: LogEntry) -> str | None:
        if entry.item in self.items:
            return f"item #{entry.item} added twice"
        if entry.dst != Status.PENDING:
            return f"item #{entry.item} added as {entry.dst}, not pending"
        if not entry.text:
            return f"item #{entry.item} added without a text"
        blockers = tuple(entry.blocked_by or ())
        unknown = [b for b in blockers if b not in self.items]
        if unknown:
            return f"item #{entry.item} blocked by #{unknown[0]}, which was never added"
        item = _Replayed(entry.item, entry.text, blockers, entry.check, entry.agent)
        item.check_by_known = entry.check is not None
        self.machine.add_model(item, initial=Status.PENDING.value)
        self.items[entry.item] = item
        return None

    def _note(self, entry: LogEntry, item: _Replayed) -> str | None:
        """An ``edit`` or a ``check`` line: the item's state stays; what it records changes."""
        if entry.dst != entry.src:
            return f"#{item.id}: a {entry.trigger} line moves it {entry.src} → {entry.dst}"
        if entry.trigger == "check":
            if entry.check is None or entry.exit_code is None:
                return f"#{item.id}: a check line without its command or exit code"
            # A run counts for the check the item has now; a later edit of it needs a new run.
            item.passed = entry.passed and entry.check == item.check
            return None
        if entry.text is None or entry.blocked_by is None or entry.check is None:
            return f"#{item.id}: an edit line without the item's new text, blockers and check"
        unknown = [b for b in entry.blocked_by if b not in self.items or b == item.id]
        if unknown:
            return f"#{item.id} edited to wait on #{unknown[0]}, which it cannot"
        if entry.check != item.check:
            # Who set a check is known when the log knew the one before it (an old add line
            # did not say, and the store kept that check's setter as it was).
            item.check_by_known = item.check is not None
            item.check, item.check_by, item.passed = entry.check, entry.agent, False
        item.text, item.blocked_by = entry.text, entry.blocked_by
        return None

    def _rules(self, entry: LogEntry, item: _Replayed) -> str | None:
        agent = entry.agent
        if entry.trigger == "start":
            assert agent is not None  # apply() refused a line that names no agent
            held = self.holding.get(agent)
            if held is not None:
                return f"{agent} started #{item.id} while holding #{held} in progress"
            waiting = [b for b in item.blocked_by if self.items[b].state != Status.COMPLETED.value]
            if waiting:
                return f"#{item.id} started while its blocker #{waiting[0]} was not completed"
        elif entry.trigger == "complete":
            if item.owner not in (None, agent):
                return f"{agent} took complete on #{item.id}, which {item.owner} held"
            if item.check and not item.passed and entry.flag != "skip_check":
                return (
                    f"#{item.id} completed without a passing run of its check "
                    f"({item.check}) logged since it last started, and no --skip-check logged"
                )
        elif entry.trigger == "pause":
            if item.owner not in (None, agent) and entry.flag != "force":
                return f"{agent} took pause on #{item.id}, which {item.owner} held"
        elif entry.trigger == "cancel":
            if not is_person(agent):
                if item.owner not in (None, agent):
                    return f"{agent} took cancel on #{item.id}, which {item.owner} held"
                if item.check and (item.check_by is None or is_person(item.check_by)):
                    return (
                        f"{agent} cancelled #{item.id}, which carries a check a person set; "
                        "only a person may"
                    )
        elif entry.trigger == "expire" and agent not in (None, item.owner):
            return f"#{item.id} expired as {agent}'s, but {item.owner} held it"
        return None

    def _own(self, entry: LogEntry, item: _Replayed) -> None:
        if item.owner is not None and self.holding.get(item.owner) == item.id:
            del self.holding[item.owner]
        if entry.trigger == "start":
            assert entry.agent is not None
            item.owner = entry.agent
            item.passed = False
            self.holding[entry.agent] = item.id
        elif entry.trigger in ("pause", "expire", "cancel"):
            item.owner = None


def check_contents(contents: BoardContents) -> Violation | None:
    """The first violation in a store's contents (:meth:`SqlBoardStore.contents`), or None.

    What ``board check`` runs: the log, and everything the store holds beside it.
    """
    return check_log(
        contents.log,
        contents.items,
        checks=contents.checks,
        setters=contents.setters,
        counters=contents.counters,
        clock_skew=0.0 if contents.dialect == "sqlite" else CLOCK_SKEW,
    )


def check_log(
    entries: Iterable[LogEntry],
    final: Sequence[BoardItem],
    *,
    checks: Mapping[str, str] | None = None,
    setters: Mapping[str, str | None] | None = None,
    counters: Mapping[str, int] | None = None,
    clock_skew: float = CLOCK_SKEW,
) -> Violation | None:
    """The first violation in the log (or between it and ``final``), or None when it holds.

    ``checks`` is the store's checks by item id; given, each item's check is compared with
    the one its log arrives at (where the log says). ``setters`` is who set each of them in
    the store; given, it is compared with who the log says set it. Items that carry a
    position (read from a store) are held to the log's order. ``counters`` is the store's
    meta counters; given, ``next_id`` and ``next_position`` are held to the items. A line's
    time may be up to ``clock_skew`` seconds before the latest time of the lines before it.
    """
    checker = _Checker()
    last = 0
    latest: tuple[dt.datetime, LogEntry] | None = None
    for entry in entries:
        if entry.seq != last + 1:
            return Violation(entry.seq, f"the log skips from seq {last} to {entry.seq}")
        last = entry.seq
        # None only for a line the store's reader would have named malformed already.
        when = log_time(entry.ts)
        if when is not None:
            if latest is not None and (latest[0] - when).total_seconds() > clock_skew:
                return Violation(
                    entry.seq,
                    f"written at {entry.ts}, before line seq {latest[1].seq} ({latest[1].ts}); "
                    "the log's lines are out of order",
                )
            if latest is None or when > latest[0]:
                latest = (when, entry)
        problem = checker.apply(entry)
        if problem is not None:
            return Violation(entry.seq, problem)
    stored = {item.id: item for item in final}
    for item_id in checker.items.keys() - stored.keys():
        return Violation(None, f"item #{item_id} is in the log but not in the store (lost)")
    for item_id in stored.keys() - checker.items.keys():
        return Violation(None, f"item #{item_id} is in the store but was never added in the log")
    for item_id in sorted((checks or {}).keys() - stored.keys()):
        return Violation(None, f"the store holds a check for #{item_id}, which is not on the board")
    for item_id, replayed in checker.items.items():
        problem = _differs(stored[item_id], replayed, checks) or _set_by_differs(
            stored[item_id], replayed, checks, setters
        )
        if problem is not None:
            return Violation(None, problem)
    added = [stored[item_id] for item_id in checker.items]
    problem = _out_of_order(added) or _counters_differ(added, counters)
    return None if problem is None else Violation(None, problem)


def _counters_differ(added: Sequence[BoardItem], counters: Mapping[str, int] | None) -> str | None:
    """How the store's counters disagree with its items (in the order the log added them).

    Each id ``next_id`` gave out went to an item, or was skipped because an item had it
    already; each add took the next position. Items are never deleted.
    """
    if not counters:
        return None
    next_id = counters.get("next_id")
    if next_id is not None:
        if next_id < 1:
            return f"the store's next_id counter is {next_id}; ids start at 1"
        ids = {item.id for item in added}
        # Every id below next_id is an item's: with n items, one of 1…n+1 is missing if any is.
        for number in range(1, min(next_id, len(added) + 2)):
            if str(number) not in ids:
                return (
                    f"the store's next_id counter is {next_id}, but #{number}, an id it gave "
                    "out, is not on the board (an item and its log lines deleted?)"
                )
    next_position = counters.get("next_position")
    positioned = [item.position for item in added if item.position is not None]
    if next_position is not None and len(positioned) == len(added):
        expected = positioned[-1] + 1 if positioned else 1
        if next_position != expected:
            last = f"#{added[-1].id}'s ({positioned[-1]})" if added else "none"
            return (
                f"the store's next_position counter is {next_position}, but the last position "
                f"the log's items took is {last} (an item and its log lines deleted?)"
            )
    return None


def _set_by_differs(
    item: BoardItem,
    replayed: _Replayed,
    checks: Mapping[str, str] | None,
    setters: Mapping[str, str | None] | None,
) -> str | None:
    """How the store's record of who set the item's check differs from the log's, or None."""
    if setters is None or checks is None or not replayed.check or not replayed.check_by_known:
        return None
    stored = setters.get(item.id)
    if stored == replayed.check_by:
        return None
    return (
        f"#{item.id}'s check was set by {stored or 'no one named'} in the store; "
        f"the log says {replayed.check_by or 'no one named'}"
    )


def _out_of_order(added: Sequence[BoardItem]) -> str | None:
    """The first item (in the order the log added them) whose position breaks that order."""
    before: BoardItem | None = None
    for item in added:
        if item.position is None:
            continue
        if item.position < 1:
            return f"#{item.id}'s position in the store is {item.position}; positions start at 1"
        if before is not None and before.position is not None and item.position <= before.position:
            return (
                f"#{item.id}'s position in the store ({item.position}) is not after "
                f"#{before.id}'s ({before.position}), which the log added before it"
            )
        before = item
    return None


def _differs(item: BoardItem, replayed: _Replayed, checks: Mapping[str, str] | None) -> str | None:
    """How the store's item differs from the one its log arrives at, or None."""
    name = f"#{item.id}"
    if replayed.state != item.status.value:
        return f"{name} is {item.status} in the store; the log leaves it {replayed.state}"
    if item.owner != replayed.owner:
        if item.status == Status.IN_PROGRESS:
            return f"{name} is held by {item.owner} in the store; the log says {replayed.owner}"
        return (
            f"{name}'s owner in the store is {item.owner or 'no one'}; "
            f"the log says {replayed.owner or 'no one'}"
        )
    if item.text != replayed.text:
        return f"{name}'s text in the store is not the text its log gave it"
    if item.blocked_by != replayed.blocked_by:
        return (
            f"{name} waits on {_ids(item.blocked_by)} in the store; "
            f"the log says {_ids(replayed.blocked_by)}"
        )
    if checks is not None and replayed.check is not None:
        stored = checks.get(item.id, "")
        if stored != replayed.check:
            return (
                f"{name}'s check in the store is {_command(stored)}; "
                f"the log says {_command(replayed.check)}"
            )
    return None


def _ids(blockers: Sequence[str]) -> str:
    return ", ".join(f"#{b}" for b in blockers) if blockers else "nothing"


def _command(check: str) -> str:
    return f"`{check}`" if check else "none"
