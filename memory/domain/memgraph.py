"""An in-memory provenance graph that applies :func:`decide` effects.

It is the same state machine the database services drive, with dicts for tables: used by the
property tests as the pure-core side, and by benchmarks that need a store without a database.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .cells import decide
from .model import (
    NEW,
    OPEN_STATUSES,
    RETRACTED_STATUSES,
    CellState,
    Decision,
    LinkSupersedes,
    NewVersion,
    OpRequest,
    Reinstate,
    Retype,
    Status,
    Support,
    Tombstone,
    VersionView,
)


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

    def view(self) -> VersionView:
        return VersionView(self.id, self.value, self.status, self.supersedes_id)


@dataclass
class MemGraph:
    versions: dict[int, MemVersion] = field(default_factory=dict)
    heads: dict[str, int | None] = field(default_factory=dict)
    clock: int = 0

    def state(self, key: str, target_id: int | None = None) -> CellState:
        head_id = self.heads.get(key)
        head = self.versions[head_id].view() if head_id is not None else None
        alternatives = tuple(
            v.view() for v in sorted(self.versions.values(), key=lambda v: v.id)
            if v.key == key and v.status == Status.ALTERNATIVE
        )
        predecessors: list[VersionView] = []
        cursor = self.versions[head_id].supersedes_id if head_id is not None else None
        while cursor is not None:
            pred = self.versions[cursor]
            predecessors.append(pred.view())
            if pred.status not in RETRACTED_STATUSES:
                break
            cursor = pred.supersedes_id
        target = None
        if target_id is not None and target_id in self.versions:
            if self.versions[target_id].key == key:
                target = self.versions[target_id].view()
        return CellState(head, alternatives, tuple(predecessors), target)

    def apply(self, key: str, req: OpRequest) -> Decision:
        self.clock += 1
        decision = decide(self.state(key, req.version_id), req)
        new_id: int | None = None
        for effect in decision.effects:
            if isinstance(effect, NewVersion):
                new_id = len(self.versions) + 1
                self.versions[new_id] = MemVersion(
                    new_id, key, effect.value, effect.status, effect.supersedes_id,
                    effect.alternative_of_id, valid_from=self.clock, support=1,
                )
            elif isinstance(effect, Retype | Reinstate):
                self._retype(self.versions[effect.version_id], effect.status)
            elif isinstance(effect, LinkSupersedes):
                self.versions[effect.version_id].supersedes_id = effect.supersedes_id
            elif isinstance(effect, Support):
                self.versions[effect.version_id].support += 1
            elif isinstance(effect, Tombstone):
                self.versions[effect.version_id].tombstones += 1
        head = decision.head_id
        self.heads[key] = new_id if head == NEW else head
        return decision

    def _retype(self, version: MemVersion, status: Status) -> None:
        version.status = status
        if status in OPEN_STATUSES:
            version.valid_to = None
        elif version.valid_to is None:
            version.valid_to = self.clock

    def head_value(self, key: str) -> str | None:
        head_id = self.heads.get(key)
        return self.versions[head_id].value if head_id is not None else None
