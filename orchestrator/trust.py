"""Which folders' ``orchestrator.toml`` the user trusts, recorded once per folder.

A repo's config file is untrusted input: a clone could point ``base_url`` at its own host and
collect the API key, or widen the sandbox. Such settings take effect only in a trusted folder.
Trust is asked once on a terminal ("Do you trust the files in this folder?") and recorded in
the user's config directory, or granted for one run with ``--trust``.

What is recorded is the folder and a digest of the ``orchestrator.toml`` and ``.mcp.json`` it
had when trusted: the model can write those files (they are in its work directory), so a file
changed since is asked about again, and a run cannot widen the next one's sandbox, or make it
start a server, by rewriting one.
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
class TrustStore:
    """The recorded trusted folders (absolute, resolved paths), each with its file's digest."""

    path: Path

    def folders(self) -> Mapping[str, str]:
        """Folder → the digest of its file when trusted ("" in a record from before digests)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            raise TrustError(f"{self.path}: cannot read the trusted folders: {error}") from None
        folders = data.get("trusted") if isinstance(data, dict) else None
        if isinstance(folders, list) and all(isinstance(f, str) for f in folders):
            return dict.fromkeys(folders, "")  # an older record: each file is asked about again
        if isinstance(folders, dict) and all(
            isinstance(f, str) and isinstance(d, str) for f, d in folders.items()
        ):
            return folders
        raise TrustError(f'{self.path}: expected {{"trusted": {{folder: digest, ...}}}}')

    def trusts(self, folder: Path) -> bool:
        """Whether ``folder`` is trusted with its ``orchestrator.toml`` and ``.mcp.json`` as now."""
        recorded = self.folders().get(str(folder.resolve()))
        return bool(recorded) and recorded == file_digest(folder)

    def changed_since_trusted(self, folder: Path) -> bool:
        """Whether ``folder`` was trusted with another ``orchestrator.toml`` than it has now."""
        recorded = self.folders().get(str(folder.resolve()))
        return recorded is not None and not (recorded and recorded == file_digest(folder))

    def add(self, folder: Path) -> None:
        """Record ``folder`` as trusted with its file as it is now, written atomically."""
        folders = {**self.folders(), str(folder.resolve()): file_digest(folder)}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            record = {"trusted": dict(sorted(folders.items()))}
            temporary.write_text(json.dumps(record, indent=2) + "\n", "utf-8")
            temporary.replace(self.path)
        except OSError as error:
            raise TrustError(f"{self.path}: cannot record the trusted folder: {error}") from None
