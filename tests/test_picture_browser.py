"""The page in a real browser: headless Chromium opens it offline and we check what it shows.

What a person would see: the DOM after the page's script ran (the item texts, the round count,
the totals), no request to any URL (Chromium's own net log, the page's requests told from the
browser's background ones by their origin), no console message (a blocked inline script or
handler would leave one), and a screenshot that is not blank. A page full of hostile text runs
none of it. A control page that does make a request and log an error proves the checks see
them. ``.ci/run`` installs Debian's ``chromium``; without it (and not root) the tests skip.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import attrs
import pytest

from orchestrator.picture.model import read_picture
from orchestrator.picture.run_page import run_document
from orchestrator.trace_file import read_trace
from tests.picture_traces import golden_copy, hostile_run

# A real browser process: the e2e layer (docs/development.md).
pytestmark = pytest.mark.e2e

CHROMIUM = Path("/usr/bin/chromium")

if not CHROMIUM.exists():
    if os.geteuid() == 0:  # CI runs as root, and .ci/run installs it: missing there is a failure
        pytest.fail(
            "chromium is missing; .ci/run installs it (apt-get install chromium)", pytrace=False
        )
    pytestmark = pytest.mark.skip(reason="chromium is not installed (.ci/run installs it as root)")


@attrs.frozen
class Visit:
    """What one headless Chromium run left: its output, console lines and the page's requests."""

    stdout: str
    console: list[str]
    requests: list[str]


def _open(url: str, scratch: Path, *action: str) -> Visit:
    scratch.mkdir(parents=True, exist_ok=True)
    netlog = scratch / "net.json"
    done = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={scratch / 'profile'}",
            "--host-resolver-rules=MAP * ~NOTFOUND",  # nothing leaves the machine, even if asked
            "--enable-logging=stderr",
            "--v=0",
            f"--log-net-log={netlog}",
            *action,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        cwd=scratch,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if re.search(r":CONSOLE[:(\]]", line)]
    return Visit(done.stdout, console, _page_requests(netlog))


def _page_requests(netlog: Path) -> list[str]:
    """The URLs the page asked for; the browser's own background calls have no origin."""
    log = json.loads(netlog.read_text(encoding="utf-8"))
    started = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    found = []
    for event in log["events"]:
        params = event.get("params") or {}
        if event["type"] != started or "url" not in params:
            continue
        if params.get("initiator") != "not an origin" or "file:" in str(
            params.get("network_isolation_key")
        ):
            found.append(str(params["url"]))
    return found


def _title(dom: str) -> str:
    match = re.search(r"<head>.*?<title>(.*?)</title>", dom, re.S)
    assert match is not None
    return match.group(1)


def test_the_checks_see_a_request_and_a_console_error(tmp_path: Path) -> None:
    control = tmp_path / "control.html"
    control.write_text(
        "<!DOCTYPE html><title>control</title><p id=p>before</p>"
        "<script>document.getElementById('p').textContent='after';"
        "console.error('boom');fetch('http://example.invalid/x').catch(()=>{});</script>",
        encoding="utf-8",
    )
    visit = _open(control.as_uri(), tmp_path / "chromium", "--dump-dom")
    assert '<p id="p">after</p>' in visit.stdout
    assert any("boom" in line for line in visit.console)
    assert "http://example.invalid/x" in visit.requests


def test_the_demo_page_shows_its_run_and_asks_for_nothing(tmp_path: Path) -> None:
    picture = read_picture(read_trace(golden_copy(tmp_path)))
    page = tmp_path / "demo.html"
    page.write_text(run_document(picture), encoding="utf-8")
    visit = _open(page.as_uri(), tmp_path / "dom", "--dump-dom")
    dom = visit.stdout
    assert visit.console == []
    assert visit.requests == []
    assert 'data-drawn="yes"' in dom
    for number, text in enumerate(
        ["Read hello.py", "Add type hints", "Add docstrings", "Add a main guard", "Run the tests"],
        start=1,
    ):
        assert re.search(
            rf'class="lane-name[^"]*" title="#{number}: {text}">#{number} {text}<', dom
        ), text
    facts = dict(re.findall(r"<dt>([^<]+)</dt><dd[^>]*>([^<]*)</dd>", dom))
    assert facts["rounds"] == "14"
    assert facts["tokens out"] == "934" and facts["cache read"] == "24,541"
    assert facts["status"] == "done · exit 0"
    assert dom.count('class="round"') == 14 and 'id="round-14"' in dom
    assert dom.count("mk mk-reminder") == 2 and dom.count("mk mk-rejected") == 1
    assert "The trace ends at line 118" in dom
    # The model asked for, not the client's kind (run.started's "model").
    assert facts["model"] == "scripted · served as scripted:refactor-hello"
    _context_is_drawn_on_its_own_scale(dom)
    # Every state says itself in the legend with a symbol, not by its colour alone.
    for words in ("○ pending", "‖ blocked", "▶ in progress", "✓ completed", "✕ cancelled"):
        assert f"</span>{words}" in dom, words

    shot = tmp_path / "shot" / "page.png"
    visit = _open(
        page.as_uri(), tmp_path / "shot", f"--screenshot={shot}", "--window-size=1200,1600"
    )
    assert visit.console == [] and visit.requests == []
    from PIL import Image

    with Image.open(shot) as image:
        pixels = image.convert("RGB")
        colours = pixels.getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 50, "the screenshot is (nearly) blank"
    most = max(count for count, _ in colours)
    assert most < 0.97 * pixels.width * pixels.height, "the screenshot is (nearly) one colour"


def _context_is_drawn_on_its_own_scale(dom: str) -> None:
    """The demo's context is 1% of its window: its line lies on its panel's 0%, not the top.

    The tokens have an axis of their own (token counts), the window is the context panel's
    100% line, and the cost so far is a panel of its own (unknown here: no price).
    """
    labels = re.findall(r'class="axis-label">([^<]*)<', dom)
    assert labels[:4] == ["0", "1k", "2k", "3k"] and "100%" in labels and "0%" in labels
    assert "context: % of the window" in dom and "cost: unknown (no price for this model)" in dom
    window = re.search(r'<line [^>]*y1="([\d.]+)"[^>]*class="window-line"', dom)
    assert window is not None
    top = float(window.group(1))
    baselines = [
        float(y) for y in re.findall(r'<line [^>]*y1="([\d.]+)"[^>]*class="baseline"', dom)
    ]
    bottom = min(y for y in baselines if y > top)  # the context panel's 0%
    line = re.search(r'<polyline points="([^"]+)" class="context-line"', dom)
    assert line is not None
    heights = [float(point.split(",")[1]) for point in line.group(1).split()]
    assert all(bottom - y <= 0.02 * (bottom - top) for y in heights), (top, bottom, heights)
    assert "fullest: 1.4% (round 14)" in dom


def test_a_hostile_run_renders_its_text_and_runs_none_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCHESTRATOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ORCHESTRATOR_CONFIG_DIR", str(tmp_path / "config"))
    source = run_document(read_picture(read_trace(hostile_run(tmp_path))))
    page = tmp_path / "hostile.html"
    page.write_text(source, encoding="utf-8")
    # #round-2 opens the round whose read_file output is the hostile file's content.
    visit = _open(page.as_uri() + "#round-2", tmp_path / "dom", "--dump-dom")
    dom = visit.stdout
    assert visit.console == []  # a blocked inline script or handler would be reported here
    assert visit.requests == []
    assert 'data-drawn="yes"' in dom
    assert _title(dom) == _title(source)
    assert _title(dom).startswith("orchestrator · run ")  # not the payload's 'pwned'
    assert "<img" not in dom and "<b " not in dom
    assert dom.count("<script") == source.count("<script")
    shown = "&lt;img src=x onerror=\"document.title='pwned'\"&gt;&lt;/script&gt;&lt;script&gt;"
    assert re.search(r'class="model-text">model says ' + re.escape(shown), dom)
    assert re.search(r'class="lane-name[^"]*" title="[^"]*">#1 item ' + re.escape(shown), dom)
    assert re.search(r'<pre class="io">file ' + re.escape(shown), dom)  # the expanded output
    assert "&lt;b onmouseover=alert(1)&gt;.txt" in dom
