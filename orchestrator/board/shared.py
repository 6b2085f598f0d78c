"""One agent's view of a shared board: the plan its loop audits and its ``todo`` tool writes.

A ``todo`` call on a shared board is applied in one store transaction as the item-machine
edges it asks for: a new id is added (and claimed, when it is in progress), a status change
is the matching edge (``start`` is the claim, ``pause`` the release). Every call is a merge:
an item the call leaves out is never cancelled, because another agent may be working on it.

What the agent last saw is remembered, so a stale copy of the board in a full rewrite never
undoes another agent's change: an entry that repeats what the agent saw is not its edge and
is skipped; one that asks for a move the item can no longer make is refused, naming what
changed. A refused call changes nothing.

The agent holds its claims by a lease that a background thread renews while the run lives;
when it dies, its claims expire by themselves (:mod:`orchestrator.board.store`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from orchestrator.board.inputs import is_person, one_line
from orchestrator.board.store import BoardChange, BoardError, BoardItem
from orchestrator.plan import (
    ITEM_KEYS,
    MARKERS,
    TOP_LEVEL_KEYS,
    BatchEntry,
    CheckProtectedError,
    IllegalEdgeError,
    ItemChecked,
    ItemTransition,
    PlanError,
    PlanItem,
    PlanRejected,
    PlanShapeError,
    PlanUpdated,
    Status,
    check_failed,
    check_not_allowed,
    parse_batch,
)
from orchestrator.protocols import BoardStore, CheckResult, JSONObject, PlanRecord


def render_shared(items: Sequence[BoardItem], me: str) -> str:
    """The seeds' format, with who holds each item in progress (``you`` for this agent)."""
    if not items:
        return "No todos."
    status_of = {item.id: item.status for item in items}
    lines = []
    for item in items:
        notes = []
        if item.status == Status.IN_PROGRESS and item.owner:
            notes.append("you" if item.owner == me else item.owner)
        waiting = [b for b in item.blocked_by if status_of.get(b) != Status.COMPLETED]
        if waiting and item.status == Status.PENDING:
            notes.append("blocked by " + ", ".join(f"#{b}" for b in waiting))
        shown = f" ({'; '.join(notes)})" if notes else ""
        lines.append(f"{MARKERS[item.status]} #{item.id}: {one_line(item.text)}{shown}")
    done = sum(item.status == Status.COMPLETED for item in items)
    return "\n".join(lines) + f"\n\n({done}/{len(items)} completed)"


def _one_line_texts(payload: object) -> None:
    """Refuse an item text with a line break: on a shared board text is one line.

    As it is for a person at ``board add``; ``parse_batch`` would fold it, so it is read here.
    """
    if not isinstance(payload, Mapping):
        return
    lists = [v for k, v in payload.items() if TOP_LEVEL_KEYS.get(str(k)) == "items"]
    for raw_items in lists:
        for raw in raw_items if isinstance(raw_items, list) else ():
            if not isinstance(raw, Mapping):
                continue
            for key, value in raw.items():
                field = ITEM_KEYS.get(str(key))
                if field == "text" and isinstance(value, str) and ("\n" in value or "\r" in value):
                    shown = str(raw.get("id", "?"))
                    raise PlanShapeError(
                        f"Item #{shown!r}: its text has a line break; on a shared board an item "
                        "is one line of text: send it without one",
                        shown,
                    )


def _view(item: BoardItem) -> PlanItem:
    return PlanItem(item.id, item.text, item.status, blocked_by=item.blocked_by)


class SharedBoard:
    """A store-backed board as one agent's loop sees it (the loop's ``Plan`` protocol)."""

    def __init__(self, store: BoardStore, agent: str, *, lease: float) -> None:
        self.store, self.agent, self.lease = store, agent, lease
        self._observers: list[Callable[[PlanRecord], None]] = []
        self._revision = 0
        self._items = store.items()
        self._seen: Mapping[str, BoardItem] = {item.id: item for item in self._items}
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        #: Runs an item's acceptance check where this agent's bash runs (set by the session).
        self.run_check: Callable[[str], CheckResult] | None = None
        #: The ``TaskCompleted`` hooks, asked after an item's own check passes.
        self.task_completed: Callable[[JSONObject], CheckResult | None] | None = None
        #: Asked before a check this agent's model set runs: None lets it run, else why not.
        self.vet_model_check: Callable[[str], str | None] | None = None

    # -- the Plan protocol ------------------------------------------------------------------

    @property
    def revision(self) -> int:
        return self._revision

    @property
    def is_empty(self) -> bool:
        return not self._items

    @property
    def config(self) -> JSONObject:
        return {"shared": self.store.url, "agent": self.agent, "lease": self.lease}

    @property
    def statuses(self) -> Mapping[str, str]:
        return {item.id: str(item.status) for item in self._items}

    @property
    def items(self) -> tuple[PlanItem, ...]:
        return tuple(_view(item) for item in self._items)

    @property
    def progress(self) -> tuple[int, int]:
        done = sum(item.status == Status.COMPLETED for item in self._items)
        return done, len(self._items)

    @property
    def held(self) -> tuple[str, ...]:
        """The items this agent holds in progress, as the board last read showed them."""
        return tuple(
            item.id
            for item in self._items
            if item.status == Status.IN_PROGRESS and item.owner == self.agent
        )

    def render(self) -> str:
        """The board as it is now in the store: what the model is shown is what it saw.

        A store that cannot be read now (a malformed row, a database that went away) does not
        end the run: the board as last read is shown, with the one line that says why.
        """
        try:
            self._items = self.store.items()
        except BoardError as error:
            why = one_line(str(error))
            shown = render_shared(self._items, self.agent)
            return f"{shown}\n\n(the board as last read; reading it now failed: {why})"
        self._seen = {item.id: item for item in self._items}
        return render_shared(self._items, self.agent)

    def subscribe(self, observer: Callable[[PlanRecord], None]) -> None:
        self._observers.append(observer)

    def reset(self) -> None:
        """Chat's ``/clear`` forgets the conversation; a shared board stays as it is."""

    # -- writing ----------------------------------------------------------------------------

    def apply(self, payload: object) -> PlanUpdated:
        """Apply one ``todo`` input as this agent's edges, atomically; refused: nothing changed."""
        if isinstance(payload, Mapping):
            # Every call is a merge here: leaving an item out must not cancel another's work.
            payload = {**payload, "merge": True}
        try:
            _one_line_texts(payload)
            batch = parse_batch(payload)
            self._check_completions(batch.entries)
            with self.store.change() as change:
                for entry in batch.entries:
                    self._apply_entry(change, entry)
                appended = change.appended
                items = change.items()
        except (PlanError, BoardError) as error:
            message = str(error)
            error_type = type(error).__name__
            item_id = getattr(error, "item_id", None)
            self._publish(PlanRejected(error_type, message, item_id))
            if isinstance(error, PlanError):
                raise
            raise PlanError(f"{message}; the board did not change", item_id) from None
        self._items = items
        self._seen = {item.id: item for item in items}
        self._revision += 1
        transitions = tuple(
            ItemTransition(entry.item, entry.trigger, Status(entry.src), Status(entry.dst))
            for entry in appended
            if entry.src is not None and entry.agent == self.agent
        )
        update = PlanUpdated(
            self._revision, self.items, transitions, merge=True, explanation=batch.explanation
        )
        for transition in transitions:
            self._publish(transition)
        self._publish(update)
        return update

    def _check_completions(self, entries: Sequence[BatchEntry]) -> None:
        """Run the check of every item this call completes, before anything changes.

        Outside the store's transaction: a check may take minutes, and other agents must not
        wait for it; the edge itself is still taken, and re-checked, in the transaction.
        """
        now = {item.id: item for item in self.store.items()}
        checks = self.store.checks()
        setters = self.store.check_setters()
        for entry in entries:
            if (
                entry.id in now
                and entry.check is not None
                and (entry.check or None) != checks.get(entry.id)
            ):
                raise CheckProtectedError(
                    f"Item #{entry.id}: on a shared board an item's check is set when it is "
                    "added and cannot be changed or removed; make it pass instead",
                    entry.id,
                )
        if self.run_check is None and self.task_completed is None:
            return
        for entry in entries:
            current = now.get(entry.id)
            # Only an item in the store can complete in this call (a new one starts pending).
            if (
                entry.status != Status.COMPLETED
                or current is None
                or current.status
                in (
                    Status.COMPLETED,
                    Status.CANCELLED,
                )
            ):
                continue
            command = checks.get(entry.id)
            setter = setters.get(entry.id)
            if command and setter is not None and not is_person(setter):
                # A model set this check (its own or another agent's): it runs only where
                # the model's bash may run.
                why = None if self.vet_model_check is None else self.vet_model_check(command)
                if why is not None:
                    raise check_not_allowed(entry.id, command, why, shared=True)
            results = []
            if command and self.run_check is not None:
                checked = self.run_check(command)
                # Logged whatever it says: the completion's guard reads the passing run, and
                # board check holds every completion of a checked item to one.
                self.store.record_check(
                    entry.id,
                    agent=self.agent,
                    command=command,
                    exit_code=checked.exit_code,
                    duration_s=checked.duration_s,
                )
                results.append(checked)
            if self.task_completed is not None and all(r.passed for r in results):
                asked = {"id": entry.id, "text": current.text, "status": "completed"}
                hooked = self.task_completed(asked)
                results.extend([hooked] if hooked is not None else [])
            for result in results:
                self._publish(ItemChecked(entry.id, result))
                if not result.passed:
                    raise check_failed(entry.id, result)

    def _apply_entry(self, change: BoardChange, entry: BatchEntry) -> None:
        current = change.item(entry.id)
        if current is None:
            if not entry.text:
                raise PlanError(f"Item #{entry.id}: text required; a new item needs a text")
            change.add(
                entry.text,
                agent=self.agent,
                blocked_by=entry.blocked_by or (),
                item_id=entry.id,
                check=entry.check or None,
            )
            self._walk(change, entry.id, Status.PENDING, entry.status or Status.PENDING, None)
            return
        if entry.status is None:
            return
        seen = self._seen.get(entry.id)
        if seen is not None and entry.status == seen.status:
            return  # what this agent saw before another moved it on: not this agent's edge
        if entry.status == Status.IN_PROGRESS == current.status and current.owner not in (
            None,
            self.agent,
        ):
            # A claim of what another agent holds, which this one had not seen held: saying
            # nothing would let it work on the item too.
            raise IllegalEdgeError(
                f"Item #{entry.id} is in progress, held by {current.owner}; claim another "
                "ready item",
                entry.id,
            )
        if entry.status == current.status:
            return
        self._walk(change, entry.id, current.status, entry.status, seen)

    def _walk(
        self,
        change: BoardChange,
        item_id: str,
        src: Status,
        dst: Status,
        seen: BoardItem | None,
    ) -> None:
        edges: dict[tuple[Status, Status], Callable[[], object]] = {
            (Status.PENDING, Status.IN_PROGRESS): lambda: change.claim(
                self.agent, lease=self.lease, item_id=item_id
            ),
            (Status.IN_PROGRESS, Status.COMPLETED): lambda: change.complete(
                item_id, agent=self.agent
            ),
            (Status.IN_PROGRESS, Status.PENDING): lambda: change.release(item_id, agent=self.agent),
            (Status.PENDING, Status.CANCELLED): lambda: change.cancel(item_id, agent=self.agent),
            (Status.IN_PROGRESS, Status.CANCELLED): lambda: change.cancel(
                item_id, agent=self.agent
            ),
        }
        if src == dst:
            return
        edge = edges.get((src, dst))
        if edge is None:
            changed = ""
            now = change.item(item_id)
            if seen is not None and now is not None and seen.status != now.status:
                by = f" by {now.owner}" if now.owner else ""
                changed = f" (it was {seen.status} when you last saw the board; now {src}{by})"
            raise IllegalEdgeError(
                f"Item #{item_id}: {src} → {dst} is not one edge{changed}; "
                "move it one step at a time (pending → in_progress → completed)",
                item_id,
            )
        edge()

    def _publish(self, record: PlanRecord) -> None:
        for observer in self._observers:
            observer(record)

    # -- the lease ----------------------------------------------------------------------------

    def start_renewing(self, open_store: Callable[[], BoardStore]) -> None:
        """Renew this agent's claims every third of the lease, on a connection of its own."""
        if self._renewer is not None:
            return

        def renew() -> None:
            store = open_store()
            try:
                while not self._stop.wait(self.lease / 3):
                    try:
                        store.renew(self.agent, lease=self.lease)
                    except Exception:
                        continue
            finally:
                store.close()

        self._renewer = threading.Thread(target=renew, name="board-lease", daemon=True)
        self._renewer.start()

    def close(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
            self._renewer = None
        self.store.close()
