"""Revoke on a long chain against a short one."""

from __future__ import annotations

import time

from memory.domain import OpType
from memory.services import observation_ingest, operation_apply

from .common import FACTS_PER_OBSERVATION, GOALS, SCALES, Perf, StatementCounter, ms, new_namespace


def rollback(perf: Perf) -> None:
    scale = SCALES[perf.scale]
    ns = new_namespace(perf, "rollback")
    revokes = 30
    for start in range(0, scale.chain, FACTS_PER_OBSERVATION):  # one key, 1,000 versions
        observation_ingest(namespace=ns, facts=[
            {"key": "chain_long", "value": f"value {i}"}
            for i in range(start, min(start + FACTS_PER_OBSERVATION, scale.chain))])
    for start in range(0, revokes + 2, 15):  # 32 keys of 2 versions each
        batch = range(start, min(start + 15, revokes + 2))
        observation_ingest(namespace=ns, facts=[
            {"key": f"chain_short_{k}", "value": f"first {k}"} for k in batch])
        observation_ingest(namespace=ns, facts=[
            {"key": f"chain_short_{k}", "value": f"second {k}"} for k in batch])
    long_t, short_t = [], []
    long_n, short_n = StatementCounter(), StatementCounter()
    for i in range(revokes):  # interleaved, so load drifts hit both alike
        with long_n.on():
            t = time.perf_counter()
            operation_apply(namespace=ns, key="chain_long", op=OpType.REVOKE, actor="user:perf",
                            explicit=True)
            long_t.append(time.perf_counter() - t)
        with short_n.on():
            t = time.perf_counter()
            operation_apply(namespace=ns, key=f"chain_short_{i}", op=OpType.REVOKE,
                            actor="user:perf", explicit=True)
            short_t.append(time.perf_counter() - t)
    l50, l95 = ms(long_t)
    s50, s95 = ms(short_t)
    perf.add("rollback", f"revoke p50 on a {scale.chain}-version chain", l50, "ms",
             p95=round(l95, 3), statements=long_n.n / revokes)
    perf.add("rollback", "revoke p50 on a 2-version chain", s50, "ms", p95=round(s95, 3),
             statements=short_n.n / revokes)
    ratio = l50 / s50
    perf.add("rollback", "long / short chain revoke (p50)", ratio, "x",
             goal=GOALS["rollback_ratio"], met=ratio <= GOALS["rollback_ratio"])
