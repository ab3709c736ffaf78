"""Every read of a namespace through the HTTP API, with its ids replaced by their rank, so
that two namespaces holding the same memory under different ids compare equal (the round
trip of docs/export-format.md).

Independent of the code under test: ranks come straight from the tables (versions,
operations, cells, tombstones by id; observations by seq), and the answers are the API's.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from rest_framework.test import APIClient

from memory.models import Cell, Evidence, Namespace, Operation, Tombstone, Version
from memory.services import token_create

VERSION_KEYS = {"version", "head", "around", "head_before", "head_after", "supersedes",
                "alternative_of", "restores", "version_id", "supersedes_id",
                "alternative_of_id", "restores_id"}
OPERATION_KEYS = {"operation", "cause", "undoes"}
EVIDENCE_KEYS = {"observation", "evidence"}
NODE = re.compile(r"^([veot])(\d+)$")
QUOTED = re.compile(r"operation (\d+)")
LINKED = re.compile(r"/observations/(\d+)/")
CURSOR = re.compile(r"^(\d+)-(\d+)$")


def _rank(ids: Any) -> dict[int, int]:
    return {i: n for n, i in enumerate(ids, start=1)}


class Ranks:
    """id -> rank (1-based) of each kind of row of one namespace."""

    def __init__(self, ns: Namespace | None = None) -> None:
        if ns is None:
            return
        self.v = _rank(Version.objects.filter(namespace=ns).order_by("id")
                       .values_list("id", flat=True))
        self.o = _rank(Operation.objects.filter(namespace=ns).order_by("id")
                       .values_list("id", flat=True))
        self.e = _rank(Evidence.objects.filter(namespace=ns).order_by("seq")
                       .values_list("id", flat=True))
        self.c = _rank(Cell.objects.filter(namespace=ns).order_by("id")
                       .values_list("id", flat=True))
        self.t = _rank(Tombstone.objects.filter(version__namespace=ns).order_by("id")
                       .values_list("id", flat=True))
        self.name = ns.name

    @classmethod
    def of_file(cls, records: list[dict[str, Any]], name: str) -> Ranks:
        """The ranks of the rows an export file holds (its own order: no database)."""
        ranks = cls()
        for attr, kind, order in (("v", "version", "id"), ("o", "operation", "id"),
                                  ("e", "observation", "seq"), ("c", "cell", "id"),
                                  ("t", "tombstone", "id")):
            rows = sorted((r for r in records if r["type"] == kind), key=lambda r: r[order])
            setattr(ranks, attr, _rank(r["id"] for r in rows))
        ranks.name = name
        return ranks

    def of(self, kind: str, value: int) -> str:
        table = getattr(self, kind)
        return f"{kind}#{table[value]}" if value in table else f"{kind}?{value}"

    def norm(self, obj: Any, id_kind: str | None = None) -> Any:
        if isinstance(obj, dict):
            return {k: self._member(k, v, id_kind) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.norm(x, id_kind) for x in obj]
        if isinstance(obj, str):
            node = NODE.match(obj)
            if node:
                return self.of(node.group(1), int(node.group(2)))
            text = QUOTED.sub(lambda m: f"operation {self.of('o', int(m.group(1)))}", obj)
            text = LINKED.sub(lambda m: f"/observations/{self.of('e', int(m.group(1)))}/", text)
            return text.replace(self.name, "<ns>")
        return obj

    def _member(self, key: str, value: Any, id_kind: str | None) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            if key == "id" and id_kind:
                return self.of(id_kind, value)
            if key.endswith("_version"):
                return self.of("v", value)
            for keys, kind in ((VERSION_KEYS, "v"), (OPERATION_KEYS, "o"), (EVIDENCE_KEYS, "e")):
                if key in keys:
                    return self.of(kind, value)
        if key in ("next", "history_next", "next_url", "history_next_url") \
                and isinstance(value, str):
            return self._cursor(value)
        if key in ("effects", "payload", "facts"):
            return self.norm(value, None)
        return self.norm(value, id_kind)

    def _cursor(self, raw: str) -> Any:
        found = CURSOR.match(raw)
        if found:
            return f"{self.of('c', int(found.group(1)))}-{found.group(2)}"
        query = dict(parse_qsl(urlsplit(raw).query))
        if "before" in query:
            before = query["before"]
            query["before"] = (self._cursor(before) if "-" in before
                               else self.of("o", int(before)))
        return {"path": urlsplit(raw).path.replace(self.name, "<ns>"), "query": query}


def api_for(ns: Namespace) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(namespace=ns, client='t').key}")
    return api


def _get(api: APIClient, url: str, ranks: Ranks, id_kind: str | None = None,
         **params: Any) -> Any:
    answer = api.get(url, params)
    body = answer.json() if answer.headers.get("Content-Type", "").startswith(
        "application/json") else None
    return answer.status_code, ranks.norm(body, id_kind)


def reads(ns: Namespace, keys: list[str], instants: list[datetime], *, full: bool = True,
          queries: tuple[str, ...] = ("city", "Rome 12")) -> dict[str, Any]:
    """The reads of ``ns``: the frontier, each key's cell (its whole history) and graph, the
    operation log and the frontier and raw reads, now and as of each instant. ``full`` adds
    history pages, timelines, every read mode and query at every instant, the log per key and
    every observation."""
    api, ranks = api_for(ns), Ranks(ns)
    base = f"/api/v1/namespaces/{ns.name}"
    out: dict[str, Any] = {}
    moments: list[str | None] = [None, *(t.isoformat() for t in instants)]
    for at in moments:
        when = {"as_of": at} if at else {}
        out[f"cells@{at}"] = _get(api, f"{base}/cells/", ranks, **when)
        for key in keys:
            out[f"cell:{key}@{at}"] = _get(api, f"{base}/cells/{key}/", ranks, history=1000,
                                           **when)
            out[f"graph:{key}@{at}"] = _get(api, f"{base}/cells/{key}/graph/", ranks, **when)
            if full:
                out[f"history:{key}@{at}"] = _get(api, f"{base}/cells/{key}/history/", ranks,
                                                  limit=2, **when)
                out[f"timeline:{key}@{at}"] = _get(api, f"{base}/cells/{key}/timeline/",
                                                   ranks, **when)
        if full or at is None:
            modes = (("frontier", "raw", "evidence", "raw_ordered") if full
                     else ("frontier", "raw_ordered"))
            for mode in modes:
                for query in queries if full else queries[:1]:
                    out[f"read:{mode}:{query}@{at}"] = _read(api, base, ranks, mode, query, at)
    out["operations"] = _get(api, f"{base}/operations/", ranks, "o", limit=500)
    if full:
        for key in keys:
            out[f"operations:{key}"] = _get(api, f"{base}/operations/", ranks, "o", key=key)
        for evidence_id, seq in Evidence.objects.filter(namespace=ns).values_list("id", "seq"):
            out[f"observation#{seq}"] = _get(api, f"{base}/observations/{evidence_id}/",
                                             ranks, "e")
    return out


def _read(api: APIClient, base: str, ranks: Ranks, mode: str, query: str,
          at: str | None) -> Any:
    """A read mode's answer. The raw read ranks by cosine alone, so observations at an equal
    distance come in the index's order, which no read promises: it is asked for every
    observation (k = 50), and equal scores compare as a set."""
    body: dict[str, Any] = {"query": query, "mode": mode, "k": 50,
                            "disclose": ["support", "alternatives", "history"]}
    if at:
        body["as_of"] = at
    answer = api.post(f"{base}/read/", body, format="json")
    found = ranks.norm(answer.json(), "e" if mode != "frontier" else None)
    if mode == "raw" and answer.status_code == 200:
        found["items"] = sorted(found["items"], key=lambda i: (-i["score"], i["seq"]))
        head, *rest = found["context"].split("\n")
        found["context"] = [head, sorted(rest)]
    return answer.status_code, found


#: Record types whose ids other reads show; the others compare by their place in the file.
RANKED = {"observation": "e", "cell": "c", "version": "v", "operation": "o", "tombstone": "t"}
#: Record members that name another record, by the kind of record they name.
REFS = {"head": "v", "cell": "c", "version": "v", "created_by": "o", "supersedes": "v",
        "alternative_of": "v", "restores": "v", "evidence": "e", "operation": "o"}


def file_normal_form(text: str) -> list[Any]:
    """An export file with its ids replaced by their ranks in the file, without the moment
    and the name of the export: two exports of the same memory compare equal."""
    # Lines end at "\n" only (U+2028 and its kin are characters of a value).
    lines = [json.loads(line) for line in text.split("\n") if line]
    ranks = Ranks.of_file(lines[1:], lines[0]["namespace"])
    header = {k: v for k, v in lines[0].items() if k not in ("exported_at", "namespace")}
    out: list[Any] = [header]
    for record in lines[1:]:
        record = dict(record)
        if record["type"] == "namespace":
            record.pop("name")
        if "id" in record:
            kind = RANKED.get(record["type"])
            record["id"] = ranks.of(kind, record["id"]) if kind else None
        for name, kind in REFS.items():
            if isinstance(record.get(name), int):
                record[name] = ranks.of(kind, record[name])
        out.append(ranks.norm(record))
    return out
