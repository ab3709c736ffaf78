"""The recall benchmark's workloads (``pmem_bench recall``): generated, deterministic.

- **entity**: 200 objects ("ring 77": ten kinds, twenty numbers each), each moved 10 times among
  40 locations, the 2,000 moves sent as structured facts in arrival order (each object's moves
  in order, the objects interleaved at random); then "Where is ring 77?" for every object.
- **meaning**: 20 profile facts among 60 distractors, each asked by a question that shares no
  word with its fact ("What do I like to eat?" for ``user_favorite_food = sushi``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from memory.domain.ranking import words

KINDS = ("ring", "key", "mug", "book", "lamp", "watch", "phone", "wallet", "pen", "hat")
ROOMS = ("kitchen", "bedroom", "garage", "office", "hallway")
FURNITURE = ("drawer", "shelf", "cabinet", "desk", "box", "basket", "table", "closet")
LOCATIONS = tuple(f"{room} {item}" for room in ROOMS for item in FURNITURE)  # 40


@dataclass(frozen=True)
class Question:
    query: str
    key: str
    value: str  # the current value


@dataclass(frozen=True)
class Workload:
    name: str
    facts: list[tuple[str, str]]  # (key, value), in arrival order
    questions: list[Question]


def entity(seed: int = 29, per_kind: int = 20, moves: int = 10) -> Workload:
    rng = random.Random(seed)
    objects = [f"{kind} {n}" for kind in KINDS for n in sorted(rng.sample(range(1, 100),
                                                                          per_kind))]
    chains: dict[str, list[str]] = {}
    for obj in objects:
        chain = [rng.choice(LOCATIONS)]
        while len(chain) < moves:
            chain.append(rng.choice([loc for loc in LOCATIONS if loc != chain[-1]]))
        chains[obj] = chain
    left = {obj: list(chain) for obj, chain in chains.items()}
    facts = []
    while left:
        obj = rng.choice(sorted(left))
        facts.append((location_key(obj), left[obj].pop(0)))
        if not left[obj]:
            del left[obj]
    questions = [Question(f"Where is {obj}?", location_key(obj), chains[obj][-1])
                 for obj in objects]
    return Workload("entity", facts, questions)


def location_key(obj: str) -> str:
    return f"{obj.replace(' ', '_')}_location"


#: (key, value, a question sharing no word with either).
PROFILE = (
    ("user_favorite_food", "sushi", "What do I like to eat?"),
    ("user_pet", "a cat named Miso", "Which animal lives with me?"),
    ("user_employer", "Acme Robotics", "Where do I work?"),
    ("user_sister_name", "Ingrid", "Who is my sibling?"),
    ("user_allergy", "peanuts", "What makes me ill when I eat it?"),
    ("user_home_city", "Lyon", "In which town do I live?"),
    ("user_car", "a green 2012 Volvo", "What do I drive?"),
    ("user_hobby", "bouldering on weekends", "What do I do for fun?"),
    ("user_birthday", "March 3", "When was I born?"),
    ("user_spouse", "Sam", "Who am I married to?"),
    ("user_phone_model", "Pixel 8", "Which mobile do I carry?"),
    ("user_favorite_music", "jazz", "What songs do I enjoy?"),
    ("user_job_title", "nurse", "What is my profession?"),
    ("user_native_language", "Portuguese", "Which tongue did I grow up speaking?"),
    ("user_favorite_sport", "tennis", "Which game do I play with a racket?"),
    ("user_coffee_order", "flat white", "How do I take my espresso?"),
    ("user_gym_days", "Monday and Thursday", "When do I exercise?"),
    ("user_doctor", "Dr. Okafor", "Who is my physician?"),
    ("user_shoe_size", "43", "How big are my feet?"),
    ("user_vacation_plan", "Japan in April", "Where am I travelling for my holidays?"),
)
_SUBJECTS = ("project alpha", "project beta", "office", "team", "server", "car rental",
             "library book", "dentist", "bank account", "conference")
_ATTRIBUTES = ("deadline", "status", "contact", "budget", "location", "password")
_VALUES = ("June 30", "on hold", "Priya", "12,000 euros", "building C", "tulip42", "pending",
           "Marco", "eu-west", "room 4", "overdue", "approved", "Lena", "3,500 euros", "Berlin")


def meaning(seed: int = 29) -> Workload:
    rng = random.Random(seed)
    distractors = [(f"{s.replace(' ', '_')}_{a}", rng.choice(_VALUES))
                   for s in _SUBJECTS for a in _ATTRIBUTES]
    facts = [(k, v) for k, v, _ in PROFILE] + distractors
    rng.shuffle(facts)
    questions = [Question(q, k, v) for k, v, q in PROFILE]
    for k, v, q in PROFILE:  # the workload's premise, checked
        shared = set(words(q)) & set(words(f"{k} {v}"))
        assert not shared, (q, shared)
    return Workload("meaning", facts, questions)
