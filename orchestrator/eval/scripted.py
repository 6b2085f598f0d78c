"""Offline stand-ins for a model: a diligent one and a forgetful one, driven by a task's steps.

They are not language models. Each plays the task's ``[[tasks.steps]]`` through the real tools
and the real loop, reacting to what the harness sends (is there a ``todo`` tool? a reminder? was
the last plan update rejected?), so ``orchestrator eval --scripted`` exercises every part of the
pipeline without a key. Whatever they score says nothing about a real model.

- **diligent**: does every step in order; with a board it writes the plan first and moves it
  along with each step (one ``merge`` update per round), so it is never reminded.
- **forgetful**: now and then skips a step or repeats its last call. With a board it writes a
  plan and then forgets to update it; a reminder (which shows the plan) makes it re-read the
  plan and go back to the first step it has not done, and before finishing it looks at the plan
  once and notices a skipped step half of the time. Its catch-up update marks several items at
  once, which the strict plan policy rejects (it then walks the items one edge at a time), and
  now and then it sends two items in progress and is rejected.

Randomness comes from the run's seed, one stream for skipping and repeating (the same in every
arm, so arms differ only by what the board adds) and one for the rest.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Mapping
from typing import Any, Final

from orchestrator.eval.suite import Step, Task
from orchestrator.protocols import JSONObject, Model, ModelTurn
from orchestrator.script import REMINDER_MARKER, ScriptedTurn, last_user_message_parts

SCRIPTED_MODELS: Final = ("forgetful", "diligent")
#: The chances that drive the forgetful model, per step it is about to do.
SKIP_CHANCE: Final = 0.2
REPEAT_CHANCE: Final = 0.15
BAD_UPDATE_CHANCE: Final = 0.25
NOTICE_AT_END_CHANCE: Final = 0.5

_PENDING, _IN_PROGRESS, _COMPLETED = "pending", "in_progress", "completed"


def scripted_model(kind: str, task: Task, seed: int) -> Model:
    """The scripted model named ``kind`` for one run of ``task``."""
    if not task.steps:
        raise ValueError(f"task {task.name!r} has no [[tasks.steps]]; scripted models need them")
    if kind == "forgetful":
        return ForgetfulModel(task.steps, seed)
    if kind == "diligent":
        return DiligentModel(task.steps)
    raise ValueError(f"unknown scripted model {kind!r}; choose {' or '.join(SCRIPTED_MODELS)}")


class _RequestView:
    """What a scripted model reads from a request: the tools offered and the last user message."""

    def __init__(self, request: Mapping[str, Any]) -> None:
        tools = request.get("tools") or []
        self.has_board = any(isinstance(t, Mapping) and t.get("name") == "todo" for t in tools)
        results, trailing, _leading = last_user_message_parts(request)
        self.errors = {str(r.get("tool_use_id")) for r in results if r.get("is_error")}
        self.reminded = any(REMINDER_MARKER in text for text in trailing)


class _Player:
    """What both scripted models share: turn numbering, tool ids and the usage estimate."""

    kind = ""

    def __init__(self, steps: tuple[Step, ...]) -> None:
        self.steps = steps
        self._turns = 0
        self._previous: Mapping[str, Any] | None = None

    @property
    def name(self) -> str:
        return f"scripted:{self.kind}"

    def respond(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        self._turns += 1
        blocks = self._blocks(_RequestView(request))
        tool_uses = [block for block in blocks if block["type"] == "tool_use"]
        for index, block in enumerate(tool_uses):
            block["id"] = f"toolu_{self.kind}_{self._turns:03d}_{index}"
        turn = ScriptedTurn(tuple(blocks), "tool_use" if tool_uses else "end_turn")
        previous, self._previous = self._previous, request
        for block in blocks:
            if block["type"] == "text":
                on_text(block["text"])
        return ModelTurn(
            turn.content, turn.stop_reason, turn.usage_for(request, previous), self.name
        )

    def _blocks(self, view: _RequestView) -> list[JSONObject]:
        raise NotImplementedError

    def _call(self, step: Step) -> JSONObject:
        return {"type": "tool_use", "id": "", "name": step.tool, "input": copy.deepcopy(step.input)}

    def _todo(self, items: Mapping[int, str], *, merge: bool = True) -> JSONObject:
        listed = []
        for index, status in sorted(items.items()):
            item: JSONObject = {"id": str(index + 1), "status": status}
            if not merge:
                item["text"] = self.steps[index].title
            listed.append(item)
        arguments: JSONObject = {"items": listed, "merge": True} if merge else {"items": listed}
        return {"type": "tool_use", "id": "", "name": "todo", "input": arguments}

    @staticmethod
    def _text(text: str) -> JSONObject:
        return {"type": "text", "text": text}

    def _finish(self) -> list[JSONObject]:
        return [self._text("I have finished the task.")]


class DiligentModel(_Player):
    """Does every step in order and, with a board, keeps the plan up to date every round."""

    kind = "diligent"

    def __init__(self, steps: tuple[Step, ...]) -> None:
        super().__init__(steps)
        self._cursor = 0
        self._planned = False
        self._closed = False

    def _blocks(self, view: _RequestView) -> list[JSONObject]:
        n = len(self.steps)
        if self._cursor < n:
            step = self.steps[self._cursor]
            blocks = [self._text(f"Next: {step.title}.")]
            if view.has_board and not self._planned:
                plan = {i: _IN_PROGRESS if i == 0 else _PENDING for i in range(n)}
                blocks.append(self._todo(plan, merge=False))
                self._planned = True
            elif view.has_board:
                moves = {self._cursor - 1: _COMPLETED, self._cursor: _IN_PROGRESS}
                blocks.append(self._todo(moves))
            blocks.append(self._call(step))
            self._cursor += 1
            return blocks
        if view.has_board and not self._closed:
            self._closed = True
            return [self._text("All steps done."), self._todo({n - 1: _COMPLETED})]
        return self._finish()


class ForgetfulModel(_Player):
    """Skips and repeats steps; with a board, a reminder or a last look brings it back."""

    kind = "forgetful"

    def __init__(self, steps: tuple[Step, ...], seed: int) -> None:
        super().__init__(steps)
        self._walk = random.Random(seed)
        self._whims = random.Random(seed + 1)
        self._cursor = 0
        self._done = [False] * len(steps)
        self._board: dict[int, str] | None = None
        self._sent: tuple[str, dict[int, str]] | None = None
        self._queue: list[dict[int, str]] = []
        self._last_call: JSONObject | None = None
        self._looked_at_end = False

    def _blocks(self, view: _RequestView) -> list[JSONObject]:
        rejected = self._settle(view)
        if rejected:
            self._queue = _one_edge_at_a_time(self._board or {}, self._target())
        if view.has_board and self._board is None and self._sent is None:
            plan = {i: _IN_PROGRESS if i == 0 else _PENDING for i in range(len(self.steps))}
            return [self._text("A plan first."), self._send(plan, merge=False), *self._act()]
        if view.has_board and self._queue:
            return [
                self._text("Updating the plan one item at a time."),
                self._send(self._queue.pop(0)),
            ]
        if view.has_board and view.reminded and self._board is not None:
            return self._catch_up(sloppy=True)
        return self._act()

    def _settle(self, view: _RequestView) -> bool:
        """Learn whether the last plan update was accepted; True when it was rejected."""
        if self._sent is None:
            return False
        tool_id, proposed = self._sent
        self._sent = None
        if tool_id in view.errors:
            return True
        self._board = {**(self._board or {}), **proposed}
        return False

    def _send(self, moves: dict[int, str], *, merge: bool = True) -> JSONObject:
        block = self._todo(moves, merge=merge)
        self._sent = ("", moves)
        # It repeats only the call it just made, which the loop guard then blocks.
        self._last_call = None
        return block

    def respond(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        turn = super().respond(request, on_text)
        if self._sent is not None:
            todo = next(b for b in turn.tool_uses if b["name"] == "todo")
            self._sent = (str(todo["id"]), self._sent[1])
        return turn

    def _target(self) -> dict[int, str]:
        """The board as it should be: done steps completed, the first undone one in progress."""
        self._cursor = next((i for i, done in enumerate(self._done) if not done), len(self._done))
        return {
            i: _COMPLETED if done else _IN_PROGRESS if i == self._cursor else _PENDING
            for i, done in enumerate(self._done)
        }

    def _catch_up(self, *, sloppy: bool) -> list[JSONObject]:
        board, target = self._board or {}, self._target()
        moves = {i: status for i, status in target.items() if board.get(i) != status}
        following = self._cursor + 1
        if sloppy and following < len(self.steps) and self._whims.random() < BAD_UPDATE_CHANCE:
            moves[following] = _IN_PROGRESS  # two in progress: the board will refuse it
        if not moves:
            return self._act()
        text = "Reminded of my plan: bringing it up to date and going back to what is left."
        return [self._text(text), self._send(moves)]

    def _act(self) -> list[JSONObject]:
        self._skip_done()  # back from a step it had skipped: on to the next one not done
        roll = self._walk.random()
        if self._last_call is not None and roll < REPEAT_CHANCE:
            return [self._text("Running that again."), copy.deepcopy(self._last_call)]
        if roll < REPEAT_CHANCE + SKIP_CHANCE:
            self._cursor += 1  # forgets this step and goes on to the next
            self._skip_done()
        if self._cursor >= len(self.steps):
            return self._wrap_up()
        step = self.steps[self._cursor]
        self._done[self._cursor] = True
        self._cursor += 1
        self._last_call = self._call(step)
        return [self._text(f"Next: {step.title}."), self._last_call]

    def _skip_done(self) -> None:
        while self._cursor < len(self.steps) and self._done[self._cursor]:
            self._cursor += 1

    def _wrap_up(self) -> list[JSONObject]:
        if self._board is not None and not self._looked_at_end:
            self._looked_at_end = True
            if not all(self._done) and self._whims.random() < NOTICE_AT_END_CHANCE:
                return self._catch_up(sloppy=False)
        return self._finish()


def _one_edge_at_a_time(
    board: Mapping[int, str], target: Mapping[int, str]
) -> list[dict[int, str]]:
    """Updates that take ``board`` to ``target`` with one legal edge per item per update.

    Each update completes or pauses what is in progress and starts the next item that has to
    pass through ``in_progress``, so every update is accepted under the strict policy.
    """
    current = dict(board)
    updates: list[dict[int, str]] = []
    for _ in range(3 * len(target) + 1):
        if all(current.get(i) == status for i, status in target.items()):
            break
        waiting = [
            i for i in sorted(target) if current.get(i) == _PENDING and target[i] == _COMPLETED
        ]
        moves: dict[int, str] = {}
        running = [i for i, status in current.items() if status == _IN_PROGRESS]
        for i in running:
            if target[i] == _COMPLETED:
                moves[i] = _COMPLETED
            elif target[i] == _PENDING or waiting:
                moves[i] = _PENDING
        if all(i in moves for i in running):
            starting = waiting or [
                i
                for i in sorted(target)
                if current.get(i) == _PENDING and target[i] == _IN_PROGRESS
            ]
            if starting:
                moves[starting[0]] = _IN_PROGRESS
        if not moves:
            break
        current.update(moves)
        updates.append(moves)
    return updates
