"""``orchestrator eval``: run a suite of tasks under several arms, repeatedly, and compare them.

The parts, one module each: :mod:`~orchestrator.eval.suite` (the TOML suite and its tasks),
:mod:`~orchestrator.eval.arms` (what differs between arms), :mod:`~orchestrator.eval.scripted`
(the offline stand-in models), :mod:`~orchestrator.eval.runner` (one run: workdir, loop, check),
:mod:`~orchestrator.eval.store` (one JSON line per run, resume by skipping what is done),
:mod:`~orchestrator.eval.driver` (the runs on a ``concurrent.futures`` executor, with progress),
:mod:`~orchestrator.eval.stats` (Wilson and Newcombe intervals), :mod:`~orchestrator.eval.report`
(table, JSON and plot) and :mod:`~orchestrator.eval.command` (the click commands).
"""
