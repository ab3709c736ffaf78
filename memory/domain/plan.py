"""What planning hands the commit: typed operations with their provenance, and what planning
reads of a cell. Shared by the model-facing annotator and the services, so neither imports
the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .vocabulary import CREATING_OPS, Method, OpType


@dataclass(frozen=True)
class OpInput:
    """One operation to apply, as the services receive it."""

    key: str
    op: OpType
    value: str | None = None
    version_id: int | None = None
    reason: str = ""
    raw_output: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    payload: dict[str, Any] = field(default_factory=dict)
    #: How the operation was decided (SPEC §3); the actor it is signed by says who asked.
    method: Method = Method.EXPLICIT

    @property
    def creates(self) -> bool:
        return self.op in CREATING_OPS and bool(self.value and self.value.strip())


#: An operation with the actor it is signed by.
Item = tuple[OpInput, str]


@dataclass(frozen=True)
class HeadView:
    """What annotation reads of a key's cell: its canonical key, head value and status, and
    the values contesting a contested head (oldest first)."""

    key: str
    value: str | None
    status: str | None
    alternatives: tuple[str, ...]


@dataclass
class Plan:
    """The operations one observation will apply, with what planning them cost."""

    items: list[Item] = field(default_factory=list)
    chat_calls: int = 0
    embed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    aliases: list[tuple[str, str]] = field(default_factory=list)  # (alias, canonical key)
    #: What planning read (memory.services.basis.Basis): a plan made ahead of its turn is
    #: checked against it at the commit, and made again when anything changed.
    basis: Any = None
