"""``manage.py pmem_demo``: the demo user, namespace and histories that show every operation.

Idempotent: the histories are written once (when the namespace has no evidence yet); the user,
membership and token are ensured on every run. ``--print-token`` prints the demo API token.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from memory.llm.client import chat_model_off
from memory.models import ApiToken, Evidence, Membership, Namespace
from memory.services import (
    ExtractionFailed,
    membership_set,
    namespace_create,
    observation_ingest,
    observation_record,
    operation_apply,
    token_create,
)

MOVES = ["countertop 1", "cabinet 3", "sinkbasin 1", "drawer 2", "shelf 1", "fridge 1",
         "diningtable 1", "sidetable 1", "desk 1"]


def _fact(key: str, value: str, op: str = "accept") -> dict[str, Any]:
    return {"key": key, "value": value, "op": op}


def _move(obj: str, where: str) -> list[dict[str, Any]]:
    return [_fact(f"{obj}_location", where)]


def load_histories(namespace: Namespace) -> bool:
    """Each key shows one part of P-Mem's vocabulary; see the README's demo tour.

    Written deterministically whether or not a model is configured: every observation is
    structured facts with explicit ops, and no chat model is asked (no soft identity could
    merge two demo keys), so a model that is down, slow or answers nonsense cannot change or
    stop it (docs/decisions.md, "The demo never asks a model"). Returns False when the
    embeddings endpoint could not be reached: the observations are stored and wait for the
    worker, and the reviewer's steps that need their cells are skipped."""
    waiting = False

    def observe(facts: list[dict[str, Any]], source: str = "demo") -> None:
        nonlocal waiting
        if waiting:  # keep arrival order: everything after the first wait waits too
            observation_record(namespace=namespace, facts=facts, source=source,
                               actor="api:demo")
            return
        try:
            observation_ingest(namespace=namespace, facts=facts, source=source,
                               actor="api:demo")
        except ExtractionFailed:
            waiting = True

    def human(key: str, op: str, value: str | None = None, reason: str = "") -> None:
        if not waiting:
            operation_apply(namespace=namespace, key=key, op=op, value=value,
                            actor="user:demo", reason=reason, explicit=True)

    with chat_model_off():
        # Superseded twice: the frontier shows only the newest city.
        observe([_fact("alice_home_city", "Paris")])
        observe([_fact("alice_home_city", "Berlin")])
        observe([_fact("alice_home_city", "Lisbon")], source="chat")
        # A retraction that reinstates the predecessor.
        observe(_move("mug_1", "countertop 1"))
        observe(_move("mug_1", "cabinet 3"))
        observe([_fact("mug_1_location", "cabinet 3", "revoke")])  # "reported in error"
        # An open contest.
        observe([_fact("team_meeting_day", "Tuesday")])
        observe([_fact("team_meeting_day", "Thursday", "contest")], source="calendar")
        # A resolved contest.
        observe([_fact("project_lead", "Dana")])
        observe([_fact("project_lead", "Sam", "contest")])
        human("project_lead", "resolve", "Sam", reason="confirmed in the staff directory")
        # A rejected value: recorded wrong, not merely outdated.
        observe([_fact("favorite_color", "blue")])
        human("favorite_color", "reject", "green", reason="the user corrected it")
        # Revoked to empty.
        observe([_fact("temp_access_code", "4417")])
        human("temp_access_code", "revoke", reason="expired; must not be reused")
        # A long revision chain.
        for where in MOVES:
            observe(_move("laptop_1", where))
    return not waiting


class Command(BaseCommand):
    help = "Create the demo user (demo/demo), namespace 'demo' and its example histories."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--print-token", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        with transaction.atomic():
            user, created = User.objects.get_or_create(username="demo")
            if created:
                user.set_password("demo")
                user.save()
            namespace = namespace_create(name="demo")
            membership_set(namespace=namespace, user=user, role=Membership.Role.REVIEWER)
        if not Evidence.objects.filter(namespace=namespace).exists() \
                and not load_histories(namespace):
            self.stderr.write("pmem_demo: the embeddings endpoint did not answer; the demo "
                              "observations wait for the worker (the reviewer's steps are "
                              "skipped)")
        token = ApiToken.objects.filter(namespace=namespace, client="demo").first()
        if token is None:
            token = token_create(namespace=namespace, client="demo")
        if options["print_token"]:
            self.stdout.write(token.key)
