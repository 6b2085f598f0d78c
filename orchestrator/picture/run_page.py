"""One run's page: its :class:`~orchestrator.picture.model.RunPicture` as the document's data.

The numbers every round has (tokens, cost, context) go in the page's main data as one array
per field, which the script draws the charts from at once. What a person reads round by round
(the model's text, each tool call's input and output) goes in blocks of :data:`CHUNK` rounds,
each its own JSON element, parsed only when that page of rounds is shown; an output enters the
document only when its call is expanded. So a 10,000-round page opens as fast as a short one.
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from orchestrator.picture.html import document
from orchestrator.picture.machines import MachineDrawing, draw_machines
from orchestrator.picture.model import Round, RunPicture
from orchestrator.picture.write import file_uri

if TYPE_CHECKING:
    from orchestrator.picture.team import TeamPicture

#: Rounds per page of the round list, and per JSON block.
CHUNK = 50


def page_data(picture: RunPicture, team: TeamPicture | None = None) -> dict[str, Any]:
    """What the script draws the run from (without the per-round blocks)."""
    rounds = picture.rounds
    header = attrs.asdict(picture.header)
    header["trace_uri"] = file_uri(picture.header.trace)
    return {
        "kind": "run",
        "header": header,
        "stop": attrs.asdict(picture.stop),
        "skipped": list(picture.skipped),
        "columns": len(rounds),
        "chunk": CHUNK,
        "rounds": _columns(rounds),
        "lanes": [
            {
                "key": lane.key,
                "item": lane.item,
                "text": lane.text,
                "segments": [[s.state, s.start, s.end] for s in lane.segments],
            }
            for lane in picture.lanes
        ],
        "markers": [attrs.asdict(marker) for marker in picture.markers],
        "machines": {
            name: [list(edge) for edge in edges] for name, edges in picture.machines.items()
        },
        "team": team.as_json() if team is not None else None,
    }


def _columns(rounds: Sequence[Round]) -> dict[str, list[Any]]:
    return {
        "number": [r.number for r in rounds],
        "run": [r.run for r in rounds],
        "input": [r.usage.get("input_tokens", 0) for r in rounds],
        "output": [r.usage.get("output_tokens", 0) for r in rounds],
        "cache_read": [r.usage.get("cache_read_input_tokens", 0) for r in rounds],
        "cache_write": [r.usage.get("cache_creation_input_tokens", 0) for r in rounds],
        "context": [r.context_tokens for r in rounds],
        "window": [r.context_window for r in rounds],
        "cost": [None if r.cost is None else round(r.cost, 6) for r in rounds],
    }


def round_blocks(rounds: Sequence[Round]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """``(element id, rounds' details)`` for each :data:`CHUNK` rounds."""
    for first in range(0, len(rounds), CHUNK):
        yield (
            f"picture-rounds-{first // CHUNK}",
            [
                {
                    "text": r.text,
                    "stop_reason": r.stop_reason,
                    "calls": [call.as_json() for call in r.calls],
                }
                for r in rounds[first : first + CHUNK]
            ],
        )


def machines_markup(drawings: Sequence[MachineDrawing]) -> str:
    """The machines' section: each chart's sanitised SVG, or why it is missing."""
    parts = [
        '<section id="machines" aria-labelledby="machines-title">',
        '<h2 id="machines-title">The machines, with this run\'s visits</h2>',
        '<p class="muted">Visited states and taken edges are blue; each edge that fired says '
        "how often (×N), summed over every item for the item machine.</p>",
    ]
    for drawing in drawings:
        caption = f"{drawing.name} machine"
        if drawing.svg is not None:
            parts.append(
                f'<figure class="machine"><figcaption>{caption}</figcaption>'
                f'<div class="svg-card">{drawing.svg}</div></figure>'
            )
        else:
            reason = html.escape(drawing.missing or "not drawn")
            parts.append(
                f'<figure class="machine"><figcaption>{caption}</figcaption>'
                f'<p class="stop warn">Not drawn: {reason}. The edges it took are listed '
                "below.</p></figure>"
            )
    parts.append("</section>")
    return "".join(parts)


def run_document(picture: RunPicture, team: TeamPicture | None = None) -> str:
    """The run's whole page as text."""
    header = picture.header
    task = " ".join(header.task.split())
    task = task if len(task) <= 80 else task[:79] + "…"
    title = f"orchestrator · run {header.run_id or '?'} · {header.status}" + (
        f" · {task}" if task else ""
    )
    return document(
        title,
        page_data(picture, team),
        blocks=tuple(round_blocks(picture.rounds)),
        body=machines_markup(draw_machines(picture.counts)),
    )
