"""Concurrent conflicts: contest and resolve (paper §4.2.3).

Two reports place the target in different locations with no recency or authority cue, eight
distractor events follow, then a check settles it, counterbalanced between the first and the
second report. Before the check the right read surfaces the conflict instead of picking a side.
"""

from __future__ import annotations

from .common import (
    CHECK,
    REPORT,
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

NAME = "contest"
CASES = 140
DISTRACTORS = 4
DISTRACTOR_EVENTS = 8


def make_case(case: int) -> LocationCase:
    rng = case_rng(NAME, case)
    per_object = DISTRACTOR_EVENTS // DISTRACTORS
    scene = draw_scene(rng, min_locations=per_object + 3, min_objects=DISTRACTORS + 1)
    target, *others = draw_objects(rng, scene, DISTRACTORS + 1)
    a, b = rng.sample(scene.locations, 2)
    settled = a if case % 2 == 0 else b  # counterbalanced: half the checks confirm each report
    elsewhere = [loc for loc in scene.locations if loc not in (a, b)]
    texts = {obj: chain_texts(obj, draw_chain(rng, elsewhere, per_object)) for obj in others}

    seen = merge_queues(rng, [[(obj, *texts[obj][0])] for obj in others])
    reports = [Event(0, target, REPORT.format(obj=target, loc=loc), "report", loc) for loc in (a, b)]
    distractors = merge_queues(rng, [[(obj, *t) for t in texts[obj][1:]] for obj in others])
    check = [Event(0, target, CHECK.format(obj=target, loc=settled), "resolve", settled)]
    events = renumber(seen + reports + distractors + check)
    return LocationCase(
        scenario=NAME, case=case, axis={}, target=target, events=tuple(events),
        probes=(Probe("pre", len(events) - 1, settled), Probe("post", len(events), settled)),
        marks={"a": a, "b": b},
    )


def generate(cases: int = CASES) -> list[LocationCase]:
    return [make_case(case) for case in range(cases)]
