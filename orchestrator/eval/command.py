"""The ``orchestrator eval`` commands: run a suite under several arms, and report on the results.

``eval`` is a click group with two subcommands, ``run`` and ``report``; a first argument that
names neither is taken as ``run``'s, so ``orchestrator eval [SUITE] --arms ... --out DIR`` and
``orchestrator eval report DIR`` both work. Exit codes: 0 every planned run is recorded, 1 some
runs could not be judged (rerun the same command to retry them), 2 bad input, 130 interrupted.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs
import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from orchestrator.cli._click import CONTEXT_SETTINGS, FiniteFloatRange, FullHelpGroup, InputError
from orchestrator.config import ConfigError, load_config
from orchestrator.eval.arms import DEFAULT_ARMS, ArmError, parse_arms
from orchestrator.eval.driver import plan_runs, run_eval
from orchestrator.eval.report import print_report, summarise, write_plot
from orchestrator.eval.runner import Harness, Limits, ModelChoice, Pricing, RunSpec
from orchestrator.eval.scripted import SCRIPTED_MODELS
from orchestrator.eval.store import PLOT_FILE, ResultsStore, RunKey, StoreError
from orchestrator.eval.suite import Suite, SuiteError, bundled_suite_path, load_suite
from orchestrator.protocols import JSONObject
from orchestrator.tools.sandbox import SandboxPolicy, SandboxUnavailable, choose_sandbox
from orchestrator.trust import TrustError, TrustStore, trust_file

F = TypeVar("F", bound=Callable[..., Any])
#: Runs are planned up front, so a slipped digit must not plan (and hold) millions of them.
MAX_REPEAT = 10_000
#: Each job is a thread running an agent and its subprocesses; more is surely a typo.
MAX_JOBS = 256
#: Wide enough for the arms table when the output is not a terminal (a file, a pipe, a test).
_REPORT_WIDTH = 150


class _EvalGroup(FullHelpGroup):
    """Routes ``eval ARGS`` to ``eval run ARGS`` unless ARGS starts with a subcommand's name."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ctx.help_option_names):
            args = ["run", *args]
        return super().parse_args(ctx, args)


def _bound_option(name: str, default: float, text: str) -> Callable[[F], F]:
    """A per-run bound: a finite number above 0 (``nan`` or ``inf`` would switch it off)."""
    kind = FiniteFloatRange(min=0, min_open=True)
    metavar = "USD" if name == "--max-cost" else "SECONDS"
    return click.option(
        name,
        type=kind,
        default=default,
        show_default=True,
        help=text,
        metavar=metavar,
    )


@click.group(name="eval", cls=_EvalGroup, context_settings=CONTEXT_SETTINGS)
def eval_group() -> None:
    """Measure whether the board helps: run a suite under several arms and compare them.

    `orchestrator eval [SUITE] --arms board,no-board --repeat N --jobs J --out DIR [--scripted]`
    is `eval run` (see `orchestrator eval run --help`); `orchestrator eval report DIR [--json]`
    reports on a results directory.
    """


@eval_group.command(name="run")
@click.argument("suite", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--arms",
    default=None,
    metavar="ARMS",
    help="Comma-separated arms [the suite's, or board,no-board].",
)
@click.option(
    "--repeat",
    type=click.IntRange(1, MAX_REPEAT),
    default=3,
    show_default=True,
    metavar="N",
    help="Runs of each task under each arm.",
)
@click.option(
    "--jobs",
    type=click.IntRange(1, MAX_JOBS),
    default=1,
    show_default=True,
    metavar="N",
    help="Runs at once, each in its own work directory.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    metavar="DIRECTORY",
    help="Where the results go (results.jsonl, traces, the report); a rerun resumes it.",
)
@click.option("--scripted", is_flag=True, help="Use the bundled scripted models, not the API.")
@click.option(
    "--scripted-model",
    type=click.Choice(SCRIPTED_MODELS),
    default="forgetful",
    show_default=True,
    help="Which scripted model --scripted uses.",
)
@click.option("--model", default=None, metavar="NAME", help="Model name [ANTHROPIC_MODEL].")
@click.option(
    "--task", "tasks", multiple=True, metavar="NAME", help="Run only this task (repeatable)."
)
@click.option(
    "--max-rounds",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Rounds one run may take [each task's own].",
)
@_bound_option("--max-cost", 2.0, "US dollars one run may spend before it is failed.")
@_bound_option("--run-timeout", 1800.0, "Seconds one run may take before it is failed.")
@click.option(
    "--prices",
    default=None,
    metavar="IN,OUT,CACHE_READ,CACHE_WRITE",
    help="US dollars per million tokens [3,15,0.3,3.75].",
)
@click.option("--keep-workdirs", is_flag=True, help="Keep each run's work directory.")
def run_command(
    *,
    suite: Path | None,
    arms: str | None,
    repeat: int,
    jobs: int,
    out: Path,
    scripted: bool,
    scripted_model: str,
    model: str | None,
    tasks: tuple[str, ...],
    max_rounds: int | None,
    max_cost: float,
    run_timeout: float,
    prices: str | None,
    keep_workdirs: bool,
) -> int:
    """Run SUITE (a TOML file; the bundled suite without one) under each arm, --repeat times."""
    loaded = _load_suite(suite, tasks)
    try:
        chosen = parse_arms(arms or list(loaded.arms) or list(DEFAULT_ARMS))
        # A project file that moves the key or widens the sandbox needs a trusted folder.
        config = load_config(
            Path.cwd(), {"model": model}, trusted=TrustStore(trust_file()).trusts(Path.cwd())
        )
        if config.sandbox == "bwrap":
            choose_sandbox("bwrap", SandboxPolicy(Path.cwd()))
    except (ArmError, ConfigError, TrustError, SandboxUnavailable) as error:
        raise InputError(str(error)) from None
    choice = _model_choice(config.values, scripted, scripted_model, loaded)
    limits = Limits(
        max_rounds=max_rounds,
        max_cost=max_cost,
        run_timeout=run_timeout,
        max_tokens=config.max_tokens,
        pricing=_pricing(prices),
    )
    harness = Harness(
        reminder_threshold=config.reminder_threshold,
        plan_policy=config.plan_policy,
        plan_limit=config.plan_limit,
        sandbox=config.sandbox,
        deny_bash=config.deny_bash,
        max_processes=config.max_processes,
        max_memory=config.max_memory,
    )
    store = ResultsStore(out)
    manifest: JSONObject = {
        "suite": loaded.name,
        "suite_source": loaded.source,
        "suite_digest": loaded.digest,
        "model": choice.name,
        "scripted": choice.scripted,
        "arms": [arm.name for arm in chosen],
        "tasks": {task.name: task.digest for task in loaded.tasks},
        "settings": {**attrs.asdict(limits), **attrs.asdict(harness)},
    }
    try:
        held = store.manifest()
        store.open_for_runs(manifest)
    except StoreError as error:
        raise InputError(str(error)) from None
    # Held until the eval ends, so a second eval into DIR is refused, not run alongside.
    with contextlib.closing(store):
        specs = plan_runs(
            loaded,
            chosen,
            repeat,
            store,
            model=choice,
            limits=limits,
            harness=harness,
            keep_workdirs=keep_workdirs,
        )
        errors = Console(stderr=True)
        if choice.scripted:
            errors.print(f"[bold red][SCRIPTED models ({choice.name}): not a real model][/]")
        if held is not None:
            _say_what_is_resumed(errors, out, held, specs, store.done())
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("({task.fields[left]} left) elapsed"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=errors,
        ) as progress:
            bar = progress.add_task(
                f"eval {escape(loaded.name)}", total=len(specs), left=len(specs)
            )

            def advance(done: int, total: int, row: JSONObject | None) -> None:
                progress.update(bar, completed=done, total=total, left=total - done)

            outcome = run_eval(specs, store, jobs=jobs, on_progress=advance)
        _report(out, store, json_output=False)
        for reason in outcome.aborted:
            errors.print(
                f"orchestrator: not judged (will rerun on resume): {reason}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        if outcome.interrupted:
            errors.print("orchestrator: eval interrupted; run the same command again to resume")
            return 130
        if outcome.gave_up is not None:
            errors.print(
                f"orchestrator: eval stopped: {outcome.gave_up}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        return 1 if outcome.aborted else 0


def _say_what_is_resumed(
    errors: Console, out: Path, held: JSONObject, specs: list[RunSpec], done: set[RunKey]
) -> None:
    """One line on what an existing results directory holds and what this eval adds to it."""
    recorded = sum(spec.key in done for spec in specs)
    new_arms = list(
        dict.fromkeys(s.arm.name for s in specs if s.arm.name not in held.get("arms", []))
    )
    added = f"; adding arms {', '.join(new_arms)}" if new_arms else ""
    errors.print(
        f"orchestrator: resuming {out}: {recorded} of {len(specs)} runs are recorded and "
        f"skipped{added}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


@eval_group.command(name="report")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "json_output", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--html",
    "html_out",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[PAGE]",
    help="Write the report as one self-contained HTML page (the plot inlined) and print its "
    "path; PAGE - for stdout.  [default PAGE: report.html in OUT]",
)
def report_command(out: Path, json_output: bool, html_out: str | None) -> int:
    """Report on the results in OUT: success rates with intervals, tokens, cost, and a plot."""
    store = ResultsStore(out)
    if not store.results.is_file():
        raise InputError(f"{out}: no {store.results.name}; run `orchestrator eval --out {out}`")
    if html_out is not None:
        if json_output:
            raise InputError("give either --json or --html, not both")
        _report_html(out, store, html_out or None)
        return 0
    _report(out, store, json_output=json_output)
    return 0


def _report_html(out: Path, store: ResultsStore, page: str | None) -> None:
    from orchestrator.picture.eval_page import eval_document
    from orchestrator.picture.write import PageError, write_page

    try:
        rows = store.rows()
        manifest = store.manifest() or {}
    except StoreError as error:
        raise InputError(str(error)) from None
    summary = summarise(rows, manifest.get("arms", []))
    plot = out / PLOT_FILE
    try:
        if rows:
            write_plot(summary, plot)
        text = eval_document(
            summary,
            suite=str(manifest.get("suite", "?")),
            results=store.results,
            plot=plot if rows else None,
        )
        written = write_page(text, page, out / "report.html", sources=(store.results, plot))
    except PageError as error:
        raise InputError(str(error)) from None
    except OSError as error:
        raise InputError(f"cannot write {plot}: {error.strerror or error}") from None
    if written is not None:
        click.echo(str(written))


def _report(out: Path, store: ResultsStore, *, json_output: bool) -> None:
    try:
        rows = store.rows()
        manifest = store.manifest() or {}
    except StoreError as error:
        raise InputError(str(error)) from None
    summary = summarise(rows, manifest.get("arms", []))
    plot = out / PLOT_FILE
    if rows:
        try:
            write_plot(summary, plot)
        except OSError as error:
            raise InputError(f"cannot write {plot}: {error.strerror or error}") from None
    if json_output:
        click.echo(json.dumps({**summary, "plot": str(plot) if rows else None}, indent=2))
        return
    console = Console()
    if not console.is_terminal:
        console = Console(width=_REPORT_WIDTH)
    print_report(summary, console, title=f"suite: {manifest.get('suite', '?')} · ")
    if rows:
        console.print(f"plot: {plot}", highlight=False, markup=False)


def _load_suite(path: Path | None, tasks: tuple[str, ...]) -> Suite:
    try:
        suite = load_suite(path if path is not None else bundled_suite_path())
        return suite.select(tasks) if tasks else suite
    except SuiteError as error:
        raise InputError(str(error)) from None


def _model_choice(
    config: Mapping[str, Any], scripted: bool, kind: str, suite: Suite
) -> ModelChoice:
    if scripted:
        bare = next((task.name for task in suite.tasks if not task.steps), None)
        if bare is not None:
            raise InputError(
                f"{suite.source}: task {bare!r} has no [[tasks.steps]], which --scripted plays"
            )
        return ModelChoice(kind, f"scripted:{kind}")
    if not (config.get("api_key") or config.get("auth_token")):
        # The same credentials as `orchestrator run`, in the same words.
        raise InputError(
            "ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) is not set; export it "
            "(ANTHROPIC_BASE_URL points the client at any Messages-API endpoint), or pass "
            "--scripted to run offline with scripted models"
        )
    return ModelChoice(
        "api",
        str(config["model"]),
        base_url=config.get("base_url"),
        api_key=config.get("api_key"),
        auth_token=config.get("auth_token"),
        max_retries=int(config["max_retries"]),
        timeout=float(config["timeout"]),
    )


def _pricing(text: str | None) -> Pricing:
    if text is None:
        return Pricing()
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        values = []
    if len(values) != 4 or not all(math.isfinite(value) and value >= 0 for value in values):
        raise InputError(
            f"--prices must be four numbers IN,OUT,CACHE_READ,CACHE_WRITE (US dollars per "
            f"million tokens), got {text!r}"
        )
    return Pricing(*values)
