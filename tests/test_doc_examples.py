"""The README's and docs' examples marked runnable run as written, so a stale one fails the suite.

A fenced block is an example when the word ``example`` follows its language (GitHub shows the
language and ignores the rest, so readers see an ordinary block):

- ```` ```sh example ````: each line (a trailing ``\\`` joins the next) runs in bash, offline: no
  key, the per-user config and state in a scratch folder, ``orchestrator`` on ``PATH``. It must
  exit 0, or the code a trailing ``# exit N`` names.
- ```` ```toml example FILE ```` and ```` ```json example FILE ````: the block is written to
  FILE in that folder and must be what orchestrator reads without complaint: an
  ``orchestrator.toml``'s settings, hooks and MCP servers, a ``.mcp.json``'s servers; any
  other file must at least parse.

A document's examples run in order in one scratch folder, so a config file example is in
place for the commands after it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Documents that must keep at least one runnable example (a marker dropped by mistake fails).
MUST_HAVE_EXAMPLES = {"README.md", "docs/mcp.md", "docs/eval.md", "docs/checks.md"}

_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
_EXIT = re.compile(r"#\s*exit\s+(\d+)\s*$")


@attrs.frozen
class Example:
    document: str
    line: int
    language: str
    file: str
    body: str


def examples(path: Path) -> list[Example]:
    text = path.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        words = match.group("info").split()
        if len(words) < 2 or words[1] != "example":
            continue
        line = text.count("\n", 0, match.start()) + 1
        file = words[2] if len(words) > 2 else ""
        name = str(path.relative_to(ROOT))
        found.append(Example(name, line, words[0], file, match.group("body")))
    return found


def _environment(scratch: Path) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))
    }
    env.update(
        NO_COLOR="1",
        ORCHESTRATOR_CONFIG_DIR=str(scratch / ".config"),
        ORCHESTRATOR_STATE_DIR=str(scratch / ".state"),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    )
    return env


def _commands(body: str) -> list[tuple[int, str]]:
    """(offset, command) for each logical line; ``\\`` at the end joins the next line."""
    commands: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for offset, line in enumerate(body.splitlines(), start=1):
        if not pending:
            start = offset
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1])
            continue
        command = " ".join([*pending, line]).strip()
        pending = []
        if command and not command.startswith("#"):
            commands.append((start, command))
    return commands


def _run_sh(example: Example, scratch: Path) -> None:
    for offset, command in _commands(example.body):
        expected = _EXIT.search(command)
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=scratch,
            env=_environment(scratch),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        want = int(expected.group(1)) if expected else 0
        where = f"{example.document}:{example.line + offset}"
        assert done.returncode == want, (
            f"{where}: `{command}` exited {done.returncode}, not {want}\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )


def _check_file(example: Example, scratch: Path) -> None:
    from orchestrator.config import load_config
    from orchestrator.hooks import load_hooks
    from orchestrator.tools.mcp_config import load_servers

    where = f"{example.document}:{example.line}"
    assert example.file, f"{where}: a {example.language} example names the file it is"
    target = scratch / example.file
    target.write_text(example.body, encoding="utf-8")
    if example.language == "toml":
        tomllib.loads(example.body)
    elif example.language == "json":
        json.loads(example.body)
    if example.file == "orchestrator.toml":
        load_config(scratch, env={}, user_file=False, trusted=True)
        load_hooks([(target, True)])
        load_servers(scratch, None)
    elif example.file == ".mcp.json":
        load_servers(scratch, None)


def _run(example: Example, scratch: Path) -> None:
    if example.language == "sh":
        _run_sh(example, scratch)
    elif example.language in ("toml", "json"):
        _check_file(example, scratch)
    else:
        pytest.fail(f"{example.document}:{example.line}: no runner for {example.language!r}")


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "document",
    [path for path in DOCUMENTS if examples(path)],
    ids=lambda path: str(path.relative_to(ROOT)),
)
def test_the_document_s_examples_run(document: Path, tmp_path: Path) -> None:
    for example in examples(document):
        _run(example, tmp_path)


def test_the_documents_keep_their_examples() -> None:
    marked = {str(path.relative_to(ROOT)) for path in DOCUMENTS if examples(path)}
    assert marked >= MUST_HAVE_EXAMPLES


def test_the_runner_fails_a_broken_example(tmp_path: Path) -> None:
    # An example that no longer works must fail, or the tests above prove nothing.
    broken = Example("doc.md", 1, "sh", "", "orchestrator config --no-such-flag\n")
    said_where = re.escape("doc.md:2: `orchestrator config --no-such-flag`")
    with pytest.raises(AssertionError, match=said_where):
        _run(broken, tmp_path)
    said = Example("doc.md", 1, "sh", "", "orchestrator config --no-such-flag   # exit 2\n")
    _run(said, tmp_path)
    bad_setting = Example("doc.md", 1, "toml", "orchestrator.toml", "max_rounds = -1\n")
    with pytest.raises(Exception, match="max_rounds"):
        _run(bad_setting, tmp_path)
    bad_hook = Example(
        "doc.md", 1, "toml", "orchestrator.toml", '[[hooks.PreToolUse]]\nmatcher = "("\n'
    )
    with pytest.raises(Exception, match="is not a regex"):
        _run(bad_hook, tmp_path)


def test_the_every_tool_matchers_docs_checks_md_names_are_taken(tmp_path: Path) -> None:
    from orchestrator.hooks import load_hooks

    said = " ".join((ROOT / "docs" / "checks.md").read_text(encoding="utf-8").split())
    assert '"" or "*" matches every tool' in said.replace("# ", "")
    for matcher in ("", "*"):
        config = tmp_path / f"hooks{len(matcher)}.toml"
        config.write_text(f'[[hooks.PreToolUse]]\nmatcher = "{matcher}"\ncommand = "true"\n')
        (hook,) = load_hooks([(config, True)])
        assert all(hook.matches(tool) for tool in ("bash", "write_file", "mcp__docs__search"))
