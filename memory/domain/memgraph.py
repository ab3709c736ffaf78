"""An in-memory provenance graph that applies :func:`decide` effects.

It is the same state machine the database services drive, with dicts for tables, and it
applies effects through the same interpreter (:func:`memory.domain.interpret.interpret`):
used by the property tests as the pure-core side, and by benchmarks that need a store without
a database.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .cells import decide
from .interpret import interpret, valid_to_after
from .model import CellState, Decision, NewVersion, OpRequest, VersionView
from .rollback import retracts_head, rollback_chain
from .vocabulary import HEAD_STATUSES, OPEN_STATUSES, Status


@dataclass
class MemVersion:
    id: int
    key: str
    value: str
    status: Status
    supersedes_id: int | None
    alternative_of_id: int | None
    valid_from: int
    valid_to: int | None = None
    support: int = 0
    tombstones: int = 0
    restores_id: int | None = None
    #: SPEC §13: from this instant it is never current (None: never); any ordered number.
    expires_at: float | None = None
    #: The evidence of each ``supported_by`` edge (None: a person's operation).
    evidence: list[int | None] = field(default_factory=list)

    def view(self) -> VersionView:
        return VersionView(self.id, self.value, self.status, self.supersedes_id)


@dataclass
class MemGraph:
    versions: dict[int, MemVersion] = field(default_factory=dict)
    heads: dict[str, int | None] = field(default_factory=dict)
    clock: int = 0

    def state(self, key: str, req: OpRequest | None = None) -> CellState:
        head_id = self.heads.get(key)
        head = self.versions[head_id].view() if head_id is not None else None
        alternatives = tuple(
            v.view() for v in sorted(self.versions.values(), key=lambda v: v.id)
            if v.key == key and v.status == Status.ALTERNATIVE
        )
        predecessors: tuple[VersionView, ...] = ()
        if head is not None and (req is None or retracts_head(req.op, req.value,
                                                                req.version_id, head.id)):
            predecessors = rollback_chain(head.supersedes_id, lambda i: self.versions[i].view())
        target = None
        target_id = req.version_id if req is not None else None
        if target_id is not None and target_id in self.versions:
            if self.versions[target_id].key == key:
                target = self.versions[target_id].view()
        return CellState(head, alternatives, predecessors, target)

    def apply(self, key: str, req: OpRequest, evidence: int | None = None) -> Decision:
        """Decide and apply ``req``; ``evidence`` is the observation it comes from (its id),
        None for a person's operation."""
        self.clock += 1
        decision = decide(self.state(key, req), req)
        interpret(decision, _KeySink(self, key, evidence))
        return decision

    def expire(self, now: float) -> list[int]:
        """SPEC §13, the reference rule: every open version whose instant is at or before
        ``now`` ends, in the order the instants came. A head becomes ``expired`` and its cell
        empty (a contested head's alternatives end their contest as ``superseded``; nothing is
        reinstated); an alternative becomes ``expired``, and the last one leaves its head
        ``active``. Returns the versions it ended."""
        ended = []
        due = sorted((v for v in self.versions.values() if v.expires_at is not None
                      and v.expires_at <= now and v.status in OPEN_STATUSES),
                     key=lambda v: (v.expires_at or 0.0, v.id))
        for version in due:
            if version.status not in OPEN_STATUSES:
                continue  # superseded meanwhile by its head's expiry
            rivals = [v for v in self.versions.values()
                      if v.key == version.key and v.status == Status.ALTERNATIVE]
            if version.status in HEAD_STATUSES:
                for rival in rivals:
                    rival.status = Status.SUPERSEDED
                self.heads[version.key] = None
            elif len(rivals) == 1 and (head := self.heads.get(version.key)) is not None:
                self.versions[head].status = Status.ACTIVE
            version.status = Status.EXPIRED
            ended.append(version.id)
        return ended

    def head_value(self, key: str) -> str | None:
        head_id = self.heads.get(key)
        return self.versions[head_id].value if head_id is not None else None


class _KeySink:
    """One key of a :class:`MemGraph`, as the interpreter changes it."""

    def __init__(self, graph: MemGraph, key: str, evidence: int | None = None) -> None:
        self.graph, self.key, self.evidence = graph, key, evidence

    def create(self, effect: NewVersion) -> int:
        new_id = len(self.graph.versions) + 1
        self.graph.versions[new_id] = MemVersion(
            new_id, self.key, effect.value, effect.status, effect.supersedes_id,
            effect.alternative_of_id, valid_from=self.graph.clock,
            restores_id=effect.restores_id)
        return new_id

    def retype(self, version_id: int, status: Status) -> None:
        version = self.graph.versions[version_id]
        version.status = status
        version.valid_to = valid_to_after(status, version.valid_to, self.graph.clock)

    def link_supersedes(self, version_id: int, supersedes_id: int) -> None:
        self.graph.versions[version_id].supersedes_id = supersedes_id

    def support(self, version_id: int) -> None:
        version = self.graph.versions[version_id]
        version.support += 1
        version.evidence.append(self.evidence)

    def carry_support(self, version_id: int, from_id: int) -> None:
        version = self.graph.versions[version_id]
        carried = sorted({e for e in self.graph.versions[from_id].evidence if e is not None})
        version.evidence += carried
        version.support += len(carried)

    def tombstone(self, version_id: int) -> None:
        self.graph.versions[version_id].tombstones += 1

    def move_head(self, version_id: int | None) -> None:
        self.graph.heads[self.key] = version_id
