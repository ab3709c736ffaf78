"""Source trust (SPEC §8): the levels a namespace gives its sources, and the right of a token
to claim one. Both decide whose word wins, so each change is a row of the access audit log
beside the token and membership changes, written in the same transaction."""

from __future__ import annotations

from django.db import transaction

from memory.domain.scopes import (
    MAX_SOURCE_CHARS,
    Scope,
    SourceRefused,
    default_source,
    source_fold,
    source_problem,
    source_refusal,
)
from memory.models import ApiToken, AuditEntry, Namespace, SourceTrust

from .tokens import audit_record


@transaction.atomic
def trust_set(*, namespace: Namespace, source: str, level: int, actor: str) -> bool:
    """Give ``source`` trust ``level`` in ``namespace``; audited with the level before. False
    when it already had that level (nothing written)."""
    source = _source_name(source)
    row = (SourceTrust.objects.select_for_update().filter(namespace=namespace, source=source)
           .first())
    was = row.level if row is not None else None
    if was == level:
        return False
    SourceTrust.objects.update_or_create(namespace=namespace, source=source,
                                         defaults={"level": level})
    audit_record(namespace=namespace, actor=actor, action=AuditEntry.Action.TRUST_SET,
                 target=f"source {source}", detail={"source": source, "level": level,
                                                    "was": was})
    return True


@transaction.atomic
def trust_clear(*, namespace: Namespace, source: str, actor: str) -> bool:
    """Take ``source``'s trust level away (it counts as 0, and any write token may name it
    again); audited. False when it had none."""
    source = _source_name(source, new=False)
    row = (SourceTrust.objects.select_for_update().filter(namespace=namespace, source=source)
           .first())
    if row is None:
        return False
    row.delete()
    audit_record(namespace=namespace, actor=actor, action=AuditEntry.Action.TRUST_CLEAR,
                 target=f"source {source}", detail={"source": source, "was": row.level})
    return True


def _source_name(source: str, *, new: bool = True) -> str:
    if len(source) > MAX_SOURCE_CHARS:
        raise ValueError(f"a source name is at most {MAX_SOURCE_CHARS} characters")
    problem = source_problem(source) if new else None  # an old look-alike can still go
    if problem:
        raise ValueError(f"source {source!r}: {problem}")
    return source


def _trusted_spelling(namespace: Namespace, source: str) -> str | None:
    """The spelling of the source with a trust level that ``source`` is, compared after NFKC,
    case folding and removal of invisible characters (``PAYROLL``, ``pay\u00adroll`` are
    ``payroll``); None when it has none. A namespace has a handful of trust levels."""
    folded = source_fold(source)
    for name in SourceTrust.objects.filter(namespace=namespace).values_list("source", flat=True):
        if source_fold(name) == folded:
            return name
    return None


def source_claim(*, namespace: Namespace, token: ApiToken | None, scope: Scope | str,
                 source: str | None) -> str:
    """The source an observation is recorded with, else :class:`SourceRefused`.

    ``source`` None (the request named none): the token's own when it is bound to exactly
    one, else no source. A write token may name its bound sources and any source without a
    trust level in ``namespace`` (one indexed probe of ``trust_once``); a review token, or a
    person's session (``token`` None, ``scope`` from their role), any."""
    bound = tuple(token.sources) if token is not None else ()
    if source is None:
        source = default_source(bound) or ""
    if not source:
        return source
    # The trusted name it reads as is the name it is recorded under: a look-alike spelling
    # neither escapes the binding nor reads as another source in the log.
    spelling = _trusted_spelling(namespace, source)
    refusal = source_refusal(scope=scope, bound=bound, source=source,
                             trusted=spelling is not None)
    if refusal is not None:
        raise refusal
    return spelling or source


__all__ = ["SourceRefused", "source_claim", "trust_clear", "trust_set"]
