"""A corpus of mutated traces and the verdicts replay gave them, for the streaming-replay tests.

The verdicts in ``data/replay_corpus/verdicts.json`` were captured from the replay that read the
whole trace into memory, before it was rewritten to stream: every verdict (the divergence line
and message, the error a bad trace raises, what ``rebuild`` makes of it) must stay the same.
``python -m tests.replay_corpus`` regenerates the file from the replay of the day: do that only
when a change of verdict is intended, and say why in the commit.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from orchestrator.replay import Replay, rebuild
from orchestrator.trace_file import TraceError, read_trace

CORPUS = Path(__file__).resolve().parent / "data" / "replay_corpus"
VERDICTS = CORPUS / "verdicts.json"
BASES = ("demo", "runs")

Mutation = dict[str, Any]

#: Values a field is set to, per event and key, by the ``set`` mutation.
_SETS: dict[str, list[tuple[str, Any]]] = {
    "loop.transition": [
        ("trigger", "advance"),
        ("trigger", "finish"),
        ("dst", "done"),
        ("src", "audit"),
        ("trigger", "teleport"),
    ],
    "plan.transition": [("trigger", "cancel"), ("dst", "completed"), ("item", "99")],
    "plan.updated": [("revision", 77), ("reset", True)],
    "audit.reminder": [("rounds_since_update", 9), ("round", 1)],
    "tool.result": [("is_error", True), ("id", "toolu_nowhere")],
    "tool.call": [("name", "todo"), ("input", {"items": []})],
    "run.finished": [("status", "failed")],
    "run.started": [("settings", {"model": "m"})],
    "model.response": [("stop_reason", "end_turn")],
    "guard.blocked": [("rule", "other")],
    "plan.rejected": [("error", "Error: something else")],
}


def base_lines(name: str) -> list[bytes]:
    return (CORPUS / f"{name}.jsonl").read_bytes().splitlines(keepends=True)


def mutations(seed: int = 16) -> list[Mutation]:
    """Deterministic mutations of every base trace (stored with the verdicts, so fixed)."""
    rng = random.Random(seed)
    found: list[Mutation] = []
    for base in BASES:
        lines = base_lines(base)
        events = [json.loads(line) for line in lines]
        count = len(lines)
        found.append({"base": base, "op": "none"})
        for _ in range(6):
            found.append({"base": base, "op": "delete", "at": rng.randrange(count)})
            found.append({"base": base, "op": "delete_renumber", "at": rng.randrange(count)})
            found.append({"base": base, "op": "swap", "at": rng.randrange(count - 1)})
            found.append({"base": base, "op": "swap_renumber", "at": rng.randrange(count - 1)})
            found.append({"base": base, "op": "duplicate", "at": rng.randrange(count)})
            found.append({"base": base, "op": "cut", "at": rng.randrange(1, count)})
        for event_name, choices in _SETS.items():
            where = [i for i, e in enumerate(events) if e.get("event") == event_name]
            if not where:
                continue
            for key, value in choices:
                at = rng.choice(where)
                found.append({"base": base, "op": "set", "at": at, "key": key, "value": value})
        for op in ("garbage", "unknown_event", "no_event_field", "newer_format", "seq_jump"):
            found.append({"base": base, "op": op, "at": rng.randrange(1, count)})
        for cut in (1, 7, 40):
            found.append({"base": base, "op": "cut_tail_bytes", "at": cut})
        found.append({"base": base, "op": "blank_lines", "at": rng.randrange(count)})
        found.append({"base": base, "op": "empty"})
    return found


def apply(mutation: Mutation) -> bytes:
    """The mutated trace's bytes."""
    lines = base_lines(mutation["base"])
    op, at = mutation["op"], mutation.get("at", 0)
    events = [json.loads(line) for line in lines]

    def dump(items: list[dict[str, Any]]) -> bytes:
        return b"".join(
            json.dumps(e, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" for e in items
        )

    def renumber(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**e, "seq": number} for number, e in enumerate(items, start=1)]

    if op == "none":
        return b"".join(lines)
    if op == "delete":
        return b"".join(lines[:at] + lines[at + 1 :])
    if op == "delete_renumber":
        return dump(renumber(events[:at] + events[at + 1 :]))
    if op in ("swap", "swap_renumber"):
        events[at], events[at + 1] = events[at + 1], events[at]
        return dump(renumber(events) if op == "swap_renumber" else events)
    if op == "duplicate":
        return b"".join(lines[: at + 1] + lines[at:])
    if op == "cut":
        return b"".join(lines[:at])
    if op == "set":
        events[at] = {**events[at], mutation["key"]: mutation["value"]}
        return dump(events)
    if op == "garbage":
        return b"".join([*lines[:at], b"{not json\n", *lines[at:]])
    if op == "unknown_event":
        extra = {**events[at], "event": "future.thing"}
        return dump(renumber([*events[:at], extra, *events[at:]]))
    if op == "no_event_field":
        events[at] = {k: v for k, v in events[at].items() if k != "event"}
        return dump(events)
    if op == "newer_format":
        events[at] = {**events[at], "trace_format": 99}
        return dump(events)
    if op == "seq_jump":
        events[at] = {**events[at], "seq": events[at].get("seq", 0) + 5}
        return dump(events)
    if op == "cut_tail_bytes":
        whole = b"".join(lines)
        return whole[: len(whole) - at]
    if op == "blank_lines":
        return b"".join([*lines[:at], b"\n  \n", *lines[at:]])
    if op == "empty":
        return b"\n"
    raise ValueError(f"unknown mutation {op!r}")


#: The fields ``LoopSettings`` had when the verdicts were captured; fields added since (with their
#: defaults) are left out of the digest, so the rebuilt settings compare as they did then.
_CAPTURED_SETTINGS = (
    "model",
    "system",
    "max_tokens",
    "max_rounds",
    "reminder_threshold",
    "trace_requests",
    "workdir",
)


def _settings_digest(settings: Any) -> str:
    """The digest of the settings' attrs repr as it read with the captured fields."""
    shown = ", ".join(f"{name}={getattr(settings, name)!r}" for name in _CAPTURED_SETTINGS)
    return _digest(f"{type(settings).__name__}({shown})")


#: The fields ``PlanItem`` had when the verdicts were captured; ``priority`` and ``blocked_by``
#: (issue 17) are left out, so a rebuilt plan compares as it did then.
_CAPTURED_ITEM_FIELDS = ("id", "text", "status", "active_form")


def _plan_digest(items: Any) -> str:
    """The digest of the items' attrs reprs as they read with the captured fields."""
    shown = [
        f"{type(item).__name__}("
        + ", ".join(f"{name}={getattr(item, name)!r}" for name in _CAPTURED_ITEM_FIELDS)
        + ")"
        for item in items
    ]
    return _digest(shown)


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def verdict(path: Path) -> dict[str, Any]:
    """What ``replay --check``, ``replay`` and ``rebuild`` make of one trace, path-free."""
    shown = str(path)
    result: dict[str, Any] = {}
    try:
        parsed = read_trace(path)
        replayer = Replay(parsed)
        divergence = replayer.check()
        result["check"] = "ok" if divergence is None else str(divergence)
        result["timeline"] = _digest([row.as_dict() for row in replayer.timeline])
        result["warnings"] = [w.replace(shown, "TRACE") for w in parsed.warnings]
    except TraceError as error:
        result["check"] = "error: " + str(error).replace(shown, "TRACE")
    except Exception as error:  # the recorded behaviour, whatever it is
        result["check"] = f"raises {type(error).__name__}"
    try:
        rebuilt = rebuild(read_trace(path))
        result["rebuild"] = {
            "messages": _digest(rebuilt.conversation.messages),
            "plan": _plan_digest(rebuilt.board.items),
            "settings": _settings_digest(rebuilt.settings),
            "numbers": [rebuilt.run_id, rebuilt.last_seq, rebuilt.last_round],
            "status": rebuilt.status,
            "task": rebuilt.task,
            "rounds_since_update": rebuilt.rounds_since_update,
        }
    except TraceError as error:
        result["rebuild"] = "error: " + str(error).replace(shown, "TRACE")
    except Exception as error:  # the recorded behaviour, whatever it is
        result["rebuild"] = f"raises {type(error).__name__}"
    return result


def verdict_of(mutation: Mutation) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "trace.jsonl"
        path.write_bytes(apply(mutation))
        return verdict(path)


def main() -> int:
    corpus = [{"mutation": m, "verdict": verdict_of(m)} for m in mutations()]
    VERDICTS.write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(corpus)} verdicts written to {VERDICTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
