"""``manage.py pmem_demo``: the demo user, namespace and histories that show every operation.

Idempotent: the histories are written once (when the namespace has no evidence yet); the user,
membership and token are ensured on every run. ``--print-token`` prints the demo API token
(scope review): the same one on every run, though the database keeps only its hash.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from memory.domain.scopes import LEGACY_SCOPE
from memory.models import ApiToken, Evidence, Membership, Namespace
from memory.services import (
    demo_secret,
    membership_set,
    namespace_create,
    observation_ingest,
    operation_apply,
    token_create,
    token_digest,
    token_usable,
)

MOVES = ["countertop 1", "cabinet 3", "sinkbasin 1", "drawer 2", "shelf 1", "fridge 1",
         "diningtable 1", "sidetable 1", "desk 1"]


def load_histories(namespace: Namespace) -> None:
    """Each key shows one part of P-Mem's vocabulary; see the README's demo tour."""
    def observe(text: str = "", facts: list[dict[str, Any]] | None = None, source: str = "demo"):
        observation_ingest(namespace=namespace, text=text, facts=facts, source=source,
                           actor="api:demo")

    def human(key: str, op: str, value: str | None = None, reason: str = "") -> None:
        operation_apply(namespace=namespace, key=key, op=op, value=value, actor="user:demo",
                        reason=reason, explicit=True)

    # Superseded twice: the frontier shows only the newest city.
    observe("alice_home_city = Paris")
    observe("alice_home_city: Berlin")
    observe("alice_home_city = Lisbon", source="chat")
    # A retraction that reinstates the predecessor.
    observe("Earlier observation: mug 1 was in countertop 1.")
    observe("Update: mug 1 has been moved from countertop 1 to cabinet 3.")
    observe("The move of mug 1 to cabinet 3 was reported in error.")
    # An open contest.
    observe(facts=[{"key": "team_meeting_day", "value": "Tuesday"}])
    observe(facts=[{"key": "team_meeting_day", "value": "Thursday", "op": "contest"}],
            source="calendar")
    # A resolved contest.
    observe(facts=[{"key": "project_lead", "value": "Dana"}])
    observe(facts=[{"key": "project_lead", "value": "Sam", "op": "contest"}])
    human("project_lead", "resolve", "Sam", reason="confirmed in the staff directory")
    # A rejected value: recorded wrong, not merely outdated.
    observe("favorite_color = blue")
    human("favorite_color", "reject", "green", reason="the user corrected it")
    # Revoked to empty.
    observe("temp_access_code = 4417")
    human("temp_access_code", "revoke", reason="expired; must not be reused")
    # A long revision chain.
    observe(f"Earlier observation: laptop 1 was in {MOVES[0]}.")
    for a, b in zip(MOVES, MOVES[1:], strict=False):
        observe(f"Update: laptop 1 has been moved from {a} to {b}.")


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
        if not Evidence.objects.filter(namespace=namespace).exists():
            load_histories(namespace)
        secret = demo_token(namespace)
        if options["print_token"]:
            self.stdout.write(secret)


def demo_token(namespace: Namespace) -> str:
    """The demo token (scope review), the same on every run: derived from the secret key, so
    it can be printed again although the database keeps only its hash. If someone revoked it,
    the next generation is made."""
    for generation in range(1000):
        secret = demo_secret(generation)
        token = ApiToken.objects.filter(digest=token_digest(secret)).first()
        if token is None:
            token_create(namespace=namespace, client="demo", name="demo", secret=secret,
                         scope=LEGACY_SCOPE)
            return secret
        if token.namespace_id == namespace.pk and token_usable(token):
            return secret
    raise CommandError("every demo token is revoked; make one with pmem_token create demo")
