"""Training samples: the server's safetensors export read into numpy arrays or torch tensors.

The layout is the one docs/http.md#samples describes: tensors ``tokens`` (I64),
``rollout_log_probs`` (F32), ``rollout_routed_experts`` (I32, only with routing replay)
and ``loss_mask`` (U8); ``__metadata__`` holds ``session_id``, ``status``,
``response_length``, ``turns`` (JSON) and ``oldest_weight_version`` (absent when null),
all as strings. The file format itself is Hugging Face's: an 8-byte little-endian header
length, a JSON header, then the tensors' bytes (huggingface/safetensors, README.md
"Format"). The ``safetensors`` package reads it when installed; else :func:`read_safetensors`.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from ._errors import TitoProtocolError

__all__ = ["read_safetensors", "sample_from_safetensors", "SAMPLE_TENSORS", "SAMPLE_METADATA"]

# The tensors and metadata keys of a sample (docs/http.md#samples); a test holds them to
# the server's JSON sample, so a renamed field fails there.
SAMPLE_TENSORS = ("tokens", "rollout_log_probs", "rollout_routed_experts", "loss_mask")
SAMPLE_METADATA = ("session_id", "status", "response_length", "turns", "oldest_weight_version")
_REQUIRED_TENSORS = ("tokens", "rollout_log_probs", "loss_mask")

_DTYPES: dict[str, str] = {
    "BOOL": "|b1",
    "U8": "|u1",
    "I8": "|i1",
    "U16": "<u2",
    "I16": "<i2",
    "F16": "<f2",
    "U32": "<u4",
    "I32": "<i4",
    "F32": "<f4",
    "U64": "<u8",
    "I64": "<i8",
    "F64": "<f8",
}
# A header larger than this is not one the server wrote (it holds four tensors' entries
# and the turns list); refuse it rather than parse an arbitrarily large prefix.
_MAX_HEADER = 100 * 1024 * 1024


def read_safetensors(data: bytes) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Parses a safetensors file: ``(tensors, metadata)``. Arrays are writable copies.

    Raises :class:`TitoProtocolError` for anything that is not a well-formed file: a short
    or oversized header, offsets outside the data, a size that does not match the shape,
    or a dtype numpy has no little-endian type for (BF16, F8).
    """
    if len(data) < 8:
        raise TitoProtocolError(f"safetensors: {len(data)} bytes, shorter than the 8-byte header length")
    (size,) = struct.unpack("<Q", data[:8])
    if size > _MAX_HEADER or 8 + size > len(data):
        raise TitoProtocolError(f"safetensors: header length {size} does not fit the {len(data)}-byte file")
    try:
        header = json.loads(data[8 : 8 + size].decode("utf-8"))
    except ValueError as err:
        raise TitoProtocolError(f"safetensors: the header is not JSON: {err}") from None
    if not isinstance(header, dict):
        raise TitoProtocolError("safetensors: the header is not a JSON object")
    buffer = memoryview(data)[8 + size :]
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise TitoProtocolError("safetensors: __metadata__ must map strings to strings")
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        try:
            dtype = np.dtype(_DTYPES[info["dtype"]])
            shape = [int(d) for d in info["shape"]]
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise TitoProtocolError(f"safetensors: tensor {name!r} has an unusable entry {info!r}") from None
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not 0 <= begin <= end <= len(buffer) or end - begin != count * dtype.itemsize:
            raise TitoProtocolError(
                f"safetensors: tensor {name!r} spans bytes {begin}..{end} of {len(buffer)}, "
                f"but {shape} x {info['dtype']} needs {count * dtype.itemsize}"
            )
        array = np.frombuffer(buffer[begin:end], dtype=dtype).reshape(shape)
        tensors[name] = array.astype(dtype.newbyteorder("="), copy=True)
    return tensors, metadata


def _load(data: bytes) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    try:
        from safetensors.numpy import load
    except ImportError:
        return read_safetensors(data)
    tensors = load(data)
    # safetensors.numpy.load drops __metadata__; the header is read for it alone.
    (size,) = struct.unpack("<Q", data[:8])
    metadata = json.loads(data[8 : 8 + size].decode("utf-8")).get("__metadata__") or {}
    return {k: np.array(v, copy=True) for k, v in tensors.items()}, metadata


def sample_from_safetensors(data: bytes, fmt: str) -> dict[str, Any]:
    """The sample dict of a safetensors export, keyed as the server's JSON sample.

    ``fmt`` is ``"numpy"`` or ``"torch"``. Metadata values get their JSON types back:
    ``response_length`` an int, ``turns`` a list, ``oldest_weight_version`` a string or
    ``None``.
    """
    tensors, metadata = _load(data)
    for name in _REQUIRED_TENSORS:
        if name not in tensors:
            raise TitoProtocolError(f"samples: the safetensors export has no {name!r} tensor (has {sorted(tensors)})")
    for key in ("session_id", "status", "response_length", "turns"):
        if key not in metadata:
            raise TitoProtocolError(f"samples: the safetensors metadata has no {key!r} (has {sorted(metadata)})")
    sample: dict[str, Any] = {
        "session_id": metadata["session_id"],
        "status": metadata["status"],
        "response_length": int(metadata["response_length"]),
        "turns": json.loads(metadata["turns"]),
        "oldest_weight_version": metadata.get("oldest_weight_version"),
    }
    for name in SAMPLE_TENSORS:
        if name in tensors:
            sample[name] = tensors[name]
    if fmt == "torch":
        try:
            import torch
        except ImportError:
            raise ImportError('samples(fmt="torch") needs torch installed; fmt="numpy" needs only numpy') from None
        for name in SAMPLE_TENSORS:
            if name in sample:
                sample[name] = torch.from_numpy(sample[name])
    return sample
