"""tito_client: the trainer's side of tito-server, in Python.

Launch a server (:class:`TitoServer`) or attach to one (:class:`Client`,
:class:`AsyncClient`); create sessions and hand their URL and token to agents
(:class:`Session`); pull training samples as numpy arrays or torch tensors; pause and
resume the rollout around weight updates. See docs/python.md of the repository.
"""

from ._async import AsyncClient, AsyncSession
from ._client import Client, Session, WeightUpdate
from ._core import Event
from ._errors import (
    AuthError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    ServerError,
    TitoConnectionError,
    TitoError,
    TitoProtocolError,
    TitoServerExitedError,
    TitoServerStartError,
    TitoTimeoutError,
    UnavailableError,
)
from ._samples import read_safetensors
from ._server import TitoServer

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "AsyncSession",
    "AuthError",
    "BadRequestError",
    "Client",
    "ConflictError",
    "Event",
    "NotFoundError",
    "ServerError",
    "Session",
    "TitoConnectionError",
    "TitoError",
    "TitoProtocolError",
    "TitoServer",
    "TitoServerExitedError",
    "TitoServerStartError",
    "TitoTimeoutError",
    "UnavailableError",
    "WeightUpdate",
    "read_safetensors",
]
