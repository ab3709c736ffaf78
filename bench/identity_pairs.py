"""A labelled set of key-name pairs for soft key identity (SPEC §5.3; docs/identity.md), built
from the vocabularies of LoCoMo (its speakers and the attributes its observations state) and
MemoryAgentBench FactConsolidation (its relations and question subjects), plus id-style keys.

Each pair is ``{"a", "b", "kind", "same"}``; ``kind``:

- ``paraphrase``: one attribute of one subject under two names (``same``: true);
- ``same_id_paraphrase``: the same, both names carrying the same identifier tokens;
- ``different_attribute``: two attributes, or one attribute of two named subjects, with no
  identifier token apart (``same``: false);
- ``id_variant``: one attribute of two entities told apart by an identifier token —
  ``mug_1_…``/``mug_2_…``, ``order_8812_…``/``order_9100_…``, hex and uuid-like ids;
- ``normalised_equal``: two spellings of one key (``same``: true).

The deterministic pre-check (:mod:`memory.domain.keyrule`) must decide every ``id_variant``
(different) and ``normalised_equal`` (same) pair, and leave every other pair to the model;
the gate's calibration (:mod:`bench.identity_gate`) measures the cosine of each kind per
embedder. ``python -m bench.identity_pairs`` writes the set to
``tests/llm/fixtures/identity_pairs.json`` (deterministic: the same file every run).
"""

from __future__ import annotations

import json
import random
import re
import sys
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
OUT = ROOT / "tests" / "llm" / "fixtures" / "identity_pairs.json"

#: FactConsolidation's relations (bench/scenarios/factconsolidation.py), each with names a
#: writer might give the same attribute.
RELATION_NAMES: dict[str, tuple[str, ...]] = {
    "birthplace": ("place_of_birth", "birth_city", "city_of_birth", "born_in_city"),
    "deathplace": ("place_of_death", "death_city", "city_of_death", "died_in_city"),
    "citizenship": ("country_of_citizenship", "nationality", "citizen_of"),
    "spouse": ("married_to", "spouse_name", "husband_or_wife"),
    "education": ("educated_at", "alma_mater", "university_attended"),
    "employer": ("employed_by", "works_for", "employer_name"),
    "genre": ("music_genre", "type_of_music", "genre_of_music"),
    "famous_for": ("known_for", "best_known_for", "famous_work"),
    "position": ("playing_position", "position_played", "plays_position"),
    "author": ("written_by", "author_name", "writer"),
    "chairperson": ("chair", "board_chairperson", "chairperson_name"),
    "ceo": ("chief_executive_officer", "chief_executive", "ceo_name"),
    "headquarters": ("headquarters_city", "hq_city", "head_office_location"),
    "capital": ("capital_city", "capital_name"),
    "official_language": ("language", "national_language", "official_tongue"),
    "continent": ("continent_name", "located_on_continent"),
    "religion": ("religious_affiliation", "faith", "main_religion"),
    "head_of_government": ("government_head", "head_of_the_government", "leader_of_government"),
    "sport": ("sport_played", "associated_sport", "sport_of_team"),
    "sport_origin": ("country_of_origin", "origin_country", "created_in_country"),
}
#: Attributes LoCoMo's observations state of its speakers, with names for the same one.
LOCOMO_NAMES: dict[str, tuple[str, ...]] = {
    "home_city": ("city_of_residence", "lives_in_city", "city_home"),
    "job": ("occupation", "profession", "job_title"),
    "hobby": ("pastime", "favorite_hobby", "hobbies"),
    "favorite_food": ("preferred_food", "food_favorite", "best_loved_food"),
    "pet_name": ("name_of_pet", "pets_name", "pet_called"),
    "number_of_children": ("kids_count", "children_count", "how_many_kids"),
    "birthday": ("date_of_birth", "birth_date", "born_on"),
    "career_goal": ("career_plan", "career_aspiration", "goal_for_career"),
    "support_group": ("support_group_attended", "group_for_support"),
    "favorite_book": ("book_favorite", "preferred_book", "most_loved_book"),
    "painting_subject": ("subject_of_painting", "what_she_paints", "painted_subject"),
    "workplace": ("place_of_work", "work_location", "office_location"),
    "relationship_status": ("marital_status", "dating_status"),
    "running_goal": ("race_goal", "marathon_target"),
    "instrument": ("musical_instrument", "instrument_played", "plays_instrument"),
}
#: Pairs of attributes that are not the same (one subject), whatever their words share.
DIFFERENT_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("birthplace", "deathplace"), ("birth_city", "death_city"), ("place_of_birth", "place_of_death"),
    ("employer", "education"), ("spouse", "employer"), ("capital", "official_language"),
    ("headquarters_city", "capital_city"), ("ceo", "chairperson"), ("sport", "sport_origin"),
    ("home_city", "work_city"), ("favorite_food", "favorite_book"), ("pet_name", "pet_breed"),
    ("job", "job_start_date"), ("birthday", "anniversary"), ("number_of_children", "children_names"),
    ("career_goal", "career_history"), ("home_city", "birth_city"), ("hobby", "hobby_since"),
    ("phone_number", "phone_model"), ("email_address", "home_address"),
    ("shoe_size", "shirt_size"), ("favorite_color", "favorite_movie"),
    ("running_goal", "running_pace"), ("instrument", "instrument_teacher"),
)
#: Entities told apart by an identifier, each with attributes (and names for one of them).
ID_TEMPLATES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("mug_{id}_{attr}", ("location", "where_it_is", "color")),
    ("order_{id}_{attr}", ("status", "state", "delivery_date")),
    ("ticket_{id}_{attr}", ("assignee", "assigned_to", "priority")),
    ("invoice_{id}_{attr}", ("total", "amount_due", "due_date")),
    ("user_{id}_{attr}", ("email", "email_address", "plan")),
    ("room_{id}_{attr}", ("temperature", "temp", "occupant")),
    ("item_{id}_{attr}", ("shelf", "shelf_number", "quantity")),
    ("{attr}_of_package_{id}", ("weight", "mass", "destination")),
    ("{id}", ("",)),
)
_ID_KINDS = ("small", "number", "hex", "uuid", "prefixed_hex")


def _speakers() -> list[str]:
    path = DATA / "locomo" / "locomo10.json"
    if not path.exists():  # the set is checked in; rebuilding it needs the data
        return ["Caroline", "Melanie", "Jon", "Gina", "John", "Maria", "Joanna", "Nate"]
    names: list[str] = []
    for sample in json.loads(path.read_text()):
        conv = sample["conversation"]
        names += [conv["speaker_a"], conv["speaker_b"]]
    return list(dict.fromkeys(names))


_SUBJECT = re.compile(r"(?:of|for|with|by|does|is|did) (?:the )?([A-Z][\w'.-]+(?: [A-Z][\w'.-]+)*)")


def _fc_subjects(limit: int = 24) -> list[str]:
    """Named subjects of the FactConsolidation questions (``… of Igor of Kiev?``)."""
    path = DATA / "memoryagentbench" / "factconsolidation_questions.jsonl"
    if not path.exists():
        return ["Thomas Kyd", "Steve Sax", "Blair Walsh", "Fatah", "Twitter"]
    found: list[str] = []
    for line in path.read_text().splitlines():
        question = json.loads(line)["question"]
        found += [m.group(1) for m in _SUBJECT.finditer(question)]
    return list(dict.fromkeys(found))[:limit]


def _slug(name: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", name.casefold()).strip("_")


def _ident(rng: random.Random, kind: str) -> str:
    if kind == "small":
        return str(rng.randint(1, 9))
    if kind == "number":
        return str(rng.randint(100, 99999))
    if kind == "hex":
        return f"{rng.getrandbits(48):012x}"
    if kind == "prefixed_hex":
        return f"k{rng.getrandbits(44):011x}"
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _join(template: str, ident: str, attr: str) -> str:
    return template.format(id=ident, attr=attr).strip("_").replace("__", "_")


def build(seed: int = 41) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    pairs: list[dict[str, Any]] = []

    def add(a: str, b: str, kind: str, same: bool) -> None:
        pairs.append({"a": a, "b": b, "kind": kind, "same": same})

    speakers = [_slug(s) for s in _speakers()]
    subjects = [_slug(s) for s in _fc_subjects()]
    for names, people in ((RELATION_NAMES, subjects), (LOCOMO_NAMES, speakers)):
        for attr, others in names.items():
            for other in others:
                who = rng.choice(people)
                add(f"{who}_{attr}", f"{who}_{other}", "paraphrase", True)
            who, other = rng.choice(people), rng.choice(others)
            add(f"{who}_{attr}", f"{other}_of_{who}", "paraphrase", True)
            a, b = rng.sample(people, 2)  # one attribute of two named subjects
            add(f"{a}_{attr}", f"{b}_{attr}", "different_attribute", False)
    for first, second in DIFFERENT_ATTRIBUTES:
        who = rng.choice(speakers + subjects)
        add(f"{who}_{first}", f"{who}_{second}", "different_attribute", False)
    for template, attrs in ID_TEMPLATES:
        for kind in _ID_KINDS:
            one, two = _ident(rng, kind), _ident(rng, kind)
            while two == one:
                two = _ident(rng, kind)
            attr = attrs[0]
            add(_join(template, one, attr), _join(template, two, attr), "id_variant", False)
            if len(attrs) > 1:  # another entity, and the attribute under another name
                add(_join(template, one, attrs[0]), _join(template, two, attrs[1]),
                    "id_variant", False)
                add(_join(template, one, attrs[0]), _join(template, one, attrs[1]),
                    "same_id_paraphrase", True)
                add(_join(template, one, attrs[0]), _join(template, one, attrs[2]),
                    "different_attribute", False)
    for who in speakers[:6]:  # LoCoMo's sessions and dialogue ids are identifiers too
        n, m = rng.sample(range(1, 30), 2)
        add(f"{who}_session_{n}_mood", f"{who}_session_{m}_mood", "id_variant", False)
        add(f"{who}_event_d{n}_3_summary", f"{who}_event_d{m}_3_summary", "id_variant", False)
        add(f"{who}_session_{n}_mood", f"{who}_mood_in_session_{n}", "same_id_paraphrase", True)
    for who in subjects[:6]:  # a second entity of one name
        add(f"{who}_2_birthplace", f"{who}_3_birthplace", "id_variant", False)
    for key in ("Mug 1 location", "Order-8812 Status", "caroline's home city", "CEO  of Twitter"):
        add(key, re.sub(r"[^0-9a-z]+", "_", key.casefold()).strip("_"), "normalised_equal", True)
    return pairs


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(build(), indent=0) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
