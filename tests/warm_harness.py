"""Harness runs started by fork from a warm interpreter: the SDK's import paid once per worker.

Importing ``anthropic`` costs a harness process over two CPU-seconds (about 1,500 pydantic
classes), more than most attacks of the red team take to run. :class:`WarmHarness` starts one
interpreter that imports the CLI and the SDK and then only forks: each run is a child of its
own, with its own pid, memory, file descriptors, working directory, environment and standard
streams, that runs ``python -m orchestrator ARGS`` the way ``-m`` does (:mod:`runpy`,
``sys.argv``, ``sys.path[0]`` the working directory) and ends the way an interpreter ends
(``SystemExit``, an uncaught exception's traceback, atexit, a signal), so its exit status is a
fresh process's. The run talks to the test's server through the real SDK and starts its sandbox
as any run does.

What a forked run does not have is an exec of its own: ``/proc/PID/environ`` and
``/proc/PID/cmdline`` still show the warm interpreter's. An attack that reads those, the
harness's memory, or finds the harness by its name starts a fresh ``python -m orchestrator``
instead (``Attack.fresh_harness`` in tests/test_redteam.py), as does any run in a control group
of its own.

The protocol is one request at a time on a socket pair: a JSON line (argv, environment, working
directory) with the run's stdin, stdout and stderr passed as file descriptors; the answer is the
child's pid, then its wait status.
"""

from __future__ import annotations

import contextlib
import json
import locale
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

#: What a harness run imports (``python -X importtime``): the CLI, the loop, the SDK and the
#: modules it loads on its first request, the tools, the trace.
_WARM_MODULES = (
    "orchestrator.cli",
    "orchestrator.cli._common",
    "orchestrator.cli.sessions",
    "orchestrator.agent",
    "orchestrator.agent.result",
    "orchestrator.anthropic_model",
    "orchestrator.board.json_file",
    "orchestrator.board.shared",
    "orchestrator.board.stores",
    "orchestrator.console",
    "orchestrator.context",
    "orchestrator.doctor",
    "orchestrator.harness_git",
    "orchestrator.hooks",
    "orchestrator.instructions",
    "orchestrator.loop",
    "orchestrator.report",
    "orchestrator.sessions",
    "orchestrator.signals",
    "orchestrator.tools",
    "orchestrator.tools.bash",
    "orchestrator.tools.mcp_config",
    "orchestrator.tools.products.gitdir",
    "orchestrator.tools.products.guard",
    "orchestrator.tools.python",
    "orchestrator.trace",
    "orchestrator.trust",
    "orchestrator.trust_scope",
    "encodings.idna",
    "httpcore2",
    "opentelemetry.propagate",
    "runpy",
)
_STATUS = struct.Struct("!qq")  # (pid, wait status); a status of -1 marks the pid message
_LENGTH = struct.Struct("!Q")


class WarmHarness:
    """One warm interpreter, and :meth:`run`, which forks it for a harness run."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        self._socket = ours
        self._process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            # Not a terminal, as a captured run's streams are not; the child gets the run's own.
            stdout=subprocess.DEVNULL,
            cwd="/",  # never inside a test's folder, where the red team looks for survivors
        )
        theirs.close()

    @property
    def pid(self) -> int:
        """The warm interpreter's own pid (never a run's)."""
        return self._process.pid

    def close(self) -> None:
        self._socket.close()  # the warm interpreter ends when its end reads EOF
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def run(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path | str,
        timeout: float,
        module: str = "orchestrator",
    ) -> subprocess.CompletedProcess[str]:
        """``python -m MODULE ARGS`` as ``subprocess.run(..., capture_output=True, text=True,
        stdin=DEVNULL)`` gives it; past ``timeout`` the run is killed and
        :class:`subprocess.TimeoutExpired` raised, as ``subprocess.run`` does."""
        command = [sys.executable, "-m", module, *args]
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        stdin = os.open(os.devnull, os.O_RDONLY)
        request = {"module": module, "argv": list(args), "env": dict(env), "cwd": str(cwd)}
        body = json.dumps(request).encode()
        try:
            socket.send_fds(
                self._socket,
                [_LENGTH.pack(len(body)) + body],
                [stdin, out_write, err_write],
            )
        finally:
            for fd in (stdin, out_write, err_write):
                os.close(fd)
        # The fork is at once whatever the run does; only the run's own time counts to timeout.
        pid = self._answer(time.monotonic() + 60)
        deadline = time.monotonic() + timeout
        try:
            stdout, stderr = _read_both(out_read, err_read, deadline)
            status = self._answer(deadline)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self._answer(time.monotonic() + 30)
            raise subprocess.TimeoutExpired(command, timeout) from None
        finally:
            os.close(out_read)
            os.close(err_read)
        code = os.waitstatus_to_exitcode(status)
        return subprocess.CompletedProcess(command, code, stdout, stderr)

    def _answer(self, deadline: float) -> int:
        self._socket.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            data = self._socket.recv(_STATUS.size, socket.MSG_WAITALL)
        except TimeoutError:
            raise subprocess.TimeoutExpired("orchestrator", 0) from None
        if len(data) != _STATUS.size:
            raise RuntimeError("the warm harness interpreter is gone")
        pid: int
        status: int
        pid, status = _STATUS.unpack(data)
        return pid if status == -1 else status


def _read_both(out: int, err: int, deadline: float) -> tuple[str, str]:
    """Both pipes to their ends, as ``communicate`` reads them; TimeoutExpired past deadline."""
    chunks: dict[int, list[bytes]] = {out: [], err: []}
    with selectors.DefaultSelector() as selector:
        for fd in chunks:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired("orchestrator", 0)
            for key, _ in selector.select(left):
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    selector.unregister(key.fd)
    return _text(b"".join(chunks[out])), _text(b"".join(chunks[err]))


def _text(data: bytes) -> str:
    """Bytes as ``text=True`` decodes them: the locale's encoding, universal newlines."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


# --- the warm interpreter ------------------------------------------------------------------------


def _serve(connection: socket.socket) -> dict[str, object] | None:
    """Fork a child per request; return the request in the child, None in the parent at EOF."""
    while True:
        message, fds, _flags, _address = socket.recv_fds(connection, 1 << 16, 3)
        if not message:
            return None
        (length,) = _LENGTH.unpack(message[: _LENGTH.size])
        body = message[_LENGTH.size :]
        if len(body) < length:
            body += connection.recv(length - len(body), socket.MSG_WAITALL)
        request = json.loads(body)
        pid = os.fork()
        if pid == 0:
            connection.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            return dict(request)
        for fd in fds:
            os.close(fd)
        connection.sendall(_STATUS.pack(pid, -1))
        _, status = os.waitpid(pid, 0)
        connection.sendall(_STATUS.pack(pid, status))


def _become(request: Mapping[str, object]) -> None:
    """Make this child look to the module as ``python -m MODULE`` started in ``cwd``."""
    import tempfile

    env = request["env"]
    cwd = request["cwd"]
    argv = request["argv"]
    assert isinstance(env, dict) and isinstance(cwd, str) and isinstance(argv, list)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again, from this run's environment
    sys.argv = ["-m", *argv]  # runpy puts the module's path in argv[0]
    sys.path.insert(0, os.getcwd())  # what -m puts first


def main() -> None:
    # The script's own folder (tests/) is not where a harness looks for modules.
    del sys.path[0]
    import importlib

    for name in _WARM_MODULES:
        importlib.import_module(name)
    connection = socket.socket(fileno=int(sys.argv[1]))
    request = _serve(connection)
    if request is None:
        return
    _become(request)
    import runpy

    runpy.run_module(str(request["module"]), run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
