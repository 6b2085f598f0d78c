"""Where a page goes, and writing it whole: a page is derived, so writing it again replaces it.

A run's page goes beside its trace as ``RUN_ID.html`` unless told otherwise; ``-`` sends it to
stdout. The file is written under a temporary name in the same folder and renamed over the old
one, so a reader never sees half a page and an interrupted write leaves the old page as it was.
The page holds what the trace holds, so it is kept as private as the temporary file is made
(readable by its owner only).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

STDOUT = "-"


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


def write_page(text: str, out: str | None, default: Path) -> Path | None:
    """Write ``text`` to ``out`` (a file or folder; ``-``: stdout) or ``default``.

    Returns the file written, None for stdout; :class:`PageError` when it cannot be written.
    """
    if out == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return None
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
