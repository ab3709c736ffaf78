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
from django.test import override_settings

from memory.domain.scopes import LEGACY_SCOPE
from memory.llm.client import chat_model_off
from memory.models import ApiToken, Evidence, Membership, Namespace
from memory.services import (
    ExtractionFailed,
    demo_secret,
    membership_set,
    namespace_create,
    observation_ingest,
    observation_record,
    operation_apply,
    token_create,
    token_digest,
    token_usable,
)
from memory.services.embeddings import embeddings_wait

MOVES = ["countertop 1", "cabinet 3", "sinkbasin 1", "drawer 2", "shelf 1", "fridge 1",
         "diningtable 1", "sidetable 1", "desk 1"]


def load_histories(namespace: Namespace) -> bool:
    """Each key shows one part of P-Mem's vocabulary; see the README's demo tour.

    Written deterministically whether or not a model is configured: no chat model is asked
    (``chat_model_off``: the texts go through the built-in rule patterns only, structured
    facts carry explicit ops, and no soft identity can merge two demo keys), so a model that is
    down, slow or answers nonsense cannot change or stop it. Returns False when the embeddings endpoint could not be reached: the
    observations are stored and wait for the worker, and the reviewer's steps that need their
    cells are skipped."""
    waiting = False

    def observe(text: str = "", facts: list[dict[str, Any]] | None = None,
                source: str = "demo") -> None:
        nonlocal waiting
        if waiting:  # keep arrival order: everything after the first wait waits too
            observation_record(namespace=namespace, text=text, facts=facts, source=source,
                               actor="api:demo")
            return
        try:
            observation_ingest(namespace=namespace, text=text, facts=facts, source=source,
                               actor="api:demo")
        except ExtractionFailed:
            waiting = True

    def human(key: str, op: str, value: str | None = None, reason: str = "") -> None:
        if not waiting:
            operation_apply(namespace=namespace, key=key, op=op, value=value,
                            actor="user:demo", reason=reason, explicit=True)

    # Only the built-in rule patterns: a configured pattern file must not reshape the demo.
    with chat_model_off(), override_settings(PMEM_RULE_PATTERNS=""):
        # Superseded twice: the frontier shows only the newest city.
        observe("alice_home_city = Paris")
        observe("alice_home_city: Berlin")
        observe("alice_home_city = Lisbon", source="chat")
        # A retraction that reinstates the predecessor.
        observe("Earlier observation: mug 1 was in countertop 1.")
        observe("Update: mug 1 has been moved from countertop 1 to cabinet 3.")
        observe("The move of mug 1 to cabinet 3 was reported in error.")
        # An open contest.
        observe(facts=[{"key": "team_meeting_day", "value": "Tuesday", "op": "accept"}])
        observe(facts=[{"key": "team_meeting_day", "value": "Thursday", "op": "contest"}],
                source="calendar")
        # A resolved contest.
        observe(facts=[{"key": "project_lead", "value": "Dana", "op": "accept"}])
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
        # A deferred embedder's background thread dies with this process: the demo's vectors
        # are computed before it ends (seconds), not by the worker's next sweep.
        embeddings_wait(timeout=120)
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
