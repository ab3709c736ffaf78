"""What every scenario generator shares: events, the ALFWorld vocabulary, seeded randomness.

Generators are pure Python (no Django) so they can be tested and inspected without a database;
the arms in :mod:`bench.arms` are what touch P-Mem.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SEED = 42
DATA_DIR = Path(__file__).resolve().parent.parent / "data"

#: The paper's ALFWorld-Revision templates (Appendix B.2) and the probes of §4.2.2–4.2.3.
STALE = "Earlier observation: {obj} was in {loc}."
UPDATE = "Update: {obj} has been moved from {a} to {b}."
RETRACTION = "The move of {obj} to {b} was reported in error."
REPORT = "Report: {obj} is in {loc}."
CHECK = "Check: {obj} is confirmed in {loc}."
QUESTION = "where is the {obj} now?"


@dataclass(frozen=True)
class Event:
    """One observation in arrival order, with the template-perfect parse the generator knows.

    ``op`` is what the sentence means for its key (accept, revoke, contest, resolve); only the
    CRUD arm reads it — the P-Mem arm sees ``text`` alone and extracts for itself.
    """

    seq: int
    obj: str
    text: str
    op: str
    value: str


def location_key(obj: str) -> str:
    """The key the rule extractor files an object's location under (``mug 1`` -> ``mug_1_location``)."""
    return re.sub(r"[^0-9a-z]+", "_", f"{obj} location".lower()).strip("_")


def case_rng(scenario: str, case: int, *axis: object) -> random.Random:
    """A generator per (scenario, case, axis): each case is reproducible on its own (seed 42),
    and adding cases or axis values never changes the earlier ones."""
    return random.Random(f"{SEED}:{scenario}:{case}:{':'.join(map(str, axis))}")


@dataclass(frozen=True)
class Scene:
    """One ALFWorld floor plan: movable object types and receptacle names as the text games print them."""

    name: str
    objects: tuple[str, ...]
    locations: tuple[str, ...]


@lru_cache(maxsize=1)
def alfworld_scenes() -> tuple[Scene, ...]:
    """Scenes from ALFWorld's layouts, as ``mug`` / ``countertop 2`` (TextWorld's lower-cased names)."""
    vocab = json.loads((DATA_DIR / "alfworld" / "vocab.json").read_text())
    layouts = json.loads((DATA_DIR / "alfworld" / "scene_vocab.json").read_text())["scenes"]
    # Pickupable objects are the ones some receptacle can hold; sliced variants are not found
    # lying around at the start of a game.
    movable = {o for held in vocab["val_receptacle_objects"].values() for o in held
               if not o.endswith("Sliced")}
    scenes = []
    for name, layout in sorted(layouts.items()):
        objects = tuple(sorted(t.lower() for t in layout["object_types"] if t in movable))
        locations = tuple(
            f"{rtype.lower()} {i}"
            for rtype, count in sorted(layout["receptacle_instances"].items())
            for i in range(1, count + 1)
        )
        scenes.append(Scene(name, objects, locations))
    return tuple(scenes)


def draw_scene(rng: random.Random, *, min_locations: int, min_objects: int = 5) -> Scene:
    """A scene large enough for the case: chains need distinct locations, cases five objects."""
    fitting = [s for s in alfworld_scenes()
               if len(s.locations) >= min_locations and len(s.objects) >= min_objects]
    return rng.choice(fitting)


def draw_objects(rng: random.Random, scene: Scene, n: int) -> list[str]:
    """``n`` distinct object types of the scene, each with an instance number (``mug 1``)."""
    return [f"{t} {rng.randint(1, 3)}" for t in rng.sample(scene.objects, n)]


def draw_chain(rng: random.Random, locations: list[str] | tuple[str, ...], moves: int) -> list[str]:
    """``moves + 1`` distinct locations: where the object was first seen, then each move's destination."""
    return rng.sample(list(locations), moves + 1)


def chain_texts(obj: str, chain: list[str]) -> list[tuple[str, str, str]]:
    """The stale record and the updates of one object's chain, as (text, op, value)."""
    out = [(STALE.format(obj=obj, loc=chain[0]), "accept", chain[0])]
    for a, b in zip(chain, chain[1:], strict=False):
        out.append((UPDATE.format(obj=obj, a=a, b=b), "accept", b))
    return out


def merge_queues(rng: random.Random, queues: list[list[tuple[str, str, str, str]]]) -> list[Event]:
    """Interleave per-object queues by random draws across the non-empty ones.

    Each queue's internal order is preserved (a move never arrives before the one it follows);
    items are (obj, text, op, value).
    """
    pending = [list(q) for q in queues if q]
    merged: list[Event] = []
    while pending:
        queue = rng.choice(pending)
        obj, text, op, value = queue.pop(0)
        merged.append(Event(len(merged) + 1, obj, text, op, value))
        if not queue:
            pending.remove(queue)
    return merged


def renumber(events: list[Event]) -> list[Event]:
    """Assign arrival numbers 1..n after events were concatenated from several phases."""
    return [Event(i, e.obj, e.text, e.op, e.value) for i, e in enumerate(events, start=1)]


@dataclass(frozen=True)
class Probe:
    """A question asked once the first ``after`` events have arrived."""

    label: str
    after: int
    gold: str


@dataclass(frozen=True)
class LocationCase:
    """One case of the ALFWorld-derived probes: a target object among distractors."""

    scenario: str
    case: int
    axis: dict[str, int]
    target: str
    events: tuple[Event, ...]
    probes: tuple[Probe, ...]
    #: values the scenario's metrics compare against (v1/v2, or the two contested reports)
    marks: dict[str, str]

    @property
    def key(self) -> str:
        return location_key(self.target)

    @property
    def question(self) -> str:
        return QUESTION.format(obj=self.target)

    def target_lines(self, upto: int) -> list[Event]:
        """The target's own events among the first ``upto``, in arrival order (the oracle read)."""
        return [e for e in self.events[:upto] if e.obj == self.target]


_NON_WORD = re.compile(r"[^0-9a-z]+")


def _words(text: str) -> str:
    return " ".join(_NON_WORD.sub(" ", text.lower()).split())


def mentions(prediction: str | None, value: str) -> bool:
    """The value appears in the answer as whole words (``cabinet 1`` is not in ``cabinet 10``):
    the paper's normalised string match against a location."""
    if not prediction:
        return False
    return f" {_words(value)} " in f" {_words(prediction)} "
