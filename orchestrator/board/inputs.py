"""What a shared board takes from anyone: agent names, item text, checks, leases, board names.

One rule per value, each a function that says what is wrong in one line (or ``None``), so the
store, the ``board`` CLI, the run's settings and the model's ``todo`` calls refuse the same
input with the same words. Nothing here touches a store.

Actors: an agent is any printable name (``alice``, ``TEAM/worker-1``); a *person* acting on
the board by hand (``board cancel``, ``edit``, ``release --force``, ``add`` without
``--agent``) is recorded as ``person:USER``. The ``person:`` prefix is reserved: no agent may
take it, because a person's actions (cancelling an item that carries a person's check) are
refused to agents. An agent named ``TEAM/NAME`` belongs to team ``TEAM``.
"""

from __future__ import annotations

import math
import re

#: The prefix that marks an actor as a person (``person:alice``); no agent may take it.
PERSON_PREFIX = "person:"
#: The longest agent name the board takes (a name is shown on every line of ``board show``).
MAX_NAME = 200
#: The longest item text (and check command) the board takes: one line a person can read,
#: the same cap for ``board add``/``edit``, the model's ``todo`` on a shared board and the store.
MAX_TEXT = 2000
#: The longest lease a claim may take, in seconds (24 h): a claim outlives its agent by at most
#: this, so a lease such as ``1e308`` (which would never expire in practice) is refused.
MAX_LEASE = 24 * 3600.0
#: A board's name in a URL (``?board=NAME``): it becomes part of SQL table names.
BOARD_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")


def person(user: str | None = None) -> str:
    """The actor a person's hand edits are logged as: ``person:`` and their login name."""
    if user is None:
        import getpass

        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no login name for this uid (a bare container)
            user = "unknown"
    return PERSON_PREFIX + (user if user and user.isprintable() else "unknown")


def is_person(actor: str | None) -> bool:
    """Whether ``actor`` is a person acting by hand (``person:…``) rather than an agent."""
    return actor is not None and actor.startswith(PERSON_PREFIX)


def team_of(actor: str | None) -> str | None:
    """The team an agent belongs to: what comes before the first ``/`` of its name, if any."""
    if actor is None or is_person(actor) or "/" not in actor:
        return None
    return actor.split("/", 1)[0] or None


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot be an actor's name on a board (a person's or an agent's), or None."""
    if not isinstance(name, str) or not name.strip():
        return "an agent's name is empty; give a name such as alice or TEAM/worker-1"
    if name != name.strip():
        return f"the agent's name {name!r} starts or ends with a space"
    if not name.isprintable():
        return f"the agent's name {name!r} holds a control character; use printable text"
    if len(name) > MAX_NAME:
        return f"the agent's name is {len(name)} characters long; at most {MAX_NAME}"
    return None


def agent_problem(name: object) -> str | None:
    """Why ``name`` cannot be an agent's name (the person's prefix is refused too), or None."""
    problem = name_problem(name)
    if problem is None and isinstance(name, str) and is_person(name):
        return (
            f"the agent's name {name!r} starts with {PERSON_PREFIX!r}, which marks a person "
            "acting by hand; choose another name"
        )
    return problem


def text_problem(text: object, what: str = "item text") -> str | None:
    """Why ``text`` cannot be an item's text (or a check's command), or None: one printable line."""
    if not isinstance(text, str) or not text.strip():
        return f"the {what} is empty; say what is to be done"
    if len(text) > MAX_TEXT:
        return f"the {what} is {len(text):,} characters long; at most {MAX_TEXT:,}"
    if "\n" in text or "\r" in text:
        return f"the {what} has a line break; an item is one line"
    if not text.isprintable():
        bad = next(char for char in text if not char.isprintable())
        return f"the {what} holds the control character {bad!r}; use printable text"
    return None


def one_line(text: str) -> str:
    """``text`` as one line: a line break an older store kept is shown as a visible escape."""
    if "\n" not in text and "\r" not in text:
        return text
    return text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\r")


#: The shortest lease: a heartbeat renews every third of it, and a database takes its time.
MIN_LEASE = 1.0
#: What a lease may be, in the words every refusal of one uses.
LEASE_RULE = (
    f"a finite number of seconds, at least {MIN_LEASE:g} and at most {MAX_LEASE:.0f} (24 h)"
)


def lease_problem(lease: object) -> str | None:
    """Why ``lease`` cannot be a claim's lease in seconds, or None: finite, 1 s to 24 h.

    Every front end that takes a lease (``board claim --lease``, the ``lease`` setting behind
    ``run``, ``team`` and ``work --lease``, the store itself) asks this one rule.
    """
    if isinstance(lease, bool) or not isinstance(lease, int | float):
        return f"a lease is a number of seconds, got {type(lease).__name__}"
    if not math.isfinite(lease) or lease < MIN_LEASE or lease > MAX_LEASE:
        return f"a lease is {LEASE_RULE}, got {lease:g}"
    return None


def board_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a board in a store (``?board=NAME``), or None."""
    if BOARD_NAME.fullmatch(name) is None:
        return (
            f"board={name!r}: a board's name is 1 to 40 lower-case letters, digits, '_' or '-', "
            "starting with a letter or digit"
        )
    return None
