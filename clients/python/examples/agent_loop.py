"""Recipe 1: an agent with tools over plain httpx, in the reference server's shape.

``run_agent(base_url, prompt, request_kwargs, metadata, **kwargs) -> dict | None`` is the
agent contract of miles' session server (radixark/miles, its documentation of
``--custom-agent-function-path``; examples/openai_format/dapo_math.py at c190d548): the
rollout hands the agent a session's base URL (``{url}/sessions/{id}``), the agent posts
the whole conversation to ``{base_url}/v1/chat/completions`` each turn, and what it
returns (reward, counters) is merged into the sample's metadata. tito-server keeps the
token ids; the trainer reads them back as a sample.

    python clients/python/examples/agent_loop.py --bin bin/tito-server.js   # launches one
    python clients/python/examples/agent_loop.py --url http://127.0.0.1:8080   # attaches
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any, Callable

import httpx

from tito_client import Client, TitoServer

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def get_weather(city: str) -> dict[str, Any]:
    """A stand-in tool: a real agent would call a service here."""
    return {"city": city, "temp_c": 18, "sky": "clear"}


TOOLS: dict[str, Callable[..., Any]] = {"get_weather": get_weather}


def reward(messages: list[dict[str, Any]]) -> float:
    """A stand-in reward: the agent used its tool (1) and then answered in words (1)."""
    used_tool = any(m["role"] == "tool" for m in messages)
    answered = messages[-1]["role"] == "assistant" and bool(messages[-1].get("content"))
    return float(used_tool) + float(answered)


async def run_agent(
    base_url: str,
    prompt: str | list[dict[str, Any]],
    request_kwargs: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    *,
    api_key: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Runs the tool loop on one session until the model answers without a tool call.

    ``base_url`` is the session's root (``Session.anthropic_base_url``: ``{url}/sessions/{id}``);
    ``prompt`` the first messages (or a user message's text); ``request_kwargs`` go into
    every chat request (``temperature``, ``max_tokens``, …); ``metadata`` is the sample's
    own data (here ``max_turns``, default 8); ``api_key`` the session token when the server
    has ``--auth-token``. Returns the reward and counters, for the sample's metadata.
    """
    max_turns = int((metadata or {}).get("max_turns", 8))
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    tool_calls = 0
    async with httpx.AsyncClient(timeout=httpx.Timeout(600, connect=5), headers=headers) as http:
        for _ in range(max_turns):
            body = {"model": "default", "messages": messages, "tools": [WEATHER_TOOL], **(request_kwargs or {})}
            res = await http.post(f"{base_url}/v1/chat/completions", json=body)
            res.raise_for_status()
            message = res.json()["choices"][0]["message"]
            # The assistant message goes back exactly as it came: the session matches it
            # against what it stored (docs/agents.md).
            messages.append(message)
            calls = message.get("tool_calls") or []
            if not calls:
                break
            for call in calls:
                fn = call["function"]
                result = TOOLS[fn["name"]](**json.loads(fn["arguments"] or "{}"))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
                tool_calls += 1
    return {
        "reward": reward(messages),
        "turns": sum(1 for m in messages if m["role"] == "assistant"),
        "tool_calls": tool_calls,
        "answer": messages[-1].get("content"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running tito-server (else one is launched)")
    parser.add_argument("--admin-token", help="its --auth-token")
    parser.add_argument("--bin", help="the tito-server executable to launch (default: $TITO_SERVER_BIN or npx)")
    opts = parser.parse_args()
    server = None if opts.url else TitoServer(bin=opts.bin, workers=1)
    url = opts.url if server is None else server.url
    try:
        with Client(url, admin_token=opts.admin_token) as client:
            session = client.create_session()
            result = asyncio.run(
                run_agent(session.anthropic_base_url, "What is the weather in Paris?", api_key=session.token)
            )
            records = session.records()
            sample = session.samples("numpy")
            # Every assistant turn is one record and one sample turn; the loss mask covers
            # exactly the tokens the engine generated.
            assert len(records) == result["turns"] == len(sample["turns"]), (len(records), result)
            generated = sum(t["completion_end"] - t["completion_start"] for t in sample["turns"])
            assert int(sample["loss_mask"].sum()) == generated
            print(
                json.dumps(
                    {
                        "session_id": session.id,
                        **result,
                        "tokens": int(sample["tokens"].shape[0]),
                        "generated_tokens": generated,
                    }
                )
            )
            session.delete()
    finally:
        if server is not None:
            server.close()


if __name__ == "__main__":
    main()
