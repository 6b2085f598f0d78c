"""Commands shown on one line: whole, or shortened in the middle of their long paths.

A command's meaning is in its words (``pytest -q tests/test_x.py``, ``test -f notes.txt``);
the long parts are the folders it runs from (a venv under a ``mktemp -d`` clone). Cutting at a
fixed width drops the words whenever the folder is long, so a check command in a tool error or
a console line is shortened here instead: the middle of its longest paths gives way first, each
keeping its start and its last two components (``/tmp/…/.venv/bin/python``). What is still too
long after that is shown whole, up to a hard bound past which its middle is left out, so a
runaway command cannot flood a message or a terminal.
"""

from __future__ import annotations

import re

#: What is kept of a path's start when its middle gives way: enough to tell ``/tmp`` from ``~``.
_PATH_HEAD = 6
_ELLIPSIS = "…"
_WORDS = re.compile(r"\S+")


def shorten_command(command: str, limit: int = 100, *, hard_limit: int = 500) -> str:
    """``command`` within ``limit`` characters by cutting its long paths in their middles.

    A command that fits is returned as it is. One whose paths cannot give enough is returned
    whole as long as it is within ``hard_limit``; past that, its middle is left out, keeping
    the start (the program) and the end (usually the argument that matters).
    """
    if len(command) <= limit:
        return command
    spans = [(match.start(), match.end()) for match in _WORDS.finditer(command)]
    # The longest paths give way first: they carry the least meaning per character.
    paths = sorted(
        (span for span in spans if "/" in command[span[0] : span[1]]),
        key=lambda span: span[1] - span[0],
        reverse=True,
    )
    replacements: dict[int, tuple[int, str]] = {}
    excess = len(command) - limit
    for start, end in paths:
        if excess <= 0:
            break
        shortened = _cut_path(command[start:end], excess)
        excess -= (end - start) - len(shortened)
        replacements[start] = (end, shortened)
    pieces, cursor = [], 0
    for start in sorted(replacements):
        end, shortened = replacements[start]
        pieces += [command[cursor:start], shortened]
        cursor = end
    text = "".join(pieces) + command[cursor:]
    if len(text) <= hard_limit:
        return text
    head = (hard_limit - len(_ELLIPSIS)) // 2
    tail = hard_limit - len(_ELLIPSIS) - head
    return text[:head] + _ELLIPSIS + text[len(text) - tail :]


def _cut_path(word: str, excess: int) -> str:
    """``word`` with up to ``excess`` characters (plus room for ``…``) taken from its middle.

    Its first ``_PATH_HEAD`` characters and its last two components stay (``bin/python``, or
    ``bin:"$PATH"`` in an assignment); a word with nothing between those is left as it is.
    """
    last = word.rfind("/")
    keep_from = word.rfind("/", 0, last) if last > 0 else last
    if keep_from - _PATH_HEAD <= len(_ELLIPSIS):
        keep_from = last
    room = keep_from - _PATH_HEAD
    if room <= len(_ELLIPSIS):
        return word
    cut = min(room, excess + len(_ELLIPSIS))
    return word[: keep_from - cut] + _ELLIPSIS + word[keep_from:]
