"""The statecharts on the page: drawn by dot with the run's counts, rebuilt as safe SVG."""

from __future__ import annotations

import shutil

import pytest

from orchestrator import diagram
from orchestrator.diagram import DOT_PROGRAM_MISSING, EdgeCounts
from orchestrator.picture.machines import draw_machines, sanitise_svg
from orchestrator.picture.model import read_picture
from orchestrator.trace_file import read_trace
from tests.picture_traces import GOLDEN

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")


@needs_dot
def test_the_demo_charts_carry_its_counts_and_nothing_but_drawing() -> None:
    counts = read_picture(read_trace(GOLDEN)).counts
    item, loop = draw_machines(counts)
    assert (item.name, loop.name) == ("item", "loop")
    assert item.svg is not None and loop.svg is not None
    assert item.svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" role="img"')
    assert "×5" in item.svg and "no_other_item_in_progress" in item.svg
    assert "×13" in loop.svg
    for svg in (item.svg, loop.svg):
        for left_out in ("<!DOCTYPE", "<!--", "<?xml", "xlink", " id=", "<script", "href"):
            assert left_out not in svg, left_out


def test_the_counts_fed_event_by_event_are_those_read_from_the_file() -> None:
    counts = EdgeCounts()
    for line in read_trace(GOLDEN).events():
        counts.feed(line.event)
    assert counts.visits() == diagram._read_trace(GOLDEN)


def test_whatever_the_svg_holds_only_drawing_comes_out_and_text_stays_text() -> None:
    hostile = (
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
        'viewBox="0 0 10 10" onload="alert(1)">'
        "<script>alert(2)</script>"
        '<g class="node" style="background:url(http://x/)">'
        "<title>&lt;img src=x onerror=alert(3)&gt;</title>"
        '<text x="1" y="2" fill="javascript:alert(4)">'
        "&lt;/svg&gt;&lt;script&gt;alert(5)&lt;/script&gt;</text>"
        '<a xlink:href="javascript:alert(6)"><text>link</text></a>'
        '<foreignObject><div xmlns="http://www.w3.org/1999/xhtml">x</div></foreignObject>'
        '<path d="M0 0" fill="url(http://evil/)" stroke="black"/>'
        "<svg><text>nested</text></svg>"
        "</g></svg>"
    )
    clean = sanitise_svg(hostile)
    for gone in (
        "onload",
        "<script",
        "style",
        "http://x",
        "javascript",
        "foreignObject",
        "<a",
        "link",
        "nested",
        "url(",
    ):
        assert gone not in clean, gone
    assert "&lt;img src=x onerror=alert(3)&gt;" in clean
    assert "&lt;/svg&gt;&lt;script&gt;alert(5)&lt;/script&gt;" in clean
    assert '<path d="M0 0" stroke="black"></path>' in clean
    assert clean.count("<svg") == 1 and clean.endswith("</svg>")


def test_what_is_not_svg_is_refused() -> None:
    with pytest.raises(ValueError, match="not SVG"):
        sanitise_svg("<html><body>no</body></html>")
    with pytest.raises(ValueError, match="not SVG"):
        sanitise_svg("<svg")


def test_without_dot_the_charts_say_why_and_the_counts_remain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    drawings = draw_machines(read_picture(read_trace(GOLDEN)).counts)
    assert [d.svg for d in drawings] == [None, None]
    assert all(d.missing == DOT_PROGRAM_MISSING for d in drawings)


@needs_dot
def test_the_page_s_charts_are_drawn_to_be_read_at_their_natural_size() -> None:
    """A chart scaled to the page's width had 5 px labels: it keeps dot's size, and scrolls."""
    import re

    from orchestrator.picture.html import asset

    _item, loop = draw_machines(read_picture(read_trace(GOLDEN)).counts)
    assert loop.svg is not None
    size = re.match(
        r'<svg [^>]*width="([\d.]+)pt" height="([\d.]+)pt" viewBox="0.00 0.00 ([\d.]+)', loop.svg
    )
    assert size is not None and float(size.group(1)) == float(size.group(3))  # 1 unit = 1 pt
    assert min(float(f) for f in re.findall(r'font-size="([\d.]+)"', loop.svg)) >= 11
    assert ".svg-card svg { display: block; max-width: none; }" in asset("page.css")
    # Each edge of a shared arrow on its own line, its count on it alone.
    texts = re.findall(r"<text [^>]*>([^<]*)</text>", loop.svg)
    assert "finish [plan_settled] ×1" in texts
    assert "finish [unfinished_reminded]" in texts
    assert "advance [plan_is_stale] / remind ×2" in texts and "advance ×11" in texts
