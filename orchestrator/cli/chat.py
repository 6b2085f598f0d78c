"""``chat``: talk to the agent turn by turn; the plan persists across turns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from orchestrator import report
from orchestrator.cli._click import CONTEXT_SETTINGS
from orchestrator.cli._common import (
    anthropic_model,
    new_session,
    options_from_flags,
    run_options,
    stopped_record,
)

if TYPE_CHECKING:
    from orchestrator.agent import Session


@click.command(context_settings=CONTEXT_SETTINGS)
@run_options
def chat(**kwargs: Any) -> int:
    """Talk to the agent turn by turn; the plan persists across turns.

    Enter sends; Alt-Enter or Esc Enter starts a new line; a paste is one message. Ctrl-C stops
    the turn; Ctrl-C at an empty prompt, Ctrl-D or /exit leaves.
    """
    from orchestrator.chat import ChatSession, run_chat
    from orchestrator.sessions import state_dir

    options = options_from_flags(**kwargs)
    # A turn may leave items open: the person speaks next, so the board does not hold it.
    session = new_session(options, anthropic_model(options), settle_plan=False, turns=True)
    stopped = stopped_record()

    def report_now() -> report.RunReport:
        return session.report_for(None, stopped.exit_code if stopped else report.EXIT_INTERRUPTED)

    return run_chat(
        ChatSession(
            run_turn=session.turn,
            board=session.board,
            model=lambda: session.model_name,
            set_model=lambda name: _switch(session, name),
            clear=session.clear,
            close=session.close,
            cost_line=lambda: report_now().cost_line(),
            farewell=lambda: report_now().closing_lines() if session.trace_path else [],
            stopped=stopped,
        ),
        history=state_dir() / "chat_history",
    )


def _switch(session: Session, name: str) -> str | None:
    """``/model NAME``: None when switched, else why not (the endpoint does not know NAME)."""
    from orchestrator.agent import SettingsError

    try:
        session.set_model(name)
    except SettingsError as error:
        return str(error)
    return None
