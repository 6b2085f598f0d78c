"""The context manager: when to clear, when to compact, and the records that say what it did.

Thresholds are shares of the window: past ``clear_at`` the loop's ``context_over_budget`` guard
sends the run through ``compact``; there old results are cleared down to ``clear_to``, and if
the history is still above ``compact_at`` it is summarised. The gap between ``clear_at`` and
``clear_to`` is the batch: each clearing frees two fifths of the window at once, so the cached
prefix survives many rounds in between (``make bench`` measures the share read from cache).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import attrs

from orchestrator.context import clearing, compaction
from orchestrator.context.tokens import CHARS_PER_TOKEN, Gauge, estimate_tokens, fixed_tokens
from orchestrator.context.window import MIN_WINDOW, window_from_refusal
from orchestrator.conversation import result_text
from orchestrator.protocols import JSONObject, Plan, PlanRecord

#: ``--compaction``: auto and client manage the context here (auto may use the server's edits
#: where a model advertises them, see docs/context.md), off sends the history whole.
COMPACTION_MODES = ("auto", "client", "server", "off")
#: Behind server-side compaction the client tiers wait longer: (clear_at, clear_to, compact_at).
_SERVER_FALLBACK = (0.85, 0.6, 0.75)
_FINISHED = frozenset({"completed", "cancelled"})


@attrs.frozen
class ContextCleared:
    """The ``context.cleared`` record: which results became stubs and what that saved."""

    event: ClassVar[str] = "context.cleared"
    blocks: int
    tokens_freed: int
    tokens_before: int
    tokens_after: int
    ids: tuple[str, ...]
    trimmed: bool = False

    def fields(self) -> JSONObject:
        return {**attrs.asdict(self), "ids": list(self.ids)}


@attrs.frozen
class ContextCompacted:
    """The ``context.compacted`` record; ``summary`` is kept so resume can rebuild the same list."""

    event: ClassVar[str] = "context.compacted"
    tokens_before: int
    tokens_after: int
    summary_chars: int
    messages_kept: int
    summary: str
    forced: bool = False

    def fields(self) -> JSONObject:
        return attrs.asdict(self)


def _share(low: float, high: float) -> Callable[[Any, Any, float], None]:
    def check(instance: Any, attribute: Any, value: float) -> None:
        if not low < value <= high:
            raise ValueError(
                f"{attribute.name} must be above {low} and at most {high}, got {value}"
            )

    return check


@attrs.define
class ContextManager:
    """Implements :class:`orchestrator.protocols.ContextKeeper` with the two client-side tiers."""

    window_tokens: int = attrs.field()
    model: str = "model"
    mode: str = attrs.field(default="auto")
    summary_max_tokens: int = 4096
    clear_at: float = attrs.field(default=0.7, validator=_share(0, 1))
    clear_to: float = attrs.field(default=0.3, validator=_share(0, 1))
    compact_at: float = attrs.field(default=0.5, validator=_share(0, 1))
    keep_rounds: int = 3
    keep_share: float = attrs.field(default=0.25, validator=_share(0, 1))
    # where the window came from (source, reason, max_tokens), for the context.window event
    origin: JSONObject = attrs.field(factory=dict)
    gauge: Gauge = attrs.field(factory=Gauge)
    # tool_use id -> the plan item in progress when its round ran
    _owners: dict[str, str | None] = attrs.field(factory=dict)

    @window_tokens.validator
    def _check_window(self, attribute: Any, value: int) -> None:
        if value < 1000:
            raise ValueError(f"window_tokens must be at least 1000, got {value}")

    @mode.validator
    def _check_mode(self, attribute: Any, value: str) -> None:
        if value not in COMPACTION_MODES:
            raise ValueError(f"mode must be one of {', '.join(COMPACTION_MODES)}, got {value!r}")

    @property
    def window(self) -> int:
        return self.window_tokens

    @property
    def owners(self) -> Mapping[str, str | None]:
        """Which plan item each tool call's round worked on; a resumed run's keeper starts here."""
        return dict(self._owners)

    @property
    def description(self) -> JSONObject:
        return {"window": self.window_tokens, "compaction": self.mode, **self.origin}

    @property
    def managing(self) -> bool:
        return self.mode != "off"

    def learn_window(self, tokens: int, reason: str) -> bool:
        # Only ever smaller: a refusal proves the limit is at most this, never that it is more.
        if not MIN_WINDOW <= tokens < self.window_tokens:
            return False
        self.origin = {
            **self.origin,
            "source": "refusal",
            "reason": f"{reason} (believed {self.window_tokens:,} tokens until then)",
        }
        self.window_tokens = tokens
        return True

    def window_from_refusal(self, message: str) -> int | None:
        return window_from_refusal(message)

    def fixed_tokens(self, request: Mapping[str, Any]) -> int:
        return fixed_tokens(request)

    def observe(self, messages: Sequence[JSONObject], fixed: int, usage: Mapping[str, int]) -> None:
        self.gauge.measured(messages, fixed, usage)

    def estimate(self, messages: Sequence[JSONObject]) -> int:
        return self.gauge.estimate(messages)

    def tag_round(self, messages: Sequence[JSONObject], plan: Plan) -> None:
        if not messages or messages[-1]["role"] != "user":
            return
        active = next((i for i, s in plan.statuses.items() if s == "in_progress"), None)
        for block in messages[-1]["content"]:
            if block.get("type") == "tool_result":
                self._owners[str(block.get("tool_use_id"))] = active

    def _shares(self) -> tuple[float, float, float]:
        if self.mode == "server":
            return _SERVER_FALLBACK
        return self.clear_at, self.clear_to, self.compact_at

    def over_budget(self, messages: Sequence[JSONObject]) -> bool:
        clear_at = self._shares()[0]
        return self.managing and self.estimate(messages) > clear_at * self.window_tokens

    def shrink(
        self,
        messages: Sequence[JSONObject],
        plan: Plan,
        summarize: Callable[[JSONObject], str],
        *,
        force: bool = False,
    ) -> tuple[list[JSONObject], list[PlanRecord]]:
        records: list[PlanRecord] = []
        current = list(messages)
        if not self.managing:
            return current, records
        window = self.window_tokens
        _clear_at, clear_to, compact_at = self._shares()
        # After a refusal the window we believed in was wrong: keep only the newest round whole.
        keep_from = self.keep_from(current, rounds=1 if force else self.keep_rounds)
        before = self.estimate(current)
        need = before - int(clear_to * window)
        if need > 0:
            statuses = plan.statuses
            cleared = clearing.clear_results(
                current,
                protect_from=keep_from,
                need=need,
                finished=lambda tool_id: statuses.get(self._owners.get(tool_id) or "") in _FINISHED,
            )
            current = self._record_cleared(records, cleared, before)
        now = self.estimate(current)
        if (force or now > compact_at * window) and keep_from > 1:
            request = compaction.summary_request(
                self.model,
                current[:keep_from],
                max_tokens=self.summary_max_tokens,
                limit_chars=int(clear_to * window) * CHARS_PER_TOKEN,
            )
            summary = summarize(request)
            current = compaction.rebuilt(current, keep_from, summary, plan.render())
            self.gauge.forget()
            after = self.estimate(current)
            records.append(
                ContextCompacted(
                    tokens_before=now,
                    tokens_after=after,
                    summary_chars=len(summary),
                    messages_kept=len(current) - 1,
                    summary=summary,
                    forced=force,
                )
            )
            now, keep_from = after, 1
        if force or now > compact_at * window:
            budget = int(compact_at * window) - (now - self._tail_results(current, keep_from))
            trimmed = clearing.trim_results(current, start=keep_from, budget=max(budget, 0))
            current = self._record_cleared(records, trimmed, now, trimmed=True)
        return current, records

    def keep_from(self, messages: Sequence[JSONObject], rounds: int | None = None) -> int:
        """Where the rounds kept whole begin: up to ``rounds``, within ``keep_share``."""
        starts = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        if not starts:
            return len(messages)
        budget = self.keep_share * self.window_tokens
        keep = starts[-1]
        size = sum(self.gauge.size(m) for m in messages[keep:])
        for start in reversed(starts[-(rounds or self.keep_rounds) : -1]):
            more = sum(self.gauge.size(m) for m in messages[start:keep])
            if size + more > budget:
                break
            keep, size = start, size + more
        return keep

    def _tail_results(self, messages: Sequence[JSONObject], start: int) -> int:
        return sum(
            estimate_tokens(result_text(block))
            for message in messages[start:]
            if message["role"] == "user"
            for block in message["content"]
            if block.get("type") == "tool_result"
        )

    def _record_cleared(
        self,
        records: list[PlanRecord],
        cleared: clearing.Cleared,
        before: int,
        *,
        trimmed: bool = False,
    ) -> list[JSONObject]:
        if not cleared.ids:
            return cleared.messages
        self.gauge.credit(cleared.saved)
        after = self.estimate(cleared.messages)
        records.append(
            ContextCleared(
                blocks=len(cleared.ids),
                tokens_freed=before - after,
                tokens_before=before,
                tokens_after=after,
                ids=cleared.ids,
                trimmed=trimmed,
            )
        )
        return cleared.messages
