"""orchestrator: an agent harness that keeps a coding agent on course through multi-step work.

The model keeps its plan on a todo board (:mod:`orchestrator.plan`) whose rules the harness
enforces, and a loop machine (:mod:`orchestrator.loop`) audits every round for a stale plan.
"""

__version__ = "0.1.0"
