"""The item machine: an item's statuses, the guarded edges between them as data, the machine.

Every board builds its items' machine from here: the plan board of one agent
(:mod:`orchestrator.plan`, which names all of this as its own too) and a shared board's store
(:mod:`orchestrator.board.store`). It is a module of its own so that a store, which a claimer
process starts just to take an item, imports ``transitions`` and this table and none of the
plan board's values and errors (the ``todo`` tool's, the observers' records): that import is
most of such a process's start.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

from transitions import Machine


class Status(enum.StrEnum):
    """An item's state; the values are the statuses on the wire."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


#: The item machine's edges, as data. ``completed`` and ``cancelled`` have no way out.
ITEM_TRANSITIONS: tuple[Mapping[str, Any], ...] = (
    {
        "trigger": "start",
        "source": "pending",
        "dest": "in_progress",
        "conditions": ["no_other_item_in_progress", "dependencies_completed"],
    },
    {
        "trigger": "complete",
        "source": "in_progress",
        "dest": "completed",
        "conditions": ["held_by_actor", "check_passes"],
    },
    {
        "trigger": "pause",
        "source": "in_progress",
        "dest": "pending",
        "conditions": ["held_by_actor"],
    },
    {
        "trigger": "cancel",
        "source": ["pending", "in_progress"],
        "dest": "cancelled",
        "conditions": ["held_by_actor"],
    },
    # A shared board's claim whose owner stopped renewing its lease (the agent died).
    {
        "trigger": "expire",
        "source": "in_progress",
        "dest": "pending",
        "conditions": ["lease_expired"],
    },
)
#: Edges only a shared board's store takes (never a move the model is advised to make).
STORE_TRIGGERS = frozenset({"expire"})


def item_machine_options() -> dict[str, Any]:
    """The item machine's definition as ``Machine`` keyword arguments, for every way to build it."""
    return {
        # Plain strings, not the enum: transitions names enum states by member name.
        "states": [str(s) for s in Status],
        "transitions": [dict(t) for t in ITEM_TRANSITIONS],
        "initial": str(Status.PENDING),
        "auto_transitions": False,
        "send_event": True,
        "after_state_change": "record_transition",
    }


class ItemMachine(Machine):
    """The one machine every item of every board is a model of (``add_model``)."""

    def __init__(self) -> None:
        super().__init__(model=None, **item_machine_options())
        self._paths = _shortest_paths(
            t for t in ITEM_TRANSITIONS if t["trigger"] not in STORE_TRIGGERS
        )

    def path(self, src: Status, dst: Status) -> tuple[str, ...] | None:
        """The shortest trigger sequence from ``src`` to ``dst``, or None when there is none."""
        return self._paths.get((src, dst))

    def legal_triggers(self, src: Status) -> tuple[tuple[str, Status], ...]:
        """The (trigger, destination) pairs leaving ``src``, in table order."""
        return tuple(
            (trigger, Status(dst))
            for source, trigger, dst in table_edges(ITEM_TRANSITIONS)
            if source == src and trigger not in STORE_TRIGGERS
        )


def table_edges(table: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, str, str], ...]:
    """A ``transitions`` table as (source, trigger, dest) edges, one per source, in order."""
    edges: list[tuple[str, str, str]] = []
    for t in table:
        sources = t["source"] if isinstance(t["source"], list | tuple) else [t["source"]]
        edges.extend((str(src), str(t["trigger"]), str(t["dest"])) for src in sources)
    return tuple(edges)


def _shortest_paths(
    table: Iterable[Mapping[str, Any]],
) -> dict[tuple[Status, Status], tuple[str, ...]]:
    edges: dict[Status, list[tuple[str, Status]]] = {s: [] for s in Status}
    for src, trigger, dst in table_edges(table):
        edges[Status(src)].append((trigger, Status(dst)))
    paths: dict[tuple[Status, Status], tuple[str, ...]] = {}
    for origin in Status:
        frontier: list[tuple[Status, tuple[str, ...]]] = [(origin, ())]
        seen = {origin}
        while frontier:
            state, path = frontier.pop(0)
            paths[(origin, state)] = path
            for trigger, dst in edges[state]:
                if dst not in seen:
                    seen.add(dst)
                    frontier.append((dst, (*path, trigger)))
    return paths
