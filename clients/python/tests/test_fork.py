"""Session.fork (POST /sessions/{id}/fork) against a real server: a linear session at a turn index,
a tree-mode session at a node id, the errors, and AsyncSession.fork."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from conftest import chat, two_turns

from tito_client import AsyncClient, Client, ConflictError, NotFoundError, TitoServer


def test_fork_at_a_turn_keeps_the_records_up_to_it_and_goes_its_own_way(client: Client) -> None:
    parent = client.create_session()
    messages = two_turns(parent)
    first = parent.fork(0)
    assert first.id != parent.id
    records = parent.records()
    assert first.records() == records[:1]
    whole = parent.fork(1)
    assert whole.records() == records
    # A turn on the fork: the parent keeps its two records.
    chat(whole, [*messages, {"role": "user", "content": "And in Rome?"}])
    assert len(whole.records()) == 3
    assert parent.records() == records
    with pytest.raises(ConflictError) as no_turn:
        parent.fork(2)
    assert no_turn.value.code == "TITO_ERR_FORK_TURN"
    with pytest.raises(ConflictError) as no_node:
        parent.fork("n0")
    assert no_node.value.code == "TITO_ERR_FORK_NODE"
    with pytest.raises(NotFoundError):
        client.session("py-no-such-session").fork(0)
    for s in (first, whole, parent):
        s.delete()


def test_fork_of_a_tree_mode_session_at_a_node(client: Client) -> None:
    # A tree-mode session is chosen at creation (docs/trajectories.md).
    tree = client.create_session(trajectory="tree")
    outline = httpx.get(f"{client.url}/sessions/{tree.id}/tree")
    assert outline.status_code == 200, outline.text
    assert outline.json()["trajectory"] == "tree"
    ask: list[dict[str, Any]] = [{"role": "user", "content": "one"}]
    chat(tree, ask)
    retried = [*ask, {"role": "user", "content": "two"}]
    chat(tree, list(retried))  # n1
    chat(tree, list(retried))  # n2, a retry of n1
    fork = tree.fork("n2")
    records = fork.records()
    assert [(r["node_id"], r["parent"], r["retry_of"]) for r in records] == [("n0", None, None), ("n1", "n0", None)]
    parent = tree.records()
    assert [r["response"] for r in records] == [parent[0]["response"], parent[2]["response"]]
    with pytest.raises(ConflictError) as index:
        tree.fork(1)
    assert index.value.code == "TITO_ERR_FORK_TREE"
    fork.delete()
    tree.delete()


@pytest.mark.asyncio
async def test_async_fork(server: TitoServer) -> None:
    async with AsyncClient(server.url) as client:
        session = await client.create_session()
        async with httpx.AsyncClient(timeout=60) as http:
            res = await http.post(
                f"{session.openai_base_url}/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            )
            assert res.status_code == 200, res.text
        fork = await session.fork(0)
        assert fork.id != session.id
        assert (await fork.records()) == (await session.records())
        await fork.delete()
        await session.delete()
