"""Errors: each status as its class with the server's message and code; auth; a restarting worker."""

from __future__ import annotations

import os
import signal
import socket
import time
from typing import Any, Iterator

import httpx
import pytest
from conftest import ADMIN_TOKEN, chat, start

from tito_client import (
    AuthError,
    BadRequestError,
    Client,
    ConflictError,
    NotFoundError,
    ServerError,
    TitoConnectionError,
    TitoError,
    TitoServer,
    TitoTimeoutError,
    UnavailableError,
)
from tito_client._errors import error_from_reply


def raw_error(method: str, url: str, **kwargs: Any) -> dict[str, Any]:
    """The server's own error body for the same request, to compare the client's error with."""
    body = httpx.request(method, url, **kwargs).json()
    assert isinstance(body["error"], str)
    return body


def test_not_found_on_every_session_route(client: Client) -> None:
    ghost = client.session("py-no-such-session")
    for call in (ghost.records, ghost.samples, lambda: ghost.samples("json"), ghost.delete):
        with pytest.raises(NotFoundError) as caught:
            call()
        err = caught.value
        assert err.status == 404
        assert err.message == "session not found: session_id=py-no-such-session"
    raw = raw_error("GET", f"{client.url}/sessions/py-no-such-session")
    assert err.code == raw.get("code")  # the server's code, when its body carries one
    if "code" in raw:
        assert err.code == "TITO_ERR_SESSION_NOT_FOUND"
    assert "404 session not found" in str(err) and "DELETE" in str(err)


def test_conflict_and_invalid_ids(client: Client) -> None:
    session = client.create_session()
    with pytest.raises(ConflictError) as caught:
        client.create_session(session.id)
    assert caught.value.status == 409
    assert caught.value.message == f"session already exists: session_id={session.id}"
    with pytest.raises(BadRequestError) as bad:
        client.create_session("not a valid id")
    assert bad.value.status == 400 and "invalid session id" in bad.value.message
    raw = raw_error("PUT", f"{client.url}/sessions/not%20a%20valid%20id")
    assert bad.value.code == raw.get("code")
    session.delete()


def test_bad_requests_the_server_refuses(client: Client) -> None:
    session = client.create_session()
    with pytest.raises(BadRequestError, match="max_seq_len must be a positive integer, got 0"):
        session.samples("json", max_seq_len=0)
    with pytest.raises(BadRequestError) as caught:
        client.resume("v" * 257)
    assert caught.value.message.startswith("invalid admin request: weight_version must be a non-empty string")
    session.delete()


def test_error_bodies_of_every_shape() -> None:
    plain = error_from_reply(502, b'{"error":"engine unreachable at x"}', {}, method="POST", url="u")
    assert isinstance(plain, ServerError) and plain.status == 502 and plain.code is None
    coded = error_from_reply(404, b'{"error":"session not found","code":"TITO_ERR_SESSION_NOT_FOUND"}', {})
    assert isinstance(coded, NotFoundError) and coded.code == "TITO_ERR_SESSION_NOT_FOUND"
    event = error_from_reply(503, b'{"error":{"message":"turn aborted","type":"TITO_ERR_TURN_ABORTED","code":503}}', {})
    assert isinstance(event, UnavailableError) and event.code == "TITO_ERR_TURN_ABORTED"
    anthropic = error_from_reply(400, b'{"type":"error","error":{"type":"invalid_request_error","message":"m"}}', {})
    assert isinstance(anthropic, BadRequestError) and anthropic.message == "m" and anthropic.code is None
    body = b'{"type":"error","error":{"type":"invalid_request_error","message":"m","code":"TITO_ERR_CLIENT_API_MIX"}}'
    anthropic_coded = error_from_reply(400, body, {})
    assert anthropic_coded.code == "TITO_ERR_CLIENT_API_MIX"  # the code inside Anthropic's error
    held = error_from_reply(503, b'{"error":"turn held"}', {"retry-after": "1"})
    assert isinstance(held, UnavailableError) and held.retry_after == 1.0
    engine = error_from_reply(500, b"Internal Server Error", {})
    assert isinstance(engine, ServerError) and engine.message == "Internal Server Error" and engine.body == "Internal Server Error"
    teapot = error_from_reply(418, b"", {})
    assert type(teapot) is TitoError and teapot.message == "HTTP 418"


def test_a_server_that_never_answers_times_out() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(TitoTimeoutError) as caught, Client(url, timeout=0.5) as client:
            client.health()
        assert time.monotonic() - started < 5
        assert caught.value.status is None and "no answer" in str(caught.value)
        with pytest.raises(TitoTimeoutError), Client(url, timeout=60) as client:
            client.pause("drain", timeout=0.5)


@pytest.fixture(scope="module")
def auth_server() -> Iterator[TitoServer]:
    srv = start("--shard-wait-ms", "0", auth_token=ADMIN_TOKEN)
    yield srv
    srv.close()


def test_auth_admin_and_session_tokens(auth_server: TitoServer) -> None:
    with auth_server.client() as admin:
        session = admin.create_session()
        assert session.token is not None and session.token.startswith("tst_")
        assert session.openai_kwargs()["api_key"] == session.token
        messages = [{"role": "user", "content": "hi"}]
        chat(session, messages)  # the agent's token is enough for its own chat
        assert len(session.records()) == 1
        with Client(auth_server.url) as anonymous:
            assert anonymous.health()["status"] == "ok"  # /health is open
            with pytest.raises(AuthError) as caught:
                anonymous.create_session()
            assert caught.value.status == 401 and caught.value.message == "missing or invalid bearer token"
        with Client(auth_server.url, admin_token=session.token) as agent:
            for call in (agent.list_sessions, agent.rollout_state, agent.session(session.id).records):
                with pytest.raises(AuthError) as forbidden:
                    call()
                assert forbidden.value.status == 403
        session.delete()


def test_a_restarting_worker_is_unavailable_then_back(auth_server: TitoServer) -> None:
    with auth_server.client() as admin:
        last = list(admin.events())[-1].seq
        shard = admin.supervision()["shards"][0]
        os.kill(shard["pid"], signal.SIGKILL)
        following = admin.events(since=last, follow=True, poll_interval=0.02, timeout=60)
        assert next((e for e in following if e.actor == "shard-0" and e.kind == "exited"), None) is not None
        with pytest.raises(UnavailableError) as caught:
            admin.create_session()
        assert caught.value.status == 503 and caught.value.message == "session worker unavailable"
        kinds = []
        for event in admin.events(since=last, follow=True, poll_interval=0.05, timeout=120):
            kinds.append(event.kind)
            if event.actor == "shard-0" and event.kind == "restarted":
                break
        assert kinds[0] == "exited" and kinds[-1] == "restarted" and "restarting" in kinds
        assert admin.create_session().token is not None
        assert admin.supervision()["shards"][0]["restarts"] == 1


def test_a_dead_server_raises_at_once(auth_server: TitoServer) -> None:
    url = auth_server.url
    assert auth_server.close() == 0  # the module's last test: its server is done
    started = time.monotonic()
    for call in (lambda c: c.health(), lambda c: c.create_session(), lambda c: c.pause("drain")):
        with pytest.raises(TitoConnectionError) as caught, Client(url) as client:
            call(client)
        assert caught.value.status is None and "unreachable" in str(caught.value)
    assert time.monotonic() - started < 5
