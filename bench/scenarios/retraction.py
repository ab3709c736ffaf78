"""Reversibility under retraction (paper §4.2.2, Appendix B.3, Table 8).

The target is seen at v1, an erroneous update moves it to v2, d distractor moves of the other
four objects follow, then a retraction names v2 only. v1 appears nowhere else, so answering it
afterwards requires that v1 still exist in the store.
"""

from __future__ import annotations

from .common import (
    RETRACTION,
    STALE,
    UPDATE,
    Event,
    LocationCase,
    Probe,
    case_rng,
    chain_texts,
    draw_chain,
    draw_objects,
    draw_scene,
    merge_queues,
    renumber,
)

NAME = "retraction"
DISTANCES = (0, 32)
CASES = 140
DISTRACTORS = 4


def _moves_per_distractor(distance: int) -> list[int]:
    """Spread d moves evenly so no distractor chain needs more distinct locations than a scene has."""
    return [distance // DISTRACTORS + (i < distance % DISTRACTORS) for i in range(DISTRACTORS)]


def make_case(case: int, distance: int) -> LocationCase:
    rng = case_rng(NAME, case, distance)
    moves = _moves_per_distractor(distance)
    scene = draw_scene(rng, min_locations=max(moves) + 3, min_objects=DISTRACTORS + 1)
    target, *others = draw_objects(rng, scene, DISTRACTORS + 1)
    v1, v2 = rng.sample(scene.locations, 2)
    elsewhere = [loc for loc in scene.locations if loc not in (v1, v2)]
    chains = {obj: draw_chain(rng, elsewhere, n) for obj, n in zip(others, moves, strict=True)}
    texts = {obj: chain_texts(obj, chain) for obj, chain in chains.items()}

    stated = merge_queues(rng, [[(target, STALE.format(obj=target, loc=v1), "accept", v1)]]
                          + [[(obj, *texts[obj][0])] for obj in others])
    error = [Event(0, target, UPDATE.format(obj=target, a=v1, b=v2), "accept", v2)]
    distractors = merge_queues(rng, [[(obj, *t) for t in texts[obj][1:]] for obj in others])
    retraction = [Event(0, target, RETRACTION.format(obj=target, b=v2), "revoke", v2)]
    events = renumber(stated + error + distractors + retraction)
    return LocationCase(
        scenario=NAME, case=case, axis={"d": distance}, target=target, events=tuple(events),
        probes=(Probe("pre", len(events) - 1, v2), Probe("post", len(events), v1)),
        marks={"v1": v1, "v2": v2},
    )


def generate(cases: int = CASES, distances: tuple[int, ...] = DISTANCES) -> list[LocationCase]:
    return [make_case(case, d) for d in distances for case in range(cases)]
