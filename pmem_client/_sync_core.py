# Generated from _async_core.py by tools/unasync_client.py: do not edit.
# Regenerate with `.venv/bin/python tools/unasync_client.py`.
"""The clients' capabilities, written once: every method of :class:`~pmem_client.AsyncClient`
and :class:`~pmem_client.Client` but how each is made, opened and closed, and the three that
page (``client.py`` holds those, where the twins differ).

This is the one definition: ``_sync_core.py`` is made from it by ``tools/unasync_client.py``
(unasync drops ``async``/``await`` and renames the asyncio names to their blocking twins); a test
fails when the two differ, so edit this file and run the tool.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx2

from . import _protocol as p
from . import errors
from ._base import RETRIED_TRANSPORT, ClientBase, T
from .types import (
    AnswerResult,
    Cell,
    EraseReport,
    HistoryEntry,
    HistoryPage,
    NamespaceDeleted,
    Observation,
    OperationResult,
    ReadResult,
    Whoami,
)


class SyncCore(ClientBase):
    """The capabilities over one ``httpx2`` client; a request is sent by :meth:`_send`, a
    capability's steps (:mod:`pmem_client._protocol`) run by :meth:`_run`."""

    _http: httpx2.Client

    def _send(self, call: p.Call) -> p.Reply:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(call.method, call.url, **self._request(call))
            except RETRIED_TRANSPORT as exc:
                time.sleep(self._transport_failed(exc, call, attempt))
                continue
            outcome = self._outcome(response, attempt)
            if isinstance(outcome, p.Reply):
                return outcome
            time.sleep(outcome)

    def _run(self, steps: p.Steps[T]) -> T:
        try:
            step = next(steps)
            while True:
                if isinstance(step, p.Pause):
                    time.sleep(step.seconds)
                    step = steps.send(p.Reply(200, None))
                    continue
                try:
                    reply = self._send(step)
                except errors.PmemError as exc:
                    step = steps.throw(exc)
                else:
                    step = steps.send(reply)
        except StopIteration as done:
            return done.value

    def _ns(self, namespace: str | None) -> str:
        if namespace is not None:
            return namespace
        if self._namespace is None:
            self.whoami()
        return self._require_namespace()

    def whoami(self) -> Whoami:
        """The token's namespace (or an application token's ``namespace_prefix``), scope and
        client name."""
        return self._learn(self._run(p.whoami()))

    def remember(self, text: str | None = None, *,
                       facts: list[dict[str, Any]] | None = None, source: str | None = None,
                       observed_at: str | datetime | None = None, wait: bool = True,
                       idempotency_key: str | None = None,
                       namespace: str | None = None,
                       messages: list[dict[str, Any]] | None = None, ttl: int | None = None,
                       expires_at: str | datetime | None = None) -> Observation:
        """Record an observation: ``text`` and/or ``facts`` (``[{"key", "value", "op"?,
        "annotate"?, "metadata"?, "ttl"?, "expires_at"?}]``; ``ttl`` (seconds) or
        ``expires_at`` here apply to every fact without its own: from then on the version it
        creates is never current; a fact's different value supersedes the current one
        unless ``annotate`` is True, which lets the memory's model decide; ``metadata``, a flat
        object of strings, numbers and booleans, stays with the version the fact creates). Waits until it is committed (its operations then
        say what changed; ``facts_found`` and ``note`` say when text yielded nothing) unless
        ``wait=False``. One idempotency key is made per call (or pass your own), so the
        client's retries never store it twice: a key sent again with the same request answers
        the first observation (``replayed`` True), with another request raises
        :class:`~pmem_client.IdempotencyConflict`. A ``source`` with a trust level must be
        one the token is bound to (:class:`~pmem_client.Forbidden` otherwise); left out, the
        token's own source when it is bound to one. An application token's first write to a
        namespace of its prefix creates it. ``messages`` (``[{"role", "content", "name"?,
        "at"?}]``, at most 500) records a chat session as one observation, read as its
        transcript and extracted in one model call; ``observed_at`` defaults to the last
        ``at`` (a time with a zone)."""
        facts = p.with_expiry(facts, ttl, expires_at)
        return self._run(p.remember(
            self._ns(namespace), text=text, facts=facts, source=source,
            observed_at=observed_at, wait=wait,
            idempotency_key=idempotency_key or p.new_idempotency_key(),
            wait_timeout=self.wait_timeout, messages=messages))

    def remember_many(self, observations: list[dict[str, Any]], *, wait: bool = True,
                            namespace: str | None = None) -> list[Observation]:
        """Record many observations in order — each a dict of ``remember``'s fields (``text``,
        ``messages``, ``facts``, ``source``, ``observed_at``, ``idempotency_key``) — in
        batch requests of at most 1,000 (a longer list is sent in chunks, in order, each
        stored whole or not at all: a bad item raises BadRequest naming its path, e.g.
        ``observations[57].facts[0].key``, counted within its chunk). Each item without an
        idempotency key gets one, so retries store nothing twice. Returns one result per
        item (``id``, ``seq``, ``status``, ``replayed``); with ``wait`` once committed."""
        return self._run(p.remember_many(self._ns(namespace), observations,
                                               wait=wait, wait_timeout=self.wait_timeout))

    def observation(self, observation_id: int, *,
                          namespace: str | None = None) -> Observation:
        """An observation's status and, once committed, its operations."""
        return self._run(p.observation(self._ns(namespace), observation_id))

    def recall(self, query: str, *, mode: str = "frontier", k: int | None = None,
                     as_of: str | datetime | None = None, disclose: list[str] | None = None,
                     filter: dict[str, Any] | None = None, min_score: float | None = None,
                     namespace: str | None = None) -> ReadResult:
        """Read memory for a query (``frontier``: current values; ``evidence``: the
        observations that best match by meaning and by the query's words, a chat session's
        item naming the ``messages`` that matched, each with its ``index`` in the session and
        its scores; ``raw``, ``raw_ordered``, ``pruned``: the evidence by meaning). ``as_of``
        reads the memory as it was then; ``filter`` (frontier) keeps the facts whose current version's metadata holds
        each entry; ``min_score`` drops items scored below it (each item's ``score``: in
        ``frontier`` the cosine similarity of query and fact plus up to 0.5 for the query's
        exact rare words, -1 to 1.5; in ``evidence`` the cosine plus up to 1 for the query's
        words, -1 to 2, with ``semantic_score`` and ``lexical_score``; otherwise the cosine, -1
        to 1; what is relevant depends on the embedder)."""
        return self._run(p.recall(self._ns(namespace), query=query, mode=mode, k=k,
                                        as_of=as_of, disclose=disclose, filter=filter,
                                        min_score=min_score))

    def answer(self, query: str, *, mode: str = "frontier", k: int | None = None,
                     disclose: list[str] | None = None,
                     namespace: str | None = None) -> AnswerResult:
        """The server's model answers ``query`` from a read in ``mode`` (``frontier``,
        ``frontier_cosine``, ``raw``, ``raw_ordered``, ``pruned``, ``iterative``); it needs
        a model configured on the server (PMEM_LLM_BASE_URL: Conflict otherwise)."""
        return self._run(p.answer(self._ns(namespace), query=query, mode=mode,
                                        k=k, disclose=disclose))

    def get_fact(self, key: str, *, as_of: str | datetime | None = None,
                       history: int | None = None, namespace: str | None = None) -> Cell:
        """A cell: value, status, alternatives and newest history. Raises NotFound."""
        return self._run(p.get_fact(self._ns(namespace), key, as_of=as_of,
                                          history=history))

    def fact_history(self, key: str, *, limit: int = 50, before: str | None = None,
                           as_of: str | datetime | None = None, search: str | None = None,
                           namespace: str | None = None) -> HistoryPage:
        """One page of a key's history, newest first; pass ``page.next`` as ``before``."""
        return self._run(p.fact_history(self._ns(namespace), key, limit=limit,
                                              before=before, as_of=as_of, search=search))

    def iter_history(self, key: str, *, as_of: str | datetime | None = None,
                           page_size: int = 200, namespace: str | None = None
                           ) -> Iterator[HistoryEntry]:
        """Every version of a key, newest first, page by page."""
        before: str | None = None
        while True:
            page = self.fact_history(key, limit=page_size, before=before, as_of=as_of,
                                           namespace=namespace)
            for entry in page.results:
                yield entry
            if not page.next:
                return
            before = page.next

    def retract(self, key: str, reason: str, *, version: int | str | None = None,
                      idempotency_key: str | None = None,
                      namespace: str | None = None) -> OperationResult:
        """Retract the key's current value (or the non-head ``version``: its id, or the key's
        ordinal as ``"v3"``): the previous value is reinstated. Raises Conflict with the reason when it is invalid in the cell's state,
        NotFound (nothing written) when the key has no cell."""
        return self._explicit("retract", namespace, key=key, reason=reason,
                                    version=version, idempotency_key=idempotency_key)

    def contest(self, key: str, value: str, *, reason: str | None = None,
                      idempotency_key: str | None = None,
                      metadata: dict[str, Any] | None = None,
                      namespace: str | None = None) -> OperationResult:
        """Hold ``value`` open beside the current one: the cell becomes contested."""
        return self._explicit("contest", namespace, key=key, value=value, reason=reason,
                                    metadata=metadata, idempotency_key=idempotency_key)

    def resolve(self, key: str, *, value: str | None = None,
                      version: int | str | None = None,
                      reason: str, idempotency_key: str | None = None,
                      namespace: str | None = None) -> OperationResult:
        """Settle a contested cell on ``value`` (or ``version``: its id, or the key's ordinal
        as ``"v3"``)."""
        return self._explicit("resolve", namespace, key=key, value=value,
                                    version=version, reason=reason,
                                    idempotency_key=idempotency_key)

    def accept(self, key: str, value: str, *, reason: str | None = None,
                     metadata: dict[str, Any] | None = None,
                     idempotency_key: str | None = None,
                     namespace: str | None = None) -> OperationResult:
        """Make ``value`` the key's current value, whatever trust or valid time would have
        decided (an explicit accept): the old one is superseded, and kept in the history."""
        return self._explicit("accept", namespace, key=key, value=value, reason=reason,
                                    metadata=metadata, idempotency_key=idempotency_key)

    def reject(self, key: str, value: str | None = None, *, reason: str,
                     metadata: dict[str, Any] | None = None,
                     idempotency_key: str | None = None,
                     namespace: str | None = None) -> OperationResult:
        """Say the current value contradicts the world: with ``value``, that one replaces it
        (the old one is kept as contradicted); without, the previous value is reinstated
        (NotFound, nothing written, when the key has no cell)."""
        return self._explicit("reject", namespace, key=key, value=value, reason=reason,
                                    metadata=metadata, idempotency_key=idempotency_key)

    def restore(self, key: str, version: int | str, *, reason: str | None = None,
                      metadata: dict[str, Any] | None = None,
                      namespace: str | None = None) -> OperationResult:
        """Undo a retraction or rejection: the value of the revoked or contradicted
        ``version`` (its id, or the key's ordinal as ``"v3"``) becomes current again (scope
        ``review``; Conflict when ``version`` is neither). The new version starts from the
        restored one's metadata; ``metadata`` overlays it key by key."""
        return self._run(p.restore(self._ns(namespace), key, version=version,
                                         reason=reason, metadata=metadata))

    def _explicit(self, capability: str, namespace: str | None, *,
                        idempotency_key: str | None, **fact: Any) -> OperationResult:
        return self._run(p.explicit_op(
            self._ns(namespace), capability, idempotency_key=idempotency_key or
            p.new_idempotency_key(), wait_timeout=self.wait_timeout, **fact))

    def _pages(self, call: p.Call | None, parse: Any) -> Iterator[Any]:
        while call is not None:
            page = self._run(p.page(call, parse, self.base_url))
            for item in page.items:
                yield item
            call = page.next

    def erase(self, key: str, *, report: bool = False,
                    namespace: str | None = None) -> EraseReport | None:
        """Privacy erase (SPEC §6): the key and its values are gone for good."""
        return self._run(p.erase(self._ns(namespace), key, report=report))

    def delete_namespace(self, namespace: str | None = None, *,
                               report: bool = False) -> NamespaceDeleted | None:
        """Delete the namespace and everything in it (SPEC §13; scope ``review``): it answers
        404 afterwards and its name starts empty."""
        return self._run(p.delete_namespace(self._ns(namespace), report=report))

    def export(self, *, namespace: str | None = None) -> str:
        """The namespace as NDJSON (``pmem_import`` reads it back; scope ``review``)."""
        return self._run(p.export(self._ns(namespace)))
