"""A throwaway PostgreSQL cluster for the shared-board tests: ``initdb`` + ``pg_ctl`` in a temp dir.

Run as root, the cluster belongs to the ``postgres`` user (the server refuses to run as root).
It listens only on a Unix socket in its own folder, with trust authentication, and is stopped
and deleted at the end. Where no server can start, :func:`start_cluster` says why in one line
so the tests skip with it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class NoPostgres(Exception):
    """No cluster can start here; ``str()`` is the one-line reason."""


def _bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise NoPostgres("PostgreSQL's initdb is not installed (apt-get install postgresql)")
    return Path(found[-1]).parent


def _as_owner(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise NoPostgres(
            "running as root and there is no postgres user to run the server"
        ) from None
    return ["runuser", "-u", "postgres", "--", *command]


@contextmanager
def start_cluster() -> Iterator[str]:
    """A running cluster's base URL (``postgresql://postgres@/postgres?host=…``)."""
    binaries = _bin()
    home = Path(tempfile.mkdtemp(prefix="orchestrator-pg-"))
    data, sockets = home / "data", home / "run"
    sockets.mkdir()
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        for path in (home, sockets):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    home.chmod(0o755)
    try:
        _run(
            [
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
            ]
        )
        options = f"-c listen_addresses='' -k {sockets} -c max_connections=100 -c fsync=off"
        _run(
            [
                str(binaries / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(home / "log"),
                "-w",
                "-t",
                "120",
                "start",
            ]
        )
        try:
            yield f"postgresql://postgres@/postgres?host={sockets}"
        finally:
            subprocess.run(
                _as_owner([str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
                capture_output=True,
                check=False,
                timeout=120,
            )
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _run(command: list[str]) -> None:
    done = subprocess.run(
        _as_owner(command), capture_output=True, text=True, check=False, timeout=300
    )
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise NoPostgres(f"{Path(command[0]).name} failed: {last[0]}")


def fresh_database(base: str) -> str:
    """A new empty database in the cluster at ``base``; its URL."""
    import psycopg

    name = f"board_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return base.replace("/postgres?", f"/{name}?")
