"""The errors the client raises: one base class, :class:`TitoError`, and a subclass per kind."""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "TitoError",
    "BadRequestError",
    "AuthError",
    "NotFoundError",
    "ConflictError",
    "UnavailableError",
    "ServerError",
    "TitoConnectionError",
    "TitoTimeoutError",
    "TitoProtocolError",
    "TitoServerStartError",
    "TitoServerExitedError",
    "error_from_reply",
]


class TitoError(Exception):
    """Any error of the client.

    Attributes:
        status: the HTTP status the server answered, or ``None`` when there was no answer
            (the server is unreachable, or the client could not use the reply).
        code: the server's error code (``"TITO_ERR_…"``, docs/errors.md) when its error body
            carries one, else ``None``.
        message: the server's error message (the body's ``error``), or the client's own.
        body: the parsed error body (a dict), or the raw text when it is not JSON.
        method, url: the request that failed, when there was one.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        body: Any = None,
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.body = body
        self.method = method
        self.url = url

    def __str__(self) -> str:
        where = f" ({self.method} {self.url})" if self.method and self.url else ""
        status = f"{self.status} " if self.status is not None else ""
        code = f" [{self.code}]" if self.code else ""
        return f"{status}{self.message}{code}{where}"


class BadRequestError(TitoError):
    """400: the server refused the request as written (bad body, bad id, bad admin request)."""


class AuthError(TitoError):
    """401 (no valid bearer token) or 403 (a session token used beyond its rights)."""


class NotFoundError(TitoError):
    """404: no such session (never created, deleted, or expired), or no such route."""


class ConflictError(TitoError):
    """409: a session with the requested id already exists."""


class UnavailableError(TitoError):
    """503: retryable (a worker restarting, a turn aborted or held too long by a pause).

    ``retry_after`` is the ``Retry-After`` header in seconds, when the server sent one.
    """

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class ServerError(TitoError):
    """Any other status of 500 and above (a worker error, an engine failure, a bug)."""


class TitoConnectionError(TitoError):
    """The server could not be reached: refused, reset, closed mid-reply. ``status`` is None."""


class TitoTimeoutError(TitoConnectionError):
    """The server did not answer within the client's timeout. ``status`` is None."""


class TitoProtocolError(TitoError):
    """The server answered 2xx with a body the client cannot read (e.g. a field it reads is gone).

    This is what a server that renamed or dropped a field raises: the client reads every
    field it uses by name and never guesses a default.
    """


class TitoServerStartError(TitoError):
    """:class:`tito_client.TitoServer` could not start the server; ``stderr`` holds its output."""

    def __init__(self, message: str, *, stderr: str = "", returncode: int | None = None) -> None:
        tail = f"\n--- tito-server stderr ---\n{stderr.rstrip()}" if stderr.strip() else ""
        super().__init__(f"{message}{tail}")
        self.stderr = stderr
        self.returncode = returncode


class TitoServerExitedError(TitoServerStartError):
    """:meth:`tito_client.TitoServer.check`: the server's process has exited."""


_BY_STATUS: dict[int, type[TitoError]] = {
    400: BadRequestError,
    401: AuthError,
    403: AuthError,
    404: NotFoundError,
    409: ConflictError,
    503: UnavailableError,
}


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def error_from_reply(
    status: int, content: bytes, headers: Any, *, method: str | None = None, url: str | None = None
) -> TitoError:
    """The error for a non-2xx reply.

    Bodies the server makes (docs/http.md): ``{"error": "<message>", "code":
    "TITO_ERR_…"}``; the Anthropic route's ``{"type": "error", "error": {"type", "message",
    "code": "TITO_ERR_…"}}``; and the stream error event's
    ``{"error": {"message", "type": "TITO_ERR_…", "code": <status>}}``. Anything else (an
    engine's own error relayed unchanged) keeps its raw text as the message.
    """
    text = content.decode("utf-8", errors="replace")
    body: Any = text
    message = text.strip() or f"HTTP {status}"
    code: str | None = None
    try:
        body = json.loads(text)
    except ValueError:
        pass
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, str):
            message = err
        elif isinstance(err, dict) and isinstance(err.get("message"), str):
            message = err["message"]
            for inner in (err.get("type"), err.get("code")):
                if isinstance(inner, str) and inner.startswith("TITO_ERR_"):
                    code = inner
        if isinstance(body.get("code"), str):
            code = body["code"]
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else TitoError)
    kwargs: dict[str, Any] = {"status": status, "code": code, "body": body, "method": method, "url": url}
    if cls is UnavailableError:
        return UnavailableError(message, retry_after=_retry_after(headers.get("retry-after")), **kwargs)
    return cls(message, **kwargs)
