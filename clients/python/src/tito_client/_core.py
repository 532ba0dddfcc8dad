"""What both clients share: each route as a :class:`Call` (request plus reply parser).

The sync and async clients only move bytes; every request they make and every field
they read is written once, here. Fields are read by name (:func:`field`), never with a
default: a server that renames one makes the client raise :class:`TitoProtocolError`
instead of handing the trainer a ``None``. The routes and fields are docs/http.md's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field as dc_field
from typing import Any, Callable, Literal
from urllib.parse import quote

from ._errors import TitoProtocolError
from ._samples import sample_from_safetensors

InFlight = Literal["drain", "abort", "keep"]
SampleFormat = Literal["numpy", "torch", "json"]
Trajectory = Literal["linear", "tree"]
IN_FLIGHT_MODES = ("drain", "abort", "keep")
SAMPLE_FORMATS = ("numpy", "torch", "json")
# How long a pause may take to answer by default: a drain waits for the turns in flight,
# i.e. up to one engine turn; the server's own bound on a held turn is 600 s
# (--hold-timeout-ms), so a longer wait would be of no use to a held turn either.
PAUSE_TIMEOUT_S = 600.0
# The placeholder api_key of a server without --auth-token: the OpenAI SDK needs a value.
NO_AUTH_API_KEY = "tito-no-auth"


@dataclass(frozen=True)
class Reply:
    """A 2xx answer as the transport got it."""

    status: int
    content: bytes
    headers: Any
    url: str

    def json(self) -> Any:
        try:
            return json.loads(self.content)
        except ValueError as err:
            raise TitoProtocolError(f"the reply of {self.url} is not JSON: {err}", status=self.status) from None


@dataclass(frozen=True)
class Call:
    """One request to the server and how to read its 2xx reply."""

    method: str
    path: str
    parse: Callable[[Reply], Any]
    params: dict[str, str] | None = None
    json: Any = None
    headers: dict[str, str] | None = None
    # None: the client's default timeout; a number: this call's own (seconds).
    timeout: float | None = None


@dataclass(frozen=True)
class Event:
    """One supervision event (docs/http.md, ``GET /supervision/events``)."""

    seq: int
    time: str
    actor: str
    kind: str
    pid: int | None
    detail: dict[str, Any] = dc_field(default_factory=dict)


@dataclass(frozen=True)
class CreatedSession:
    """What ``POST /sessions`` / ``PUT /sessions/{id}`` answered."""

    id: str
    token: str | None


# Every (reply, field) the client has read: a test holds them to docs/http.md.
FIELDS_READ: set[tuple[str, str]] = set()


def field(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``obj[key]``, checked to be of ``kind``; a missing or mistyped field is a TitoProtocolError."""
    FIELDS_READ.add((where, key))
    if not isinstance(obj, dict):
        raise TitoProtocolError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if key not in obj:
        raise TitoProtocolError(f"{where}: the reply has no {key!r} field (it has {sorted(obj)})")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
        raise TitoProtocolError(f"{where}: {key!r} is {value!r}, not {_names(kind)}")
    return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _names(kind: type | tuple[type, ...]) -> str:
    return " or ".join("null" if k is type(None) else k.__name__ for k in _as_tuple(kind))


def _sid(session_id: str) -> str:
    return quote(session_id, safe="")


def _as_dict(reply: Reply) -> dict[str, Any]:
    body = reply.json()
    if not isinstance(body, dict):
        raise TitoProtocolError(f"{reply.url}: expected a JSON object, got {type(body).__name__}")
    return body


# --- reply parsers ---------------------------------------------------------------------


def parse_created(reply: Reply) -> CreatedSession:
    body = reply.json()
    sid = field(body, "session_id", str, "create session")
    token = field(body, "session_token", str, "create session") if "session_token" in body else None
    return CreatedSession(sid, token)


def parse_event(obj: Any) -> Event:
    where = "supervision event"
    return Event(
        seq=field(obj, "seq", int, where),
        time=field(obj, "time", str, where),
        actor=field(obj, "actor", str, where),
        kind=field(obj, "kind", str, where),
        pid=field(obj, "pid", (int, type(None)), where),
        detail=field(obj, "detail", dict, where),
    )


def parse_events(reply: Reply) -> list[Event]:
    return [parse_event(e) for e in field(reply.json(), "events", list, "supervision events")]


def parse_rollout(reply: Reply) -> dict[str, Any]:
    body = _as_dict(reply)
    where = "rollout state"
    field(body, "state", str, where)
    field(body, "weight_version", (str, type(None)), where)
    field(body, "held", int, where)
    field(body, "in_flight", int, where)
    return body


def parse_pause(reply: Reply) -> dict[str, Any]:
    body = parse_rollout(reply)
    field(body, "mode", str, "pause")
    field(body, "wait_ms", (int, float), "pause")
    return body


def parse_resume(reply: Reply) -> dict[str, Any]:
    body = parse_rollout(reply)
    field(body, "previous_weight_version", (str, type(None)), "resume")
    field(body, "released", int, "resume")
    field(body, "paused_ms", (int, float), "resume")
    return body


def parse_session(reply: Reply) -> dict[str, Any]:
    body = _as_dict(reply)
    field(body, "session_id", str, "session")
    field(body, "records", list, "session")
    field(body, "metadata", dict, "session")
    return body


def parse_json_sample(reply: Reply) -> dict[str, Any]:
    body = _as_dict(reply)
    where = "samples"
    for key, kind in (("session_id", str), ("status", str), ("response_length", int), ("tokens", list)):
        field(body, key, kind, where)
    for key in ("loss_mask", "rollout_log_probs", "turns"):
        field(body, key, list, where)
    field(body, "oldest_weight_version", (str, type(None)), where)
    return body


def parse_health(reply: Reply) -> dict[str, Any]:
    body = _as_dict(reply)
    field(body, "status", str, "health")
    field(body, "session_server_instance_id", str, "health")
    return body


def parse_supervision(reply: Reply) -> dict[str, Any]:
    body = _as_dict(reply)
    field(body, "state", str, "supervision")
    field(body, "instance_id", str, "supervision")
    field(body, "host_pid", int, "supervision")
    field(body, "shards", list, "supervision")
    return body


# --- the calls -------------------------------------------------------------------------


def health() -> Call:
    return Call("GET", "/health", parse_health)


def supervision() -> Call:
    return Call("GET", "/supervision", parse_supervision)


def events(since: int) -> Call:
    return Call("GET", "/supervision/events", parse_events, params={"since": str(since)})


def create_session(
    session_id: str | None,
    trajectory: Trajectory | None = None,
    max_total_tokens: int | None = None,
    max_turns: int | None = None,
) -> Call:
    """``POST /sessions`` (or ``PUT /sessions/{id}``), with the create body docs/http.md names:
    ``trajectory`` and the session's budget; options left as None are not sent."""
    options = {"trajectory": trajectory, "max_total_tokens": max_total_tokens, "max_turns": max_turns}
    body = {k: v for k, v in options.items() if v is not None} or None
    if session_id is None:
        return Call("POST", "/sessions", parse_created, json=body)
    return Call("PUT", f"/sessions/{_sid(session_id)}", parse_created, json=body)


def list_sessions_page(limit: int | None, after: str | None) -> Call:
    params: dict[str, str] = {}
    if limit is not None:
        params["limit"] = str(limit)
    if after:
        params["after"] = after

    def parse(reply: Reply) -> tuple[list[str], str | None]:
        body = reply.json()
        return field(body, "sessions", list, "list sessions"), field(body, "next", (str, type(None)), "list sessions")

    return Call("GET", "/sessions", parse, params=params)


def get_session(session_id: str) -> Call:
    return Call("GET", f"/sessions/{_sid(session_id)}", parse_session)


def fork_session(session_id: str, at: int | str, new_id: str | None) -> Call:
    """``POST /sessions/{id}/fork``: ``at`` a 0-based turn index, or a tree-mode session's node id ("n3")."""
    body: dict[str, Any] = {"at": at} if new_id is None else {"at": at, "session_id": new_id}
    return Call("POST", f"/sessions/{_sid(session_id)}/fork", parse_created, json=body)


def delete_session(session_id: str) -> Call:
    return Call("DELETE", f"/sessions/{_sid(session_id)}", lambda reply: None)


def samples(session_id: str, fmt: str, max_seq_len: int | None) -> Call:
    if fmt not in SAMPLE_FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(SAMPLE_FORMATS)}, got {fmt!r}")
    body = {} if max_seq_len is None else {"max_seq_len": max_seq_len}
    path = f"/sessions/{_sid(session_id)}/samples"
    if fmt == "json":
        return Call("POST", path, parse_json_sample, params={"format": "json"}, json=body)
    return Call(
        "POST",
        path,
        lambda reply: sample_from_safetensors(reply.content, fmt),
        params={"format": "safetensors"},
        json=body,
    )


def pause(in_flight: str, timeout: float | None) -> Call:
    if in_flight not in IN_FLIGHT_MODES:
        raise ValueError(f"in_flight must be one of {', '.join(IN_FLIGHT_MODES)}, got {in_flight!r}")
    return Call(
        "POST",
        "/admin/pause",
        parse_pause,
        json={"in_flight": in_flight},
        timeout=PAUSE_TIMEOUT_S if timeout is None else timeout,
    )


def resume(weight_version: str) -> Call:
    if not isinstance(weight_version, str) or not weight_version:
        raise ValueError(f"weight_version must be a non-empty string, got {weight_version!r}")
    return Call("POST", "/admin/resume", parse_resume, json={"weight_version": weight_version})


def rollout_state() -> Call:
    return Call("GET", "/admin/rollout", parse_rollout)


def session_urls(base_url: str, session_id: str) -> tuple[str, str]:
    """``(openai_base_url, anthropic_base_url)`` of a session (docs/agents.md)."""
    root = f"{base_url}/sessions/{_sid(session_id)}"
    return f"{root}/v1", root


def stopped(event: Event) -> bool:
    """The last event of a server's life: the supervisor's ``stopped``."""
    return event.actor == "supervisor" and event.kind == "stopped"
