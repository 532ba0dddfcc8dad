"""The blocking Client against a real server: every method, and the fields it reads."""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from conftest import CLIENT_DIR, REPO, WEATHER_TOOL, chat, two_turns, until

from tito_client import BadRequestError, Client, Event, TitoProtocolError, TitoServer
from tito_client import _core as core


def test_health_and_supervision_name_the_launched_server(client: Client, server: TitoServer) -> None:
    health = client.health()
    assert health["status"] == "ok"
    assert health["session_server_instance_id"] == server.instance_id
    tree = client.supervision()
    assert tree["state"] == "running"
    assert tree["instance_id"] == server.instance_id
    assert tree["host_pid"] == server.host_pid
    assert len(tree["shards"]) == server.workers == 2


def test_create_session_with_a_server_id_and_with_our_own(client: Client) -> None:
    made = client.create_session()
    assert re.fullmatch(r"[0-9a-f]{32}", made.id)
    assert made.token is None
    own = f"py-{uuid.uuid4().hex}"
    chosen = client.create_session(own)
    assert chosen.id == own
    assert client.session(own).records() == []
    made.delete()
    chosen.delete()


def test_session_urls_and_openai_kwargs_reach_the_session(client: Client) -> None:
    session = client.create_session()
    assert session.openai_base_url == f"{client.url}/sessions/{session.id}/v1"
    assert session.anthropic_base_url == f"{client.url}/sessions/{session.id}"
    kwargs = session.openai_kwargs()
    assert kwargs == {"base_url": session.openai_base_url, "api_key": core.NO_AUTH_API_KEY}
    # What an OpenAI client does with the kwargs: POST {base_url}/chat/completions.
    res = httpx.post(
        f"{kwargs['base_url']}/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        headers={"authorization": f"Bearer {kwargs['api_key']}"},
    )
    assert res.status_code == 200, res.text
    # And an Anthropic client: POST {base_url}/v1/messages, on a session of its own.
    other = client.create_session()
    res = httpx.post(
        f"{other.anthropic_base_url}/v1/messages",
        json={"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert res.status_code == 200, res.text
    assert res.json()["type"] == "message"
    assert len(session.records()) == 1 and len(other.records()) == 1
    session.delete()
    other.delete()


def test_records_and_metadata_follow_the_turns(client: Client) -> None:
    session = client.create_session()
    messages = two_turns(session)
    records = session.records()
    assert [r["status_code"] for r in records] == [200, 200]
    assert records[0]["request"]["messages"] == messages[:1]
    assert records[1]["response"]["choices"][0]["message"] == messages[-1]
    meta = session.metadata()
    assert meta["tito_family"] == "qwen3"
    whole = session.get()
    assert whole["session_id"] == session.id
    assert whole["metadata"]["accumulated_token_ids"] == meta["accumulated_token_ids"]
    session.delete()


def test_list_sessions_walks_every_page(client: Client) -> None:
    made = [client.create_session() for _ in range(3)]
    ids = client.list_sessions(page_size=1)
    assert {s.id for s in made} <= set(ids)
    assert ids == sorted(ids) and len(ids) == len(set(ids))
    assert client.list_sessions() == ids
    for s in made:
        s.delete()
    assert not {s.id for s in made} & set(client.list_sessions())


def test_pause_resume_rollout_state(client: Client) -> None:
    client.resume("c-1")
    state = client.rollout_state()
    assert state == {"state": "running", "weight_version": "c-1", "held": 0, "in_flight": 0}
    for mode in ("keep", "abort", "drain"):
        paused = client.pause(mode)
        assert paused["mode"] == mode and paused["state"] == "paused"
        assert client.rollout_state()["state"] == "paused"
    resumed = client.resume("c-2")
    assert resumed["previous_weight_version"] == "c-1"
    assert resumed["weight_version"] == "c-2" and resumed["state"] == "running"
    with pytest.raises(ValueError):
        client.pause(cast(Any, "later"))
    with pytest.raises(ValueError):
        client.resume("")


def test_weight_update_holds_a_turn_and_stamps_it_with_the_new_version(client: Client) -> None:
    client.resume("w-1")
    session = client.create_session()
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    chat(session, messages, tools=[WEATHER_TOOL])
    call = messages[-1]["tool_calls"][0]
    messages.append({"role": "tool", "tool_call_id": call["id"], "content": "sunny"})
    with client.weight_update("w-2", in_flight="drain") as update:
        assert update.paused["state"] == "paused" and update.paused["mode"] == "drain"
        turn = threading.Thread(target=chat, args=(session, messages), kwargs={"tools": [WEATHER_TOOL]})
        turn.start()
        until(lambda: client.rollout_state()["held"] == 1, "the turn to reach the closed door")
        assert turn.is_alive()
        assert update.resumed is None
    turn.join(60)
    assert update.resumed is not None and update.resumed["released"] == 1
    assert update.resumed["weight_version"] == "w-2"
    assert [r["weight_version"] for r in session.records()] == ["w-1", "w-2"]
    session.delete()


def test_weight_update_that_fails_leaves_the_door_closed(client: Client) -> None:
    client.resume("f-1")
    with pytest.raises(RuntimeError, match="update failed"):
        with client.weight_update("f-2"):
            raise RuntimeError("update failed")
    assert client.rollout_state()["state"] == "paused"
    assert client.rollout_state()["weight_version"] == "f-1"
    client.resume("f-2")


def test_events_since_and_the_pause_events(client: Client) -> None:
    everything = list(client.events())
    assert all(isinstance(e, Event) for e in everything)
    assert [e.seq for e in everything] == sorted(e.seq for e in everything)
    assert any(e.actor == "router" and e.kind == "ready" for e in everything)
    last = everything[-1].seq
    client.pause("keep")
    client.resume("e-1")
    later = []
    for event in client.events(since=last, follow=True, poll_interval=0.02, timeout=60):
        later.append(event)
        if event.kind == "resumed":
            break
    assert [e.kind for e in later][-2:] == ["paused", "resumed"]
    assert later[-1].detail["weight_version"] == "e-1"
    assert all(e.seq > last for e in later)
    # A follow with a timeout ends when no event comes: it never hangs.
    started = time.monotonic()
    assert list(client.events(since=later[-1].seq, follow=True, timeout=0.3)) == []
    assert time.monotonic() - started < 10


def test_every_field_the_client_reads_is_documented(client: Client) -> None:
    # Exercise every reply parser, then hold what they read to docs/http.md.
    session = client.create_session()
    two_turns(session)
    client.health(), client.supervision(), list(client.events()), client.list_sessions()
    session.get(), session.samples("json"), session.samples("numpy")
    client.pause("keep"), client.resume("doc-1"), client.rollout_state()
    session.delete()
    doc = (REPO / "docs" / "http.md").read_text()
    read = {key for _, key in core.FIELDS_READ}
    assert {"session_id", "records", "held", "in_flight", "host_pid", "seq", "detail", "next"} <= read
    missing = sorted(k for k in read if f'"{k}"' not in doc and f"`{k}`" not in doc)
    assert missing == [], f"fields the client reads that docs/http.md does not show: {missing}"


def test_a_renamed_field_is_a_protocol_error_not_a_none() -> None:
    reply = core.Reply(200, b'{"state":"running","weight_version":null,"held":0,"inflight":0}', {}, "u")
    with pytest.raises(TitoProtocolError, match="no 'in_flight' field"):
        core.parse_rollout(reply)
    reply = core.Reply(200, b'{"session_id": 7}', {}, "u")
    with pytest.raises(TitoProtocolError, match="'session_id' is 7"):
        core.parse_created(reply)
    with pytest.raises(TitoProtocolError, match="not JSON"):
        core.parse_health(core.Reply(200, b"<html>", {}, "u"))


def test_the_package_is_typed_and_installed_as_built() -> None:
    import tito_client

    assert Path(tito_client.__file__).with_name("py.typed").is_file()
    if os.environ.get("TITO_CLIENT_INSTALLED") == "1":  # run-tests.sh: the wheel pip built, not src/
        assert CLIENT_DIR / "src" not in Path(tito_client.__file__).parents, tito_client.__file__


def test_create_session_sends_its_budget_and_refuses_a_bad_one(client: Client) -> None:
    # docs/http.md "Budgets": one turn more than max_turns is 400 TITO_ERR_BUDGET, and the
    # session is as it was.
    session = client.create_session(max_turns=1)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is the weather in Paris?"}]
    chat(session, messages)
    messages.append({"role": "user", "content": "And in Rome?"})
    over = httpx.post(
        f"{session.openai_base_url}/chat/completions", json={"model": "m", "messages": messages}, timeout=60
    )
    assert over.status_code == 400, over.text
    assert over.json()["code"] == "TITO_ERR_BUDGET"
    assert len(session.records()) == 1
    with pytest.raises(BadRequestError) as bad:
        client.create_session(max_total_tokens=-1)
    assert bad.value.code == "TITO_ERR_INVALID_BUDGET"
    session.delete()
