"""The results directory: one JSON line per (task, arm, repeat), and a manifest of what it holds.

``results.jsonl`` is appended to by one writer (the driver) as runs finish, each line flushed and
synced, so a killed eval loses at most the runs that were still going. On the next start the
complete lines say what is done and only the rest is run; a line cut off by the kill is dropped.
``eval.json`` records the suite and model the directory belongs to, so results from a different
model or a changed suite are never mixed into it.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from orchestrator.protocols import JSONObject

RESULTS_FILE = "results.jsonl"
MANIFEST_FILE = "eval.json"
TRACES_DIR = "traces"
PLOT_FILE = "report.png"

RunKey = tuple[str, str, int]


class StoreError(Exception):
    """A results directory that cannot be used as asked; ``str()`` is one line."""


def row_key(row: JSONObject) -> RunKey:
    return (str(row["task"]), str(row["arm"]), int(row["repeat"]))


class ResultsStore:
    """Reads and appends the rows of one results directory."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.results = out / RESULTS_FILE
        self.manifest_path = out / MANIFEST_FILE
        self._lock = threading.Lock()
        self._folder_lock: int | None = None

    def rows(self) -> list[JSONObject]:
        """The complete rows, first of each key only, in the order they were written."""
        try:
            data = self.results.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as error:
            raise StoreError(f"{self.results}: cannot read it: {error.strerror}") from None
        rows: list[JSONObject] = []
        seen: set[RunKey] = set()
        for number, line in enumerate(data.split(b"\n")[:-1], start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                key = row_key(row)
                if not _well_typed(row):
                    raise ValueError(row)
            except (ValueError, KeyError, TypeError):
                raise StoreError(
                    f"{self.results}: line {number} is not a result row; "
                    "was the file edited by hand?"
                ) from None
            if key not in seen:
                seen.add(key)
                rows.append(row)
        return rows

    def done(self) -> set[RunKey]:
        return {row_key(row) for row in self.rows()}

    def open_for_runs(self, manifest: JSONObject) -> None:
        """Create the directory, or check it belongs to this eval; drop a cut-off last line.

        A directory takes more arms, more repeats and more tasks than it holds, but never a
        different model, a task whose definition changed, or different run settings: rows
        made under those would be compared as if they were alike.
        """
        try:
            self._open(manifest)
        except StoreError:
            self.close()
            raise

    def _open(self, manifest: JSONObject) -> None:
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            self._hold_lock()
            existing = self.manifest()
            if existing is not None:
                manifest = _merged(self.out, existing, manifest)
            elif any(self.out.iterdir()):
                # An --out of `.` or a project folder would be littered with results and traces.
                raise StoreError(
                    f"{self.out} is not empty and holds no {MANIFEST_FILE}; "
                    "give --out a new or empty folder"
                )
            _write_json(self.manifest_path, manifest)
            self._drop_cut_tail()
        except OSError as error:
            where = error.filename or self.out
            raise StoreError(f"{where}: cannot use it for results: {error.strerror}") from None
        self.rows()  # a line that is not a row is named now, before any run is spent

    def _hold_lock(self) -> None:
        """Lock the directory for as long as this store lives: one eval writes it at a time.

        Two evals in one directory would each run what the other is running; the lock is on
        the folder itself, so it adds no file, and the system drops it when the process ends.
        """
        if self._folder_lock is not None:
            return
        descriptor = os.open(self.out, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise StoreError(
                f"{self.out}: another orchestrator eval is writing to it; "
                "wait for it to finish, or use another --out"
            ) from None
        self._folder_lock = descriptor

    def close(self) -> None:
        """Let another eval write the directory."""
        lock, self._folder_lock = self._folder_lock, None
        if lock is not None:
            os.close(lock)

    def manifest(self) -> JSONObject | None:
        try:
            data: Any = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, NotADirectoryError):
            return None  # no eval here yet (or no folder at all)
        except OSError as error:
            raise StoreError(f"{self.manifest_path}: cannot read it: {error.strerror}") from None
        except ValueError as error:
            raise StoreError(f"{self.manifest_path}: cannot read it: {error}") from None
        arms = data.get("arms", []) if isinstance(data, dict) else None
        if (
            not isinstance(data, dict)
            or not isinstance(arms, list)
            or not all(isinstance(arm, str) for arm in arms)
            or not isinstance(data.get("tasks", {}), dict)
            or not isinstance(data.get("settings", {}), dict)
        ):
            raise StoreError(f"{self.manifest_path}: not an eval manifest; was it edited by hand?")
        return data

    def append(self, row: JSONObject) -> None:
        line = json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._lock, self.results.open("a", encoding="utf-8") as stream:
            stream.write(line)
            stream.flush()
            os.fsync(stream.fileno())

    def trace_path(self, key: RunKey) -> Path:
        task, arm, repeat = key
        return self.out / TRACES_DIR / task / _safe(arm) / f"{repeat}.jsonl"

    def _drop_cut_tail(self) -> None:
        try:
            data = self.results.read_bytes()
        except FileNotFoundError:
            return
        if data and not data.endswith(b"\n"):
            with self.results.open("r+b") as stream:
                stream.truncate(data.rfind(b"\n") + 1)


def _merged(out: Path, existing: JSONObject, manifest: JSONObject) -> JSONObject:
    """``existing`` grown by ``manifest``'s arms and tasks; :class:`StoreError` if they clash."""
    if existing.get("model") != manifest.get("model"):
        raise StoreError(
            f"{out} holds results for another model: {existing.get('model')!r}, "
            f"not {manifest.get('model')!r}; use another --out"
        )
    before, now = existing.get("settings"), manifest.get("settings")
    if isinstance(before, dict) and isinstance(now, dict) and before != now:
        differ = [key for key in sorted({*before, *now}) if before.get(key) != now.get(key)]
        shown = ", ".join(f"{key} {before.get(key)!r}, not {now.get(key)!r}" for key in differ)
        raise StoreError(
            f"{out} holds results run with other settings ({shown}); use another --out"
        )
    old_tasks, new_tasks = existing.get("tasks"), manifest.get("tasks")
    if isinstance(old_tasks, dict) and isinstance(new_tasks, dict):
        changed = [
            name for name in new_tasks if old_tasks.get(name, new_tasks[name]) != new_tasks[name]
        ]
        if changed:
            raise StoreError(
                f"{out} holds results for task {changed[0]!r} as it was before it changed; "
                "use another --out"
            )
        tasks: object = {**old_tasks, **new_tasks}
    elif existing.get("suite_digest") != manifest.get("suite_digest"):
        raise StoreError(
            f"{out} holds results for another suite (its tasks changed): "
            f"{existing.get('suite_digest')!r}, not {manifest.get('suite_digest')!r}; "
            "use another --out"
        )
    else:
        tasks = new_tasks
    arms = list(existing.get("arms", []))
    arms += [arm for arm in manifest.get("arms", []) if arm not in arms]
    merged = {**existing, **manifest, "arms": arms}
    if tasks is not None:
        merged["tasks"] = tasks
    return merged


#: Fields the report adds up; a row holding anything but a number in one is not a result row.
NUMBER_FIELDS = (
    "rounds",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "repeated_calls",
    "rejected_updates",
    "reminders",
    "blocked_calls",
    "cost_usd",
    "duration_s",
)


def _well_typed(row: JSONObject) -> bool:
    if not isinstance(row["task"], str) or not isinstance(row["arm"], str):
        return False
    if isinstance(row["repeat"], bool) or not isinstance(row["repeat"], int):
        return False
    numbers = [row.get(field, 0) for field in NUMBER_FIELDS]
    return isinstance(row.get("success", False), bool) and all(
        isinstance(value, int | float) and not isinstance(value, bool) for value in numbers
    )


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def _write_json(path: Path, document: JSONObject) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def arms_in(rows: Iterable[JSONObject], preferred: Iterable[str] = ()) -> list[str]:
    """The arms of ``rows``: those in ``preferred`` first, in its order, then the rest."""
    present = {str(row["arm"]) for row in rows}
    ordered = [arm for arm in preferred if arm in present]
    for row in rows:
        if row["arm"] not in ordered:
            ordered.append(str(row["arm"]))
    return ordered
