"""An eval's report as a page: arms with their intervals, differences, tasks, the plot inlined.

The numbers are :func:`orchestrator.eval.report.summarise`'s document, the same one
``eval report --json`` prints, drawn by the page's script as tables; the plot is the PNG
``eval report`` writes, inlined as a ``data:`` image (the one kind of image the page's policy
allows), so the page needs nothing beside it.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from orchestrator.picture.html import document
from orchestrator.picture.write import file_uri
from orchestrator.protocols import JSONObject


def eval_document(summary: JSONObject, *, suite: str, results: Path, plot: Path | None) -> str:
    """The report's page; ``plot`` is the PNG to inline (None: the report has no runs yet)."""
    data: dict[str, Any] = {
        "kind": "eval",
        "summary": summary,
        "suite": suite,
        "results": str(results),
        "results_uri": file_uri(results),
        "plot": None,
    }
    if plot is not None:
        data["plot"] = "data:image/png;base64," + base64.b64encode(plot.read_bytes()).decode()
    scripted = " · SCRIPTED" if summary.get("scripted") else ""
    return document(f"orchestrator · eval {suite}{scripted}", data)
