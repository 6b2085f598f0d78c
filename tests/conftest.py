"""Suite-wide fixtures, the hypothesis profiles, and the hardening figures ``make test`` ends with.

Hypothesis runs under the ``ci`` profile unless ``--hypothesis-profile=deep`` asks for every
example (``make test-deep``; see :mod:`tests.budget`). Neither profile has a deadline or the
too-slow health check: a busy machine must not fail a property for being slow.

Hardening tests record what they tried through the ``hardening`` fixture. Under pytest-xdist
each worker is its own process, so records go to files in one folder and the controlling
process adds them up for the closing line:
``faults survived: N/N, hostile inputs: N, escapes blocked: N/N, lost results: 0``, then one
line per sandbox mode the red-team suite ran in: ``red team, --sandbox bwrap: escapes: 0 of N``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

from tests.budget import CI, DEEP

if TYPE_CHECKING:
    from tests.warm_harness import WarmHarness

# Neither times a test: no deadline, and no health check for slow data generation, which a busy
# machine would trip.
settings.register_profile(DEEP, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(CI, settings.get_profile(DEEP), max_examples=25)
# Loaded here so it is the default; the hypothesis plugin loads --hypothesis-profile after this.
settings.load_profile(CI)

_KINDS = ("fault", "hostile", "escape", "lost", "redteam")
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")
_OWN_HOME = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    # The SDK honours proxy variables, but the loopback test server must be reached directly.
    # Dropped once for the whole process (each xdist worker runs this too), so every test and
    # every subprocess it starts inherits an environment without them.
    for name in list(os.environ):
        if name.lower() in _PROXY_VARIABLES:
            del os.environ[name]
    # Per-user config, state (traces, sessions, chat history) and cache go to a throwaway home,
    # so no test reads the developer's settings or writes into their real home directory.
    if "ORCHESTRATOR_TEST_HOME" not in os.environ:
        home = Path(tempfile.mkdtemp(prefix="orchestrator-test-home-"))
        os.environ["ORCHESTRATOR_TEST_HOME"] = str(home)
        config.stash[_OWN_HOME] = home
        for variable in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
            os.environ[variable] = str(home / variable.lower())


def pytest_unconfigure(config: pytest.Config) -> None:
    home = config.stash.get(_OWN_HOME, None)
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)


class HardeningRecorder:
    """Appends one JSON line per record to this process's own file."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._file = folder / f"{os.getpid()}-{uuid.uuid4().hex[:6]}.jsonl"

    def record(
        self, kind: str, ok: bool = True, count: int = 1, what: str = "", mode: str = ""
    ) -> None:
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
        # Another session (a second pytest on the same tree) may have cleared the folder.
        self._file.parent.mkdir(parents=True, exist_ok=True)
        record = {"kind": kind, "ok": ok, "count": count, "what": what, "mode": mode}
        with self._file.open("a", encoding="utf-8") as stream:
            stream.write(json.dumps(record) + "\n")


def _folder(config: pytest.Config) -> Path:
    return Path(str(config.rootpath)) / ".pytest_cache" / "hardening"


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    if _is_controller(session.config):
        shutil.rmtree(_folder(session.config), ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[str]:
    """The base URL of this session's one throwaway PostgreSQL cluster (``tests/postgres.py``).

    Started on first use; a test that uses it is ``e2e`` and in the ``pg`` xdist group, so under
    ``--dist loadgroup`` one worker starts one cluster for every such test. Where no cluster can
    start, each of them skips, saying why.
    """
    from tests.postgres import NoPostgres, start_cluster

    cluster = start_cluster()
    try:
        url = cluster.__enter__()
    except NoPostgres as why:
        pytest.skip(str(why))
    try:
        yield url
    finally:
        cluster.__exit__(None, None, None)


@pytest.fixture(scope="session")
def warm_harness() -> Iterator[WarmHarness]:
    """This worker's warm interpreter, forked for harness runs (``tests/warm_harness.py``).

    It starts with ``WARM_HARNESS_STRAY`` set, a variable no run is given, so a test can show
    that a forked run sees its own environment only.
    """
    from tests.warm_harness import WarmHarness

    os.environ["WARM_HARNESS_STRAY"] = "the warm interpreter's"
    try:
        warm = WarmHarness()
    finally:
        del os.environ["WARM_HARNESS_STRAY"]
    try:
        yield warm
    finally:
        warm.close()


@pytest.fixture(scope="session")
def hardening(pytestconfig: pytest.Config) -> HardeningRecorder:
    return HardeningRecorder(_folder(pytestconfig))


def hardening_summary(folder: Path) -> str | None:
    """The closing line, or None when no hardening test ran."""
    totals: Counter[str] = Counter()
    passed: Counter[str] = Counter()
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    for file in files:
        for line in file.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            kind = record["kind"]
            if kind == "redteam":
                kind = f"redteam:{record.get('mode', '')}"
            totals[kind] += record["count"]
            passed[kind] += record["count"] if record["ok"] else 0
    if not totals:
        return None
    lines = [
        f"faults survived: {passed['fault']}/{totals['fault']}, "
        f"hostile inputs: {totals['hostile']}, "
        f"escapes blocked: {passed['escape']}/{totals['escape']}, "
        f"lost results: {totals['lost'] - passed['lost']}"
    ]
    for kind in sorted(k for k in totals if k.startswith("redteam:")):
        escaped = totals[kind] - passed[kind]
        mode = kind.removeprefix("redteam:")
        lines.append(f"red team, --sandbox {mode}: escapes: {escaped} of {totals[kind]}")
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _is_controller(terminalreporter.config):
        return
    summary = hardening_summary(_folder(terminalreporter.config))
    for line in (summary or "").splitlines():
        terminalreporter.write_line(line)
