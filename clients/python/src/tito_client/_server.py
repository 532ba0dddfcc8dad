"""Launching ``tito-server serve`` as a child process of the trainer: :class:`TitoServer`."""

from __future__ import annotations

import atexit
import collections
import os
import re
import signal
import subprocess
import threading
import time
from typing import IO, TYPE_CHECKING, Sequence

import httpx

from ._client import DEFAULT_TIMEOUT_S, Client
from ._errors import TitoServerExitedError, TitoServerStartError

if TYPE_CHECKING:
    from ._async import AsyncClient

__all__ = ["TitoServer", "READY_LINE"]

# The one line the CLI prints on stdout once the server is up (server/host/cli.ts, serve()).
READY_LINE = re.compile(r"^tito-server ready url=(\S+) workers=(\d+) instance=([0-9a-f]+)$")
# Output kept for the error of a failed start and for `stderr_tail()`.
_KEPT_LINES = 2000


class TitoServer:
    """``tito-server serve`` started as a child process; stopped on :meth:`close`, on the
    ``with`` block's exit, or when the interpreter exits.

    ``bin`` is the path of the ``tito-server`` executable (``bin/tito-server.js`` of a
    checkout or an installed package); by default ``$TITO_SERVER_BIN`` when set, else
    ``npx --no-install tito-server``: the one installed in the working directory's project. ``engine`` is the engine URL (none: the
    server's built-in simulated engine), ``workers`` the worker count, ``tokenizer`` a
    Hugging Face tokenizer folder, ``auth_token`` the admin token (``--auth-token``),
    ``args`` more flags of ``tito-server serve --help``. The server listens on a free port
    of 127.0.0.1 unless ``args`` says otherwise (``--port``/``--host``).

    The constructor returns once the server printed its ready line; if it exits first,
    or is not ready within ``start_timeout`` seconds, it raises
    :class:`TitoServerStartError` holding the server's stderr. The server's stderr (logs
    and supervision events) is kept in memory (:meth:`stderr_tail`) and also written to
    ``stderr`` when given (e.g. ``sys.stderr``).
    """

    def __init__(
        self,
        bin: str | os.PathLike[str] | None = None,
        engine: str | None = None,
        workers: int | None = None,
        tokenizer: str | os.PathLike[str] | None = None,
        auth_token: str | None = None,
        args: Sequence[str] = (),
        *,
        start_timeout: float = 120.0,
        stop_timeout: float = 30.0,
        stderr: IO[str] | None = None,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.auth_token = auth_token
        self.stop_timeout = stop_timeout
        self.url = ""
        self.instance_id = ""
        self.workers = 0
        self.host_pid: int | None = None
        self._echo = stderr
        self._lines: collections.deque[str] = collections.deque(maxlen=_KEPT_LINES)
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._closed = False
        command = self._command(bin) + ["serve", "--port", "0"]
        if engine is not None:
            command += ["--engine", engine]
        if workers is not None:
            command += ["--workers", str(workers)]
        if tokenizer is not None:
            command += ["--tokenizer", os.fspath(tokenizer)]
        if auth_token is not None:
            command += ["--auth-token", auth_token]
        command += [str(a) for a in args]
        self.command = command
        try:
            # Its own process group, so that close() can reach the whole tree (npx's child too).
            self._proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as err:
            raise TitoServerStartError(f"could not run {command[0]!r}: {err}") from err
        atexit.register(self.close)
        self._readers = [
            threading.Thread(target=self._read_stdout, name="tito-server-stdout", daemon=True),
            threading.Thread(target=self._read_stderr, name="tito-server-stderr", daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        self._wait_ready(start_timeout)

    @staticmethod
    def _command(bin: str | os.PathLike[str] | None) -> list[str]:
        if bin is None:
            bin = os.environ.get("TITO_SERVER_BIN") or None
        if bin is None:
            return ["npx", "--no-install", "tito-server"]
        path = os.fspath(bin)
        # A .js entry that lost its executable bit (a copy, a zip) still runs under node.
        if path.endswith(".js") and not os.access(path, os.X_OK):
            return ["node", path]
        return [path]

    def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            match = READY_LINE.match(line)
            if match and not self._ready.is_set():
                self.url, self.workers, self.instance_id = match[1], int(match[2]), match[3]
                self._ready.set()
            else:
                self._keep(line)

    def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        for raw in self._proc.stderr:
            self._keep(raw.decode("utf-8", errors="replace").rstrip("\n"))

    def _keep(self, line: str) -> None:
        with self._lock:
            self._lines.append(line)
        if self._echo is not None:
            try:
                self._echo.write(line + "\n")
            except (OSError, ValueError):
                self._echo = None

    def stderr_tail(self, lines: int = 200) -> str:
        """The server's last ``lines`` lines of output (stderr, and stdout but the ready line)."""
        with self._lock:
            kept = list(self._lines)[-lines:]
        return "\n".join(kept)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.05):
            if self._proc.poll() is not None:
                for reader in self._readers:
                    reader.join(timeout=2)
                self._unregister()
                raise TitoServerStartError(
                    f"tito-server exited with code {self._proc.returncode} before it was ready "
                    f"({' '.join(self.command)})",
                    stderr=self.stderr_tail(),
                    returncode=self._proc.returncode,
                )
            if time.monotonic() > deadline:
                self.close()
                raise TitoServerStartError(
                    f"tito-server was not ready within {timeout:g} s ({' '.join(self.command)})",
                    stderr=self.stderr_tail(),
                    returncode=self._proc.returncode,
                )
        # The host process is the one to signal (`npx` may sit between it and us).
        headers = {"authorization": f"Bearer {self.auth_token}"} if self.auth_token else {}
        try:
            res = httpx.get(f"{self.url}/supervision", headers=headers, timeout=5.0)
            self.host_pid = int(res.json()["host_pid"])
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            self.host_pid = None

    @property
    def pid(self) -> int:
        """The pid of the launched command (``npx``, or the server's host process)."""
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        """The launched command's exit code, or ``None`` while it runs."""
        return self._proc.poll()

    def check(self) -> None:
        """Raises :class:`TitoServerExitedError` (with the server's last output) once the
        server's process has exited: after :meth:`close`, or when the session server failed
        (a worker crashing past ``--max-restarts``). Call it between rollout steps to stop
        loudly instead of meeting connection errors."""
        code = self._proc.poll()
        if code is not None:
            raise TitoServerExitedError(
                f"tito-server ({self.url or ' '.join(self.command)}) exited with code {code}",
                stderr=self.stderr_tail(),
                returncode=code,
            )

    def client(self, *, timeout: float = DEFAULT_TIMEOUT_S) -> Client:
        """A :class:`Client` of this server, with its admin token."""
        return Client(self.url, admin_token=self.auth_token, timeout=timeout)

    def async_client(self, *, timeout: float = DEFAULT_TIMEOUT_S) -> AsyncClient:
        """An :class:`AsyncClient` of this server, with its admin token."""
        from ._async import AsyncClient

        return AsyncClient(self.url, admin_token=self.auth_token, timeout=timeout)

    def __enter__(self) -> TitoServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _unregister(self) -> None:
        self._closed = True
        atexit.unregister(self.close)

    def close(self) -> int | None:
        """Stops the server (SIGTERM: a clean shutdown; SIGKILL to its process group after
        ``stop_timeout`` seconds) and returns the launched command's exit code."""
        if self._closed:
            return self._proc.returncode
        self._unregister()
        targets = {self._proc.pid} | ({self.host_pid} if self.host_pid else set())
        for pid in targets:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        try:
            self._proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            pass
        while self.host_pid and _alive(self.host_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._proc.poll() is None or (self.host_pid and _alive(self.host_pid)):
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self._proc.wait()
        for reader in self._readers:
            reader.join(timeout=2)
        return self._proc.returncode

    def __repr__(self) -> str:
        state = "stopped" if self._closed else "running"
        return f"TitoServer(url={self.url!r}, pid={self._proc.pid}, {state})"


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    # A zombie child of ours is gone for our purpose; a non-child we cannot reap shows as alive.
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().split(b") ", 1)[-1][:1] != b"Z"
    except OSError:
        return True
