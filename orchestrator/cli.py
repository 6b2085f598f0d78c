"""The command-line interface: the one place that wires concrete classes together."""

import click


@click.group()
def main() -> None:
    """Keep a coding agent on course with a guarded todo board and an auditing loop."""
