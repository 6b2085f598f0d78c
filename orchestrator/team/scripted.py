"""The SCRIPTED team: a lead that writes a plan, and a worker model that does one item.

No model and no key. :class:`ScriptedLead` writes the same plan every time (four notes, and
an index blocked by them). :class:`ScriptedItem` is what ``orchestrator work --scripted`` runs
for each item it claims: it writes the file the item's text names (``Write notes/x.md about
…`` → ``notes/x.md``; an item that names none gets ``notes/item-ID.md``) with the
``write_file`` tool, marks the item completed with the ``todo`` tool, and ends its turn. Both
go through the real loop, tools, board and trace, so a person can try ``team`` and ``work`` on
any board without a key.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.protocols import JSONObject, ModelTurn

#: The demo repository: what the workers' notes are about.
FILES = {
    "README.md": "# Greeter\n\nA tiny library the team documents, one note per function.\n",
    "greeter.py": (
        'def hello(name: str) -> str:\n    return f"Hello, {name}!"\n\n\n'
        'def goodbye(name: str) -> str:\n    return f"Goodbye, {name}!"\n'
    ),
}
#: The lead's plan: (id, text, blocked_by).
PLAN: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("1", "Write notes/hello.md about hello()", ()),
    ("2", "Write notes/goodbye.md about goodbye()", ()),
    ("3", "Write notes/usage.md with an example", ()),
    ("4", "Write notes/testing.md on how to test greeter.py", ()),
    ("5", "Write notes/index.md linking the other notes", ("1", "2", "3", "4")),
)
MODEL_NAME = "scripted-team"
#: A path an item's text names: a word with a slash or a file extension, no spaces.
_NAMED_PATH = re.compile(
    r"(?<![\w./-])((?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z0-9]+|(?:[\w.-]+/)+[\w.-]+)"
)


def _turn(content: list[JSONObject], messages: int) -> ModelTurn:
    stop = "tool_use" if any(block["type"] == "tool_use" for block in content) else "end_turn"
    # Plausible counts, so the closing lines show tokens (the price is unknown: no cost).
    usage = {"input_tokens": 300 + 120 * messages, "output_tokens": 40}
    return ModelTurn(tuple(content), stop, usage, MODEL_NAME)


def note_path(text: str, item_id: str) -> str:
    """The file an item asks for: the first relative path its text names."""
    for found in _NAMED_PATH.finditer(text):
        path = found.group(1).rstrip(".")
        if not path.startswith(("/", "..")) and ".." not in Path(path).parts:
            return path
    return f"notes/item-{item_id}.md"


class ScriptedLead:
    """Writes a plan on the board in one ``todo`` call, then ends its turn."""

    name = MODEL_NAME

    def __init__(self, plan: Sequence[tuple[str, str, tuple[str, ...]]] = PLAN) -> None:
        self._plan = tuple(plan)

    def respond(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        messages = list(request.get("messages", ()))
        if len(messages) == 1:
            items = [
                {"id": item_id, "text": text, "status": "pending", "blocked_by": list(blockers)}
                for item_id, text, blockers in self._plan
            ]
            text = f"The plan: {len(items)} items; an item waits for those it builds on."
            on_text(text)
            call = {"type": "tool_use", "id": "toolu_lead_1", "name": "todo"}
            return _turn([{"type": "text", "text": text}, {**call, "input": {"items": items}}], 1)
        text = "The plan is on the board for the workers."
        on_text(text)
        return _turn([{"type": "text", "text": text}], len(messages))


class ScriptedItem:
    """Does one claimed item: writes the file its text names, completes it, ends its turn."""

    name = MODEL_NAME

    def __init__(self, agent: str, item_id: str, text: str, *, pace: float = 0.0) -> None:
        self.agent, self.item_id, self.text = agent, item_id, text
        self.path = note_path(text, item_id)
        # Seconds before each turn: to watch a worker, or to stop one in the middle of an item.
        self._pace = pace
        self._step = 0

    def respond(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        if self._pace:
            time.sleep(self._pace)
        messages = list(request.get("messages", ()))
        self._step += 1
        refused = _last_result_refused(messages)
        if self._step == 1:
            name = Path(self.path).name
            body = f"# {name}\n\nWritten by {self.agent} for item #{self.item_id}: {self.text}\n"
            arguments: JSONObject = {"path": self.path, "content": body}
            return self._call("write_file", arguments, len(messages))
        if self._step == 2 and not refused:
            update = {"merge": True, "items": [{"id": self.item_id, "status": "completed"}]}
            return self._call("todo", update, len(messages))
        said = (
            f"Item #{self.item_id} was refused; the harness gives it back."
            if refused
            else f"Item #{self.item_id} is done: {self.path}."
        )
        on_text(said)
        return _turn([{"type": "text", "text": said}], len(messages))

    def _call(self, tool: str, arguments: JSONObject, messages: int) -> ModelTurn:
        block = {"type": "tool_use", "id": f"toolu_{self.item_id}_{self._step}", "name": tool}
        return _turn([{**block, "input": arguments}], messages)


def _last_result_refused(messages: list[Any]) -> bool:
    last = messages[-1] if messages else {}
    content = last.get("content") if isinstance(last, Mapping) else None
    if not isinstance(content, list):
        return False
    return any(b.get("type") == "tool_result" and b.get("is_error") for b in content)


def prepare_scripted_repository(workdir: Path, files: Mapping[str, str] = FILES) -> None:
    """A small repository for the offline team demo, in a new or empty folder.

    It is marked as the demo's own (:func:`made_by_demo`), so the demo may run there again.
    """
    from orchestrator.harness_git import run_git
    from orchestrator.team.integration import TeamError

    if workdir.exists() and any(workdir.iterdir()):
        raise TeamError(
            f"{workdir}: not empty; --scripted sets up its own small repository in a new or "
            "empty folder (pass another --workdir)"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (workdir / name).write_text(text, encoding="utf-8")
    run_git(workdir, "init", "-q", "-b", "main")
    run_git(workdir, "add", "-A")
    run_git(workdir, "commit", "-q", "-m", "The team demo's starting point")
    start = run_git(workdir, "rev-parse", "HEAD").stdout.strip()
    run_git(workdir, "config", "--local", DEMO_KEY, start)


#: The mark of a repository the demo made: its own git config, naming its first commit.
#: Not a file in the tree, which a model's work (or a merge) could carry into a user's
#: repository; git config is not versioned, is not cloned, and is a protected path.
DEMO_KEY = "orchestrator.teamdemo"


def made_by_demo(workdir: Path) -> bool:
    """Whether ``workdir`` is the top of a repository :func:`prepare_scripted_repository` made.

    Its own git dir (``.git`` a folder, not a worktree's pointer) holds :data:`DEMO_KEY`,
    naming the root commit of its ``HEAD``.
    """
    from orchestrator.harness_git import GitError, run_git

    if not (workdir / ".git").is_dir():
        return False
    try:
        marked = run_git(workdir, "config", "--local", "--get", DEMO_KEY, check=False)
        roots = run_git(workdir, "rev-list", "--max-parents=0", "HEAD", check=False)
    except GitError:
        return False
    start = marked.stdout.strip()
    return marked.returncode == 0 and roots.returncode == 0 and start in roots.stdout.split()
