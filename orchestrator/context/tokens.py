"""Token accounting: the last response's exact usage plus a conservative estimate since then.

The service counts tokens with its own tokenizer; the harness cannot, so whatever it has not been
told is estimated at three characters of JSON per token, which over-counts English, code and
JSON alike (real text runs nearer four), so the estimate errs towards clearing early.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from orchestrator.protocols import JSONObject

CHARS_PER_TOKEN = 3
_USAGE_INPUT_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def estimate_tokens(value: Any) -> int:
    """A conservative token count of a JSON value (a message, a block, a request part)."""
    return math.ceil(len(json.dumps(value, ensure_ascii=False)) / CHARS_PER_TOKEN)


def input_tokens(usage: Mapping[str, int]) -> int:
    """The size of the request a response answered: input plus cache reads and writes."""
    return sum(int(usage.get(key, 0)) for key in _USAGE_INPUT_KEYS)


def fixed_tokens(request: Mapping[str, Any]) -> int:
    """The estimated size of a request's parts that are not messages (system, tools, settings)."""
    return estimate_tokens({k: v for k, v in request.items() if k != "messages"})


@attrs.frozen
class _Baseline:
    sent: int  # how many messages the measured request carried
    tokens: int  # what the service counted for it
    last_blocks: int  # its last message's block count, to notice a pause_turn merge into it


@attrs.define
class Gauge:
    """The running size of the conversation; mutation is the point (a new baseline per round)."""

    fixed: int = 0
    _baseline: _Baseline | None = None
    # id(message) -> (message, block count, tokens): a sent message does not change, so each
    # is estimated once (the message object is held so its id cannot be reused meanwhile).
    _sizes: dict[int, tuple[JSONObject, int, int]] = attrs.field(factory=dict, repr=False)

    def measured(self, sent: Sequence[JSONObject], fixed: int, usage: Mapping[str, int]) -> None:
        """``usage`` counted a request of ``fixed`` tokens plus the messages ``sent``."""
        self.fixed = fixed
        total = input_tokens(usage)
        if total <= 0:
            # An endpoint that reports no usage: estimate everything instead.
            self._baseline = None
            return
        self._baseline = _Baseline(len(sent), total, len(sent[-1]["content"]) if sent else 0)

    def credit(self, tokens: int) -> None:
        """``tokens`` were taken out of messages already measured (a clearing)."""
        if self._baseline is not None:
            self._baseline = attrs.evolve(self._baseline, tokens=self._baseline.tokens - tokens)

    def forget(self) -> None:
        """The history was rewritten: estimate it whole until the next response measures it."""
        self._baseline = None

    def estimate(self, messages: Sequence[JSONObject]) -> int:
        base = self._baseline
        if base is not None and base.sent <= len(messages) and base.sent > 0:
            unchanged = len(messages[base.sent - 1]["content"]) == base.last_blocks
            start = base.sent if unchanged else base.sent - 1
            return base.tokens + sum(self.size(m) for m in messages[start:])
        return self.fixed + sum(self.size(m) for m in messages[_after_compaction(messages) :])

    def size(self, message: JSONObject) -> int:
        key = id(message)
        cached = self._sizes.get(key)
        blocks = len(message["content"])
        if cached is not None and cached[0] is message and cached[1] == blocks:
            return cached[2]
        tokens = estimate_tokens(message)
        self._sizes[key] = (message, blocks, tokens)
        return tokens


def _after_compaction(messages: Sequence[JSONObject]) -> int:
    """Where the service starts reading: the newest message with a compaction block, or 0."""
    for index in range(len(messages) - 1, -1, -1):
        if any(block.get("type") == "compaction" for block in messages[index]["content"]):
            return index
    return 0
