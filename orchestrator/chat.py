"""``orchestrator chat``: the interactive prompt, on ``prompt_toolkit``.

Enter sends the message; Alt-Enter or Esc then Enter adds a line; a paste arrives whole
(bracketed paste), so a pasted block is one message. An empty line does nothing. Ctrl-C
during a turn stops the turn and comes back to the prompt; Ctrl-C at the prompt clears what
was typed, and at an empty prompt leaves, as Ctrl-D and ``/exit`` do. Every message goes to
the history file as it is sent, so no way of leaving loses it. Without a terminal on stdin,
each line read is one message.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import attrs
import click

from orchestrator.inert import inert
from orchestrator.loop import RunOutcome
from orchestrator.plan import TodoBoard
from orchestrator.signals import Stopped, StopRecord

PROMPT = "you> "
COMMANDS = {
    "/help": "this list",
    "/plan": "show the plan",
    "/cost": "tokens, cost and time so far",
    "/model": "the model in use; /model NAME switches from the next message on",
    "/clear": "forget the conversation and the plan (also /reset)",
    "/diagram": "the item machine as Mermaid",
    "/exit": "leave (also Ctrl-D, or Ctrl-C at an empty prompt)",
}
BANNER = (
    "orchestrator chat: Enter sends, Alt-Enter (or Esc Enter) adds a line; "
    "/help for commands, /exit to leave"
)


@attrs.frozen
class ChatSession:
    """What the prompt needs from the wired-up session (the CLI builds it)."""

    run_turn: Callable[[str], RunOutcome]
    board: TodoBoard
    model: Callable[[], str]
    #: Switches the model; says why not (an unknown name) or returns None.
    set_model: Callable[[str], str | None]
    clear: Callable[[], None]
    close: Callable[[], None]
    cost_line: Callable[[], str]
    #: The closing lines (totals, trace, resume command); empty when nothing was sent.
    farewell: Callable[[], list[str]] = list
    stopped: StopRecord | None = None


def run_chat(chat: ChatSession, *, history: Path) -> int:
    """Read messages until the person leaves; the exit code is 0, or a stop signal's."""
    click.echo(BANNER)
    read = _terminal_reader(history) if sys.stdin.isatty() else _line_reader()
    try:
        while True:
            text = read()
            if text is None:
                break
            if not text.strip():
                continue
            if text.strip().startswith("/"):
                if not _command(text.strip(), chat):
                    break
                continue
            chat.run_turn(text)
            if chat.stopped is not None and chat.stopped.received is not None:
                return chat.stopped.exit_code
    finally:
        chat.close()
        for line in chat.farewell():
            click.echo(line)
    if chat.stopped is not None and chat.stopped.received is not None:
        return chat.stopped.exit_code  # SIGTERM or SIGHUP while at the prompt
    return 0


def _command(line: str, chat: ChatSession) -> bool:
    """Run a slash command; False means leave."""
    name = line.split(maxsplit=1)[0]
    if name == "/exit":
        return False
    if name == "/help":
        width = max(len(command) for command in COMMANDS)
        for command, what in COMMANDS.items():
            click.echo(f"  {command:<{width}}  {what}")
    elif name == "/plan":
        click.echo(inert(chat.board.render()))
    elif name == "/cost":
        click.echo(chat.cost_line())
    elif name == "/model":
        wanted = line.split()[1:]
        if len(wanted) == 1:
            refused = chat.set_model(wanted[0])
            if refused is not None:
                click.echo(inert(f"model: not switched: {refused}; still {chat.model()}"))
            else:
                click.echo(f"model: {chat.model()} from the next message on")
        else:
            click.echo(f"model: {chat.model()} (/model NAME switches)")
    elif name in ("/clear", "/reset"):
        chat.clear()
        click.echo("conversation and plan cleared")
    elif name == "/diagram":
        from orchestrator.diagram import render_diagram

        click.echo(render_diagram("item", "mermaid"))
    else:
        click.echo(f"unknown command {name}; try /help")
    return True


def _line_reader() -> Callable[[], str | None]:
    def read() -> str | None:
        click.echo(PROMPT, nl=False)
        line = sys.stdin.readline()
        return line.rstrip("\n") if line else None

    return read


def _terminal_reader(history: Path) -> Callable[[], str | None]:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory, InMemoryHistory
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
    from prompt_toolkit.keys import Keys

    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _new_line(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add(Keys.BracketedPaste)
    def _paste(event: KeyPressEvent) -> None:
        # Bound here too, because the dumb-terminal prompt leaves pastes unhandled.
        event.current_buffer.insert_text(event.data.replace("\r\n", "\n").replace("\r", "\n"))

    try:
        history.parent.mkdir(parents=True, exist_ok=True)
        stored: FileHistory | InMemoryHistory = FileHistory(str(history))
    except OSError:
        stored = InMemoryHistory()
    session: PromptSession[str] = PromptSession(
        history=stored, key_bindings=bindings, enable_open_in_editor=False
    )

    def read() -> str | None:
        while True:
            try:
                return session.prompt(PROMPT)
            except EOFError:
                return None
            except KeyboardInterrupt as stop:
                # Ctrl-C clears a half-typed message; at an empty prompt it leaves.
                if isinstance(stop, Stopped) or not session.default_buffer.text:
                    return None
                click.echo()

    return read
