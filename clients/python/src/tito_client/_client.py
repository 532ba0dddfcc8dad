"""The blocking client: :class:`Client` and its :class:`Session`."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import httpx

from . import _core as core
from ._core import NO_AUTH_API_KEY, Call, Event, InFlight, Reply, SampleFormat, Trajectory
from ._errors import TitoConnectionError, TitoTimeoutError, error_from_reply

__all__ = ["Client", "Session", "WeightUpdate"]

DEFAULT_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 5.0


def _timeout(seconds: float) -> httpx.Timeout:
    # A dead server must fail fast: the connect bound stays short whatever the read bound.
    return httpx.Timeout(seconds, connect=min(CONNECT_TIMEOUT_S, seconds))


def transport_error(err: httpx.HTTPError, method: str, url: str) -> TitoConnectionError:
    """A client-side failure as the client's own error, naming the server it could not reach."""
    if isinstance(err, httpx.TimeoutException):
        return TitoTimeoutError(f"no answer from tito-server in time: {err!r}", method=method, url=url)
    return TitoConnectionError(f"tito-server is unreachable: {err!r}", method=method, url=url)


@dataclass
class Session:
    """One session of a :class:`Client`: its id, its agent's token and URLs, its data.

    ``token`` is the session's bearer token when the server runs with ``--auth-token``
    (hand it to the agent, never the admin token), else ``None``.
    """

    id: str
    token: str | None
    client: Client = field(repr=False)

    @property
    def openai_base_url(self) -> str:
        """``{url}/sessions/{id}/v1``: the ``base_url`` of an OpenAI client."""
        return core.session_urls(self.client.url, self.id)[0]

    @property
    def anthropic_base_url(self) -> str:
        """``{url}/sessions/{id}``: the ``base_url`` of an Anthropic client (it adds ``/v1/messages``)."""
        return core.session_urls(self.client.url, self.id)[1]

    def openai_kwargs(self) -> dict[str, str]:
        """``{"base_url", "api_key"}`` for ``openai.OpenAI(**kwargs)``; the key is the session token."""
        return {"base_url": self.openai_base_url, "api_key": self.token or NO_AUTH_API_KEY}

    def get(self) -> dict[str, Any]:
        """The whole ``GET /sessions/{id}`` body: ``session_id``, ``records``, ``metadata``."""
        return self.client._run(core.get_session(self.id))

    def records(self) -> list[dict[str, Any]]:
        """The session's records, one per committed turn (docs/http.md#records)."""
        return self.get()["records"]

    def metadata(self) -> dict[str, Any]:
        """The session's metadata (``accumulated_token_ids``, ``tito_family``, …)."""
        return self.get()["metadata"]

    def samples(self, fmt: SampleFormat = "numpy", *, max_seq_len: int | None = None) -> dict[str, Any]:
        """The session as one training sample, keyed as the server's JSON sample.

        ``fmt="numpy"`` / ``"torch"``: ``tokens`` (int64), ``loss_mask`` (uint8),
        ``rollout_log_probs`` (float32) and, with routing replay, ``rollout_routed_experts``
        (int32, ``[len(tokens) - 1, width]``) as arrays, read from the safetensors export;
        ``session_id``, ``status``, ``response_length``, ``turns`` and
        ``oldest_weight_version`` as plain values. ``fmt="json"``: the server's JSON sample.
        ``max_seq_len`` cuts the trajectory at a turn boundary (docs/http.md#samples).
        """
        return self.client._run(core.samples(self.id, fmt, max_seq_len))

    def fork(self, at: int | str, id: str | None = None) -> Session:
        """A new session whose history is this one's up to and including turn ``at`` (0-based).

        A tree-mode session is forked at a node id instead (``"n3"``): the fork holds the
        path from the root to that node (docs/trajectories.md#forks). The ids and records are
        shared copy-on-write; turns on either side never affect the other. ``id``: the fork's
        own (it must route to this session's worker), else one is minted. A turn or node the
        session lacks, or a taken ``id``, raises :class:`ConflictError`.
        """
        created = self.client._run(core.fork_session(self.id, at, id))
        return Session(created.id, created.token, self.client)

    def delete(self) -> None:
        """Deletes the session (404 :class:`NotFoundError` when it is already gone)."""
        self.client._run(core.delete_session(self.id))


@dataclass
class WeightUpdate:
    """What :meth:`Client.weight_update` saw: the pause's answer, then the resume's."""

    version: str
    paused: dict[str, Any]
    resumed: dict[str, Any] | None = None


class Client:
    """A blocking client of one tito-server (its router's URL).

    ``admin_token`` is the server's ``--auth-token``, sent as a bearer token on every
    request. ``timeout`` bounds each request in seconds (a pause has its own bound); a
    server that is down raises :class:`TitoConnectionError` at once, and one that does not
    answer raises :class:`TitoTimeoutError`: no call waits forever.
    """

    def __init__(
        self,
        url: str,
        admin_token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        http: httpx.Client | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.admin_token = admin_token
        self.timeout = timeout
        headers = {"authorization": f"Bearer {admin_token}"} if admin_token else {}
        self._owns_http = http is None
        self._http = http or httpx.Client(timeout=_timeout(timeout))
        self._headers = headers

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the HTTP connections (not the server)."""
        if self._owns_http:
            self._http.close()

    def _run(self, call: Call) -> Any:
        url = f"{self.url}{call.path}"
        try:
            res = self._http.request(
                call.method,
                url,
                params=call.params,
                json=call.json,
                headers={**self._headers, **(call.headers or {})},
                timeout=_timeout(call.timeout) if call.timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.HTTPError as err:
            raise transport_error(err, call.method, url) from err
        if not 200 <= res.status_code < 300:
            raise error_from_reply(res.status_code, res.content, res.headers, method=call.method, url=url)
        return call.parse(Reply(res.status_code, res.content, res.headers, url))

    # --- server ---

    def health(self) -> dict[str, Any]:
        """``GET /health``: ``{"status": "ok", "session_server_instance_id": …}``."""
        return self._run(core.health())

    def supervision(self) -> dict[str, Any]:
        """``GET /supervision``: the supervision tree (state, pids, restarts)."""
        return self._run(core.supervision())

    def events(
        self, since: int = 0, *, follow: bool = False, poll_interval: float = 0.25, timeout: float | None = None
    ) -> Iterator[Event]:
        """The supervision events after ``since``, oldest first.

        With ``follow=True`` it keeps polling every ``poll_interval`` seconds and yields new
        events as they come, until the server's last one (the supervisor's ``stopped``) or,
        with ``timeout``, until that many seconds have passed. Events reach the router from
        the host a moment after what caused them: follow to wait for one.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            batch = self._run(core.events(since))
            for event in batch:
                since = event.seq
                yield event
                if core.stopped(event):
                    return
            if not follow or (deadline is not None and time.monotonic() > deadline):
                return
            if not batch:
                time.sleep(poll_interval)

    # --- sessions ---

    def create_session(
        self,
        id: str | None = None,
        *,
        trajectory: Trajectory | None = None,
        max_total_tokens: int | None = None,
        max_turns: int | None = None,
    ) -> Session:
        """A new session: ``POST /sessions``, or ``PUT /sessions/{id}`` with your own ``id``.

        An ``id`` in use raises :class:`ConflictError`; an invalid one :class:`BadRequestError`.
        """
        created = self._run(core.create_session(id, trajectory, max_total_tokens, max_turns))
        return Session(created.id, created.token, self)

    def session(self, id: str, token: str | None = None) -> Session:
        """A handle on an existing session (no request is made)."""
        return Session(id, token, self)

    def list_sessions(self, *, page_size: int | None = None) -> list[str]:
        """Every session id of this server, in id order (all pages of ``GET /sessions``)."""
        ids: list[str] = []
        after: str | None = None
        while True:
            page, after = self._run(core.list_sessions_page(page_size, after))
            ids.extend(page)
            if after is None:
                return ids

    # --- the RL loop (docs/rl-loop.md) ---

    def pause(self, in_flight: InFlight = "drain", *, timeout: float | None = None) -> dict[str, Any]:
        """Closes the rollout door; returns the server's answer (``mode``, ``held``, …).

        ``drain`` answers once the turns in flight have finished, ``abort`` stops them
        (their clients get a retryable 503), ``keep`` answers at once. ``timeout``
        (seconds, default 600) bounds the wait for a drain.
        """
        return self._run(core.pause(in_flight, timeout))

    def resume(self, weight_version: str) -> dict[str, Any]:
        """Sets the policy version and opens the door; the held turns go through."""
        return self._run(core.resume(weight_version))

    def rollout_state(self) -> dict[str, Any]:
        """``GET /admin/rollout``: ``{"state", "weight_version", "held", "in_flight"}``."""
        return self._run(core.rollout_state())

    @contextmanager
    def weight_update(self, version: str, in_flight: InFlight = "drain") -> Iterator[WeightUpdate]:
        """Pauses on entry and resumes with ``version`` on a clean exit.

        If the block raises, the door stays closed and the error propagates: no turn may
        be sent to an engine whose weights are half loaded. Retry the update and call
        :meth:`resume` (held turns wait up to the server's ``--hold-timeout-ms``).
        """
        core.resume(version)  # checks the version before the door closes
        update = WeightUpdate(version, self.pause(in_flight))
        yield update
        update.resumed = self.resume(version)
