"""Property test of the privacy erase (SPEC §6) against full ``pg_dump``s of the database.

Random histories — several keys; observations with text, structured facts and sources that
carry values of several keys (so evidence is shared between keys) or of none (unrelated
evidence); people's operations whose reasons quote values; idempotency keys holding values —
over a pool of hostile values (``value``, ``key``, ``": "``, quotes, backslashes, full-width
and soft-hyphen variants, single letters). Then a random key is erased, and two data-only
dumps of the whole test database, before and after, must show that

(a) nothing attached to the key (its rows are gone; the evidence that supported or produced it
    is redacted) holds an erased value, the key's name or its metadata as a whole token in any
    form the service treats as equal to it — except where a kept fact of the same observation
    says it (that span is the other fact's, SPEC §6); the facts of the key lose their key, value
    and metadata, every other fact is byte-identical, and the redacted JSON keeps every field
    name and every non-string value;
(b) every row not attached to the key is byte-identical, and the only new row is the audit,
    which holds a digest of the key, not its name;
(c) the namespace's export names neither the key nor its metadata.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.domain import InvalidOperation, normalize_key
from memory.domain.redact import MARKERS
from memory.models import Cell, KeyAlias, Operation, SupportEdge, Tombstone, Version, VersionSpan
from memory.services import (
    CellNotFound,
    cell_erase,
    namespace_create,
    namespace_drain,
    observation_extract,
    observation_ingest,
    observation_record,
    operation_apply,
)
from memory.services.erase import key_digest
from memory.services.transfer import namespace_export
from tests.support import pgdump
from tests.support.erase import holds, shape, strings

pytestmark = pytest.mark.django_db(transaction=True)

KEYS = ("alpha", "beta", "gamma", "rk1", "rk10")
TRICKY = ["value", "key", '": "', "val1", "val10", "Lisbon", "Lisbon-north", "LISBON", '"quoted"', "back\\slash", 'pin "88" b\\x', "Zanzibar-4471",
          "ＺＡＮＺＩＢＡＲ－４４７１", "Zan\u00adzibar-4471", "naïve Café", "NAÏVE CAFÉ", "a b", "x",
          "e", "[erased]", "red"]
values = st.one_of(st.sampled_from(TRICKY),
                   st.text(alphabet='abcAB12 :"\\\u00ad\uff21-', min_size=1, max_size=6)
                   .filter(lambda v: v.strip() != ""))
keys = st.sampled_from(KEYS)
tags = st.one_of(st.none(), st.integers(0, 3))  # a fact's metadata: "meta-<key>-<n>"
observation = st.tuples(
    st.just("observe"),
    st.lists(st.tuples(keys, values, tags), max_size=3),  # structured facts
    st.one_of(st.none(), st.lists(values, min_size=1, max_size=2)),  # values quoted in text
    st.one_of(st.none(), values),  # a value in the source
)
operation = st.tuples(st.just("operate"), keys, st.sampled_from(["accept", "contest", "revoke",
                                                                 "reject"]), values, values)
replayable = st.tuples(st.just("record"), keys, values)
first = st.tuples(st.just("observe"),
                  st.lists(st.tuples(keys, values, tags), min_size=1, max_size=3),
                  st.one_of(st.none(), st.lists(values, min_size=1, max_size=2)),
                  st.one_of(st.none(), values))  # at least one key has a value to erase
histories = st.tuples(first, st.lists(st.one_of(observation, operation, replayable),
                                      min_size=1, max_size=7)).map(lambda h: [h[0], *h[1]])

_counter = iter(range(10**9))


def play(ns, history) -> None:
    for step in history:
        if step[0] == "observe":
            _, facts, quoted, source = step
            text = " and ".join(f"someone said {v} twice" for v in quoted or [])
            text += "".join(f"\n{k} = {v}" for k, v, _ in facts[:1])  # a fact quoted too
            observation_ingest(namespace=ns, text=text,
                               facts=[{"key": k, "value": v, **(
                                   {} if t is None else {"metadata": {"tag": f"meta-{k}-{t}"}})}
                                      for k, v, t in facts] or None,
                               source=(source or "")[:200])
        elif step[0] == "operate":
            _, key, kind, value, quoted = step
            try:
                operation_apply(namespace=ns, key=key, op=kind, actor="user:prop",
                                value=value if kind in ("accept", "contest") else None,
                                reason=f"because {quoted}", explicit=True)
            except (InvalidOperation, CellNotFound):
                pass
        else:
            _, key, value = step
            observation_record(namespace=ns, facts=[{"key": key, "value": value}],
                               idempotency_key=f"req {value} {next(_counter)}")
            for pk in ns.evidence.filter(state="pending").values_list("id", flat=True):
                observation_extract(evidence_id=pk)
            namespace_drain(namespace_id=ns.pk)


def attached_to(ns, key: str) -> tuple[dict[str, set[str]], set[str]]:
    """The rows of the key by table (first column as pg_dump prints it) and its values,
    computed here from the graph, independently of the erase's own queries."""
    cell = Cell.objects.get(namespace=ns, key=key)
    names = [key, *KeyAlias.objects.filter(cell=cell).values_list("alias", flat=True)]
    versions = Version.objects.filter(cell=cell)
    ops = Operation.objects.filter(cell=cell) | Operation.objects.filter(
        namespace=ns, key__in=names, cell__isnull=True)
    edges = SupportEdge.objects.filter(version__in=versions)
    evidence = ({e for e in edges.values_list("evidence_id", flat=True) if e}
                | {e for e in ops.values_list("evidence_id", flat=True) if e})
    rows = {
        "memory_cell": {cell.pk}, "memory_version": set(versions.values_list("id", flat=True)),
        "memory_operation": set(ops.values_list("id", flat=True)),
        "memory_supportedge": set(edges.values_list("id", flat=True)),
        "memory_tombstone": set(Tombstone.objects.filter(version__in=versions)
                                .values_list("id", flat=True)),
        "memory_keyalias": set(KeyAlias.objects.filter(cell=cell).values_list("id", flat=True)),
        "memory_versionspan": set(VersionSpan.objects.filter(version__in=versions)
                                  .values_list("id", flat=True)),
        "memory_frontiervector": {cell.pk}, "memory_evidence": evidence,
    }
    erased = set(versions.values_list("value", flat=True)) | {
        v for v in ops.values_list("value", flat=True) if v is not None}
    return {t: {str(i) for i in ids} for t, ids in rows.items()}, erased


def _json(raw: str | None) -> object:
    return None if raw is None else json.loads(raw)


def _fact_lists(raw: str | None) -> list[list[object]]:
    data = _json(raw)
    if isinstance(data, dict):
        data = data.get("facts")
    return [data] if isinstance(data, list) else []


def _kept(fact_lists: list[list[object]], names: set[str]) -> list[str]:
    return [s for facts in fact_lists for f in facts if isinstance(f, dict)
            and normalize_key(f["key"]) not in names for s in (f["key"], f["value"])
            if isinstance(s, str)]


def check_redacted(before: tuple[list[str], str], after: tuple[list[str], str],
                   erased: set[str], names: set[str]) -> None:
    old, new = pgdump.fields(*before), pgdump.fields(*after)
    lists = _fact_lists(old["facts"]) + _fact_lists(old["extracted"])
    kept = _kept(lists, names)
    # What a kept fact says is its own: a value it holds as a token may stay (SPEC §6).
    secrets = {v for v in erased | names if not any(holds(k, v) for k in kept)}
    # Stored hashed: a hex digest may hold a letter or digit that was a value, nothing more.
    assert new["idempotency_key"] is None or re.fullmatch("[0-9a-f]{64}", new["idempotency_key"])
    for column in ("text", "source", "error"):
        assert not [v for v in secrets if holds(new[column] or "", v)], (column, new[column])
        if not any(holds(old[column] or "", v) for v in erased | names):
            assert new[column] == old[column], column  # nothing to redact: untouched
    for column in ("facts", "extracted"):
        was, now = _json(old[column]), _json(new[column])
        was_facts, now_facts = _fact_lists(old[column]), _fact_lists(new[column])
        assert len(was_facts) == len(now_facts), column
        for w, n in zip(was_facts[0] if was_facts else [], now_facts[0] if now_facts else [],
                        strict=True):
            if normalize_key(w["key"]) in names:  # the key's own fact: every trace goes
                assert "metadata" not in n and n["key"] == n["value"] in MARKERS, n
            else:
                assert n == w, column  # another fact: never touched
        if isinstance(was, dict):
            was, now = ({k: v for k, v in d.items() if k not in ("facts", "vectors")}
                        for d in (was, now))
        if not was_facts:
            assert shape(now) == shape(was), column  # same fields, same numbers and flags
        held = [s for s in strings(now) for v in secrets if holds(s, v)]
        assert held == [], (column, held)
    # The digest of the request as sent would still answer "was it this value?": dropped
    # from a redacted row (a retry of it then replays).
    assert new["request_digest"] is None
    for column in set(old) - {"text", "source", "error", "facts", "extracted", "embedding",
                              "request_digest"}:
        assert new[column] == old[column], column


def exported(ns) -> str:
    out = io.BytesIO()
    namespace_export(ns, out)
    return out.getvalue().decode()


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(history=histories, pick=st.integers(0, 10))
def test_erase_removes_every_form_of_the_values_and_touches_nothing_else(history, pick):
    ns = namespace_create(name=f"erase-prop-{next(_counter)}")
    play(ns, history)
    cells = list(Cell.objects.filter(namespace=ns, versions__isnull=False).distinct()
                 .order_by("key").values_list("key", flat=True))
    assert cells, "the first observation gives some key a version"
    key = cells[pick % len(cells)]
    attached, erased = attached_to(ns, key)
    before = pgdump.rows(pgdump.dump())

    names = {key, *KeyAlias.objects.filter(cell__namespace=ns, cell__key=key)
             .values_list("alias", flat=True)}
    cell_erase(namespace=ns, key=key, actor="user:prop", report=True)

    after = pgdump.rows(pgdump.dump())
    feed_before = before.pop("memory_changeevent", {})
    feed_after = after.pop("memory_changeevent", {})
    before.pop("memory_changecounter", None)  # the erase event took the next cursor
    feed_kept = {pk: row for pk, row in feed_before.items()
                 if pgdump.fields(*row)["key"] not in names
                 or pgdump.fields(*row)["namespace_id"] != str(ns.pk)}
    feed_new = [pgdump.fields(*feed_after[pk]) for pk in set(feed_after) - set(feed_before)]
    assert {pk: feed_after.get(pk) for pk in feed_kept} == feed_kept  # other keys' events
    assert set(feed_after) - set(feed_before) | set(feed_kept) == set(feed_after)  # key's gone
    assert [(e["op"], e["key"]) for e in feed_new] == [("erase", key)]  # one names the key
    for table, rows in before.items():
        mine = attached.get(table, set())
        for pk, row in rows.items():
            if pk not in mine:
                assert after[table].get(pk) == row, (table, pk)  # (b) byte-identical
            elif table == "memory_evidence":
                check_redacted(row, after[table][pk], erased, names)  # (a) redacted
            else:
                assert pk not in after[table], (table, pk)  # (a) gone
        new = set(after.get(table, {})) - set(rows)
        assert not new or table == "memory_eraseaudit", (table, new)
    audits = [pgdump.fields(*r) for r in after["memory_eraseaudit"].values()]
    assert [a for a in audits if a["key"] == key_digest(key) and a["namespace_id"] == str(ns.pk)]
    export = exported(ns)  # (c)
    assert f"meta-{key}-" not in export
    assert not re.search(rf'"{key}"|\b{key}\b(?![_-])', export), key
