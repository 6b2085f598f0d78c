r"""Untrusted text made inert for the terminal, by one function, :func:`inert`.

It is the console's only way to show a string that did not come from the harness itself. Tool
output, file contents, the model's text, file names and MCP results may carry bytes aimed
at the user's terminal: ``ESC ] 52`` writes the clipboard, ``ESC ] 8`` hides a link's target,
``ESC [ 2 J`` clears the screen, ``ESC [ 6 n`` makes the terminal answer on stdin, ``\r`` and
cursor moves rewrite lines already read, DCS/APC pass through to a multiplexer, and bidi
overrides reorder what is shown. Every such character becomes a visible escape (``␛]52;…``,
``\x07``, ``\u202e``): never interpreted, and never silently dropped, so the user sees that
something was there. Newlines and tabs stay. The trace keeps the exact bytes; JSON on stdout
keeps the exact value, each such character written as its JSON escape (:func:`json_escaped`).
"""

from __future__ import annotations

import re

#: C0 controls except tab and newline, DEL, the C1 range, the bidirectional controls, and
#: lone surrogates (a JSON escape of half a pair): a terminal would get a raw byte, or the
#: print would fail.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\x1b":
        return "␛"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str) -> str:
    """``text`` with every character that could drive a terminal shown as a visible escape."""
    if _UNSAFE.search(text) is None:  # the common case: nothing to do, no copy
        return text
    return _UNSAFE.sub(_visible, text)


def inert_line(text: str) -> str:
    r"""``text`` for one line of a terminal: :func:`inert`, and each newline shown as ``\n``.

    For a line that names a path or an argument a person or a model chose, which may hold a
    newline: it must not look like two lines, the second one forged.
    """
    return inert(text).replace("\n", "\\n")


def json_escaped(text: str) -> str:
    r"""A JSON ``text`` with each character :func:`inert` would escape written as ``\uXXXX``.

    The same JSON value, parsed: outside its strings JSON has no such character, and inside one
    the escape means the character. ``json.dumps`` escapes the C0 controls already, but not DEL,
    the C1 range, the bidirectional controls or half a surrogate pair, which would reach a
    terminal raw (or fail to encode).
    """
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
