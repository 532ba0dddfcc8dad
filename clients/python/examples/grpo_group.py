"""Recipe 2: a GRPO-style group: N sessions per prompt with asyncio, samples as padded arrays.

Each prompt gets a group of N sessions whose agents run concurrently; every session's
sample is pulled from the safetensors export, each group's (stand-in) rewards become
group-normalized advantages, and all groups are stacked into right-padded
``[prompts * N, max_len]`` arrays with an attention mask and a loss mask over the whole
sequence.

    python clients/python/examples/grpo_group.py --bin bin/tito-server.js --group 4
    python clients/python/examples/grpo_group.py --url http://127.0.0.1:8080
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

import numpy as np

from tito_client import AsyncClient, AsyncSession, TitoServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent_loop import run_agent  # the recipe next to this one, importable once its folder is on the path

PAD_ID = 0


def pad_group(samples: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Stacks samples (``fmt="numpy"``) into right-padded arrays.

    ``loss_mask`` and ``rollout_log_probs`` of a sample cover its last ``response_length``
    tokens (docs/http.md#samples); here they are placed at those positions of the whole
    sequence, so every array is ``[N, max_len]`` and lines up with ``input_ids``.
    """
    n = len(samples)
    width = max(int(s["tokens"].shape[0]) for s in samples)
    input_ids = np.full((n, width), PAD_ID, dtype=np.int64)
    attention_mask = np.zeros((n, width), dtype=np.int64)
    loss_mask = np.zeros((n, width), dtype=np.float32)
    log_probs = np.zeros((n, width), dtype=np.float32)
    for i, s in enumerate(samples):
        length, response = int(s["tokens"].shape[0]), int(s["response_length"])
        input_ids[i, :length] = s["tokens"]
        attention_mask[i, :length] = 1
        loss_mask[i, length - response : length] = s["loss_mask"]
        log_probs[i, length - response : length] = s["rollout_log_probs"]
    return {"input_ids": input_ids, "attention_mask": attention_mask, "loss_mask": loss_mask, "log_probs": log_probs}


async def rollout_group(client: AsyncClient, prompt: str, n: int) -> tuple[list[dict[str, Any]], np.ndarray]:
    """N sessions on one prompt, concurrently: their samples and rewards."""
    sessions: list[AsyncSession] = await asyncio.gather(*(client.create_session() for _ in range(n)))
    try:
        results = await asyncio.gather(
            *(run_agent(s.anthropic_base_url, prompt, {"temperature": 1.0}, api_key=s.token) for s in sessions)
        )
        samples = await asyncio.gather(*(s.samples("numpy") for s in sessions))
    finally:
        await asyncio.gather(*(s.delete() for s in sessions))
    rewards = np.array([r["reward"] for r in results], dtype=np.float32)
    return list(samples), rewards


async def run(url: str, admin_token: str | None, prompts: list[str], n: int) -> dict[str, np.ndarray]:
    """Every prompt's group at once, stacked into one padded ``[len(prompts) * n, max_len]`` batch."""
    async with AsyncClient(url, admin_token=admin_token) as client:
        groups = await asyncio.gather(*(rollout_group(client, p, n) for p in prompts))
    batch = pad_group([s for samples, _ in groups for s in samples])
    rewards = [r for _, r in groups]
    batch["rewards"] = np.concatenate(rewards)
    # GRPO: each reward against its own group's mean and spread.
    batch["advantages"] = np.concatenate([(r - r.mean()) / (r.std() + 1e-6) for r in rewards])
    batch["group"] = np.repeat(np.arange(len(prompts)), n)
    return batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running tito-server (else one is launched)")
    parser.add_argument("--admin-token", help="its --auth-token")
    parser.add_argument("--bin", help="the tito-server executable to launch (default: $TITO_SERVER_BIN or npx)")
    parser.add_argument("--group", type=int, default=4, help="sessions per prompt (default 4)")
    opts = parser.parse_args()
    prompts = ["What is the weather in Paris?", "Is it raining in Oslo?"]
    server = None if opts.url else TitoServer(bin=opts.bin, workers=1)
    url = opts.url if server is None else server.url
    try:
        batch = asyncio.run(run(url, opts.admin_token, prompts, opts.group))
    finally:
        if server is not None:
            server.close()
    lengths = batch["attention_mask"].sum(axis=1)
    # Padding is masked out everywhere, and every generated token is inside the mask.
    assert all((batch["input_ids"][i, int(n) :] == PAD_ID).all() for i, n in enumerate(lengths))
    assert not (batch["loss_mask"] > batch["attention_mask"]).any()
    print(
        json.dumps(
            {
                "shape": list(batch["input_ids"].shape),
                "group": batch["group"].tolist(),
                "lengths": lengths.tolist(),
                "loss_tokens": batch["loss_mask"].sum(axis=1).astype(int).tolist(),
                "rewards": batch["rewards"].tolist(),
                "advantages": [round(float(a), 4) for a in batch["advantages"]],
            }
        )
    )


if __name__ == "__main__":
    main()
