"""Replay's verdicts on a corpus of mutated traces stay the ones the in-memory replay gave.

The corpus and its verdicts are in ``data/replay_corpus`` (see :mod:`tests.replay_corpus`): a
deleted, swapped, duplicated or edited line, a cut file, a bad line anywhere. Each must give the
same divergence line and message, the same error, the same timeline and the same rebuilt run.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.replay_corpus import VERDICTS, verdict_of

_CORPUS: list[dict[str, Any]] = json.loads(VERDICTS.read_text(encoding="utf-8"))


def _name(entry: dict[str, Any]) -> str:
    mutation = entry["mutation"]
    return "-".join(str(mutation[key]) for key in ("base", "op", "at", "key") if key in mutation)


@pytest.mark.parametrize("entry", _CORPUS, ids=[_name(e) for e in _CORPUS])
def test_the_verdict_is_the_one_recorded(entry: dict[str, Any]) -> None:
    assert verdict_of(entry["mutation"]) == entry["verdict"]


def test_the_corpus_covers_divergences_errors_and_clean_traces() -> None:
    checks = [entry["verdict"]["check"] for entry in _CORPUS]
    assert sum(check == "ok" for check in checks) >= 10
    assert sum(check.startswith("line ") for check in checks) >= 40
    assert sum(check.startswith("error: ") for check in checks) >= 4
