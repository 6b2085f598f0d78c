"""``python -m orchestrator.bench``: run the benchmarks and print a table or one JSON object."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import click
from rich.console import Console

from orchestrator.bench._figures import QUICK, Sizes, measure_all
from orchestrator.bench._report import as_json, print_table


@click.command()
@click.option("--json", "as_json_flag", is_flag=True, help="Print one JSON object, no table.")
@click.option("--quick", is_flag=True, help="Shrink every size (a smoke run, for the tests).")
@click.option("--profile", is_flag=True, help="Also profile our 200-round session (stderr).")
def main(as_json_flag: bool, quick: bool, profile: bool) -> None:
    """Measure the harness against the seeds' loop; exit 0 whatever the numbers."""
    sizes = QUICK if quick else Sizes()
    with tempfile.TemporaryDirectory(prefix="orchestrator-bench-") as scratch:
        measured = measure_all(sizes, Path(scratch))
        if profile:
            from orchestrator.bench._profile import profile_session

            click.echo(profile_session(sizes, Path(scratch)), err=True)
    if as_json_flag:
        click.echo(json.dumps(as_json(measured)))
    else:
        console = Console()
        if not console.is_terminal:
            console = Console(width=160)  # a pipe or a file: do not wrap the table at 80
        print_table(measured, console, quick=quick)


if __name__ == "__main__":
    main(prog_name="python -m orchestrator.bench")
