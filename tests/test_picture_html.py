"""The document: data that cannot end its element, a policy that names exactly what runs."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from orchestrator.picture.html import asset, document, json_for_script
from orchestrator.picture.model import read_picture
from orchestrator.picture.run_page import run_document
from orchestrator.trace_file import read_trace
from tests.picture_traces import (
    GOLDEN,
    HOSTILE,
    HOSTILE_FILE,
    HOSTILE_SCRIPT,
    HOSTILE_TAG,
    hostile_run,
)


class _Elements(HTMLParser):
    """Every start tag with its attributes, and each script element's text, as a browser parses."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.title = ""
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in ("script", "title", "style"):
            self._in = tag
            if tag == "script":
                self.scripts.append((dict(attrs), ""))

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "script":
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)
        elif self._in == "title" and not self.title:
            self.title = data


def _parsed(page: str) -> _Elements:
    elements = _Elements()
    elements.feed(page)
    elements.close()
    return elements


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_json_for_a_script_element_cannot_close_it_and_reads_back_the_same() -> None:
    value = {"out": HOSTILE + "\u2029 & > <", "n": [1, 2.5, None, True]}
    text = json_for_script(value)
    for unsafe in ("<", ">", "&", "\u2028", "\u2029"):
        assert unsafe not in text, unsafe
    assert json.loads(text) == value


def test_what_orjson_refuses_is_still_json_the_page_can_read() -> None:
    value = {"big": 2**70, "nan": float("nan"), 3: "key"}
    assert json.loads(json_for_script(value)) == {"big": 2**70, "nan": None, "3": "key"}


def test_half_a_surrogate_pair_is_written_as_its_escape_on_both_paths() -> None:
    """A trace may hold ``"\\udc80"`` (a response's JSON escape); the page must still be UTF-8."""
    for value in ({"t": "a\udc80b"}, {"t": "a\udc80b", 3: "k"}):
        text = json_for_script(value)
        text.encode("utf-8")
        assert json.loads(text) == {str(key): item for key, item in value.items()}
    page = document("task \ud800 <b>", {"t": "x\udfff"})
    page.encode("utf-8")
    assert "task \ufffd &lt;b&gt;" in page


def test_the_policy_lets_nothing_load_and_runs_only_the_inlined_script_and_style() -> None:
    page = document("t", {"kind": "none"}, blocks=[("block-1", {"a": 1})])
    elements = _parsed(page)
    (meta,) = [a for tag, a in elements.tags if tag == "meta" and a.get("http-equiv")]
    policy = str(meta["content"])
    script, style = asset("page.js"), asset("page.css")
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == _sha256(script)
    assert directives["style-src"] == _sha256(style)
    assert directives["img-src"] == "data:"
    assert "unsafe" not in policy
    # The policy comes before anything it governs.
    names = [tag for tag, _ in elements.tags]
    assert names.index("meta") < names.index("style") < names.index("script")
    running = [text for attrs, text in elements.scripts if "type" not in attrs]
    assert running == [script]
    data = {
        str(attrs["id"]): json.loads(text) for attrs, text in elements.scripts if "type" in attrs
    }
    assert data == {"picture-data": {"kind": "none"}, "block-1": {"a": 1}}
    for name, closing in (("page.js", "</script"), ("page.css", "</style")):
        assert closing not in asset(name).lower(), name


def test_the_script_sets_text_never_markup() -> None:
    script = asset("page.js")
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "Function(",
    ):
        assert sink not in script, sink
    assert "textContent" in script


def test_the_demo_page_carries_its_rounds_in_blocks_of_fifty(tmp_path: Path) -> None:
    page = run_document(read_picture(read_trace(GOLDEN)))
    elements = _parsed(page)
    data = {
        str(a["id"]): json.loads(t)
        for a, t in elements.scripts
        if a.get("type") == "application/json"
    }
    main = data["picture-data"]
    assert main["kind"] == "run" and main["columns"] == 14 and main["chunk"] == 50
    assert main["lanes"][0]["text"] == "Read hello.py"
    assert list(data) == ["picture-data", "picture-rounds-0"]
    assert len(data["picture-rounds-0"]) == 14
    assert data["picture-rounds-0"][1]["calls"][0]["output"].startswith("def greet(name):")
    assert elements.title.startswith("orchestrator · run {RUN_ID} · done · Refactor hello.py")


@pytest.fixture
def hostile_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ORCHESTRATOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ORCHESTRATOR_CONFIG_DIR", str(tmp_path / "config"))
    return run_document(read_picture(read_trace(hostile_run(tmp_path))))


def test_hostile_text_is_data_in_the_page_and_never_markup(hostile_page: str) -> None:
    elements = _parsed(hostile_page)
    tags = {tag for tag, _ in elements.tags}
    assert "img" not in tags and "b" not in tags
    assert not any(name.startswith("on") for _, attrs in elements.tags for name in attrs)
    scripts = [attrs for attrs, _ in elements.scripts]
    assert sum("type" not in attrs for attrs in scripts) == 1
    assert all(attrs.get("type") in (None, "application/json") for attrs in scripts)
    for raw in (HOSTILE_TAG, HOSTILE_SCRIPT, "<b onmouseover", "\u2028"):
        assert raw not in hostile_page, raw
    # The title is the task's text, escaped on the way in and read back as text.
    task = " ".join(("draw " + HOSTILE).split())
    assert elements.title == f"orchestrator · run {_run_id(elements)} · done · {task[:79]}…"
    blocks = [json.loads(text) for attrs, text in elements.scripts if "type" in attrs]
    found = json.dumps(blocks, ensure_ascii=False)
    for where in ("model says ", "item ", "file ", "finished "):
        assert json.dumps(where + HOSTILE, ensure_ascii=False)[1:-1] in found, where
    assert json.dumps(HOSTILE_FILE, ensure_ascii=False)[1:-1] in found


def _run_id(elements: _Elements) -> str:
    (data,) = [json.loads(t) for a, t in elements.scripts if a.get("id") == "picture-data"]
    run_id: Any = data["header"]["run_id"]
    assert re.fullmatch(r"[0-9a-f]{12}", run_id)
    return str(run_id)


def _state_looks(dark: bool) -> dict[str, tuple[str, ...]]:
    """How each lane state is painted (its fill, stroke, and a pattern's colours), resolved."""
    css = asset("page.css")
    light = dict(re.findall(r"(--[\w-]+): ([^;]+);", css.split("@media (prefers-color-scheme")[0]))
    dark_block = css.split("@media (prefers-color-scheme: dark)")[1].split("\n}\n")[0]
    colours = {**light, **(dict(re.findall(r"(--[\w-]+): ([^;]+);", dark_block)) if dark else {})}

    def resolve(value: str) -> str:
        return re.sub(r"var\((--[\w-]+)\)", lambda m: colours[m.group(1)], value).strip()

    def declared(selector: str, prop: str) -> str:
        rule = re.search(re.escape(selector) + r"(?:,[^{]*)? \{([^}]*)\}", css)
        found = re.search(rf"(?:^|;)\s*{prop}: ([^;]+)", rule.group(1)) if rule else None
        return resolve(found.group(1)) if found else ""

    looks: dict[str, tuple[str, ...]] = {}
    for state in ("pending", "blocked", "in_progress", "completed", "cancelled", "many"):
        fill = declared(f".st-{state}", "fill")
        pattern: tuple[str, ...] = ()
        if fill.startswith("url(#pattern-"):
            pattern = (
                declared(f".pattern-fg-{state}", "fill"),
                declared(f".pattern-bg-{state}", "fill"),
            )
        looks[state] = (fill, declared(f".st-{state}", "stroke"), *pattern)
    return looks


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_every_lane_state_looks_different_in_light_and_dark(dark: bool) -> None:
    """Pending and cancelled once were two greys; they differ in pattern now, as all do."""
    looks = _state_looks(dark)
    assert len(set(looks.values())) == len(looks), looks
    assert looks["pending"][1], "pending is hollow: an outline, no fill of its own"
    patterned = {state for state, look in looks.items() if look[0].startswith("url(")}
    assert patterned == {"blocked", "cancelled"}
    symbols = re.search(r"const STATE_SYMBOLS = \{(.*?)\};", asset("page.js"), re.S)
    assert symbols is not None
    found = dict(re.findall(r"(\w+): \"(.)\"", symbols.group(1)))
    assert len({found[state] for state in looks}) == len(looks), found
