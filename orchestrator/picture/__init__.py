"""A run as a page: one self-contained HTML file per trace, per team board, per eval report.

``orchestrator show TRACE --html`` and ``board show URL --html`` write it. The parts, one
module each: :mod:`~orchestrator.picture.model` reads a trace into the page's data (header,
rounds, plan lanes, markers, tool calls, edge counts) with the reader ``show`` and ``replay``
use; :mod:`~orchestrator.picture.team` reads a shared board's log into lanes per agent and
item; :mod:`~orchestrator.picture.machines` draws the statecharts with a run's counts as
sanitised inline SVG; :mod:`~orchestrator.picture.html` puts data, styles and script into one
document under a strict Content-Security-Policy; :mod:`~orchestrator.picture.write` decides
where a page goes and replaces it whole; :mod:`~orchestrator.picture.eval` does the same for
an eval's report. The styles and the script are package files in ``assets/``.
"""
