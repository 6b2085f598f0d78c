"""Benchmarks: the harness measured against floors taken in the same run.

``python -m orchestrator.bench`` (``make bench``) prints a table, each figure with its floor
beside it; ``--json`` prints the same figures as one JSON object; ``--quick`` shrinks every size
(the test suite uses it); ``--profile`` adds a pyinstrument profile of our loop's session on
stderr. The seeds' s03 loop, the old yardstick, is :mod:`orchestrator.bench.baseline`; it is now
an informational line. Benchmarks never fail: the exit status is 0 whatever the numbers. See
``docs/performance.md``.

This package imports nothing on import: its memory benchmark's child process
(:mod:`orchestrator.bench._replay_memory`) must not pay for the SDK the other benchmarks load.
"""
