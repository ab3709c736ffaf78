"""The memory arms a scenario compares (paper §4.2, Table 6/8, §4.2.3).

Every arm sees the same events in arrival order and is asked the same question at the same
points. ``commit`` is P-Mem itself: each event goes through the real write path
(:func:`memory.services.observation_ingest`: rule extractor or model, annotation, commit) into
a fresh namespace, and the question reads the cell. The raw arms read the *same* namespace's
evidence.

Without a model only the store arms answer (with the cell's value); the raw arms cannot answer
without a reader, so they are reported as not run — never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from memory.selectors.cells import cell_detail, versions_with_value
from memory.selectors.search import raw_read
from memory.services import ExtractionFailed, namespace_create, observation_ingest

from .scenarios.common import Event, location_key

NEEDS_MODEL = "needs a model"


@dataclass(frozen=True)
class Read:
    """What an arm puts in front of the reader for one question.

    ``value`` is the store's own answer when it has one (a cell's head), ``candidates`` every
    value the read shows for the key (head and alternatives), ``status`` the cell's state.
    """

    context: str
    value: str | None = None
    status: str = ""
    candidates: tuple[str, ...] = ()


class Arm(Protocol):
    name: str
    #: True when the arm can only answer through a model reading its context.
    needs_model: bool
    #: Which answer prompt a model reads this arm with ("flat": serial numbers decide recency).
    prompt: str

    def begin(self, case_name: str) -> None: ...

    def ingest(self, event: Event) -> None: ...

    def read(self, *, question: str, key: str, target: str, upto: int) -> Read: ...

    def retains(self, *, key: str, value: str) -> bool | None: ...


class PMemSession:
    """One P-Mem namespace per case, shared by every arm that reads P-Mem (ingest once)."""

    def __init__(self, run_id: str, scenario: str) -> None:
        self.prefix = f"bench-{scenario}-{run_id}"
        self.namespace: Any = None
        self.events: list[Event] = []
        #: Why observations of this case failed (a model call that failed after its retries,
        #: an unusable answer): the case is then reported failed, never a crash.
        self.failed: list[str] = []

    def begin(self, case_name: str) -> None:
        self.namespace = namespace_create(name=f"{self.prefix}-{case_name}".lower())
        self.events = []
        self.failed = []

    def ingest(self, event: Event) -> None:
        self.events.append(event)
        try:
            evidence = observation_ingest(namespace=self.namespace, text=event.text,
                                          source=f"bench:{event.obj}")
        except ExtractionFailed as exc:  # the model or embedder unreachable after retries
            self.failed.append(f"event {event.seq}: {exc}")
            return
        if evidence.state != "committed":
            self.failed.append(f"event {event.seq} {evidence.state}: {evidence.error}")


class CommitArm:
    """P-Mem's write path; the question reads the target's cell (``key = value``)."""

    name = "commit"
    needs_model = False
    prompt = "state"

    def __init__(self, session: PMemSession, disclose: tuple[str, ...] = ()) -> None:
        self.session = session
        self.disclose = disclose

    def begin(self, case_name: str) -> None:
        """The session is begun by the runner (it is shared with the raw arms)."""

    def ingest(self, event: Event) -> None:
        """Ingested once through the shared session."""

    def read(self, *, question: str, key: str, target: str, upto: int) -> Read:
        detail = cell_detail(namespace=self.session.namespace, key=key)
        if detail is None:
            return Read(context=f"{key} = (empty)", status="empty")
        alternatives = tuple(a["value"] for a in detail.alternatives)
        candidates = ((detail.value,) if detail.value is not None else ()) + alternatives
        return Read(context=detail.render(self.disclose), value=detail.value,
                    status=detail.status, candidates=candidates)

    def retains(self, *, key: str, value: str) -> bool | None:
        return versions_with_value(namespace=self.session.namespace, key=key, value=value) > 0


class CrudArm:
    """Commitment without retention (the Mem0 corner): one value per key, overwritten in place.

    A report overwrites like any write (last write wins, so a conflict is never represented);
    a retraction deletes the key, because there is no earlier version left to roll back to.
    It reads the generator's template-perfect parse, so its failures are its design's, not
    an extractor's.
    """

    name = "commit_no_retention"
    needs_model = False
    prompt = "state"

    def __init__(self) -> None:
        self.store: dict[str, str] = {}

    def begin(self, case_name: str) -> None:
        self.store = {}

    def ingest(self, event: Event) -> None:
        key = location_key(event.obj)
        if event.op == "revoke":
            self.store.pop(key, None)
        else:
            self.store[key] = event.value

    def read(self, *, question: str, key: str, target: str, upto: int) -> Read:
        value = self.store.get(key)
        shown = value if value is not None else "(empty)"
        return Read(context=f"{key} = {shown}", value=value,
                    status="active" if value is not None else "empty",
                    candidates=(value,) if value is not None else ())

    def retains(self, *, key: str, value: str) -> bool | None:
        return self.store.get(key) == value


class RawArm:
    """Archival reading of P-Mem's evidence: top-k by cosine in similarity order, or with
    ``[t=seq]`` order tags sorted by arrival (SPEC §7 raw read)."""

    needs_model = True
    prompt = "flat"

    def __init__(self, session: PMemSession, *, k: int, ordered: bool) -> None:
        self.session = session
        self.k = k
        self.ordered = ordered
        self.name = "raw_order_tags" if ordered else f"raw_top{k}"

    def begin(self, case_name: str) -> None:
        """The session is begun by the runner."""

    def ingest(self, event: Event) -> None:
        """Ingested once through the shared session."""

    def read(self, *, question: str, key: str, target: str, upto: int) -> Read:
        result = raw_read(namespace=self.session.namespace, query=question, k=self.k,
                          ordered=self.ordered)
        return Read(context=result.context)

    def retains(self, *, key: str, value: str) -> bool | None:
        return None  # raw text always holds every value; the question is whether it is read


class OracleOrderArm:
    """The target's own lines in arrival order, bypassing retrieval: isolates order
    reassembly from retrieval (Table 6, last column)."""

    name = "raw_oracle_order"
    needs_model = True
    prompt = "flat"

    def __init__(self) -> None:
        self.events: list[Event] = []

    def begin(self, case_name: str) -> None:
        self.events = []

    def ingest(self, event: Event) -> None:
        self.events.append(event)

    def read(self, *, question: str, key: str, target: str, upto: int) -> Read:
        lines = [f"[t={e.seq}] {e.text}" for e in self.events[:upto] if e.obj == target]
        return Read(context="\n".join(lines))

    def retains(self, *, key: str, value: str) -> bool | None:
        return None


def location_arms(run_id: str, scenario: str, *, k: int = 10,
                  disclose: tuple[str, ...] = ()) -> tuple[PMemSession, list[Arm]]:
    """The five arms of the ALFWorld-derived probes, sharing one P-Mem session."""
    session = PMemSession(run_id, scenario)
    arms: list[Arm] = [
        CommitArm(session, disclose), CrudArm(), RawArm(session, k=k, ordered=False),
        RawArm(session, k=k, ordered=True), OracleOrderArm(),
    ]
    return session, arms
