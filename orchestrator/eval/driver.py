"""The driver: plans the runs of an eval, hands them to an executor, and records each result.

The worker pool is any ``concurrent.futures.Executor``, made by an :data:`ExecutorFactory` from
the job count; :func:`local_executor` (threads, as runs spend their time waiting on the API and on
subprocesses) is the one built here. Only the driver writes the results file, as each future
completes, so a worker (a thread, a process, a machine) only has to run :func:`execute_run` on a
:class:`RunSpec` and send its row back.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import attrs

from orchestrator.eval.arms import Arm
from orchestrator.eval.runner import Harness, Limits, ModelChoice, RunAborted, RunSpec, execute_run
from orchestrator.eval.store import ResultsStore
from orchestrator.eval.suite import Suite
from orchestrator.protocols import JSONObject
from orchestrator.signals import interrupt_mark, stop_signals_deferred

ExecutorFactory = Callable[[int], Executor]
#: Consecutive runs the API failed before the eval stops: the endpoint is down, or the key wrong.
MAX_CONSECUTIVE_ABORTS = 3
DEFAULT_LIMITS = Limits()
DEFAULT_HARNESS = Harness()


def local_executor(jobs: int) -> Executor:
    """``jobs`` threads on this machine."""
    return ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="orchestrator-eval")


@attrs.frozen
class EvalOutcome:
    """What a call of :func:`run_eval` did: runs recorded, skipped as done, and not judged."""

    recorded: int
    skipped: int
    aborted: tuple[str, ...] = ()
    interrupted: bool = False
    gave_up: str | None = None


def plan_runs(
    suite: Suite,
    arms: Sequence[Arm],
    repeat: int,
    store: ResultsStore,
    *,
    model: ModelChoice,
    limits: Limits = DEFAULT_LIMITS,
    harness: Harness = DEFAULT_HARNESS,
    keep_workdirs: bool = False,
) -> list[RunSpec]:
    """Every (task, arm, repeat), repeat by repeat, so a partial eval is balanced across arms."""
    return [
        RunSpec(
            task=task,
            arm=arm,
            repeat=number,
            model=model,
            trace=str(store.trace_path((task.name, arm.name, number))),
            limits=limits,
            harness=harness,
            keep_workdir=keep_workdirs,
        )
        for number in range(repeat)
        for task in suite.tasks
        for arm in arms
    ]


def run_eval(
    specs: Sequence[RunSpec],
    store: ResultsStore,
    *,
    jobs: int,
    executor_factory: ExecutorFactory = local_executor,
    on_progress: Callable[[int, int, JSONObject | None], None] = lambda _done, _total, _row: None,
) -> EvalOutcome:
    """Run what ``store`` does not hold yet; ``on_progress(done, total, row)`` after each one.

    Ctrl-C stops it: runs not started are cancelled, running ones stop at their next model call,
    and neither is recorded, so the same command resumes the eval.
    """
    with _interpreter_first_on_path():
        return _drive(specs, store, jobs, executor_factory, on_progress)


def _drive(
    specs: Sequence[RunSpec],
    store: ResultsStore,
    jobs: int,
    executor_factory: ExecutorFactory,
    on_progress: Callable[[int, int, JSONObject | None], None],
) -> EvalOutcome:
    done = store.done()
    todo = [spec for spec in specs if spec.key not in done]
    total, finished = len(specs), len(specs) - len(todo)
    on_progress(finished, total, None)
    recorded, aborted, streak = 0, [], 0
    stop = threading.Event()
    executor = executor_factory(jobs)
    # Threads share this process, so they can be told to stop; other executors cancel instead.
    shares_memory = isinstance(executor, ThreadPoolExecutor)
    pending: set[Future[JSONObject]] = set()
    gave_up: str | None = None
    # Each future lands here as it finishes; a stop signal puts None, to wake the wait. The
    # main thread never takes a future's lock while a signal could interrupt it (see
    # stop_signals_deferred): Ctrl-C inside concurrent.futures.wait could leave one held, and a
    # worker finishing that run then blocked the shutdown below for ever.
    finished_runs: queue.SimpleQueue[Future[JSONObject] | None] = queue.SimpleQueue()
    mark = interrupt_mark()
    with stop_signals_deferred(lambda: finished_runs.put(None)):
        try:
            for spec in todo:
                if interrupt_mark() != mark:
                    break
                if shares_memory:
                    future = executor.submit(execute_run, spec, stop)
                else:
                    future = executor.submit(execute_run, spec)
                pending.add(future)
                future.add_done_callback(finished_runs.put)
            while pending and interrupt_mark() == mark:
                run = finished_runs.get()
                if run is None:
                    continue  # woken by a stop signal
                pending.discard(run)
                error = run.exception()
                if isinstance(error, RunAborted):
                    aborted.append(str(error))
                    streak += 1
                elif error is not None:
                    raise error
                else:
                    row = run.result()
                    store.append(row)
                    recorded, finished, streak = recorded + 1, finished + 1, 0
                    on_progress(finished, total, row)
                if streak >= MAX_CONSECUTIVE_ABORTS and pending:
                    gave_up = f"{streak} runs in a row could not be judged; last: {aborted[-1]}"
                    _stop(executor, pending, stop)
                    pending = set()
            if interrupt_mark() != mark:
                _stop(executor, pending, stop)
                return EvalOutcome(recorded, len(done), tuple(aborted), interrupted=True)
        finally:
            executor.shutdown(wait=True, cancel_futures=True)
    return EvalOutcome(recorded, len(done), tuple(aborted), gave_up=gave_up)


def _stop(executor: Executor, pending: set[Future[JSONObject]], stop: threading.Event) -> None:
    stop.set()
    for future in pending:
        future.cancel()
    executor.shutdown(wait=True, cancel_futures=True)


@contextmanager
def _interpreter_first_on_path() -> Iterator[None]:
    """While the eval runs, ``python`` in an agent's command or a check is this interpreter.

    The agent's ``bash`` and the checks inherit this process's environment; putting the running
    interpreter first makes every run see the same Python, whatever shims the user's PATH holds.
    """
    before = os.environ.get("PATH")
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), before or ""])
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = before
