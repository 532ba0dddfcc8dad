"""The asyncio client: :class:`AsyncClient` and its :class:`AsyncSession`, the same surface as
:class:`tito_client.Client` with ``await``."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

import httpx

from . import _core as core
from ._client import DEFAULT_TIMEOUT_S, WeightUpdate, _timeout, transport_error
from ._core import NO_AUTH_API_KEY, Call, Event, InFlight, Reply, SampleFormat, Trajectory
from ._errors import error_from_reply

__all__ = ["AsyncClient", "AsyncSession"]


@dataclass
class AsyncSession:
    """One session of an :class:`AsyncClient`; see :class:`tito_client.Session`."""

    id: str
    token: str | None
    client: AsyncClient = field(repr=False)

    @property
    def openai_base_url(self) -> str:
        """``{url}/sessions/{id}/v1``: the ``base_url`` of an OpenAI client."""
        return core.session_urls(self.client.url, self.id)[0]

    @property
    def anthropic_base_url(self) -> str:
        """``{url}/sessions/{id}``: the ``base_url`` of an Anthropic client."""
        return core.session_urls(self.client.url, self.id)[1]

    def openai_kwargs(self) -> dict[str, str]:
        """``{"base_url", "api_key"}`` for ``openai.AsyncOpenAI(**kwargs)``."""
        return {"base_url": self.openai_base_url, "api_key": self.token or NO_AUTH_API_KEY}

    async def get(self) -> dict[str, Any]:
        """The whole ``GET /sessions/{id}`` body: ``session_id``, ``records``, ``metadata``."""
        return await self.client._run(core.get_session(self.id))

    async def records(self) -> list[dict[str, Any]]:
        """The session's records, one per committed turn."""
        return (await self.get())["records"]

    async def metadata(self) -> dict[str, Any]:
        """The session's metadata."""
        return (await self.get())["metadata"]

    async def samples(self, fmt: SampleFormat = "numpy", *, max_seq_len: int | None = None) -> dict[str, Any]:
        """The session as one training sample; see :meth:`tito_client.Session.samples`."""
        return await self.client._run(core.samples(self.id, fmt, max_seq_len))

    async def fork(self, at: int | str, id: str | None = None) -> AsyncSession:
        """A new session from this one's turn ``at`` (or node id); see :meth:`tito_client.Session.fork`."""
        created = await self.client._run(core.fork_session(self.id, at, id))
        return AsyncSession(created.id, created.token, self.client)

    async def delete(self) -> None:
        """Deletes the session."""
        await self.client._run(core.delete_session(self.id))


class AsyncClient:
    """An asyncio client of one tito-server; see :class:`tito_client.Client`."""

    def __init__(
        self,
        url: str,
        admin_token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.admin_token = admin_token
        self.timeout = timeout
        self._headers = {"authorization": f"Bearer {admin_token}"} if admin_token else {}
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(timeout=_timeout(timeout))

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the HTTP connections (not the server)."""
        if self._owns_http:
            await self._http.aclose()

    async def close(self) -> None:
        """The same as :meth:`aclose`, named as :meth:`tito_client.Client.close`."""
        await self.aclose()

    async def _run(self, call: Call) -> Any:
        url = f"{self.url}{call.path}"
        try:
            res = await self._http.request(
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

    async def health(self) -> dict[str, Any]:
        """``GET /health``."""
        return await self._run(core.health())

    async def supervision(self) -> dict[str, Any]:
        """``GET /supervision``."""
        return await self._run(core.supervision())

    async def events(
        self, since: int = 0, *, follow: bool = False, poll_interval: float = 0.25, timeout: float | None = None
    ) -> AsyncIterator[Event]:
        """The supervision events after ``since``; ``follow=True`` polls until the last one or ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            batch = await self._run(core.events(since))
            for event in batch:
                since = event.seq
                yield event
                if core.stopped(event):
                    return
            if not follow or (deadline is not None and time.monotonic() > deadline):
                return
            if not batch:
                await asyncio.sleep(poll_interval)

    async def create_session(
        self,
        id: str | None = None,
        *,
        trajectory: Trajectory | None = None,
        max_total_tokens: int | None = None,
        max_turns: int | None = None,
    ) -> AsyncSession:
        """A new session (``PUT /sessions/{id}`` with your own ``id``)."""
        created = await self._run(core.create_session(id, trajectory, max_total_tokens, max_turns))
        return AsyncSession(created.id, created.token, self)

    def session(self, id: str, token: str | None = None) -> AsyncSession:
        """A handle on an existing session (no request is made)."""
        return AsyncSession(id, token, self)

    async def list_sessions(self, *, page_size: int | None = None) -> list[str]:
        """Every session id of this server, in id order."""
        ids: list[str] = []
        after: str | None = None
        while True:
            page, after = await self._run(core.list_sessions_page(page_size, after))
            ids.extend(page)
            if after is None:
                return ids

    async def pause(self, in_flight: InFlight = "drain", *, timeout: float | None = None) -> dict[str, Any]:
        """Closes the rollout door; see :meth:`tito_client.Client.pause`."""
        return await self._run(core.pause(in_flight, timeout))

    async def resume(self, weight_version: str) -> dict[str, Any]:
        """Sets the policy version and opens the door."""
        return await self._run(core.resume(weight_version))

    async def rollout_state(self) -> dict[str, Any]:
        """``GET /admin/rollout``."""
        return await self._run(core.rollout_state())

    @asynccontextmanager
    async def weight_update(self, version: str, in_flight: InFlight = "drain") -> AsyncIterator[WeightUpdate]:
        """Pauses on entry, resumes with ``version`` on a clean exit; an error leaves it paused."""
        core.resume(version)
        update = WeightUpdate(version, await self.pause(in_flight))
        yield update
        update.resumed = await self.resume(version)
