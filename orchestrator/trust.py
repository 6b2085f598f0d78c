"""Which folders' ``orchestrator.toml`` the user trusts, recorded once per folder.

A repo's config file is untrusted input: a clone could point ``base_url`` at its own host and
collect the API key, or widen the sandbox. Such settings take effect only in a trusted folder.
Trust is asked once on a terminal ("Do you trust the files in this folder?") and recorded in
the user's config directory, or granted for one run with ``--trust``.

What is recorded is the folder and a digest of the ``orchestrator.toml`` and ``.mcp.json`` it
had when trusted: the model can write those files (they are in its work directory), so a file
changed since is asked about again, and a run cannot widen the next one's sandbox, or make it
start a server, by rewriting one. Beside it, the digests of the files the hooks' commands name
inside the folder (``files``): a hook whose script differs from what was trusted does not run.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

import attrs
import platformdirs

#: Overrides the folder the trust record lives in (tests, and users with an unusual layout).
CONFIG_DIR_VARIABLE = "ORCHESTRATOR_CONFIG_DIR"
TRUST_FILE = "trusted-folders.json"


def trust_file(env: Mapping[str, str] | None = None) -> Path:
    """Where trusted folders are recorded: the user config dir or ``$ORCHESTRATOR_CONFIG_DIR``."""
    env = os.environ if env is None else env
    folder = env.get(CONFIG_DIR_VARIABLE) or platformdirs.user_config_dir("orchestrator")
    return Path(folder) / TRUST_FILE


class TrustError(Exception):
    """The trust record cannot be read or written; ``str()`` is one line."""


#: The file whose contents trust covers (the name config.py reads).
TRUSTED_FILE = "orchestrator.toml"
#: The other file trust covers: the MCP servers it names start processes (issue 22).
MCP_FILE = ".mcp.json"


def file_digest(folder: Path) -> str:
    """A sha256 of ``folder``'s ``orchestrator.toml`` and ``.mcp.json`` now, or "" for neither.

    With no ``.mcp.json`` it is the digest of ``orchestrator.toml`` alone, as older records hold.
    """
    found: list[tuple[str, bytes]] = []
    for name in (TRUSTED_FILE, MCP_FILE):
        try:
            found.append((name, (folder / name).read_bytes()))
        except OSError:
            continue
    if not found:
        return ""
    if [name for name, _ in found] == [TRUSTED_FILE]:
        return hashlib.sha256(found[0][1]).hexdigest()
    combined = hashlib.sha256()
    for name, data in found:
        combined.update(f"{name}\0{hashlib.sha256(data).hexdigest()}\0".encode())
    return combined.hexdigest()


@attrs.frozen
class TrustRecord:
    """What was recorded for one folder when a person trusted it."""

    #: The digest of its ``orchestrator.toml`` and ``.mcp.json``; None in a record from before
    #: digests (each file is asked about again).
    digest: str | None
    #: The files its hooks name inside it, by path relative to it, each with its digest.
    files: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class TrustStore:
    """The recorded trusted folders (absolute, resolved paths), each with its file's digest."""

    path: Path

    def records(self) -> Mapping[str, TrustRecord]:
        """Folder → what was recorded when it was trusted."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            raise TrustError(f"{self.path}: cannot read the trusted folders: {error}") from None
        folders = data.get("trusted") if isinstance(data, dict) else None
        if isinstance(folders, list) and all(isinstance(f, str) for f in folders):
            # An older record: each file is asked about again.
            return {folder: TrustRecord(None) for folder in folders}
        if isinstance(folders, dict):
            found = {folder: _record(value) for folder, value in folders.items()}
            if all(record is not None for record in found.values()):
                return {folder: record for folder, record in found.items() if record is not None}
        raise TrustError(
            f'{self.path}: expected {{"trusted": {{folder: digest or {{"digest": …, "files": '
            "{…}}, ...}}"
        )

    def folders(self) -> Mapping[str, str]:
        """Folder → the digest of its file when trusted ("" in a record from before digests)."""
        return {folder: record.digest or "" for folder, record in self.records().items()}

    def record(self, folder: Path) -> TrustRecord | None:
        """What was recorded for ``folder``, or None when it was never trusted."""
        return self.records().get(str(folder.resolve()))

    def trusts(self, folder: Path) -> bool:
        """Whether ``folder`` is trusted with its ``orchestrator.toml`` and ``.mcp.json`` as now."""
        recorded = self.record(folder)
        return recorded is not None and recorded.digest == file_digest(folder)

    def changed_since_trusted(self, folder: Path) -> bool:
        """Whether ``folder`` was trusted with another ``orchestrator.toml`` than it has now."""
        recorded = self.record(folder)
        return recorded is not None and recorded.digest != file_digest(folder)

    def add(self, folder: Path, files: Mapping[str, str] | None = None) -> None:
        """Record ``folder`` as trusted with its files as they are now, written atomically.

        ``files``: the digests of the files its hooks name inside it (relative paths).
        """
        entries: dict[str, object] = {
            name: _entry(record) for name, record in self.records().items()
        }
        entries[str(folder.resolve())] = _entry(TrustRecord(file_digest(folder), dict(files or {})))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            record = {"trusted": dict(sorted(entries.items()))}
            temporary.write_text(json.dumps(record, indent=2) + "\n", "utf-8")
            temporary.replace(self.path)
        except OSError as error:
            raise TrustError(f"{self.path}: cannot record the trusted folder: {error}") from None


def _record(value: object) -> TrustRecord | None:
    """One folder's entry: a digest, or ``{"digest": …, "files": {path: digest}}``."""
    if isinstance(value, str):
        return TrustRecord(value)
    if not isinstance(value, dict):
        return None
    digest, files = value.get("digest"), value.get("files", {})
    if not isinstance(digest, str) or not isinstance(files, dict):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return None
    return TrustRecord(digest, files)


def _entry(record: TrustRecord) -> object:
    """How a record is written: its digest alone when no hook names a file (as before)."""
    if not record.files:
        return record.digest or ""
    return {"digest": record.digest or "", "files": dict(sorted(record.files.items()))}
