"""ALFWorld-Revision (paper §4.2.1, Appendix B.2): revision chains of length L, interleaved.

Per case a target object and four distractors each get an L-move chain over distinct
locations of one ALFWorld scene; the five chains (stale record first) merge into one arrival
order by random draws across per-chain queues. The question asks for the target's last location.
"""

from __future__ import annotations

from .common import (
    LocationCase,
    Probe,
    case_rng,
    chain_texts,
    draw_chain,
    draw_objects,
    draw_scene,
    merge_queues,
)

NAME = "alfworld-revision"
LENGTHS = (1, 2, 4, 8)
CASES = 140
DISTRACTORS = 4


def make_case(case: int, length: int) -> LocationCase:
    """One case at chain length ``length``; deterministic in (case, length)."""
    rng = case_rng(NAME, case, length)
    scene = draw_scene(rng, min_locations=max(LENGTHS) + 1, min_objects=DISTRACTORS + 1)
    objects = draw_objects(rng, scene, DISTRACTORS + 1)
    chains = {obj: draw_chain(rng, scene.locations, length) for obj in objects}
    queues = [[(obj, *item) for item in chain_texts(obj, chain)] for obj, chain in chains.items()]
    events = merge_queues(rng, queues)
    target = objects[0]
    gold = chains[target][-1]
    return LocationCase(
        scenario=NAME, case=case, axis={"L": length}, target=target, events=tuple(events),
        probes=(Probe("final", len(events), gold),), marks={"first": chains[target][0]},
    )


def generate(cases: int = CASES, lengths: tuple[int, ...] = LENGTHS) -> list[LocationCase]:
    return [make_case(case, length) for length in lengths for case in range(cases)]
