"""Which folders' ``orchestrator.toml`` the user trusts, recorded once per folder.

A repo's config file is untrusted input: a clone could point ``base_url`` at its own host and
collect the API key, or widen the sandbox. Such settings take effect only in a trusted folder.
Trust is asked once on a terminal ("Do you trust the files in this folder?") and recorded in
the user's config directory, or granted for one run with ``--trust``.
"""

from __future__ import annotations

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


@attrs.frozen
class TrustStore:
    """The recorded set of trusted folders (absolute, resolved paths)."""

    path: Path

    def folders(self) -> frozenset[str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return frozenset()
        except (OSError, ValueError) as error:
            raise TrustError(f"{self.path}: cannot read the trusted folders: {error}") from None
        folders = data.get("trusted") if isinstance(data, dict) else None
        if not isinstance(folders, list) or not all(isinstance(f, str) for f in folders):
            raise TrustError(f'{self.path}: expected {{"trusted": [folder, ...]}}')
        return frozenset(folders)

    def trusts(self, folder: Path) -> bool:
        return str(folder.resolve()) in self.folders()

    def add(self, folder: Path) -> None:
        """Record ``folder`` as trusted, written atomically."""
        folders = sorted(self.folders() | {str(folder.resolve())})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            temporary.write_text(json.dumps({"trusted": folders}, indent=2) + "\n", "utf-8")
            temporary.replace(self.path)
        except OSError as error:
            raise TrustError(f"{self.path}: cannot record the trusted folder: {error}") from None
