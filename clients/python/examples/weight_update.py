"""Recipe 3: the weight-update loop: rollout, pause, update, resume, versions checked per turn.

Each step, every agent sends its next turn while the trainer updates the weights: the
turns wait at tito-server's closed door (docs/rl-loop.md), the (fake) update runs, and
the resume releases them under the new version. At the end each session's sample says,
turn by turn, which policy version generated it.

    python clients/python/examples/weight_update.py --bin bin/tito-server.js --steps 3
    python clients/python/examples/weight_update.py --url http://127.0.0.1:8080
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import httpx

from tito_client import AsyncClient, AsyncSession, TitoServer

FOLLOW_UPS = ["And tomorrow?", "And the day after?", "Should I take an umbrella?", "Thanks. Anything else?"]


def update_engine_weights(step: int) -> None:
    """Stand-in for the engine-specific update (SGLang ``/update_weights_from_disk``, …)."""
    time.sleep(0.05)


async def chat_turn(http: httpx.AsyncClient, session: AsyncSession, messages: list[dict[str, Any]]) -> None:
    """One turn: send the conversation, append the assistant's reply as it came."""
    headers = {"authorization": f"Bearer {session.token}"} if session.token else {}
    res = await http.post(
        f"{session.openai_base_url}/chat/completions",
        json={"model": "default", "messages": messages},
        headers=headers,
    )
    res.raise_for_status()
    messages.append(res.json()["choices"][0]["message"])


async def wait_held(client: AsyncClient, count: int, timeout: float = 60.0) -> None:
    """Until ``count`` turns wait at the closed door (a condition, not a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while (await client.rollout_state())["held"] < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count} turns did not reach the door within {timeout} s")
        await asyncio.sleep(0.02)


async def run(url: str, admin_token: str | None, agents: int, steps: int) -> list[dict[str, Any]]:
    async with AsyncClient(url, admin_token=admin_token) as client, httpx.AsyncClient(
        timeout=httpx.Timeout(600, connect=5)
    ) as http:
        # A version before the first turn, so that no turn is recorded with null.
        await client.resume("step-0")
        sessions = await asyncio.gather(*(client.create_session() for _ in range(agents)))
        conversations: list[list[dict[str, Any]]] = [
            [{"role": "user", "content": f"What is the weather in city {i}?"}] for i in range(agents)
        ]
        await asyncio.gather(*(chat_turn(http, s, c) for s, c in zip(sessions, conversations)))
        for step in range(1, steps + 1):
            for c in conversations:
                c.append({"role": "user", "content": FOLLOW_UPS[(step - 1) % len(FOLLOW_UPS)]})
            async with client.weight_update(f"step-{step}", in_flight="drain") as update:
                turns = [asyncio.create_task(chat_turn(http, s, c)) for s, c in zip(sessions, conversations)]
                await wait_held(client, agents)
                update_engine_weights(step)
            await asyncio.gather(*turns)
            assert update.resumed is not None and update.resumed["released"] == agents, update.resumed
        results = []
        expected = [f"step-{k}" for k in range(steps + 1)]
        for s in sessions:
            sample = await s.samples("json")
            versions = [t["weight_version"] for t in sample["turns"]]
            # The turn sent during step k's update was held and released under step-k.
            assert versions == expected, (s.id, versions)
            assert sample["oldest_weight_version"] == "step-0"
            results.append({"session_id": s.id, "versions": versions})
            await s.delete()
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running tito-server (else one is launched)")
    parser.add_argument("--admin-token", help="its --auth-token")
    parser.add_argument("--bin", help="the tito-server executable to launch (default: $TITO_SERVER_BIN or npx)")
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    opts = parser.parse_args()
    server = None if opts.url else TitoServer(bin=opts.bin, workers=1)
    url = opts.url if server is None else server.url
    try:
        results = asyncio.run(run(url, opts.admin_token, opts.agents, opts.steps))
    finally:
        if server is not None:
            server.close()
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
