"""Statecharts of the item and loop machines, drawn by ``transitions`` from their live definitions.

The states and initial state come from :class:`~orchestrator.plan.ItemMachine` and
:class:`~orchestrator.loop.LoopMachine`, the edges from :data:`~orchestrator.plan.ITEM_TRANSITIONS`
and :data:`~orchestrator.loop.LOOP_TRANSITIONS`; ``transitions``' own diagram support writes the
Mermaid text and the Graphviz source, so no edge is ever typed here. Edge labels read
``trigger [guard] / action``. Given a trace, the same charts show one run: the states and edges it
visited are highlighted and every edge that fired says how often (``pause ×2``).
:func:`write_statecharts` produces the checked-in ``statecharts/`` directory, deterministically,
so a test can compare it byte for byte.
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
from transitions.extensions.diagrams import GraphMachine
from transitions.extensions.diagrams_base import BaseGraph
from transitions.extensions.diagrams_graphviz import Graph as GraphvizGraph
from transitions.extensions.diagrams_mermaid import Graph as MermaidGraph

from orchestrator.loop import LOOP_TRANSITIONS, LoopMachine
from orchestrator.plan import ITEM_TRANSITIONS, ItemMachine

MachineName = Literal["item", "loop", "all"]
DiagramFormat = Literal["mermaid", "dot"]

DOT_PROGRAM_MISSING = (
    "rendering an image needs Graphviz's `dot` program; install graphviz "
    "(e.g. apt-get install graphviz), or write .mmd or .dot text instead"
)
GRAPHVIZ_PACKAGE_MISSING = (
    "the dot format needs the graphviz Python package; "
    "install it with pip install 'orchestrator[graphviz]' or use --format mermaid"
)

#: Callbacks a trace proves ran: each logs an event before its edge's ``loop.transition``.
_LOGGED_CALLBACKS = frozenset({"remind", "remind_unfinished"})

_VISITED = "visited"

#: What a merged arrow's count says when the trace cannot tell which of its edges fired.
UNTOLD = "?"

#: (source, trigger, destination, alternative): one edge a trace shows fired. ``alternative``
#: is the edge's guards and actions as its label writes them (``plan_settled``,
#: ``plan_is_stale / remind``; empty for an edge without either), or :data:`UNTOLD` when the
#: table has several edges with these ends and trigger and the trace cannot tell which fired.
_EdgeKey = tuple[str, str, str, str]


class DiagramError(Exception):
    """A diagram that cannot be drawn; ``str()`` is one line saying what to do about it."""


# --- what is drawn ---------------------------------------------------------------------------


@attrs.frozen
class _Chart:
    """One machine as the diagram code sees it: its name, states, initial state and edge table."""

    name: str
    states: tuple[str, ...]
    initial: str
    transitions: tuple[Mapping[str, Any], ...]
    #: Where the hooks meet the machine: (state, note), drawn as Mermaid notes.
    notes: tuple[tuple[str, str], ...] = ()

    @property
    def title(self) -> str:
        return f"{self.name} machine"

    @property
    def edges(self) -> dict[tuple[str, str, str], list[_Edge]]:
        return _edges_of(self.transitions)


def _item_chart() -> _Chart:
    machine = ItemMachine()
    notes = (("completed", "TaskCompleted hooks: part of check_passes"),)
    return _Chart("item", tuple(machine.states), str(machine.initial), ITEM_TRANSITIONS, notes)


def _loop_chart() -> _Chart:
    machine = LoopMachine()
    notes = (
        ("dispatch", "PreToolUse and PostToolUse hooks around each call"),
        ("done", "Stop hooks: a done-check beside --done-check"),
        ("compact", "PreCompact hooks first"),
    )
    return _Chart("loop", tuple(machine.states), str(machine.initial), LOOP_TRANSITIONS, notes)


def _names(value: Any) -> tuple[str, ...]:
    """A table's ``conditions``/``unless``/``before`` (a name or a list of names) as a tuple."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(str(name) for name in value)


def _alternative(transition: Mapping[str, Any]) -> str:
    """An edge's guards and actions as its label writes them, without the trigger."""
    guards = [
        *_names(transition.get("conditions")),
        *("!" + u for u in _names(transition.get("unless"))),
    ]
    actions = [*_names(transition.get("before")), *_names(transition.get("after"))]
    text = " & ".join(guards)
    if actions:
        text = f"{text} / {', '.join(actions)}".strip()
    return text


@attrs.frozen
class _Edge:
    """One edge of a table, one source each: what tells it from its siblings in a trace."""

    src: str
    trigger: str
    dst: str
    conditions: tuple[str, ...]
    unless: tuple[str, ...]
    logged: frozenset[str]
    alternative: str


def _edges_of(table: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], list[_Edge]]:
    """Each (source, trigger, destination) of a table with its edges, in the table's order."""
    found: dict[tuple[str, str, str], list[_Edge]] = {}
    for transition in table:
        for src in _names(transition["source"]):
            dst = str(transition.get("dest", src))
            edge = _Edge(
                src,
                str(transition["trigger"]),
                dst,
                _names(transition.get("conditions")),
                _names(transition.get("unless")),
                frozenset(_names(transition.get("before"))) & _LOGGED_CALLBACKS,
                _alternative(transition),
            )
            found.setdefault((edge.src, edge.trigger, edge.dst), []).append(edge)
    return found


_ITEM_EDGES = _edges_of(ITEM_TRANSITIONS)
_LOOP_EDGES = _edges_of(LOOP_TRANSITIONS)


def _holds(edge: _Edge, facts: Mapping[str, bool]) -> bool | None:
    """Whether ``edge``'s guards held, from what the trace says; None where it does not say."""
    known = [facts.get(name) for name in edge.conditions]
    known += [None if facts.get(name) is None else not facts[name] for name in edge.unless]
    if False in known:
        return False
    return True if all(value is True for value in known) else None


def _which(edges: list[_Edge], logged: frozenset[str], facts: Mapping[str, bool]) -> str:
    """The alternative that fired among ``edges`` (one trigger, one pair of ends), or UNTOLD.

    A callback that logs an event proves its edge ran (and its absence that it did not); of
    the edges left, transitions takes the first whose guards hold, so an edge is the one when
    its guards held and no earlier one's might have, or when it is the only one that might.
    """
    if len(edges) == 1:
        return edges[0].alternative
    possible = [edge for edge in edges if edge.logged == logged]
    held = [(edge, _holds(edge, facts)) for edge in possible]
    held = [(edge, holds) for edge, holds in held if holds is not False]
    if held and (held[0][1] is True or len(held) == 1):
        return held[0][0].alternative
    return UNTOLD


@attrs.frozen
class _Visits:
    """What a trace shows one machine did: how often each edge fired, summed over its models."""

    edges: Mapping[_EdgeKey, int] = attrs.field(factory=dict)

    @property
    def states(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for src, _trigger, dst, _which in self.edges:
            seen[src] = seen[dst] = None
        return tuple(seen)

    def count(self, transition: Mapping[str, Any]) -> int:
        src = str(transition["source"])
        key = (src, str(transition["trigger"]), str(transition.get("dest", src)))
        return self.edges.get((*key, _alternative(transition)), 0)

    def untold(self, transition: Mapping[str, Any], table: Mapping[Any, list[_Edge]]) -> int:
        """The count of ``transition``'s trigger and ends whose edge the trace did not tell.

        Given for the last of those edges only, so a merged arrow says it once.
        """
        src = str(transition["source"])
        key = (src, str(transition["trigger"]), str(transition.get("dest", src)))
        siblings = table.get(key, [])
        if not siblings or siblings[-1].alternative != _alternative(transition):
            return 0
        return self.edges.get((*key, UNTOLD), 0)


# --- transitions' diagram support, with actions and counts on the edges ----------------------


def _edge_label(
    label: str, transition: Mapping[str, Any], visits: _Visits | None, table: Mapping[Any, Any]
) -> str:
    """Extend transitions' ``trigger [guard]`` label with ``/ action`` and, for a run, ``×N``.

    Where the trace cannot tell which of a trigger's edges between two states fired, their
    count follows the last of them once: ``finish [a] | finish [b] (either ×2)``.
    """
    actions = [*transition.get("before", ()), *transition.get("after", ())]
    if actions:
        label += " / " + ", ".join(actions)
    if visits is None:
        return label
    fired = visits.count(transition)
    label = f"{label} ×{fired}" if fired else label
    untold = visits.untold(transition, table)
    return f"{label} (either ×{untold})" if untold else label


class _MermaidChartGraph(MermaidGraph):
    visits: _Visits | None = None
    table: Mapping[Any, Any] = {}

    def _transition_label(self, tran: dict[str, Any]) -> str:
        return _edge_label(super()._transition_label(tran), tran, self.visits, self.table)


class _GraphvizChartGraph(GraphvizGraph):
    visits: _Visits | None = None
    table: Mapping[Any, Any] = {}
    #: Whether the labels of edges that share an arrow are stacked, one a line (the page's
    #: layout), rather than joined by `` | `` as transitions joins them.
    stacked = False

    def _transition_label(self, tran: dict[str, Any]) -> str:
        return _edge_label(super()._transition_label(tran), tran, self.visits, self.table)

    def _add_edges(self, transitions: list[dict[str, Any]], container: Any) -> None:
        if not self.stacked:
            super()._add_edges(transitions, container)
            return
        # transitions' own method, each label a line of its own (dot's \l ends one, left-aligned).
        labels: dict[tuple[str, str], list[str]] = {}
        for transition in transitions:
            dst = transition.get("dest", transition["source"])
            labels.setdefault((transition["source"], dst), []).append(
                self._transition_label(transition)
            )
        # transitions' stubs type these loosely; they are the nested dicts _styles builds.
        custom: Any = self.custom_styles["edge"]
        looks: Any = self.machine.style_attributes.get("edge", {})
        for (src, dst), texts in labels.items():
            container.edge(
                src,
                dst,
                label="".join(text + "\\l" for text in texts),
                **looks.get(custom[src][dst], {}),
            )


def _styles(fmt: DiagramFormat, *, run: bool, page: bool = False) -> dict[str, Any]:
    """Node and edge styles by name, in the shape ``GraphMachine.style_attributes`` has.

    For a run, ``visited`` marks a state it touched and ``previous`` (transitions' name for a
    taken edge) an edge it took. Mermaid takes CSS, and its state diagrams cannot style edges.
    A page's chart has its edge labels in a smaller type, so it is narrower at natural size.
    """
    if fmt == "mermaid":
        nodes: dict[str, dict[str, str]] = {"default": {"fillcolor": "white", "color": "black"}}
        if run:
            nodes[_VISITED] = {"fillcolor": "#cde4ff", "stroke": "#1f6feb", "stroke-width": "3px"}
        return {"node": nodes}
    return {
        "node": {
            # transitions' own default look, minus the attributes dot ignores
            "default": {
                "style": "rounded,filled",
                "shape": "rectangle",
                "fillcolor": "white",
                "color": "black",
            },
            _VISITED: {"color": "blue", "fillcolor": "lightblue", "penwidth": "3"},
        },
        "edge": {
            "default": {"color": "black", **({"fontsize": "11"} if page else {})},
            "previous": {"color": "blue", "fontcolor": "blue", "penwidth": "3"},
        },
    }


class _ChartMachine(GraphMachine):
    """A model-less ``GraphMachine`` built from a chart: only ever drawn, never triggered."""

    def __init__(self, chart: _Chart, fmt: DiagramFormat, *, run: bool, page: bool = False) -> None:
        super().__init__(
            model=None,
            states=list(chart.states),
            initial=chart.initial,
            transitions=[dict(t) for t in chart.transitions],
            auto_transitions=False,
            title=chart.title,
            show_conditions=True,
            graph_engine="graphviz" if fmt == "dot" else "mermaid",
        )
        # Only layout: transitions' "directed" and "strict" would land in dot as graph attributes.
        # A page is read at its natural size, so it is laid out top to bottom, narrower.
        self.machine_attributes = {"rankdir": "TB" if page else "LR"}
        self.style_attributes = _styles(fmt, run=run, page=page)

    def _init_graphviz_engine(self, graph_engine: str) -> type[BaseGraph]:
        return _GraphvizChartGraph if graph_engine == "graphviz" else _MermaidChartGraph


def _draw(
    chart: _Chart, fmt: DiagramFormat, visits: _Visits | None = None, *, page: bool = False
) -> str:
    machine = _ChartMachine(chart, fmt, run=visits is not None, page=page)
    graph = machine.graph_cls(machine)
    assert isinstance(graph, _MermaidChartGraph | _GraphvizChartGraph)
    if isinstance(graph, _GraphvizChartGraph):
        graph.stacked = page
    if visits is not None:
        graph.visits = visits
        graph.table = chart.edges
        for src, _trigger, dst, _which in visits.edges:
            graph.set_previous_transition(src, dst)
        # After the edges, which mark their sources "previous" as a side effect.
        for state in visits.states:
            graph.set_node_style(state, _VISITED)
    source = str(graph.get_graph(title=chart.title).source)
    if fmt != "mermaid":
        return source.rstrip("\n")
    notes = [f"  note right of {state} : {text}" for state, text in chart.notes]
    return "\n".join([_tidy_mermaid(source), *notes])


def _tidy_mermaid(source: str) -> str:
    """Tidy transitions' Mermaid text without changing what it draws.

    The title block goes, so the text starts with ``stateDiagram-v2``; ``Class`` is written
    ``class`` as in Mermaid's documentation; trailing blanks go (the files are compared as bytes).
    """
    lines = source.split("\n")
    if lines[0] == "---":
        lines = lines[lines.index("---", 1) + 1 :]
    tidy = []
    for line in lines:
        body = line.strip()
        indent = line[: len(line) - len(line.lstrip())] if body else ""
        if body.startswith("Class "):
            body = "class " + body.removeprefix("Class ")
        tidy.append(indent + body)
    return "\n".join(tidy).strip("\n")


# --- reading a trace --------------------------------------------------------------------------


@attrs.define
class EdgeCounts:
    """How often each item and loop edge fired, counted as a trace's events stream past.

    :func:`render_machines` reads a file with one; a reader that already streams the trace
    (``show --html``) feeds its events to one and draws from it with ``counts=``. Where the
    table has several edges with one trigger between two states (``finish`` to ``done`` when
    the plan is settled, or after the unfinished reminder), what the trace says picks the one
    that fired: the events a callback logs (``audit.reminder``), the done-check's outcome
    (``loop.done_check``), whether this run was reminded of unfinished items, and the plan's
    statuses (``plan.updated``). What it cannot tell is counted as :data:`UNTOLD`.
    """

    items: Counter[_EdgeKey] = attrs.field(factory=Counter)
    loop: Counter[_EdgeKey] = attrs.field(factory=Counter)
    #: Logged callbacks the events since the last loop edge prove ran.
    evidence: set[str] = attrs.field(factory=set)
    #: The last done-check since the last loop edge: passed or not (None: none ran).
    done_check: bool | None = None
    #: This run's state as the guards read it.
    reminded: bool = False
    settle_plan: bool | None = None
    shared: bool = False
    statuses: dict[str, str] | None = None

    def feed(self, record: Mapping[str, Any]) -> None:
        """Count one event; ``ValueError`` for an edge without string src, trigger and dst."""
        event = record.get("event")
        if event == "plan.transition":
            edge = _edge_of(record)
            self.items[(*edge, _which(_ITEM_EDGES.get(edge, []), frozenset(), {}))] += 1
        elif event == "loop.transition":
            edge = _edge_of(record)
            which = _which(_LOOP_EDGES.get(edge, []), frozenset(self.evidence), self._facts())
            self.loop[(*edge, which)] += 1
            self.reminded = self.reminded or "remind_unfinished" in self.evidence
            self.evidence, self.done_check = set(), None
        elif event == "audit.reminder":
            unfinished = record.get("reason") == "unfinished"
            self.evidence.add("remind_unfinished" if unfinished else "remind")
        elif event == "loop.done_check":
            passed = record.get("passed")
            self.done_check = passed if isinstance(passed, bool) else record.get("exit_code") == 0
        elif event == "plan.updated":
            self._plan(record)
        elif event == "run.started":
            settings, plan = record.get("settings"), record.get("plan")
            settle = settings.get("settle_plan") if isinstance(settings, Mapping) else None
            self.settle_plan = settle if isinstance(settle, bool) else None
            self.shared = isinstance(plan, Mapping) and plan.get("shared") is not None
            self.reminded, self.evidence, self.done_check = False, set(), None

    def _plan(self, record: Mapping[str, Any]) -> None:
        items = record.get("items")
        if not isinstance(items, list):
            return
        self.statuses = {
            str(item.get("id")): str(item.get("status", "pending"))
            for item in items
            if isinstance(item, Mapping)
        }

    def _facts(self) -> dict[str, bool]:
        """The guards the trace tells the value of, as they stood before this edge."""
        facts = {
            "unfinished_reminded": self.reminded,
            "unfinished_reminder_left": not self.reminded,
            # The check is reset on entering call_model: none since means none to fail.
            "done_check_passes": self.done_check is not False,
        }
        if self.settle_plan is False:
            facts["plan_settled"] = True
        elif self.settle_plan and not self.shared and self.statuses is not None:
            # A shared board's statuses change under other agents without this trace saying.
            finished = ("completed", "cancelled")
            facts["plan_settled"] = all(s in finished for s in self.statuses.values())
        return facts

    def visits(self) -> tuple[_Visits, _Visits]:
        return _Visits(dict(self.items)), _Visits(dict(self.loop))

    def fired(self) -> dict[str, list[tuple[str, str, str, str, int]]]:
        """Per machine, each edge that fired as ``(src, trigger, dst, alternative, times)``.

        In firing order. ``alternative`` is empty where the table has one edge with that
        trigger and ends, ``(no guard)`` for the plain one of several, and :data:`UNTOLD`
        where there are several and the trace did not say which.
        """
        found: dict[str, list[tuple[str, str, str, str, int]]] = {}
        for name, counter, table in (
            ("item", self.items, _ITEM_EDGES),
            ("loop", self.loop, _LOOP_EDGES),
        ):
            found[name] = [
                (src, trigger, dst, _named(which, len(table.get((src, trigger, dst), ()))), times)
                for (src, trigger, dst, which), times in counter.items()
            ]
        return found


def _named(which: str, siblings: int) -> str:
    """How a table of a run's edges names one: only where several share trigger and ends."""
    if siblings < 2:
        return ""
    return which or "(no guard)"


def _edge_of(record: Mapping[str, Any]) -> tuple[str, str, str]:
    values = [record.get(key) for key in ("src", "trigger", "dst")]
    if not all(isinstance(value, str) for value in values):
        raise ValueError(f"{record.get('event')} needs string src, trigger and dst")
    src, trigger, dst = (str(value) for value in values)
    return src, trigger, dst


def _read_trace(path: Path) -> tuple[_Visits, _Visits]:
    """The item and the loop machine's edge counts in one trace file, read line by line.

    Only the counts are kept, so memory stays flat in the trace's length. Every line is checked
    before a bad edge is reported, so a file with both a broken line and a bad edge names the
    broken line, as when the whole file was read first.
    """
    counts = EdgeCounts()
    bad_edge: DiagramError | None = None
    for number, record in _trace_records(path):
        try:
            counts.feed(record)
        except ValueError as error:
            bad_edge = bad_edge or DiagramError(f"trace {path} line {number}: {error}")
    if bad_edge is not None:
        raise bad_edge
    return counts.visits()


def _trace_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each line's event with its number; text mode, so lines split as ``read_text`` splits."""
    try:
        stream = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise DiagramError(
            f"trace {path}: no such file; pass a trace written by orchestrator run --trace"
        ) from None
    except OSError as error:
        raise DiagramError(f"trace {path}: cannot read it: {error}") from None
    records, blank = 0, True
    with stream:
        try:
            for number, line in enumerate(stream, start=1):
                if not line.strip():
                    continue
                blank = False
                try:
                    record = _record(path, number, line)
                except DiagramError:
                    for _rest in stream:
                        pass  # a file that cannot be decoded says so first, as it always did
                    raise
                if record is None:
                    break  # a last line without its newline: the run was killed while writing it
                records += 1
                yield number, record
        except UnicodeDecodeError:
            # Worded as it always was: the position counted from the start of the file.
            _whole_text(path)
            raise
        except OSError as error:
            raise DiagramError(f"trace {path}: cannot read it: {error}") from None
    if blank:
        raise DiagramError(f"trace {path} is empty; a run writes one JSON event per line")
    if not records:
        raise DiagramError(f"trace {path} has no complete line; its only line is cut short")


def _record(path: Path, number: int, line: str) -> dict[str, Any] | None:
    """The event on one line; None for a cut-off last line (no newline after it)."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        if not line.endswith("\n"):
            return None
        raise DiagramError(
            f"trace {path} line {number} is not JSON ({error.msg}); "
            "pass a trace written by orchestrator run --trace"
        ) from None
    if not isinstance(record, dict):
        raise DiagramError(f"trace {path} line {number} is not a JSON object")
    return record


def _whole_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise DiagramError(f"trace {path}: cannot read it: {error}") from None


# --- public API -------------------------------------------------------------------------------


def render_diagram(machine: MachineName, fmt: DiagramFormat, *, trace: Path | None = None) -> str:
    """The statechart of ``machine`` as Mermaid or Graphviz dot text (no trailing newline).

    ``"all"`` gives the item machine's diagram, then the loop machine's. With ``trace``, the
    states and edges that run visited are highlighted and each edge that fired shows ``×N``.
    """
    if machine not in ("item", "loop", "all"):
        raise DiagramError(f"unknown machine {machine!r}; use item, loop or all")
    if fmt not in ("mermaid", "dot"):
        raise DiagramError(f"unknown format {fmt!r}; use mermaid or dot")
    diagrams = list(render_machines(machine, fmt, trace=trace).values())
    separator = "\n\n%% loop machine\n" if fmt == "mermaid" else "\n\n"
    return separator.join(diagrams)


def render_machines(
    machine: MachineName,
    fmt: DiagramFormat,
    *,
    trace: Path | None = None,
    counts: EdgeCounts | None = None,
    page: bool = False,
) -> dict[str, str]:
    """One document per machine, by name (``item``, ``loop``): each parses on its own.

    ``counts`` (edges counted already) stands for reading ``trace``. ``page`` lays a chart out
    to be read at its natural size in a page: top to bottom, the labels of the edges that
    share an arrow one a line, in a smaller type (dot only; ``statecharts/`` is not drawn so).
    Writing dot source needs the graphviz Python package (a dependency), not the ``dot``
    program; only :func:`render_image` and :func:`render_svg` run that.
    """
    if machine not in ("item", "loop", "all"):
        raise DiagramError(f"unknown machine {machine!r}; use item, loop or all")
    if fmt not in ("mermaid", "dot"):
        raise DiagramError(f"unknown format {fmt!r}; use mermaid or dot")
    if fmt == "dot":
        _require_graphviz_package()
    item_visits: _Visits | None = None
    loop_visits: _Visits | None = None
    if counts is not None:
        item_visits, loop_visits = counts.visits()
    elif trace is not None:
        item_visits, loop_visits = _read_trace(trace)
    documents = {}
    if machine in ("item", "all"):
        documents["item"] = _draw(_item_chart(), fmt, item_visits, page=page)
    if machine in ("loop", "all"):
        documents["loop"] = _draw(_loop_chart(), fmt, loop_visits, page=page)
    return documents


#: Image formats ``--output`` renders through Graphviz's ``dot`` program.
IMAGE_SUFFIXES = (".svg", ".png")


def render_image(dot_source: str, path: Path) -> None:
    """Render dot source to ``path`` (.svg or .png) with the ``dot`` program."""
    _dot(dot_source, [f"-T{path.suffix.lstrip('.')}", "-o", str(path)], f"{path}: ")


def render_svg(dot_source: str) -> str:
    """Dot source drawn as SVG text by the ``dot`` program (:class:`DiagramError` without it)."""
    return _dot(dot_source, ["-Tsvg"], "").decode("utf-8", "replace")


def _dot(dot_source: str, arguments: list[str], where: str) -> bytes:
    """What ``dot ARGUMENTS`` prints for ``dot_source``; its first complaint as DiagramError."""
    program = shutil.which("dot")
    if program is None:
        raise DiagramError(f"{where}{DOT_PROGRAM_MISSING}")
    done = subprocess.run(
        [program, *arguments],
        input=dot_source.encode("utf-8"),
        capture_output=True,
        check=False,
        timeout=60,
    )
    if done.returncode != 0:
        first = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])[0]
        raise DiagramError(f"{where}dot failed: {first}")
    return done.stdout


_SUFFIXES = {"mermaid": ".mmd", "dot": ".dot"}


def diagram_output(
    machine: MachineName, fmt: DiagramFormat, *, trace: Path | None, output: Path | None
) -> tuple[str, list[Path]]:
    """What ``orchestrator diagram`` prints and the files it writes.

    One machine goes to stdout bare, or to ``output`` (a ``.svg``/``.png`` is rendered with
    ``dot``). Two machines are two documents: with ``output`` a folder (an existing one, or a
    path without a suffix), ``item`` and ``loop`` files in it; on stdout a Markdown document
    with one fenced block per machine, since no single Mermaid or dot document holds both.
    """
    image = output is not None and output.suffix.lower() in IMAGE_SUFFIXES
    documents = render_machines(machine, "dot" if image else fmt, trace=trace)
    if output is None:
        if len(documents) == 1:
            return next(iter(documents.values())), []
        fence = "mermaid" if fmt == "mermaid" else "dot"
        blocks = [
            f"## {name} machine\n\n```{fence}\n{text}\n```" for name, text in documents.items()
        ]
        return "\n\n".join(blocks), []
    if output.is_dir() or not output.suffix:
        output.mkdir(parents=True, exist_ok=True)
        written = []
        for name, text in documents.items():
            path = output / f"{name}{_SUFFIXES[fmt]}"
            path.write_text(text + "\n", encoding="utf-8")
            written.append(path)
        return "", written
    if len(documents) > 1:
        raise DiagramError(
            f"--output {output}: one file holds one machine; pass --machine item or loop, "
            "or --output DIR for both"
        )
    (text,) = documents.values()
    if image:
        render_image(text, output)
    else:
        output.write_text(text + "\n", encoding="utf-8")
    return "", [output]


def write_statecharts(directory: Path) -> list[Path]:
    """Write ``item.mmd``, ``loop.mmd``, ``item.dot``, ``loop.dot`` and ``README.md``.

    The dot files are Graphviz source, so writing them needs the graphviz Python package but
    not the ``dot`` program. The output depends only on the machine definitions.
    """
    _require_graphviz_package()
    item, loop = _item_chart(), _loop_chart()
    item_mermaid, loop_mermaid = _draw(item, "mermaid"), _draw(loop, "mermaid")
    contents = {
        "item.mmd": item_mermaid,
        "loop.mmd": loop_mermaid,
        "item.dot": _draw(item, "dot"),
        "loop.dot": _draw(loop, "dot"),
        "README.md": _README.format(item_mermaid=item_mermaid, loop_mermaid=loop_mermaid),
    }
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in contents.items():
        path = directory / name
        path.write_text(text.rstrip("\n") + "\n", encoding="utf-8", newline="\n")
        written.append(path)
    return written


def _require_graphviz_package() -> None:
    try:
        importlib.import_module("graphviz")
    except ImportError:
        raise DiagramError(GRAPHVIZ_PACKAGE_MISSING) from None


_README = """\
# Statecharts

Generated by `make statecharts` (`orchestrator diagram --write-statecharts statecharts`) from
the live machine definitions: `ItemMachine` and `ITEM_TRANSITIONS` in `orchestrator/plan.py`,
`LoopMachine`, `LOOP_STATES` and `LOOP_TRANSITIONS` in `orchestrator/loop.py`. The drawing is
done by the `transitions` library's own diagram support. Do not edit these files by hand:
`tests/test_diagram.py` fails as soon as they differ from what the code generates.

`item.mmd` and `loop.mmd` are Mermaid; `item.dot` and `loop.dot` are Graphviz source
(`dot -Tsvg loop.dot -o loop.svg`). An edge label reads `trigger [guard] / action`; edges
between the same two states share one arrow, their labels joined by `|`.

To see one run, `orchestrator diagram --trace TRACE` draws the same charts with the states and
edges that run visited highlighted and each edge that fired labelled with its count
(`pause ×2`), summed over all items for the item machine. Where several edges share a trigger
and both ends (`finish` to `done` through `plan_settled` or `unfinished_reminded`), the count
goes on the one that fired, as the trace tells it: the reminder an edge's callback logged, the
done-check's outcome, whether the run was reminded of unfinished items, the plan's statuses.
Where the trace cannot tell (a shared board's plan changes under other agents), their count is
said once after them: `finish [plan_settled] | finish [unfinished_reminded] (either ×1)`.

## Item machine

```mermaid
{item_mermaid}
```

Every todo item is a model of one shared item machine and starts `pending`. `start` moves an
item to `in_progress` under two guards: `no_other_item_in_progress` looks at the whole board,
so at most one item is ever in progress, and `dependencies_completed` holds only when every item
the item's `blocked_by` names is `completed` (a cancelled blocker still blocks until the
dependency is dropped). `complete` takes an `in_progress` item to `completed` when
`check_passes`: an item with an acceptance check (its own `check`, or the person's
`completion_check`) completes only when that command, run where bash runs just before the edge
fires, exits 0 (recorded as `plan.check`; replay reads the recorded outcome). And
`pause` puts it back to `pending`. `cancel` takes a `pending` or `in_progress` item to
`cancelled`; it also fires for the unfinished items a full rewrite of the list leaves out.
`completed` and `cancelled` are final: no edge leaves them, so finished work is never reopened,
a new item is added instead. One `todo` call is one batch: if any of its edges is refused, the
edges already fired are rolled back and the board stays as it was.

On a shared board (several agents, one store) `start` is the claim and records the owner, and
`no_other_item_in_progress` counts per owner. `held_by_actor` guards `complete`, `pause` (the
release) and `cancel`: only the agent holding an item may move it on (on a board of one agent
it always holds). `expire` takes an `in_progress` item back to `pending` when
`lease_expired`: its owner stopped renewing the claim's lease (the agent died), so the work
returns to the board by itself. Every edge on a shared board is logged in the store.

## Loop machine

```mermaid
{loop_mermaid}
```

A run starts in `idle`, and `start` enters `call_model`, which sends the conversation to the
model; every entry except `resend` and the retry after `overflow` begins a new round. From
`call_model`, `use_tools` goes to `dispatch` when the answer holds tool calls
(`has_tool_calls`), `resend` asks again after a `pause_turn` stop without counting a round, and
`finish` is taken when the model answers without tool calls. `finish` reaches `done` only when
`plan_settled` (every item completed or cancelled, or the board empty) and
`done_check_passes` (the `--done-check` command, run where bash runs, exited 0; it is logged
as `loop.done_check` and replay reads the recorded outcome, never running it again). The first
time the plan is unsettled, `finish` goes back to `call_model` through `remind_unfinished`
while `unfinished_reminder_left`: one reminder naming the open items, as a new user message and
an `audit.reminder` event with `reason: "unfinished"`; if the model ends again unsettled,
`unfinished_reminded` lets the run end `done` reporting the unfinished items (exit code 3).
A failing done-check sends its exit code and output tail back through `report_done_check` while
`done_check_retry_left` (`--done-check-retries`), and ends the run in `failed` once it has none
left. In `chat` a turn may leave items open: the plan does not hold it. `dispatch` runs every
tool call, answers each with exactly one result, and `dispatched` enters `audit`, which counts
the rounds since the plan last changed. `advance` leaves `audit` by the first edge whose guard
holds: to `failed` when `round_limit_reached` (`--max-rounds`); to `compact` when
`context_over_budget` (the conversation's estimated size is past the clearing threshold of the
model's window); back to `call_model` through the `remind` action when `plan_is_stale` (the
plan has not changed for the reminder threshold's rounds: `remind` appends the reminder to the
user message carrying this round's tool results, after them, and logs an `audit.reminder`
event); otherwise plainly back to `call_model` for the next round. `compact` clears old tool
results and, if that is not enough, summarises older history (`context.cleared`,
`context.compacted`); `compacted` then goes back to `call_model`, through `remind` when
`plan_is_stale` as `advance` would have, unless `retrying_overflow`. `overflow` enters
`compact` from `call_model` when the endpoint refused the request as too long (or stopped with
`model_context_window_exceeded`) and `overflow_retry_left` (once per round). `fail`
ends the run in `failed` from any working state (a model error, a `max_tokens` or `refusal`
stop, a second refusal as too long), and `interrupt` (Ctrl-C) ends it in `interrupted` from any
state that is not final.
`done`, `failed` and `interrupted` are final.
"""
