"""Replay's verdicts on a corpus of mutated traces stay the ones the in-memory replay gave.

The corpus and its verdicts are in ``data/replay_corpus`` (see :mod:`tests.replay_corpus`): a
deleted, swapped, duplicated or edited line, a cut file, a bad line anywhere. Each must give the
same divergence line and message, the same error, the same timeline and the same rebuilt run.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.replay import Replay, check_trace, rebuild
from orchestrator.sessions import summarize
from orchestrator.trace_file import TraceError, read_trace
from orchestrator.transcript import transcript_lines
from tests.budget import examples
from tests.in_process import run_cli
from tests.replay_corpus import VERDICTS, apply, base_lines, verdict_of

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


def test_no_trace_makes_replay_or_rebuild_raise_anything_but_a_trace_error() -> None:
    """An edited trace is a bad file: one line, not a traceback, from every command."""
    for entry in _CORPUS:
        verdict = entry["verdict"]
        assert not verdict["check"].startswith("raises"), entry["mutation"]
        assert not str(verdict["rebuild"]).startswith("raises"), entry["mutation"]


@pytest.mark.parametrize(
    "mutation",
    [
        {"base": "demo", "op": "set", "at": 0, "key": "settings", "value": {"model": "m"}},
        {"base": "demo", "op": "set", "at": 49, "key": "is_error", "value": True},
    ],
    ids=["no-settings", "refused-todo"],
)
def test_resume_and_replay_of_an_edited_trace_say_one_line_and_exit_2_or_1(
    tmp_path: Path, mutation: dict[str, Any]
) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(apply(mutation))
    environment = {"PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": "unused"}
    environment["ORCHESTRATOR_STATE_DIR"] = str(tmp_path / "state")
    expected = {entry["verdict"]["check"] for entry in _CORPUS if entry["mutation"] == mutation}
    for args, codes in (
        (["resume", str(trace), "next", "--workdir", str(tmp_path)], {2}),
        (["replay", "--check", str(trace)], {1, 2}),
    ):
        done = run_cli(args, env=environment)
        assert done.returncode in codes, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith("orchestrator: ")
    assert expected and all(e.startswith(("error: ", "line ")) for e in expected)


def test_check_trace_and_a_check_without_timeline_agree_with_the_full_replay(
    tmp_path: Path,
) -> None:
    """``replay --check`` keeps no timeline; its verdict is the full replay's on every trace."""
    for entry in _CORPUS:
        path = tmp_path / "trace.jsonl"
        path.write_bytes(apply(entry["mutation"]))
        try:
            verdict = check_trace(path)
        except TraceError as error:
            assert entry["verdict"]["check"] == "error: " + str(error).replace(str(path), "TRACE")
            continue
        except Exception as error:
            assert entry["verdict"]["check"] == f"raises {type(error).__name__}"
            continue
        assert entry["verdict"]["check"] == ("ok" if verdict is None else str(verdict))
        replayer = Replay(read_trace(path), timeline=False)
        replayer.check()
        assert len(replayer.timeline) <= 1


_ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10**12),
    st.text(max_size=8),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["a", "id", "items"]), st.integers(0, 3), max_size=2),
)


@given(data=st.data())
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_edit_of_any_field_is_a_divergence_or_a_trace_error(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """Replay, rebuild, show and sessions read hand-edited files too: none may crash on one."""
    base = data.draw(st.sampled_from(["demo", "runs"]))
    events = [json.loads(line) for line in base_lines(base)]
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(events) - 1))
        key = data.draw(st.sampled_from(sorted(events[at])))
        events[at] = {**events[at], key: data.draw(_ODD_VALUES)}
    path = tmp_path_factory.mktemp("edited") / "trace.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    attempts = (
        lambda: check_trace(path),
        lambda: rebuild(read_trace(path)),
        lambda: list(transcript_lines(read_trace(path), full=True)),  # show
        lambda: summarize(path),  # sessions
    )
    for attempt in attempts:
        with contextlib.suppress(TraceError):
            attempt()
