"""``board check``: replay a shared board's log through fresh item machines and check its rules.

From the log alone it proves, line by line, that:

- every item was added once, and every edge names an item that exists;
- every edge is one the item machine has, from the state the item was in;
- no item was ever owned by two agents at once, and only the owner completed or released it;
- no agent held two items in progress at once;
- no item started before its blockers completed;
- and that the state the log arrives at is the store's own, item for item.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs
from transitions import EventData, MachineError

from orchestrator.board.store import BoardItem, LogEntry
from orchestrator.plan import ItemMachine, Status


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
    owner: str | None = None
    state: str = Status.PENDING.value
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
        if entry.src != item.state:
            return f"#{item.id} {entry.trigger} from {entry.src}, but the log has it {item.state}"
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
        blockers = tuple(entry.blocked_by or ())
        unknown = [b for b in blockers if b not in self.items]
        if unknown:
            return f"item #{entry.item} blocked by #{unknown[0]}, which was never added"
        item = _Replayed(entry.item, entry.text or "", blockers)
        self.machine.add_model(item, initial=Status.PENDING.value)
        self.items[entry.item] = item
        return None

    def _rules(self, entry: LogEntry, item: _Replayed) -> str | None:
        agent = entry.agent
        if entry.trigger == "start":
            if agent is None:
                return f"#{item.id} started by no agent"
            held = self.holding.get(agent)
            if held is not None:
                return f"{agent} started #{item.id} while holding #{held} in progress"
            waiting = [b for b in item.blocked_by if self.items[b].state != Status.COMPLETED.value]
            if waiting:
                return f"#{item.id} started while its blocker #{waiting[0]} was not completed"
        elif entry.trigger in ("complete", "pause", "cancel") and item.owner not in (None, agent):
            return f"{agent} took {entry.trigger} on #{item.id}, which {item.owner} held"
        elif entry.trigger == "expire" and agent not in (None, item.owner):
            return f"#{item.id} expired as {agent}'s, but {item.owner} held it"
        return None

    def _own(self, entry: LogEntry, item: _Replayed) -> None:
        if item.owner is not None and self.holding.get(item.owner) == item.id:
            del self.holding[item.owner]
        if entry.trigger == "start":
            assert entry.agent is not None
            item.owner = entry.agent
            self.holding[entry.agent] = item.id
        elif entry.trigger in ("pause", "expire", "cancel"):
            item.owner = None


def check_log(entries: Iterable[LogEntry], final: Sequence[BoardItem]) -> Violation | None:
    """The first violation in the log (or between it and ``final``), or None when it holds."""
    checker = _Checker()
    last = 0
    for entry in entries:
        if entry.seq != last + 1:
            return Violation(entry.seq, f"the log skips from seq {last} to {entry.seq}")
        last = entry.seq
        problem = checker.apply(entry)
        if problem is not None:
            return Violation(entry.seq, problem)
    stored = {item.id: item for item in final}
    for item_id in checker.items.keys() - stored.keys():
        return Violation(None, f"item #{item_id} is in the log but not in the store (lost)")
    for item_id in stored.keys() - checker.items.keys():
        return Violation(None, f"item #{item_id} is in the store but was never added in the log")
    for item_id, replayed in checker.items.items():
        item = stored[item_id]
        if replayed.state != item.status.value:
            return Violation(
                None,
                f"#{item_id} is {item.status} in the store; the log leaves it {replayed.state}",
            )
        if item.status == Status.IN_PROGRESS and item.owner != replayed.owner:
            return Violation(
                None,
                f"#{item_id} is held by {item.owner} in the store; the log says {replayed.owner}",
            )
    return None
