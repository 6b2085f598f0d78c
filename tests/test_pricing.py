"""Cost from the price table, an override, and the totals a session adds up."""

from __future__ import annotations

import pytest

from orchestrator.pricing import UsageTotals, cost_of, format_cost, prices_for
from orchestrator.report import EXIT_FAILED, EXIT_REFUSED, exit_code


def test_the_table_matches_families_and_the_override_wins() -> None:
    assert prices_for("claude-sonnet-4-5-20250929") == (3.0, 15.0, 0.3, 3.75)
    assert prices_for("claude-opus-4-1-20250805") == (15.0, 75.0, 1.5, 18.75)
    assert prices_for("claude-opus-4-5") == (5.0, 25.0, 0.5, 6.25)
    assert prices_for("claude-haiku-4-5") == (1.0, 5.0, 0.1, 1.25)
    assert prices_for("my-gateway-model") is None
    assert prices_for("my-gateway-model", (1.0, 2.0, 0.0, 0.0)) == (1.0, 2.0, 0.0, 0.0)


def test_cost_counts_every_kind_of_token_and_unknown_stays_unknown() -> None:
    usage = {
        "input_tokens": 1_000_000,
        "output_tokens": 100_000,
        "cache_read_input_tokens": 2_000_000,
        "cache_creation_input_tokens": 0,
    }
    assert cost_of(usage, (3.0, 15.0, 0.3, 3.75)) == pytest.approx(3.0 + 1.5 + 0.6)
    assert cost_of(usage, None) is None
    assert format_cost(None) == "cost unknown (set --price-per-mtok)"
    assert format_cost(0.01234) == "$0.0123"


def test_totals_add_up_model_responses_only() -> None:
    totals = UsageTotals()
    totals({"event": "model.request", "round": 1})
    totals({"event": "model.response", "model": "m", "usage": {"input_tokens": 5}})
    totals({"event": "model.response", "usage": {"input_tokens": 7, "output_tokens": 2}})
    assert (totals.rounds, totals.model) == (2, "m")
    assert totals.usage["input_tokens"] == 12
    assert totals.tokens_line().startswith("tokens 12 in · 2 out")


def test_refusals_keep_a_done_run_from_exiting_0() -> None:
    assert exit_code("done", 0) == 0
    assert exit_code("done", 2) == EXIT_REFUSED == 3
    assert exit_code("failed", 2) == EXIT_FAILED
    assert exit_code("interrupted", 0, interrupted_code=143) == 143


def test_each_round_is_priced_at_the_model_that_served_it() -> None:
    totals = UsageTotals()
    million = {"input_tokens": 1_000_000}
    totals({"event": "model.response", "model": "claude-sonnet-4-5", "usage": million})
    totals({"event": "model.response", "model": "claude-opus-4-5", "usage": million})
    # $3 for the Sonnet round and $5 for the Opus one: not both at the last model's rate ($10).
    assert totals.cost() == pytest.approx(8.0)
    assert totals.cost((1.0, 0.0, 0.0, 0.0)) == pytest.approx(2.0)  # the override is for all


def test_a_round_from_a_model_without_a_price_makes_the_cost_unknown() -> None:
    totals = UsageTotals()
    totals({"event": "model.response", "model": "claude-sonnet-4-5", "usage": {"output_tokens": 9}})
    totals({"event": "model.response", "model": "gateway-x", "usage": {"output_tokens": 9}})
    assert totals.cost() is None
    unnamed = UsageTotals()
    unnamed({"event": "model.response", "usage": {"input_tokens": 1_000_000}})
    assert unnamed.cost(default_model="claude-haiku-4-5") == pytest.approx(1.0)
