"""pmem_client: the P-Mem API from Python, for agents and scripts. Needs no Django.

>>> from pmem_client import Client
>>> with Client("http://127.0.0.1:8000", token) as memory:
...     memory.remember(facts=[{"key": "mug_1_location", "value": "shelf 2"}])
...     memory.get_fact("mug_1_location").value
'shelf 2'
"""

from __future__ import annotations

from ._protocol import Retry
from .client import AsyncClient, Client
from .errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    IdempotencyConflict,
    NotFound,
    ObservationFailed,
    PayloadTooLarge,
    PmemError,
    RateLimited,
    RequestTooLong,
    ServerError,
    Timeout,
    TransportError,
    Unauthorized,
)
from .types import (
    Alternative,
    AnswerResult,
    Cell,
    ChangeEvent,
    ChangeVersion,
    EraseReport,
    HistoryEntry,
    HistoryPage,
    NamespaceDeleted,
    NamespaceInfo,
    Observation,
    ObservationOperation,
    Operation,
    OperationResult,
    ReadResult,
    Whoami,
    to_json,
)

__all__ = [
    "Alternative", "AnswerResult", "ApiError", "AsyncClient", "BadRequest", "Cell", "ChangeEvent",
    "ChangeVersion", "Client", "Conflict",
    "EraseReport", "Forbidden", "HistoryEntry", "HistoryPage", "IdempotencyConflict",
    "NamespaceDeleted", "NamespaceInfo", "NotFound", "Observation",
    "ObservationFailed", "ObservationOperation", "Operation", "OperationResult",
    "PayloadTooLarge", "PmemError", "RateLimited", "ReadResult", "RequestTooLong", "Retry",
    "ServerError",
    "Timeout", "TransportError", "Unauthorized", "Whoami", "to_json",
]
