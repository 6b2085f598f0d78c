"""``diagram``: the machines drawn from their live definitions, or one run's path through them."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.cli._click import CONTEXT_SETTINGS, InputError


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--machine",
    type=click.Choice(["item", "loop", "all"]),
    default="all",
    help="Which machine; all gives two documents (Markdown on stdout, or two files).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["mermaid", "dot"]),
    default="mermaid",
    help="Mermaid (renders on GitHub) or Graphviz dot.",
)
@click.option(
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help="A file (.mmd, .dot; .svg or .png rendered by Graphviz) or a folder for both machines.",
)
@click.option(
    "--trace",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Highlight the states and edges this run visited.",
)
@click.option(
    "--write-statecharts",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Regenerate the documentation folder (make statecharts).",
)
def diagram(
    machine: str, fmt: str, output: Path | None, trace: Path | None, write_statecharts: Path | None
) -> int:
    """Draw the machines from their live definitions, or one run's path through them."""
    from orchestrator.diagram import DiagramError, diagram_output
    from orchestrator.diagram import write_statecharts as write_all

    try:
        if write_statecharts is not None:
            for path in write_all(write_statecharts):
                click.echo(f"wrote {path}")
            return 0
        text, written = diagram_output(machine, fmt, trace=trace, output=output)  # type: ignore[arg-type]
    except DiagramError as error:
        raise InputError(str(error)) from None
    except OSError as error:
        raise InputError(f"--output {output}: {error.strerror}") from None
    for path in written:
        click.echo(f"wrote {path}")
    if text:
        click.echo(text, nl=not text.endswith("\n"))
    return 0
