"""Fixtures: real tito-server processes (the simulated engine), shared per test session.

The server is the repository's ``bin/tito-server.js`` (``npm run build`` first, as for the
CLI tests) unless ``TITO_SERVER_BIN`` names another. Starting one costs seconds, so the
plain server is started once for the whole run and the auth server once per module.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest

from tito_client import Client, Session, TitoServer

CLIENT_DIR = Path(__file__).resolve().parents[1]
REPO = CLIENT_DIR.parents[1]
EXAMPLES = CLIENT_DIR / "examples"
BIN = os.environ.get("TITO_SERVER_BIN") or str(REPO / "bin" / "tito-server.js")
ADMIN_TOKEN = "py-admin-token-0123456789"

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def start(*args: str, auth_token: str | None = None, workers: int = 1) -> TitoServer:
    return TitoServer(
        bin=BIN,
        workers=workers,
        auth_token=auth_token,
        args=["--log-level", "warn", *args],
        stderr=sys.stderr if os.environ.get("TITO_TEST_SERVER_LOGS") else None,
    )


@pytest.fixture(scope="session")
def server() -> Iterator[TitoServer]:
    """Two workers, routing replay on (samples carry ``rollout_routed_experts``)."""
    srv = start("--routing-replay", workers=2)
    yield srv
    srv.close()


@pytest.fixture()
def client(server: TitoServer) -> Iterator[Client]:
    with server.client() as c:
        yield c


def chat(session: Session, messages: list[dict[str, Any]], **body: Any) -> dict[str, Any]:
    """One chat turn over plain HTTP, as an agent sends it; appends the reply to ``messages``."""
    headers = {"authorization": f"Bearer {session.token}"} if session.token else {}
    res = httpx.post(
        f"{session.openai_base_url}/chat/completions",
        json={"model": "m", "messages": messages, **body},
        headers=headers,
        timeout=60,
    )
    assert res.status_code == 200, res.text
    reply = res.json()
    messages.append(reply["choices"][0]["message"])
    return reply


def two_turns(session: Session) -> list[dict[str, Any]]:
    """A tool call, then an answer: the quickstart's conversation (docs/quickstart.md)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is the weather in Paris?"}]
    chat(session, messages, tools=[WEATHER_TOOL])
    call = messages[-1]["tool_calls"][0]
    messages.append({"role": "tool", "tool_call_id": call["id"], "content": '{"temp_c": 18}'})
    chat(session, messages, tools=[WEATHER_TOOL])
    return messages


def until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Polls ``condition`` until it holds; fails naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)
