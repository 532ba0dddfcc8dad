"""Samples: the safetensors export read into arrays equals the server's JSON, element for element."""

from __future__ import annotations

import importlib.util
import struct
from typing import Any, cast

import httpx
import numpy as np
import pytest
from conftest import two_turns

from tito_client import Client, Session, TitoProtocolError, read_safetensors
from tito_client._samples import SAMPLE_METADATA, SAMPLE_TENSORS

DTYPES = {"tokens": np.int64, "loss_mask": np.uint8, "rollout_log_probs": np.float32, "rollout_routed_experts": np.int32}


@pytest.fixture(scope="module")
def sampled(server: Any) -> Any:
    with server.client() as client:
        client.resume("s-1")
        session = client.create_session()
        two_turns(session)
        yield client, session
        session.delete()


def assert_same(arrays: dict[str, Any], json_sample: dict[str, Any]) -> None:
    """Every key of the JSON sample, every element: the arrays at their dtype, the rest equal."""
    assert set(arrays) == set(json_sample)
    for key, value in json_sample.items():
        if key in DTYPES:
            got = np.asarray(arrays[key])
            want = np.asarray(value, dtype=DTYPES[key])
            assert got.dtype == DTYPES[key], key
            assert got.shape == want.shape, key
            # The server writes F32 log probs: the JSON's doubles, rounded to float32, match bit for bit.
            assert np.array_equal(got, want), key
        else:
            assert arrays[key] == value, key


def test_numpy_sample_equals_the_json_sample(sampled: tuple[Client, Session]) -> None:
    _, session = sampled
    as_json = session.samples("json")
    arrays = session.samples("numpy")
    assert as_json["status"] == "completed" and len(as_json["turns"]) == 2
    assert "rollout_routed_experts" in as_json  # --routing-replay
    assert_same(arrays, as_json)
    assert set(as_json) <= set(SAMPLE_TENSORS) | set(SAMPLE_METADATA)
    assert arrays["oldest_weight_version"] == "s-1"
    assert arrays["rollout_routed_experts"].shape[0] == arrays["tokens"].shape[0] - 1
    assert arrays["loss_mask"].shape == (arrays["response_length"],)
    assert np.array_equal(arrays["tokens"], session.metadata()["accumulated_token_ids"])
    arrays["tokens"][0] = -1  # writable copies, ready for torch.from_numpy


def test_max_seq_len_truncates_both_formats_alike(sampled: tuple[Client, Session]) -> None:
    _, session = sampled
    full = session.samples("json")
    cut = full["turns"][1]["completion_start"] + 3
    as_json = session.samples("json", max_seq_len=cut)
    arrays = session.samples("numpy", max_seq_len=cut)
    assert as_json["status"] == "truncated" and len(as_json["tokens"]) == cut
    assert_same(arrays, as_json)


def test_the_small_reader_reads_the_file_the_server_wrote(sampled: tuple[Client, Session]) -> None:
    client, session = sampled
    url = f"{client.url}/sessions/{session.id}/samples"
    raw = httpx.post(url, params={"format": "safetensors"}, json={}).content
    as_json = httpx.post(url, json={}).json()
    tensors, metadata = read_safetensors(raw)
    assert list(tensors) == ["tokens", "rollout_log_probs", "rollout_routed_experts", "loss_mask"]
    assert metadata["session_id"] == session.id and metadata["response_length"] == str(as_json["response_length"])
    for key, array in tensors.items():
        assert np.array_equal(array, np.asarray(as_json[key], dtype=DTYPES[key])), key
    if importlib.util.find_spec("safetensors") is not None:
        from safetensors.numpy import load

        reference = load(raw)
        assert all(np.array_equal(reference[k], tensors[k]) for k in reference)


def test_the_reader_refuses_a_broken_file(sampled: tuple[Client, Session]) -> None:
    client, session = sampled
    raw = httpx.post(f"{client.url}/sessions/{session.id}/samples?format=safetensors", json={}).content
    (size,) = struct.unpack("<Q", raw[:8])
    with pytest.raises(TitoProtocolError, match="shorter than"):
        read_safetensors(raw[:5])
    with pytest.raises(TitoProtocolError, match="does not fit"):
        read_safetensors(raw[: 8 + size - 1])
    with pytest.raises(TitoProtocolError, match="needs"):
        read_safetensors(raw[:-1])  # the last tensor's bytes run past the end
    with pytest.raises(TitoProtocolError, match="not JSON"):
        read_safetensors(struct.pack("<Q", 2) + b"{x")


def test_a_session_without_turns_gives_an_empty_sample(sampled: tuple[Client, Session]) -> None:
    client, _ = sampled
    session = client.create_session()
    as_json = session.samples("json")
    arrays = session.samples("numpy")
    assert as_json["tokens"] == [] and as_json["turns"] == [] and as_json["oldest_weight_version"] is None
    assert_same(arrays, as_json)
    assert arrays["tokens"].shape == (0,)
    session.delete()


def test_torch_format(sampled: tuple[Client, Session]) -> None:
    _, session = sampled
    if importlib.util.find_spec("torch") is None:
        with pytest.raises(ImportError, match="needs torch installed"):
            session.samples("torch")
        return
    import torch

    tensors = session.samples("torch")
    assert isinstance(tensors["tokens"], torch.Tensor) and tensors["tokens"].dtype == torch.int64
    assert_same({k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in tensors.items()}, session.samples("json"))


def test_an_unknown_format_is_refused_before_any_request(sampled: tuple[Client, Session]) -> None:
    _, session = sampled
    with pytest.raises(ValueError, match="fmt must be one of"):
        session.samples(cast(Any, "arrow"))
