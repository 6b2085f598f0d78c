"""The results directory: one JSON line per (task, arm, repeat), and a manifest of what it holds.

``results.jsonl`` is appended to by one writer (the driver) as runs finish, each line flushed and
synced, so a killed eval loses at most the runs that were still going. On the next start the
complete lines say what is done and only the rest is run; a line cut off by the kill is dropped.
``eval.json`` records the suite and model the directory belongs to, so results from a different
model or a changed suite are never mixed into it.
"""

from __future__ import annotations

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
        """Create the directory, or check it belongs to this eval; drop a cut-off last line."""
        self.out.mkdir(parents=True, exist_ok=True)
        existing = self.manifest()
        if existing is not None:
            for key in ("model", "suite_digest"):
                if existing.get(key) != manifest.get(key):
                    what = "model" if key == "model" else "suite (its tasks changed)"
                    raise StoreError(
                        f"{self.out} holds results for another {what}: "
                        f"{existing.get(key)!r}, not {manifest.get(key)!r}; use another --out"
                    )
            arms = list(existing.get("arms", []))
            arms += [arm for arm in manifest.get("arms", []) if arm not in arms]
            manifest = {**existing, "arms": arms}
        _write_json(self.manifest_path, manifest)
        self._drop_cut_tail()

    def manifest(self) -> JSONObject | None:
        try:
            data: Any = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise StoreError(f"{self.manifest_path}: cannot read it: {error}") from None
        if not isinstance(data, dict):
            raise StoreError(f"{self.manifest_path}: not an eval manifest")
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
