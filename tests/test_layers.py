"""The package's layering: no module imports from a layer above its own.

Every ``import`` of the package's own modules is read with :mod:`ast` (lazy imports inside
functions and ``TYPE_CHECKING`` ones included: a lazy upward import is still a dependency),
and each module's layer is looked up in :data:`LAYERS` by its longest matching name. A module
the table does not name fails the test, so a new one is placed on purpose.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "orchestrator"

#: From the ground floor up; a module may import from its own layer and the ones below.
#: A name covers the module and everything under it (``orchestrator.tools`` covers
#: ``orchestrator.tools.mcp``); the longest name that matches decides.
LAYERS: tuple[tuple[str, ...], ...] = (
    # 0: the seams, importing nothing of the package.
    ("protocols",),
    # 1: values and small parts with no behaviour of the loop's.
    (
        "_lazy",
        "exits",
        "inert",
        # commands shown on one line, cut only in their paths (plan, guard and console use it)
        "shorten",
        "signals",
        "pricing",
        "instructions",
        "trust",
        # what a configured command runs from the work directory, pinned (hooks, MCP servers)
        "pinning",
        "config",
        "trace_file",
        "guard",
        "conversation",
        # the item machine (statuses, edges, the Machine): the plan board's and a store's
        "item_machine",
        "plan",
        "script",
        "testing",
        "anthropic_model",
        # the rules for what a shared board takes (names, leases, text): pure values, no store
        "board.inputs",
        # git as the harness runs it in a tree a model wrote: nothing of the package below it
        "harness_git",
    ),
    # 2: what the loop drives: tools (sandbox, MCP, Python), hooks, approval, boards, the trace;
    # what a folder's trust covers.
    (
        "tools",
        "list_files",
        "hooks",
        "trust_scope",
        "approval",
        "trace",
        "sessions",
        "transcript",
        "board",
        "board_file",
    ),
    # 3: the loop machine, which knows the layers below only through protocols.
    ("loop",),
    # 4: what reads or keeps a loop's conversation: context keeping, replay, diagrams, chat.
    ("context", "replay", "diagram", "chat"),
    # 5: what shows and checks a run: the console, the report, doctor.
    ("console", "report", "doctor"),
    # 6: the one wiring, and the public API.
    ("agent", "orchestrator"),
    # 7: clients of the API: teams, evals, pictures of a run.
    ("team", "scenarios", "eval", "picture", "html"),
    # 8: the command line, and the benchmarks that time it.
    ("cli", "cli_docs", "__main__", "eval.command", "work", "bench"),
)


def _layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for number, names in enumerate(LAYERS):
        for name in names:
            full = "orchestrator" if name == "orchestrator" else f"orchestrator.{name}"
            matches = module == full or (name != "orchestrator" and module.startswith(full + "."))
            if matches and (best is None or len(full) > best[1]):
                best = (number, len(full))
    return None if best is None else best[0]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "bundled" in path.parts:  # an eval task's own files, not the package's code
            continue
        found.append((_module_name(path), path))
    return found


def _is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    root = PACKAGE.parent
    return (root / relative).with_suffix(".py").is_file() or (root / relative).is_dir()


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for each import of the package's own modules in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "orchestrator":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "orchestrator":
                continue
            for alias in node.names:
                # ``from orchestrator import report`` imports the module orchestrator.report.
                inner = f"{node.module}.{alias.name}"
                yield node.lineno, inner if _is_module(inner) else node.module


def test_every_module_has_a_layer() -> None:
    missing = [name for name, _ in _modules() if _layer_of(name) is None]
    assert missing == [], f"place these in tests/test_layers.py LAYERS: {missing}"


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    upward = []
    for name, path in _modules():
        mine = _layer_of(name)
        if mine is None:
            continue
        for line, imported in _imports(path):
            theirs = _layer_of(imported)
            if theirs is not None and theirs > mine:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {name} -> {imported}")
    assert upward == []


def test_protocols_imports_nothing_of_the_package() -> None:
    assert list(_imports(PACKAGE / "protocols.py")) == []


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [("orchestrator.loop", "orchestrator.context"), ("orchestrator.doctor", "orchestrator.cli")],
)
def test_the_two_old_upward_imports_are_gone(module: str, forbidden: str) -> None:
    path = PACKAGE / (module.removeprefix("orchestrator.").replace(".", "/") + ".py")
    found = [name for _, name in _imports(path) if name.startswith(forbidden)]
    assert found == []


def test_the_table_itself_catches_an_upward_import(tmp_path: Path) -> None:
    # The walker must see a lazy import inside a function, or the rule above proves nothing.
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from orchestrator.context.window import x\n")
    (imported,) = [name for _, name in _imports(planted)]
    assert imported == "orchestrator.context.window"
    assert _layer_of(imported) == 4 and _layer_of("orchestrator.loop") == 3
