"""Where a page goes, and writing it whole: a page is derived, so writing it again replaces it.

A run's page goes beside its trace as ``RUN_ID.html`` unless told otherwise; ``-`` sends it to
stdout. The file is written under a temporary name in the same folder and renamed over the old
one, so a reader never sees half a page and an interrupted write leaves the old page as it was.
The page holds what the trace holds, so it is kept as private as the temporary file is made
(readable by its owner only).

Only a page is ever replaced: a place that holds a file the page is drawn from (the trace, a
team's agent traces, the board) or any file that is not a page this package wrote is refused,
so a slip in OUT cannot destroy a file. A link in the page's place is replaced, never followed.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

STDOUT = "-"

#: Every page this package writes starts so (see :func:`orchestrator.picture.html.document`).
PAGE_START = b"<!DOCTYPE html>\n"
#: ... and says in its head who wrote it, within the first :data:`_HEAD_BYTES`.
PAGE_MARKER = b'<meta name="generator" content="orchestrator '
_HEAD_BYTES = 4096


class PageError(Exception):
    """A page that cannot be written where asked; ``str()`` is one line for a person."""


def default_page_path(trace: Path, run_id: str) -> Path:
    """``RUN_ID.html`` beside the trace (the trace's own name when the id is not a plain name)."""
    name = run_id if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", run_id) else trace.stem
    return trace.parent / f"{name}.html"


def file_uri(path: str | Path) -> str | None:
    """``file:///…`` for a local path, for the page's links; None when it cannot be one."""
    try:
        return Path(path).resolve().as_uri()
    except (OSError, ValueError):
        return None


def write_page(
    text: str, out: str | None, default: Path, *, sources: Iterable[Path] = ()
) -> Path | None:
    """Write ``text`` to ``out`` (a file or folder; ``-``: stdout) or ``default``.

    ``sources`` are the files the page is drawn from: the page never goes in their place.
    Returns the file written, None for stdout; :class:`PageError` when it cannot be written.
    """
    if out == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return None
    if out is not None and out.endswith(("/", os.sep)) and not Path(out).is_dir():
        # Path() drops the slash that said "a folder": never a file of that name instead.
        what = "not a folder" if os.path.lexists(out.rstrip("/" + os.sep)) else "no such directory"
        raise PageError(f"{out}: {what}; a name ending in / is a folder to write the page in")
    path = default if out is None else Path(out)
    # A folder the person names takes the page inside it; the default path is never followed
    # into a folder (a link planted there must not send the page elsewhere: it is replaced).
    if out is not None and path.is_dir():
        path = path / default.name
    elif path.is_dir() and not path.is_symlink():
        raise PageError(f"{path}: a folder is in the page's place; pass OUT to write elsewhere")
    folder = path.parent
    if not folder.is_dir():
        raise PageError(f"{path}: no such directory {folder}")
    _refuse_a_source(path, sources)
    _refuse_what_is_not_a_page(path)
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as error:
        raise PageError(f"{path}: cannot write into {folder}: {error.strerror}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except OSError as error:
        Path(temporary).unlink(missing_ok=True)
        raise PageError(f"{path}: cannot write the page: {error.strerror or error}") from None
    return path


def _refuse_a_source(path: Path, sources: Iterable[Path]) -> None:
    """A page in the place of a file it is drawn from would destroy that file: refused."""
    entry = path.parent.resolve() / path.name  # the name itself, a link there not followed
    target = path.resolve()
    for source in sources:
        try:
            same = source.resolve() in (entry, target) or (
                path.exists() and source.exists() and os.path.samefile(path, source)
            )
        except OSError:
            continue
        if same:
            raise PageError(
                f"{path}: that is {source}, which this page is drawn from; choose another name "
                "for the page"
            )


def _refuse_what_is_not_a_page(path: Path) -> None:
    """Only a page this package wrote is replaced; a link there is replaced, never followed."""
    if path.is_symlink() or not os.path.lexists(path):
        return
    head = b""
    if path.is_file():  # never opened otherwise: a fifo would hold the open
        try:
            with path.open("rb") as stream:
                head = stream.read(_HEAD_BYTES)
        except OSError:
            pass
    if not (head.startswith(PAGE_START) and PAGE_MARKER in head):
        raise PageError(
            f"{path}: exists and is not a page orchestrator wrote; remove it or choose another name"
        )
