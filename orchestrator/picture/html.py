"""One self-contained HTML document: the page's data as JSON, its styles and script inlined.

Nothing on the page is fetched: the styles and the script are the package's ``assets/`` files
written inline, fonts are the system's, the eval's plot is a ``data:`` image. A
Content-Security-Policy meta tag says so to the browser: nothing may load from anywhere, and
only the one inline script and style whose SHA-256 hashes it names may run or apply, so even a
tag that slipped into the page could not run. The data goes in ``<script
type="application/json">`` blocks, never run, with ``<``, ``>``, ``&`` and the JavaScript line
separators escaped, so a ``</script>`` inside a tool's output stays text inside a string.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
from collections.abc import Sequence
from importlib import resources
from typing import Any

import orjson

from orchestrator import __version__
from orchestrator.trace_file import json_utf8

#: In a JSON text these can only be inside strings, where their escapes mean the same.
_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def asset(name: str) -> str:
    """One of the package's ``assets/`` files (the page's styles or script) as text."""
    return resources.files("orchestrator.picture").joinpath("assets", name).read_text("utf-8")


def json_for_script(value: Any) -> str:
    """``value`` as JSON that cannot end the ``<script>`` element it is written into."""
    try:
        raw = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        # What orjson refuses (integers past 64 bits, keys that are not strings): json writes
        # it, with the values JSON has no word for made null first.
        raw = json_utf8(json.dumps(_finite(value), ensure_ascii=False, default=str))
    for plain, escaped in _ESCAPES:
        raw = raw.replace(plain, escaped)
    return raw.decode("utf-8")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(key): _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _whole_characters(text: str) -> str:
    """``text`` with each lone surrogate (half a UTF-16 pair) as U+FFFD, so it can be UTF-8."""
    return "".join("\ufffd" if "\ud800" <= char <= "\udfff" else char for char in text)


def _hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def content_security_policy(script: str, style: str) -> str:
    """Nothing loads; only the inline script and style with these hashes run and apply."""
    return (
        "default-src 'none'; "
        f"script-src {_hash(script)}; "
        f"style-src {_hash(style)}; "
        "img-src data:; "
        "base-uri 'none'; "
        "form-action 'none'"
    )


def document(
    title: str,
    data: Any,
    *,
    blocks: Sequence[tuple[str, Any]] = (),
    body: str = "",
) -> str:
    """The whole page: ``data`` as ``picture-data``, each of ``blocks`` as ``(id, value)``.

    ``body`` is markup this package made (the sanitised statecharts), placed in ``<main>``
    after what the script builds; everything from a trace or a store goes in ``data``.
    """
    script, style = asset("page.js"), asset("page.css")
    parts = [
        "<!DOCTYPE html>\n",
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        '<meta http-equiv="Content-Security-Policy" content="',
        html.escape(content_security_policy(script, style), quote=False),
        '">\n<meta name="referrer" content="no-referrer">\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        '<meta name="color-scheme" content="light dark">\n',
        # write.py knows a page it may replace by this line (PAGE_MARKER there).
        f'<meta name="generator" content="orchestrator {html.escape(__version__)}">\n',
        f"<title>{html.escape(_whole_characters(title), quote=False)}</title>\n",
        f"<style>{style}</style>\n</head>\n<body>\n",
        '<main id="page">\n<noscript><p>This page draws its lanes, charts and lists with its own '
        "inlined script; allow scripts for this file to see them.</p></noscript>\n",
        body,
        "\n</main>\n",
        '<script type="application/json" id="picture-data">',
        json_for_script(data),
        "</script>\n",
    ]
    for block_id, value in blocks:
        parts.extend(
            [
                f'<script type="application/json" id="{html.escape(block_id, quote=True)}">',
                json_for_script(value),
                "</script>\n",
            ]
        )
    parts.extend([f"<script>{script}</script>\n", "</body>\n</html>\n"])
    return "".join(parts)
