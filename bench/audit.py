"""The FactConsolidation write-path audit (paper Appendix F): what a stream left in memory
against its mechanically derived gold state. Used by the scenario runner and the perf suite."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from memory.domain import normalize_value
from memory.selectors.cells import cells_list

from .scenarios import factconsolidation


def stream_audit(namespace: Any, stream: factconsolidation.Stream) -> dict[str, Any]:
    """Appendix F's write-path audit against the mechanically derived gold state."""

    cells = list(cells_list(namespace=namespace))
    heads = {c.key: normalize_value(c.head.value) for c in cells if c.head is not None}
    head_values = set(heads.values())
    by_subject: dict[str, list[str]] = defaultdict(list)
    for key in heads:
        subject = factconsolidation.subject_of_key(key)
        if subject is not None:
            by_subject[subject].append(key)
    subjects = {f.key: factconsolidation.fact_key(f.subject, "") for f in stream.facts}
    in_head = in_any = stale_heads = keys_with_stale = overwritten = 0
    for key, values in stream.history.items():
        final = normalize_value(values[-1])
        in_head += heads.get(key) == final
        in_any += final in head_values
        earlier = {normalize_value(v) for v in values[:-1]} - {final}
        if not earlier:
            continue
        overwritten += 1
        # The key's own head, and heads of *fragments* of it: cells of the same subject that
        # are no template key (a model writer's variant name). Another relation of the subject
        # holding the same value by coincidence (a city both born in and worked in) is no
        # stale sibling.
        siblings = [k for k in by_subject.get(subjects[key], [])
                    if k == key or k not in stream.history]
        stale = sum(heads[k] in earlier for k in siblings)
        stale_heads += stale
        keys_with_stale += stale > 0
    gold = len(stream.history)
    return {"facts": len(stream.facts), "gold_keys": gold, "overwritten_keys": overwritten,
            "overwrite_rate": round(100 * overwritten / gold, 1), "cells": len(cells),
            "cells_per_key": round(len(cells) / gold, 3),
            "gold_in_keyed_head": round(100 * in_head / gold, 1),
            "gold_in_any_head": round(100 * in_any / gold, 1), "stale_heads": stale_heads,
            "stale_sibling_rate": round(100 * keys_with_stale / max(overwritten, 1), 1),
            "accuracy": None, "n": gold, "context_chars": None}
