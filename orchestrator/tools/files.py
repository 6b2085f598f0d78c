"""The file tools: read, write and edit text files beneath the work directory."""

from __future__ import annotations

import difflib
import errno
import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from orchestrator.protocols import JSONObject, ToolError, ToolResult
from orchestrator.tools.arguments import optional, quoted, required, with_note
from orchestrator.tools.beneath import (
    HardLinked,
    NotRegular,
    TooLarge,
    read_regular,
    replace_file,
)
from orchestrator.tools.workdir import Workdir

# Files are read whole; anything bigger belongs to grep and sed.
_MAX_FILE_BYTES = 32 << 20


def _read_text(workdir: Workdir, tool: str, path: str) -> tuple[Path, str]:
    """Resolve ``path`` and return it with its text, read without newline translation.

    The checks (a regular file, one name, the size) and the read go through one descriptor
    opened beneath the work directory, so nothing can be swapped in between.
    """
    target = workdir.resolve(path)
    refused = workdir.refusal(target, writing=False)
    if refused is not None:
        raise ToolError(f"Error: {tool}: {quoted(path)} cannot be read: {refused}")
    base, relative = workdir.anchor(target)
    try:
        opened = read_regular(base, relative, _MAX_FILE_BYTES)
    except FileNotFoundError:
        raise ToolError(
            f"Error: {tool}: {quoted(path)} does not exist; list the files with "
            f"{workdir.how_to_list()} and check the path"
        ) from None
    except NotRegular as error:
        if error.kind == "a directory":
            raise ToolError(
                f"Error: {tool}: {quoted(path)} is a directory, not a file; list it with "
                f"{workdir.how_to_list(workdir.relative(target))}"
            ) from None
        raise ToolError(
            f"Error: {tool}: {quoted(path)} is not a regular file ({error.kind}); only "
            "regular files can be read"
        ) from None
    except HardLinked as error:
        raise ToolError(
            f"Error: {tool}: {quoted(path)} has {error.links} hard links, so it may also be a "
            "file outside the work directory; the file tools only open files with one name"
        ) from None
    except TooLarge:
        raise ToolError(
            f"Error: {tool}: {quoted(path)} is larger than {_MAX_FILE_BYTES // 2**20} MiB; "
            f"look at parts of it with bash (e.g. 'head', 'sed -n', 'grep -n')"
        ) from None
    except OSError as error:
        raise ToolError(_open_failure(tool, path, "read", error)) from error
    return target, _decode(tool, path, opened.data)


def _open_failure(tool: str, path: str, verb: str, error: OSError) -> str:
    if error.errno in (errno.ELOOP, errno.EXDEV):
        # The path was checked, then a link appeared on the way: a race, or a planted link.
        return (
            f"Error: {tool}: {quoted(path)} changed while it was opened (a symbolic link "
            "appeared on the way); use a path inside the work directory without links"
        )
    return f"Error: {tool}: cannot {verb} {quoted(path)}: {error.strerror or error}"


def _decode(tool: str, path: str, data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise ToolError(
            f"Error: {tool}: {quoted(path)} looks like a binary file; inspect it with bash "
            f"(e.g. 'file {path}' or 'xxd {path} | head')"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ToolError(
            f"Error: {tool}: {quoted(path)} is not valid UTF-8 text (byte {error.start}); "
            f"inspect it with bash (e.g. 'file {path}')"
        ) from error


#: A diff kept for the person and the trace stops here: the console shows a few lines anyway.
MAX_DIFF_LINES = 400


def unified_diff(path: str, old: str | None, new: str) -> str:
    """What a write or an edit changed, as ``diff -u`` shows it; a new file is all additions."""
    lines = difflib.unified_diff(
        [] if old is None else old.splitlines(),
        new.splitlines(),
        "/dev/null" if old is None else f"a/{path}",
        f"b/{path}",
        lineterm="",
    )
    kept = list(itertools.islice(lines, MAX_DIFF_LINES + 1))
    if len(kept) > MAX_DIFF_LINES:
        kept[-1] = f"… the diff goes on past {MAX_DIFF_LINES} lines"
    return "\n".join(kept)


def _text_before(workdir: Workdir, path: str) -> str | None:
    """A file's text before a write, or None when it is new or cannot be read as text."""
    try:
        return _read_text(workdir, "write_file", path)[1]
    except ToolError:
        return None


def _write_text(workdir: Workdir, tool: str, path: str, target: Path, content: str) -> int:
    refused = workdir.refusal(target, writing=True)
    if refused is not None:
        raise ToolError(
            f"Error: {tool}: {quoted(path)} is protected: {refused}, so no tool may write it; "
            "leave it as it is, and tell the user if it needs a change"
        )
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ToolError(
            f"Error: {tool}: the content has a character UTF-8 cannot store "
            f"(position {error.start}); remove it"
        ) from error
    base, relative = workdir.anchor(target)
    try:
        replace_file(base, relative, data)
    except NotRegular as error:
        raise ToolError(
            f"Error: {tool}: {quoted(path)} is {error.kind}; only regular files can be "
            "written, pick another name"
        ) from None
    except OSError as error:
        raise ToolError(_open_failure(tool, path, "write", error)) from error
    return len(data)


def _lines(text: str) -> list[str]:
    # Split on "\n" only, so line numbers agree with sed, grep -n and wc -l.
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    return [*lines, pieces[-1]] if pieces[-1] else lines


@attrs.frozen
class ReadFileTool:
    """Returns a range of lines of a text file, capped in size."""

    workdir: Workdir
    max_chars: int = attrs.field(default=50_000, kw_only=True)

    @property
    def name(self) -> str:
        return "read_file"

    @property
    def schema(self) -> JSONObject:
        return {
            "name": self.name,
            "description": (
                "Read a UTF-8 text file in the work directory, exactly as stored. Long files "
                f"are cut at {self.max_chars} characters with a note saying which offset to "
                "read next."
            ),
            "input_schema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the work dir."},
                    "offset": {"type": "integer", "description": "First line to read (1-based)."},
                    "limit": {"type": "integer", "description": "How many lines to read."},
                },
                "required": ["path"],
            },
        }

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        path = required(arguments, self.name, "path", str)
        offset = optional(arguments, self.name, "offset", int)
        offset = 1 if offset is None else offset
        limit = optional(arguments, self.name, "limit", int)
        if offset < 1:
            raise ToolError(f"Error: read_file: field 'offset' must be 1 or more, got {offset}")
        if limit is not None and limit < 1:
            raise ToolError(f"Error: read_file: field 'limit' must be 1 or more, got {limit}")
        _, text = _read_text(self.workdir, self.name, path)
        lines = _lines(text)
        if not lines:
            return ToolResult("(empty file)")
        if offset > len(lines):
            raise ToolError(
                f"Error: read_file: offset={offset} is past the end of {quoted(path)}, "
                f"which has {len(lines)} lines"
            )
        return ToolResult(self._excerpt(lines, offset, limit))

    def _excerpt(self, lines: list[str], offset: int, limit: int | None) -> str:
        end = len(lines) if limit is None else min(len(lines), offset - 1 + limit)
        shown: list[str] = []
        size = 0
        capped = False
        for line in lines[offset - 1 : end]:
            if size + len(line) > self.max_chars:
                capped = True
                if not shown:  # one line longer than the cap: show its start
                    shown.append(line[: self.max_chars])
                break
            shown.append(line)
            size += len(line)
        last = offset - 1 + len(shown)
        text = "".join(shown)
        if last >= len(lines) and not capped:
            return text
        reason = f"output capped at {self.max_chars} characters; " if capped else ""
        return with_note(
            text,
            f"... [{reason}showing lines {offset}-{last} of {len(lines)}; "
            f"use offset={last + 1} to read further]",
        )


@attrs.frozen
class WriteFileTool:
    """Creates or overwrites a file, making parent directories as needed."""

    workdir: Workdir

    @property
    def name(self) -> str:
        return "write_file"

    @property
    def schema(self) -> JSONObject:
        return {
            "name": self.name,
            "description": (
                "Create or overwrite a file in the work directory with the given UTF-8 "
                "content, creating parent directories as needed."
            ),
            "input_schema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the work dir."},
                    "content": {"type": "string", "description": "The whole new file content."},
                },
                "required": ["path", "content"],
            },
        }

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        path = required(arguments, self.name, "path", str)
        content = required(arguments, self.name, "content", str)
        target = self.workdir.resolve(path)
        if target.is_dir():
            raise ToolError(
                f"Error: write_file: {quoted(path)} is a directory; pass a file path inside it"
            )
        before = _text_before(self.workdir, path)
        size = _write_text(self.workdir, self.name, path, target, content)
        shown = self.workdir.relative(target)
        return ToolResult(
            f"Wrote {size} bytes to {shown}", diff=unified_diff(shown, before, content)
        )


@attrs.frozen
class EditFileTool:
    """Replaces an exact piece of text in a file, refusing ambiguous or missing matches."""

    workdir: Workdir

    @property
    def name(self) -> str:
        return "edit_file"

    @property
    def schema(self) -> JSONObject:
        return {
            "name": self.name,
            "description": (
                "Replace old_text with new_text in a file. old_text must match the file "
                "exactly (whitespace included) and occur exactly once, unless replace_all is "
                "true. Read the file first and copy the text."
            ),
            "input_schema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the work dir."},
                    "old_text": {"type": "string", "description": "Exact text to replace."},
                    "new_text": {"type": "string", "description": "Text to put in its place."},
                    "replace_all": {
                        "type": "boolean",
                        "description": "Replace every occurrence (default false).",
                    },
                },
                "required": ["path", "old_text", "new_text"],
            },
        }

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        path = required(arguments, self.name, "path", str)
        old_text = required(arguments, self.name, "old_text", str)
        new_text = required(arguments, self.name, "new_text", str)
        replace_all = optional(arguments, self.name, "replace_all", bool) or False
        if not old_text:
            raise ToolError(
                "Error: edit_file: field 'old_text' is empty; copy the exact text to replace "
                "from the file, or use write_file to create a file"
            )
        if old_text == new_text:
            raise ToolError("Error: edit_file: old_text and new_text are the same; nothing to do")
        target, text = _read_text(self.workdir, self.name, path)
        shown = self.workdir.relative(target)
        count = text.count(old_text)
        if count == 0:
            raise ToolError(
                f"Error: old_text not found in {shown}; read the file and copy the exact text"
            )
        if count > 1 and not replace_all:
            raise ToolError(
                f"Error: old_text occurs {count} times in {shown}; include more context to make "
                "it unique, or pass replace_all=true"
            )
        # Checked before replacing: a short old_text and a long new_text multiply quickly.
        size = len(text) + count * (len(new_text) - len(old_text))
        if size > _MAX_FILE_BYTES:
            raise ToolError(
                f"Error: edit_file: the edit would make {shown} {size} characters long, over "
                f"the {_MAX_FILE_BYTES // 2**20} MiB limit; replace fewer occurrences at a time"
            )
        edited = text.replace(old_text, new_text)
        _write_text(self.workdir, self.name, path, target, edited)
        return ToolResult(
            f"Edited {shown} ({count} replacement{'s' if count > 1 else ''})",
            diff=unified_diff(shown, text, edited),
        )
