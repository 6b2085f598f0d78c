"""The board file (``--board FILE``): the plan as versioned JSON, kept next to a run.

A run with a board file loads the file when it starts and rewrites it after every accepted
update, so a person can read the plan and a later run, or a second terminal, can pick it up
without a trace. A write goes to a temporary file in the same directory and is renamed over the
old one, so a reader never sees half a board. A file that another version wrote, or that is
corrupt, is refused with one line saying so: it is never silently replaced by an empty board.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.plan import (
    EdgePolicy,
    PlanBoard,
    PlanError,
    PlanItem,
    Priority,
    Status,
    items_from_dicts,
)
from orchestrator.protocols import JSONObject, PlanRecord

#: What the file says it is; a JSON file without it is not ours.
FORMAT = "orchestrator-board"
#: The file format this version reads and writes; any other is refused.
VERSION = 1


class BoardFileError(Exception):
    """A board file that cannot be read, trusted or written; ``str()`` is one line."""


def open_board(
    path: Path,
    *,
    limit: int,
    policy: EdgePolicy,
    on_write_error: Callable[[str], None],
) -> PlanBoard:
    """A board loaded from ``path`` (empty when there is no file yet) that keeps the file.

    The file has one live writer: a second run on it is refused (:func:`lock_board`) rather
    than left to overwrite the first one's updates.
    """
    lock_board(path)
    items = load_items(path)
    try:
        board = PlanBoard(limit=limit, policy=policy, initial=items)
    except PlanError as error:
        raise BoardFileError(f"{path}: the board file breaks the board's rules: {error}") from None
    # Written once now, so a path that cannot be written fails at the start, not mid-run.
    save_items(path, [item.as_dict() for item in board.items])
    keep_file(board, path, on_write_error)
    return board


#: The board files this process holds the lock of: path → the lock file's descriptor.
_HELD: dict[Path, int] = {}


def lock_board(path: Path) -> None:
    """Take the board file's lock for as long as this process runs (or :func:`release_board`).

    A JSON board is rewritten whole after every update, so two live writers would lose each
    other's changes; the second is refused in one line naming the first one's pid. The lock
    file lives in the per-user state directory, named by the board's path, so the board's
    folder holds nothing but the board.
    """
    import hashlib

    from orchestrator.sessions import state_dir

    key = path.resolve()
    if key in _HELD:
        return
    locks = state_dir() / "board-locks"
    lock = locks / (hashlib.sha256(os.fsencode(key)).hexdigest()[:32] + ".lock")
    try:
        locks.mkdir(parents=True, exist_ok=True)
        handle = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as error:
        raise BoardFileError(f"{lock}: cannot open the board's lock: {error.strerror}") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(handle, 32).decode("ascii", "replace").strip() or "unknown"
        os.close(handle)
        raise BoardFileError(
            f"{path}: another run (pid {holder}) is writing this board; a JSON board has one "
            "writer at a time: wait for it, or share a store (--board sqlite:///PATH)"
        ) from None
    os.ftruncate(handle, 0)
    os.write(handle, f"{os.getpid()}\n".encode())
    _HELD[key] = handle


def release_board(path: Path) -> None:
    """Give the board file's lock back (the run that held it is over)."""
    handle = _HELD.pop(path.resolve(), None)
    if handle is not None:
        os.close(handle)


def keep_file(board: PlanBoard, path: Path, on_write_error: Callable[[str], None]) -> None:
    """Rewrite ``path`` after every accepted update of ``board`` (a ``/reset`` too)."""

    def write(record: PlanRecord) -> None:
        if record.event != "plan.updated":
            return
        try:
            save_items(path, record.fields()["items"])
        except BoardFileError as error:
            # The update is already on the board; failing the model's call would be a lie.
            on_write_error(str(error))

    board.subscribe(write)


def save_items(path: Path, items: Sequence[JSONObject]) -> None:
    """Write the board atomically: a temporary file in the same directory, then a rename."""
    document = {"format": FORMAT, "version": VERSION, "items": list(items)}
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    directory = path.parent if str(path.parent) else Path(".")
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as error:
        raise BoardFileError(f"{path}: cannot write the board file: {error.strerror}") from None


def load_items(path: Path) -> tuple[PlanItem, ...]:
    """The items a board file holds; none when the file does not exist yet."""
    if not path.exists():
        return ()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise BoardFileError(f"{path}: cannot read the board file: {reason}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise BoardFileError(
            f"{path}: corrupt board file (not JSON: {error.msg} at line {error.lineno}); "
            "repair it or pass another --board"
        ) from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise BoardFileError(
            f'{path}: not an orchestrator board file (no "format": "{FORMAT}"); '
            "pass another --board"
        )
    version = document.get("version")
    if version != VERSION:
        raise BoardFileError(
            f"{path}: board file version {json.dumps(version)} was written by another version "
            f"of orchestrator; this one reads version {VERSION}"
        )
    raw = document.get("items")
    if not isinstance(raw, list):
        raise BoardFileError(f"{path}: corrupt board file: 'items' is not a list")
    for number, item in enumerate(raw, start=1):
        problem = _item_problem(item)
        if problem:
            raise BoardFileError(f"{path}: corrupt board file: item {number} {problem}")
    return items_from_dicts(raw)


_TEXT_FIELDS = ("id", "text", "status")


def _item_problem(item: Any) -> str:
    if not isinstance(item, Mapping):
        return "is not an object"
    for field in _TEXT_FIELDS:
        if not isinstance(item.get(field), str) or not item[field]:
            return f"has no {field}"
    if item["status"] not in set(Status):
        return f"has the unknown status {item['status']!r}"
    if not isinstance(item.get("active_form", ""), str):
        return "has an active_form that is not text"
    if item.get("priority") is not None and item["priority"] not in set(Priority):
        return f"has the unknown priority {item['priority']!r}"
    blockers = item.get("blocked_by", [])
    if not isinstance(blockers, list) or not all(isinstance(b, str) for b in blockers):
        return "has a blocked_by that is not a list of ids"
    return ""
