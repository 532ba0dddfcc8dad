"""AsyncClient: the same surface as Client, under asyncio, against the shared server."""

from __future__ import annotations

import asyncio
import re
import uuid

import httpx
import numpy as np
import pytest
from conftest import WEATHER_TOOL

from tito_client import (
    AsyncClient,
    AsyncSession,
    ConflictError,
    Event,
    NotFoundError,
    TitoConnectionError,
    TitoServer,
)
from tito_client import _core as core

pytestmark = pytest.mark.asyncio


async def turn(http: httpx.AsyncClient, session: AsyncSession, messages: list[dict], **body: object) -> None:
    res = await http.post(f"{session.openai_base_url}/chat/completions", json={"model": "m", "messages": messages, **body})
    assert res.status_code == 200, res.text
    messages.append(res.json()["choices"][0]["message"])


async def test_server_routes(server: TitoServer) -> None:
    async with server.async_client() as client:
        assert (await client.health())["session_server_instance_id"] == server.instance_id
        assert (await client.supervision())["host_pid"] == server.host_pid
        events = [e async for e in client.events()]
        assert events and all(isinstance(e, Event) for e in events)
        last = events[-1].seq
        await client.pause("keep")
        await client.resume("async-events")
        kinds = []
        async for event in client.events(since=last, follow=True, poll_interval=0.02, timeout=60):
            kinds.append(event.kind)
            if event.kind == "resumed":
                break
        assert kinds[-2:] == ["paused", "resumed"]
        quiet = [e async for e in client.events(since=10**9, follow=True, timeout=0.2)]
        assert quiet == []


async def test_sessions_concurrently(server: TitoServer) -> None:
    async with AsyncClient(server.url) as client, httpx.AsyncClient(timeout=60) as http:
        own = f"py-async-{uuid.uuid4().hex}"
        sessions = await asyncio.gather(*(client.create_session() for _ in range(4)), client.create_session(own))
        assert sessions[-1].id == own and all(re.fullmatch(r"[0-9a-f]{32}", s.id) for s in sessions[:-1])
        with pytest.raises(ConflictError):
            await client.create_session(own)
        s = sessions[0]
        assert s.openai_base_url == f"{server.url}/sessions/{s.id}/v1"
        assert s.anthropic_base_url == f"{server.url}/sessions/{s.id}"
        assert s.openai_kwargs() == {"base_url": s.openai_base_url, "api_key": core.NO_AUTH_API_KEY}
        conversations = [[{"role": "user", "content": f"Weather in city {i}?"}] for i in range(len(sessions))]
        await asyncio.gather(*(turn(http, s, c, tools=[WEATHER_TOOL]) for s, c in zip(sessions, conversations)))
        records = await asyncio.gather(*(s.records() for s in sessions))
        assert [len(r) for r in records] == [1] * len(sessions)
        assert (await s.metadata())["tito_family"] == "qwen3"
        assert (await s.get())["session_id"] == s.id
        again = client.session(s.id)
        assert (await again.records()) == records[0]
        ids = await client.list_sessions(page_size=2)
        assert {x.id for x in sessions} <= set(ids)
        await asyncio.gather(*(x.delete() for x in sessions))
        with pytest.raises(NotFoundError):
            await s.delete()
        assert not {x.id for x in sessions} & set(await client.list_sessions())


async def test_samples_round_trip(server: TitoServer) -> None:
    async with AsyncClient(server.url) as client, httpx.AsyncClient(timeout=60) as http:
        session = await client.create_session()
        await turn(http, session, [{"role": "user", "content": "hello"}])
        as_json = await session.samples("json")
        arrays = await session.samples("numpy")
        assert set(arrays) == set(as_json)
        assert np.array_equal(arrays["tokens"], np.asarray(as_json["tokens"], dtype=np.int64))
        assert np.array_equal(arrays["loss_mask"], np.asarray(as_json["loss_mask"], dtype=np.uint8))
        assert np.array_equal(arrays["rollout_log_probs"], np.asarray(as_json["rollout_log_probs"], dtype=np.float32))
        assert np.array_equal(arrays["rollout_routed_experts"], np.asarray(as_json["rollout_routed_experts"], dtype=np.int32))
        assert arrays["turns"] == as_json["turns"]
        await session.delete()


async def test_rl_loop(server: TitoServer) -> None:
    async with server.async_client() as client, httpx.AsyncClient(timeout=60) as http:
        await client.resume("a-1")
        session = await client.create_session()
        messages = [{"role": "user", "content": "hi"}]
        await turn(http, session, messages)
        messages.append({"role": "user", "content": "and again"})
        async with client.weight_update("a-2", in_flight="abort") as update:
            assert update.paused["mode"] == "abort"
            held = asyncio.create_task(turn(http, session, messages))

            async def at_the_door() -> None:
                while (await client.rollout_state())["held"] < 1:
                    assert not held.done()
                    await asyncio.sleep(0.01)

            await asyncio.wait_for(at_the_door(), 60)
        await asyncio.wait_for(held, 60)
        assert update.resumed is not None and update.resumed["released"] == 1
        assert [r["weight_version"] for r in await session.records()] == ["a-1", "a-2"]
        assert (await client.rollout_state())["weight_version"] == "a-2"
        paused = await client.pause("keep")
        assert paused["state"] == "paused"
        resumed = await client.resume("a-3")
        assert resumed["previous_weight_version"] == "a-2"
        with pytest.raises(RuntimeError):
            async with client.weight_update("a-4"):
                raise RuntimeError("the update failed")
        assert (await client.rollout_state())["state"] == "paused"
        await client.resume("a-4")
        await session.delete()


async def test_a_dead_server_raises() -> None:
    async with AsyncClient("http://127.0.0.1:9", timeout=5) as client:
        with pytest.raises(TitoConnectionError):
            await client.health()
        with pytest.raises(TitoConnectionError):
            [e async for e in client.events()]


async def test_close_closes_the_connections(server: TitoServer) -> None:
    client = AsyncClient(server.url)
    assert (await client.health())["status"] == "ok"
    await client.close()
    with pytest.raises(RuntimeError):  # httpx refuses a closed client
        await client.health()
