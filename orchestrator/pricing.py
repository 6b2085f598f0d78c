"""What a run cost: token totals from ``model.response`` events and a small price table.

Prices are list prices in dollars per million tokens, matched on the model name's family; the
``price_per_mtok`` setting (``--price-per-mtok in,out,cache_read,cache_write``) overrides them
for a gateway, a discount or a model the table does not know. A model the table does not know
and no override gives no cost (shown as "cost unknown"), never a made-up one.

| family (model name contains)       | input | output | cache read | cache write |
| ---------------------------------- | ----- | ------ | ---------- | ----------- |
| ``opus-4-1``, ``opus-4-0``, ``3-opus`` | 15    | 75     | 1.50       | 18.75       |
| ``opus`` (4.5 and later)           | 5     | 25     | 0.50       | 6.25        |
| ``sonnet``                         | 3     | 15     | 0.30       | 3.75        |
| ``haiku-3`` (3 and 3.5)            | 0.80  | 4      | 0.08       | 1.00        |
| ``haiku`` (4.5 and later)          | 1     | 5      | 0.10       | 1.25        |
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import attrs

USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)

Prices = tuple[float, float, float, float]

#: (name fragment, prices), first match wins, so the older, dearer Opus names come first.
PRICE_TABLE: tuple[tuple[str, Prices], ...] = (
    ("opus-4-1", (15.0, 75.0, 1.5, 18.75)),
    ("opus-4-0", (15.0, 75.0, 1.5, 18.75)),
    ("opus-4-2025", (15.0, 75.0, 1.5, 18.75)),
    ("3-opus", (15.0, 75.0, 1.5, 18.75)),
    ("opus", (5.0, 25.0, 0.5, 6.25)),
    ("sonnet", (3.0, 15.0, 0.3, 3.75)),
    ("haiku-3", (0.8, 4.0, 0.08, 1.0)),
    ("3-haiku", (0.25, 1.25, 0.03, 0.3)),
    ("haiku", (1.0, 5.0, 0.1, 1.25)),
)


def prices_for(model: str, override: Prices | None = None) -> Prices | None:
    """The prices for ``model``: the override, the table's first match, or None."""
    if override is not None:
        return override
    name = model.lower()
    for fragment, prices in PRICE_TABLE:
        if fragment in name:
            return prices
    return None


def cost_of(usage: Mapping[str, int], prices: Prices | None) -> float | None:
    """Dollars for ``usage`` at ``prices``; None when the prices are unknown."""
    if prices is None:
        return None
    counts = [usage.get(key, 0) for key in USAGE_KEYS]
    return sum(count * price for count, price in zip(counts, prices, strict=True)) / 1_000_000


def format_cost(cost: float | None) -> str:
    if cost is None:
        return "cost unknown (set --price-per-mtok)"
    return f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"


@attrs.define
class UsageTotals:
    """An event sink adding up the rounds and tokens of a session, and timing it."""

    rounds: int = 0
    usage: dict[str, int] = attrs.field(factory=lambda: dict.fromkeys(USAGE_KEYS, 0))
    started: float = attrs.field(factory=time.monotonic)
    model: str = ""
    #: The same tokens split by the model that served them: each is priced at its own rate.
    by_model: dict[str, dict[str, int]] = attrs.field(factory=dict)

    def __call__(self, event: Mapping[str, Any]) -> None:
        if event.get("event") != "model.response":
            return
        self.rounds += 1
        self.model = str(event.get("model") or self.model)
        served = self.by_model.setdefault(self.model, dict.fromkeys(USAGE_KEYS, 0))
        reported = event.get("usage")
        if not isinstance(reported, Mapping):
            reported = {}  # an edited trace: a round without counts, not a crash
        for key in USAGE_KEYS:
            value = reported.get(key)
            if isinstance(value, int):
                self.usage[key] += value
                served[key] += value

    def cost(self, override: Prices | None = None, default_model: str = "") -> float | None:
        """Dollars so far, each model's tokens at its price; None when a price is unknown.

        ``default_model`` prices the responses that named no model.
        """
        total = 0.0
        for model, usage in self.by_model.items():
            if not any(usage.values()):
                continue
            spent = cost_of(usage, prices_for(model or default_model, override))
            if spent is None:
                return None
            total += spent
        return total

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def tokens_line(self) -> str:
        usage = self.usage
        return (
            f"tokens {usage['input_tokens']:,} in · {usage['output_tokens']:,} out · "
            f"{usage['cache_read_input_tokens']:,} cache read · "
            f"{usage['cache_creation_input_tokens']:,} cache write"
        )
