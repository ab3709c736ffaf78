"""The names P-Mem speaks in, defined once (SPEC §1-§3, §5): every serializer, form, prompt,
template, model choice list and SQL statement takes them from here."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """A version's status (SPEC §2)."""

    ACTIVE = "active"
    CONTESTED = "contested"
    ALTERNATIVE = "alternative"
    SUPERSEDED = "superseded"
    CONTRADICTED = "contradicted"
    REVOKED = "revoked"
    #: its expiry passed (SPEC §13): closed by an ``expire`` operation, never reinstated
    EXPIRED = "expired"


#: A version with one of these statuses is its key's head (at most one per key).
HEAD_STATUSES = frozenset({Status.ACTIVE, Status.CONTESTED})
#: Statuses whose validity interval is open.
OPEN_STATUSES = frozenset({Status.ACTIVE, Status.CONTESTED, Status.ALTERNATIVE})
#: Statuses a rollback walks past: the version was recorded wrong or retracted (SPEC §4).
RETRACTED_STATUSES = frozenset({Status.REVOKED, Status.CONTRADICTED})


class OpType(StrEnum):
    """The typed operations a client, a person or the annotator may ask for (SPEC §3)."""

    ACCEPT = "accept"
    CONTEST = "contest"
    REJECT = "reject"
    REVOKE = "revoke"
    RESOLVE = "resolve"
    NOOP = "noop"
    #: The undo of a retraction or rejection (SPEC §3): a person's request on the
    #: cell-operations endpoint or in the explorer, never an observation's.
    RESTORE = "restore"


#: The log row of a predecessor reopened by rollback (SPEC §4): logged, never requested.
REINSTATE = "reinstate"
#: The log row of a version whose expiry passed (SPEC §13): recorded by the system, never asked for.
EXPIRE = "expire"
#: Who records an expiry (SPEC §13).
EXPIRY_ACTOR = "system:expiry"
#: Every ``type`` an operation row may have.
LOG_TYPES: tuple[str, ...] = (*(op.value for op in OpType), REINSTATE, EXPIRE)
#: The operations an observation's fact may carry (everything but ``restore``, a person's).
OBSERVATION_OPS: tuple[OpType, ...] = tuple(op for op in OpType if op != OpType.RESTORE)
#: Statuses ``restore`` undoes: a retraction (revoked) or a rejection / lost resolve.
RESTORABLE_STATUSES = frozenset({Status.REVOKED, Status.CONTRADICTED})
#: Operations that may create a cell for a key never seen before (with a value).
CREATING_OPS = frozenset({OpType.ACCEPT, OpType.REJECT})
#: Operations that are meaningless without a value.
VALUE_OPS = frozenset({OpType.ACCEPT, OpType.CONTEST})


class CellStatus(StrEnum):
    """What a cell shows (SPEC §7), derived from its head by :func:`cell_status`."""

    ACTIVE = "active"
    CONTESTED = "contested"
    EMPTY = "empty"


def cell_status(head_status: str | None) -> CellStatus:
    """The cell's status from its head's (None: no head)."""
    if head_status is None:
        return CellStatus.EMPTY
    return CellStatus.CONTESTED if head_status == Status.CONTESTED else CellStatus.ACTIVE


#: What a read may disclose beside each cell's value, in the order it is rendered (SPEC §7).
DISCLOSURES: tuple[str, ...] = ("support", "alternatives", "history")


class EvidenceState(StrEnum):
    """Where an observation is on its way to the commit (SPEC §5)."""

    PENDING = "pending"
    PROCESSING = "processing"
    COMMITTED = "committed"
    FAILED = "failed"


#: An observation in one of these states still holds back its namespace's later ones.
UNSETTLED_STATES: tuple[EvidenceState, ...] = (EvidenceState.PENDING, EvidenceState.PROCESSING)
SETTLED_STATES: tuple[EvidenceState, ...] = (EvidenceState.COMMITTED, EvidenceState.FAILED)
#: The PostgreSQL NOTIFY channel on which an observation's settling (committed or failed) is
#: announced, its payload the evidence ids, comma-separated: ``?wait=1`` listens instead of
#: polling (memory.selectors.settled).
SETTLED_CHANNEL = "pmem_settled"


#: How an observation states a value (paper A.4). Anything else is read as ``asserted``.
ASSERTIONS: tuple[str, ...] = ("asserted", "hedged", "reported", "withdrawn")


class Role(StrEnum):
    """A person's role in a namespace: a viewer sees, a reviewer may act, an admin also
    manages the namespace's members and API tokens."""

    VIEWER = "viewer"
    REVIEWER = "reviewer"
    ADMIN = "admin"


#: The role the explorer shows for a superuser, who sees and acts everywhere.
SUPERUSER = "superuser"


class Method(StrEnum):
    """How an operation was decided (SPEC §3): asked for as such, a client's structured fact
    decided without the model (SPEC §5.4), by the rule extractor and the deterministic
    controller, by the model, by soft key identity (the fact reached its key through an alias
    the model confirmed), or by rollback."""

    EXPLICIT = "explicit"
    CLIENT = "client"
    RULE = "rule"
    MODEL = "model"
    IDENTITY = "identity"
    REINSTATE = "reinstate"


#: The actor of the service's own steps (SPEC §3); people are ``user:<name>``, clients
#: ``api:<token name>`` / ``mcp:<token name>``.
SYSTEM_ACTOR = "system"


def may_act(role: str) -> bool:
    """Whether ``role`` may change memory (apply operations, record observations)."""
    return role in (Role.REVIEWER, Role.ADMIN, SUPERUSER)


def may_manage(role: str) -> bool:
    """Whether ``role`` may manage the namespace's members and API tokens."""
    return role in (Role.ADMIN, SUPERUSER)
