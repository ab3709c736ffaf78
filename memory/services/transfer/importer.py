"""``pmem_import``: check the whole file, then write it as a new namespace in one transaction.

Nothing is written unless the whole file passed the check (:mod:`.checking`); the writing
(:mod:`.writing`) is one transaction, so a fault half-way — the database, the embedder, a
constraint a hand-edited file breaks — leaves nothing behind either. The new namespace gets a
new ``review`` token; tokens never travel.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import DataError, IntegrityError, connection, transaction

from memory.domain.scopes import Scope
from memory.llm.embedding import embedder_id
from memory.models import Namespace

from ..namespaces import NAME_RE, NAME_RULE
from ..reembed import namespace_terms_write
from ..tokens import token_create
from .checking import Checked, check
from .reading import ImportRefused, lines
from .writing import allocate, without_fk_triggers, writers

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Imported:
    namespace: Namespace
    token: str
    counts: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace.name, "token": self.token, "counts": self.counts}


def _name(checked: Checked, name: str | None) -> str:
    wanted = name or checked.header["namespace"]
    if not NAME_RE.fullmatch(wanted):
        raise ImportRefused(0, f"{wanted!r} is not a namespace name: {NAME_RULE}")
    if Namespace.objects.filter(name=wanted).exists():
        raise ImportRefused(0, f"a namespace named {wanted!r} exists already: import it"
                               " under another name (--as NAME)")
    return wanted


def _create(name: str, record: dict[str, Any]) -> int:
    try:
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("INSERT INTO memory_namespace (name, next_seq, created_at)"
                        " VALUES (%s, %s, %s) RETURNING id",
                        [name, record["next_seq"], record["created_at"]])
            return int(cur.fetchone()[0])
    except IntegrityError:
        raise ImportRefused(0, f"a namespace named {name!r} exists already") from None


def _write(path: Path, checked: Checked, name: str, progress: Progress | None) -> int:
    maps = allocate(checked)
    total = sum(checked.header["counts"].values())
    namespace_id = 0
    tables: dict[str, Any] = {}
    current = None
    for number, raw in lines(path):
        if number == 1:
            continue
        obj = json.loads(raw)
        kind = obj["type"]
        if kind == "namespace":
            namespace_id = _create(name, obj)
            tables = writers(checked, namespace_id, maps)
            continue
        if kind != current and current is not None:
            tables[current].flush()
        current = kind
        tables[kind].add(obj)
        if progress is not None and number % 10000 == 0:
            progress(number - 1, total)
    if current is not None:
        tables[current].flush()
    if progress is not None:
        progress(total, total)
    return namespace_id


def namespace_import(path: Path, *, name: str | None = None,
                     check_progress: Progress | None = None,
                     write_progress: Progress | None = None) -> Imported:
    """Import the export file at ``path`` as namespace ``name`` (default: the name in the
    file). Raises :class:`ImportRefused` (nothing written) for a damaged, newer or edited file
    or a name that is taken."""
    checked = check(path, check_progress)
    wanted = _name(checked, name)
    try:
        with transaction.atomic(), without_fk_triggers():
            namespace_id = _write(path, checked, wanted, write_progress)
            # The vectors were computed by this instance's embedder as the rows were written;
            # the words of the frontier read's lexical half are written here.
            namespace_terms_write(namespace_id=namespace_id)
            Namespace.objects.filter(pk=namespace_id).update(embedder=embedder_id())
            namespace = Namespace.objects.get(pk=namespace_id)
            token = token_create(namespace=namespace, client="import", name="pmem_import",
                                 scope=Scope.REVIEW)
    except (IntegrityError, DataError, UnicodeEncodeError) as exc:
        # What the check cannot see and the database can (two heads in one key, a key twice,
        # a source longer than its column, a NUL inside JSON): a hand-edited file. Rolled
        # back whole.
        raise ImportRefused(0, f"the database refused the file, nothing written: {exc}"
                            ) from None
    assert token.key is not None
    return Imported(namespace, token.key, dict(checked.header["counts"]))
