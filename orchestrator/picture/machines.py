"""The item and loop statecharts with one run's visit counts, as SVG safe to inline in a page.

:mod:`orchestrator.diagram` writes the charts' dot source with the counts on the edges, and
Graphviz's ``dot`` draws them. What ``dot`` writes is then parsed and written out again
keeping only the drawing: a short list of SVG elements and presentation attributes, every
text and attribute value escaped, no scripts, links, styles, ids or external references. A
label can only hold state and trigger names and counts today, but the page must not depend
on that staying so. Without ``dot`` the page lists the edge counts instead.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from xml.etree import ElementTree

import attrs

from orchestrator.diagram import DiagramError, EdgeCounts, render_machines, render_svg

_SVG = "{http://www.w3.org/2000/svg}"
#: The elements dot draws a chart with; anything else is dropped with its children.
_ELEMENTS = frozenset({"svg", "g", "title", "polygon", "polyline", "path", "ellipse", "text"})
#: Presentation attributes only: no ``style``, ``href``, event handlers or ids.
_ATTRIBUTES = frozenset(
    {
        "viewBox",
        # The chart's natural size (in pt), so the page shows it readable and scrolls it.
        "width",
        "height",
        "transform",
        "points",
        "d",
        "cx",
        "cy",
        "rx",
        "ry",
        "x",
        "y",
        "fill",
        "stroke",
        "stroke-width",
        "stroke-dasharray",
        "font-family",
        "font-size",
        "font-weight",
        "font-style",
        "text-anchor",
        "class",
    }
)
#: An attribute value that could reach outside the page or run something is dropped.
_UNSAFE_VALUE = re.compile(r"url\s*\(|javascript:|data:|expression\s*\(|[<>]", re.IGNORECASE)


@attrs.frozen
class MachineDrawing:
    """One machine's chart: sanitised SVG markup, or why there is none."""

    name: str
    svg: str | None
    missing: str | None = None


def draw_machines(counts: EdgeCounts) -> tuple[MachineDrawing, ...]:
    """The item and the loop chart with ``counts``; each without SVG says why."""
    try:
        documents = render_machines("all", "dot", counts=counts, page=True)
    except DiagramError as error:
        return tuple(MachineDrawing(name, None, str(error)) for name in ("item", "loop"))
    drawings = []
    for name, source in documents.items():
        try:
            drawings.append(MachineDrawing(name, sanitise_svg(render_svg(source))))
        except (DiagramError, OSError, ValueError) as error:
            drawings.append(MachineDrawing(name, None, str(error)))
    return tuple(drawings)


def sanitise_svg(text: str) -> str:
    """SVG markup rebuilt from ``text``, keeping only drawing elements and attributes.

    ``ValueError`` when ``text`` is not SVG at all.
    """
    try:
        root = ElementTree.fromstring(text.encode("utf-8"))
    except ElementTree.ParseError as error:
        raise ValueError(f"dot wrote something that is not SVG: {error}") from None
    if root.tag != f"{_SVG}svg":
        raise ValueError("dot wrote something that is not SVG")
    return "".join(_written(root, top=True))


def _written(element: ElementTree.Element, *, top: bool = False) -> Iterator[str]:
    tag = element.tag.removeprefix(_SVG)
    if tag not in _ELEMENTS or (tag == "svg" and not top):
        return
    attributes = [
        f' {name}="{html.escape(value, quote=True)}"'
        for name, value in element.attrib.items()
        if name in _ATTRIBUTES and not _UNSAFE_VALUE.search(value)
    ]
    if top:
        attributes.insert(0, ' xmlns="http://www.w3.org/2000/svg" role="img"')
    yield f"<{tag}{''.join(attributes)}>"
    if element.text and tag in ("title", "text"):
        yield html.escape(element.text, quote=False)
    for child in element:
        yield from _written(child)
    yield f"</{tag}>"
