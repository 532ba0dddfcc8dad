"""The recipes of docs/python.md, run as their files are run, against the shared server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from conftest import EXAMPLES

from tito_client import Client, TitoServer


def run_example(name: str, server: TitoServer, *args: str) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--url", server.url, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr}"
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_agent_loop(server: TitoServer) -> None:
    [out] = run_example("agent_loop.py", server)
    assert out["turns"] == 2 and out["tool_calls"] == 1 and out["reward"] == 2.0
    assert out["generated_tokens"] > 0 and out["tokens"] > out["generated_tokens"]
    with Client(server.url) as client:
        assert out["session_id"] not in client.list_sessions()  # it cleaned up


def test_grpo_group(server: TitoServer) -> None:
    [out] = run_example("grpo_group.py", server, "--group", "3")
    assert out["shape"][0] == 6 and out["group"] == [0, 0, 0, 1, 1, 1]
    assert max(out["lengths"]) == out["shape"][1]
    assert all(n > 0 for n in out["loss_tokens"])
    assert out["rewards"] == [2.0] * 6  # every agent used the tool, then answered


def test_weight_update(server: TitoServer) -> None:
    outs = run_example("weight_update.py", server, "--agents", "2", "--steps", "2")
    assert [o["versions"] for o in outs] == [["step-0", "step-1", "step-2"]] * 2


def test_pad_group_aligns_the_masks_with_the_tokens() -> None:
    sys.path.insert(0, str(EXAMPLES))
    import numpy as np
    from grpo_group import pad_group

    short = {
        "tokens": np.array([5, 6, 7], dtype=np.int64),
        "response_length": 1,
        "loss_mask": np.array([1], dtype=np.uint8),
        "rollout_log_probs": np.array([-0.5], dtype=np.float32),
    }
    long = {
        "tokens": np.array([1, 2, 3, 4, 9], dtype=np.int64),
        "response_length": 3,
        "loss_mask": np.array([1, 0, 1], dtype=np.uint8),
        "rollout_log_probs": np.array([-1, 0, -2], dtype=np.float32),
    }
    batch = pad_group([short, long])
    assert batch["input_ids"].tolist() == [[5, 6, 7, 0, 0], [1, 2, 3, 4, 9]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    assert batch["loss_mask"].tolist() == [[0, 0, 1, 0, 0], [0, 0, 1, 0, 1]]
    assert batch["log_probs"].tolist() == [[0, 0, -0.5, 0, 0], [0, 0, -1, 0, -2]]
