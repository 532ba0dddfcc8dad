"""TitoServer: launch, ready line, stop on close / context exit / interpreter exit, failed starts."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import BIN, REPO

from tito_client import Client, TitoConnectionError, TitoServer, TitoServerExitedError, TitoServerStartError
from tito_client._server import _alive


def gone(url: str, host_pid: int) -> bool:
    try:
        Client(url, timeout=5).health()
    except TitoConnectionError:
        return not _alive(host_pid)
    return False


def test_launch_then_close_on_context_exit(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    echo = io.StringIO()
    with TitoServer(BIN, workers=1, args=["--events", str(events)], stderr=echo, cwd=tmp_path) as srv:
        assert srv.url.startswith("http://127.0.0.1:") and not srv.url.endswith(":8080")
        assert srv.workers == 1 and srv.returncode is None
        assert srv.host_pid == srv.pid  # bin/tito-server.js is the host itself
        with srv.client() as client:
            assert client.health()["session_server_instance_id"] == srv.instance_id
        assert "[supervision #" in srv.stderr_tail()
        assert "[supervision #1]" in echo.getvalue()  # the log lines also went to `stderr`
        assert "running" in repr(srv)
        srv.check()  # running: no error
        url, host = srv.url, srv.host_pid
    assert srv.returncode == 0
    with pytest.raises(TitoServerExitedError, match="exited with code 0") as exited:
        srv.check()
    assert "[supervision #" in exited.value.stderr
    assert gone(url, host)
    assert '"kind":"stopped"' in events.read_text()
    assert srv.close() == 0  # closing again is a no-op


def test_interpreter_exit_stops_a_server_launched_through_npx(tmp_path: Path) -> None:
    # A project that has tito-server installed: `npx --no-install tito-server` finds its bin.
    bins = tmp_path / "node_modules" / ".bin"
    bins.mkdir(parents=True)
    (tmp_path / "package.json").write_text('{"name": "trainer", "version": "1.0.0"}')
    (tmp_path / "node_modules" / "tito-server").symlink_to(REPO)
    (bins / "tito-server").symlink_to(Path("..") / "tito-server" / "bin" / "tito-server.js")
    script = textwrap.dedent(
        """
        from tito_client import TitoServer
        srv = TitoServer(workers=1, args=["--log-level", "warn"])
        print(srv.url, srv.host_pid, srv.command[0], flush=True)
        # no close(): the interpreter's exit must stop it
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "TITO_SERVER_BIN"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    url, host, launcher = done.stdout.split()
    assert launcher == "npx"
    assert gone(url, int(host))


def test_a_failed_start_raises_with_the_server_stderr() -> None:
    with pytest.raises(TitoServerStartError) as caught:
        TitoServer(bin=BIN, args=["--no-such-flag"])
    err = caught.value
    assert err.returncode == 2
    assert "Unknown option '--no-such-flag'" in err.stderr
    assert "exited with code 2 before it was ready" in str(err) and "--no-such-flag" in str(err)


def test_a_missing_executable_raises() -> None:
    with pytest.raises(TitoServerStartError, match="could not run '/nonexistent/tito-server'"):
        TitoServer(bin="/nonexistent/tito-server")


def test_a_start_that_takes_too_long_is_stopped(tmp_path: Path) -> None:
    marker = tmp_path / "slow-events.jsonl"
    with pytest.raises(TitoServerStartError, match="not ready within 0.2 s"):
        TitoServer(bin=BIN, args=["--events", str(marker)], start_timeout=0.2, stop_timeout=2)
    # No process of it is left: the host's command line named the marker.
    left = []
    for proc in Path("/proc").iterdir():
        try:
            if str(marker).encode() in (proc / "cmdline").read_bytes():
                left.append(proc.name)
        except OSError:
            pass
    assert left == []
