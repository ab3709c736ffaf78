"""LangGraph's long-term memory store on P-Mem: :class:`PMemStore`, a
``langgraph.store.base.BaseStore`` (CONTRACT "Framework integrations and clients").

>>> from pmem_client.langgraph import PMemStore
>>> store = PMemStore("http://127.0.0.1:8000", token)
>>> agent = create_react_agent(model, tools, store=store)   # or StateGraph(...).compile(store=)

How LangGraph's items map onto P-Mem:

- **Namespace.** Every item lives in one P-Mem namespace: ``namespace=`` (a name), else the
  token's. With an application token (one for every namespace of a prefix) ``namespace`` may be
  a function of the LangGraph namespace tuple — ``lambda ns: f"acme-{ns[0]}"`` gives each user
  their own P-Mem namespace. It is called with the item's namespace (get, put, delete) or the
  search's prefix (search, list_namespaces), so it must depend on the leading elements only.
- **Key.** An item is one P-Mem key, ``<readable part>_<12 hex digits of a hash>`` of the
  LangGraph namespace and key: keys of any length and script, none colliding once P-Mem
  normalises them; :meth:`PMemStore.pmem_key` gives it.
- **Value.** The item's value, as canonical JSON (sorted keys), is the key's value: a put of a
  changed value supersedes the old one (which stays in the history), a put of the same value
  only supports it. The LangGraph namespace and key, and the value's top-level strings, numbers
  and booleans (``value.<field>``), are the version's metadata: a search's namespace prefix and
  its equality filters are P-Mem filters, answered by the server.
- **Delete** retracts every value the key still holds (one observation): ``get`` answers None
  and the history keeps them all, retracted.
- **Search** with a ``query`` is P-Mem's frontier read (ranked by meaning, ``score`` its
  cosine similarity); without, the frontier list, by key. Filters with operators (``$gt`` …)
  are applied here, to what the server sent.
- **Time.** :meth:`PMemStore.history` lists every value an item had; :meth:`PMemStore.get`
  takes ``as_of`` and answers the item as it was then.

- **TTL** (``supports_ttl``): a put's ``ttl`` (minutes) becomes the fact's expiry (SPEC §13):
  after it the item is gone from ``get`` and ``search`` and its history says ``expired``. A
  ``get`` with ``refresh_ttl`` (the default with a ``ttl_config`` that does not turn it off)
  sends the value again with its ttl, which moves its expiry; ``search`` does not refresh.

``abatch`` runs ``batch`` in a thread (the client is thread-safe). An ``index`` configuration is
ignored (P-Mem embeds every value with its own embedder).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from . import errors
from .client import Client
from .types import Cell

__all__ = ["PMemStore"]

Namespace = tuple[str, ...]
NamespaceFor = str | Callable[[Namespace], str] | None

#: Metadata the store keeps with each version (memory.domain.metadata bounds it: 32 entries,
#: 500 characters a string, 4 kB in all).
NS_KEY, KEY_KEY, DEPTH_KEY = "langgraph.namespace", "langgraph.key", "langgraph.depth"
#: True when every top-level field the metadata could hold is there (False: some did not fit
#: its bounds, and a search by value reads such items apart, filtering them here).
WHOLE_KEY = "langgraph.values"
TTL_KEY = "langgraph.ttl_seconds"  # the put's ttl, so that a read can refresh it
PART_KEY = "langgraph.ns.{}"
VALUE_KEY = "value.{}"
MAX_PARTS = 8  # namespace levels a prefix filters by on the server (deeper: here)
MAX_ENTRIES, MAX_STRING, MAX_BYTES = 32, 500, 4096
#: P-Mem keys: a readable part and a hash, within the server's 200 characters.
READABLE_CHARS = 150
_JUNK = re.compile(r"[^a-z0-9]+")
#: Versions a get reads to date an item (its oldest shown is its creation, up to this many).
DELETED_REASON = "deleted through the LangGraph store"


def pmem_key(namespace: Namespace, key: str) -> str:
    """The P-Mem key of the LangGraph item (``namespace``, ``key``): stable, and a fixed point
    of P-Mem's key normalisation."""
    whole = json.dumps([*namespace, key], ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(whole.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    readable = "_".join(p for p in (_JUNK.sub("_", part.lower()).strip("_")
                                    for part in (*namespace, key)) if p)
    readable = readable[:READABLE_CHARS].strip("_")
    return f"{readable}_{digest}" if readable else f"item_{digest}"


def _encode(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _scalar(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) <= MAX_STRING and "\x00" not in value
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return abs(value) <= 2**53 - 1
    return isinstance(value, float) and value == value and abs(value) != float("inf")


def _metadata(namespace: Namespace, key: str, value: Mapping[str, Any]) -> dict[str, Any]:
    """What the version keeps to find the item again: its LangGraph path, by level too (a
    prefix is then a filter), and the value's scalar fields that fit (filters by value)."""
    meta: dict[str, Any] = {NS_KEY: json.dumps(list(namespace), ensure_ascii=False),
                            KEY_KEY: key, DEPTH_KEY: len(namespace)}
    if not all(_scalar(v) for v in meta.values()):
        raise ValueError("a LangGraph namespace and key of at most 500 characters (as JSON)")
    meta.update({PART_KEY.format(i): part for i, part in enumerate(namespace[:MAX_PARTS])})
    meta[WHOLE_KEY] = True
    size = len(json.dumps(meta, ensure_ascii=False).encode())
    for field, field_value in sorted(value.items()):
        entry_key = VALUE_KEY.format(field)
        if not _indexable(field, field_value):
            continue
        grown = size + len(json.dumps({entry_key: field_value}, ensure_ascii=False).encode())
        if len(meta) < MAX_ENTRIES and grown <= MAX_BYTES - 64:
            meta[entry_key], size = field_value, grown
        else:
            meta[WHOLE_KEY] = False
    return meta


def _indexable(field: str, value: Any) -> bool:
    """Could a value field be kept as metadata (and so be filtered by on the server)?"""
    return len(VALUE_KEY.format(field)) <= 64 and _scalar(value)


def _located(metadata: Mapping[str, Any] | None) -> tuple[Namespace, str] | None:
    """The LangGraph namespace and key a version's metadata names (None: not the store's)."""
    if not metadata or NS_KEY not in metadata or KEY_KEY not in metadata:
        return None
    try:
        parts = json.loads(metadata[NS_KEY])
    except (TypeError, ValueError):
        return None
    if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
        return None
    return tuple(parts), str(metadata[KEY_KEY])


def _decoded(raw: str | None) -> dict[str, Any] | None:
    try:
        value = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _time(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value) if isinstance(value, str) else datetime.fromtimestamp(0)


def _server_filters(prefix: Namespace, wanted: Mapping[str, Any] | None
                    ) -> list[dict[str, Any]]:
    """What the server answers of a search, as filters whose answers together hold every
    match: the prefix's levels, with equality of value fields for the items whose fields are
    all in their metadata, and without for the others (then filtered by :func:`_matches`)."""
    base: dict[str, Any] = {PART_KEY.format(i): part
                            for i, part in enumerate(prefix[:MAX_PARTS])}
    values: dict[str, Any] = {}
    for field, condition in (wanted or {}).items():
        if isinstance(condition, dict) and set(condition) == {"$eq"}:
            condition = condition["$eq"]
        if not isinstance(condition, dict) and _indexable(field, condition):
            values[VALUE_KEY.format(field)] = condition
    if not values:
        return [base]
    return [{**base, **values, WHOLE_KEY: True}, {**base, WHOLE_KEY: False}]


def _compare(have: Any, condition: Any) -> bool:
    """LangGraph's filter semantics: equality, or ``$eq``, ``$ne``, ``$gt``, ``$gte``,
    ``$lt``, ``$lte`` (numbers)."""
    if isinstance(condition, dict) and condition and all(k.startswith("$") for k in condition):
        checks = {"$eq": lambda a, b: a == b, "$ne": lambda a, b: a != b,
                  "$gt": lambda a, b: float(a) > float(b), "$gte": lambda a, b: float(a) >= float(b),
                  "$lt": lambda a, b: float(a) < float(b), "$lte": lambda a, b: float(a) <= float(b)}
        try:
            return all(checks[op](have, want) for op, want in condition.items())
        except (KeyError, TypeError, ValueError):
            return False
    if isinstance(condition, dict):
        return isinstance(have, dict) and all(_compare(have.get(k), v)
                                              for k, v in condition.items())
    return bool(have == condition)


def _matches(namespace: Namespace, value: Mapping[str, Any], prefix: Namespace,
             wanted: Mapping[str, Any] | None) -> bool:
    return namespace[:len(prefix)] == prefix and all(
        _compare(value.get(field), condition) for field, condition in (wanted or {}).items())


def _namespace_matches(condition: MatchCondition, namespace: Namespace) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = (zip(namespace, path, strict=False) if condition.match_type == "prefix"
             else zip(reversed(namespace), reversed(path), strict=False))
    return all(want == "*" or have == want for have, want in pairs)


class PMemStore(BaseStore):
    """LangGraph's ``BaseStore`` on a P-Mem server (see the module's documentation for how
    items map onto keys, values and metadata). ``base_url`` is the server's root; ``token`` an
    API token of scope ``write`` (``review`` to also restore); ``namespace`` the P-Mem
    namespace, or a function of the LangGraph namespace for an application token."""

    supports_ttl = True

    def __init__(self, base_url: str, token: str, *, namespace: NamespaceFor = None,
                 client: Client | None = None, ttl_config: TTLConfig | None = None,
                 **client_options: Any) -> None:
        self.client = client or Client(base_url, token, **client_options)
        self._namespace_for = namespace
        self.ttl_config = ttl_config

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> PMemStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- mapping ----------------------------------------------------------------------------

    @staticmethod
    def pmem_key(namespace: Namespace, key: str) -> str:
        """The P-Mem key an item is kept under."""
        return pmem_key(tuple(namespace), key)

    def pmem_namespace(self, namespace: Namespace) -> str:
        """The P-Mem namespace of a LangGraph namespace (or search prefix)."""
        mapped = self._namespace_for
        if mapped is None:
            return self.client.namespace
        if isinstance(mapped, str):
            return mapped
        try:
            return mapped(tuple(namespace))
        except (IndexError, KeyError) as exc:
            raise ValueError(f"the namespace function cannot place {namespace!r}: give a "
                             f"prefix that names the P-Mem namespace") from exc

    # --- BaseStore --------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key, refresh=op.refresh_ttl))
            elif isinstance(op, PutOp):
                self._put(op.namespace, op.key, op.value, ttl=op.ttl)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise TypeError(f"unknown store operation {op!r}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        listed = list(ops)
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, listed)

    def get(self, namespace: Namespace, key: str, *, refresh_ttl: bool | None = None,
            as_of: str | datetime | None = None) -> Item | None:
        """The item, or None; with ``as_of``, the item as it was then."""
        if as_of is None:
            return super().get(namespace, key, refresh_ttl=refresh_ttl)
        return self._get(tuple(namespace), key, as_of=as_of)

    def history(self, namespace: Namespace, key: str, *, limit: int = 50,
                as_of: str | datetime | None = None) -> list[dict[str, Any]]:
        """Every value the item had, newest first (at most ``limit``): each ``value`` (None
        for a value not written through this store), ``status`` (active, superseded, revoked
        …), ``ordinal``, ``valid_from``, ``valid_to`` and ``metadata``."""
        namespace = tuple(namespace)
        try:
            page = self.client.fact_history(self.pmem_key(namespace, key), limit=limit,
                                            as_of=as_of,
                                            namespace=self.pmem_namespace(namespace))
        except errors.NotFound:
            return []
        return [{"value": _decoded(h.value), "status": h.status, "ordinal": h.ordinal,
                 "valid_from": h.valid_from, "valid_to": h.valid_to, "metadata": h.metadata}
                for h in page.results]

    # --- the operations ---------------------------------------------------------------------

    def _get(self, namespace: Namespace, key: str, as_of: str | datetime | None = None,
             refresh: bool = False) -> Item | None:
        try:
            cell = self.client.get_fact(self.pmem_key(namespace, key), as_of=as_of, history=1,
                                        namespace=self.pmem_namespace(namespace))
        except errors.NotFound:
            return None
        item = self._item(cell, namespace, key)
        seconds = (cell.metadata or {}).get(TTL_KEY)
        if item is not None and refresh and as_of is None and isinstance(seconds, int):
            # The same value again, with its ttl: a support that moves the expiry.
            self.client.remember(facts=[{"key": cell.key, "value": cell.value,
                                         "ttl": seconds, "metadata": cell.metadata}],
                                 namespace=self.pmem_namespace(namespace))
        return item

    def _item(self, cell: Cell, namespace: Namespace, key: str) -> Item | None:
        value = _decoded(cell.value) if cell.status != "empty" else None
        if value is None:
            return None
        raw = cell.raw
        updated = raw.get("updated_at") or (cell.history[0].valid_from if cell.history else None)
        return Item(value=value, key=key, namespace=namespace,
                    created_at=_time(raw.get("created_at")), updated_at=_time(updated))

    def _put(self, namespace: Namespace, key: str, value: Mapping[str, Any] | None,
             ttl: float | None = None) -> None:
        namespace = tuple(namespace)
        if value is None:
            self._delete(namespace, key)
            return
        fact: dict[str, Any] = {"key": self.pmem_key(namespace, key), "value": _encode(value),
                                "op": "accept", "metadata": _metadata(namespace, key, value)}
        if ttl is not None:  # minutes, as LangGraph counts them
            fact["ttl"] = max(1, round(ttl * 60))
            meta = fact["metadata"]
            if len(meta) >= MAX_ENTRIES:  # make room: one value field fewer to filter by
                del meta[max(k for k in meta if k.startswith("value."))]
                meta[WHOLE_KEY] = False
            meta[TTL_KEY] = fact["ttl"]
        self.client.remember(facts=[fact], namespace=self.pmem_namespace(namespace))

    def _delete(self, namespace: Namespace, key: str) -> None:
        """Retract every value the key still holds, in one observation: the older ones by
        version, the current one last (so nothing is reinstated)."""
        pkey, where = self.pmem_key(namespace, key), self.pmem_namespace(namespace)
        try:
            cell = self.client.get_fact(pkey, history=0, namespace=where)
        except errors.NotFound:
            return
        if cell.status == "empty":
            return
        live = [h.version for h in self.client.iter_history(pkey, namespace=where)
                if h.status not in ("revoked", "contradicted") and h.version != cell.version]
        facts = [{"key": pkey, "op": "revoke", "version": v, "reason": DELETED_REASON}
                 for v in live]
        facts.append({"key": pkey, "op": "revoke", "reason": DELETED_REASON})
        self.client.remember(facts=facts, namespace=where)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        where = self.pmem_namespace(prefix)
        servers = _server_filters(prefix, op.filter)
        wanted = op.offset + op.limit
        try:
            found = (self._ranked(op.query, where, servers, wanted) if op.query
                     else self._listed(where, servers))
            out = list(itertools.islice(
                (item for item in found
                 if _matches(item.namespace, item.value, prefix, op.filter)), wanted))
        except errors.NotFound:  # an application token's namespace not written yet
            return []
        return out[op.offset:]

    def _ranked(self, query: str, where: str, servers: list[dict[str, Any]],
                wanted: int) -> list[SearchItem]:
        """The nearest items by meaning (P-Mem's frontier read, filtered on the server), the
        best first. Twice the items asked for are read (at most P-Mem's 100), so that filters
        applied here still leave enough."""
        items = []
        for server in servers:
            read = self.client.recall(query, k=min(max(wanted, 1) * 2, 100), filter=server,
                                      namespace=where)
            for found in read.items:
                item = self._search_item(found, found.get("score"))
                if item is not None:
                    items.append(item)
        return sorted(items, key=lambda i: -(i.score or 0.0))

    def _listed(self, where: str, servers: list[dict[str, Any]]) -> Iterator[SearchItem]:
        for server in servers:
            for cell in self.client.cells(filter=server, namespace=where, page_size=200):
                if cell.status != "empty":
                    item = self._search_item(cell.raw, None)
                    if item is not None:
                        yield item

    @staticmethod
    def _search_item(found: Mapping[str, Any], score: float | None) -> SearchItem | None:
        located = _located(found.get("metadata"))
        value = _decoded(found.get("value"))
        if located is None or value is None:
            return None
        return SearchItem(namespace=located[0], key=located[1], value=value,
                          created_at=_time(found.get("created_at")),
                          updated_at=_time(found.get("updated_at")), score=score)

    def _list_namespaces(self, op: ListNamespacesOp) -> list[Namespace]:
        conditions = tuple(op.match_conditions or ())
        prefix: Namespace = ()
        for condition in conditions:
            if condition.match_type == "prefix":
                path = tuple(condition.path)
                cut = path.index("*") if "*" in path else len(path)
                prefix = path[:cut] if len(path[:cut]) > len(prefix) else prefix
        found: set[Namespace] = set()
        try:
            for cell in self.client.cells(filter=_server_filters(prefix, None)[0],
                                          page_size=200,
                                          namespace=self.pmem_namespace(prefix)):
                located = _located(cell.metadata) if cell.status != "empty" else None
                if located is not None and all(_namespace_matches(c, located[0])
                                               for c in conditions):
                    found.add(located[0][:op.max_depth] if op.max_depth is not None
                              else located[0])
        except errors.NotFound:
            return []
        return sorted(found)[op.offset:op.offset + op.limit]
