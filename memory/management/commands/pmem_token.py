"""``manage.py pmem_token create|list|revoke`` (CONTRACT "Tokens and roles").

- ``create NAMESPACE [--scope read|write|review] [--name NAME] [--expires-days N]`` prints the
  token once, as one JSON line ``{"id", "namespace", "scope", "token"}`` (default scope write);
- ``list NAMESPACE`` prints one JSON line per token, without the secret (the database does not
  have it);
- ``revoke ID`` revokes a token: its next request gets 401.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from memory.domain.scopes import DEFAULT_SCOPE, Scope
from memory.models import ApiToken, Namespace
from memory.selectors import token_rows
from memory.services import token_create, token_revoke

ACTOR = "cli"


class Command(BaseCommand):
    help = "Create, list and revoke API tokens."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="make a token and print it once")
        create.add_argument("namespace")
        create.add_argument("--scope", choices=[s.value for s in Scope], default=DEFAULT_SCOPE.value)
        create.add_argument("--name", default="", help="a label, also the client operations are "
                                                       "signed with (api:NAME)")
        create.add_argument("--expires-days", type=int, default=None, metavar="N")
        listing = sub.add_parser("list", help="the namespace's tokens, without secrets")
        listing.add_argument("namespace")
        revoke = sub.add_parser("revoke", help="revoke a token by id")
        revoke.add_argument("id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "create":
            self._create(options)
        elif action == "list":
            for row in token_rows(namespace=self._namespace(options["namespace"])):
                self.stdout.write(json.dumps(row, default=str))
        else:
            self._revoke(options["id"])

    def _namespace(self, name: str) -> Namespace:
        namespace = Namespace.objects.filter(name=name).first()
        if namespace is None:
            raise CommandError(f"no namespace {name!r}; make it with pmem_namespace create {name}")
        return namespace

    def _create(self, options: dict[str, Any]) -> None:
        namespace = self._namespace(options["namespace"])
        days = options["expires_days"]
        if days is not None and days < 1:
            raise CommandError("--expires-days must be at least 1")
        name = options["name"].strip()
        token = token_create(
            namespace=namespace, scope=options["scope"], name=name, client=name or "cli",
            expires_at=timezone.now() + timedelta(days=days) if days else None, actor=ACTOR)
        self.stdout.write(json.dumps({"id": token.pk, "namespace": namespace.name,
                                      "scope": token.scope, "token": token.key}))

    def _revoke(self, pk: int) -> None:
        token = ApiToken.objects.select_related("namespace").filter(pk=pk).first()
        if token is None:
            raise CommandError(f"no token with id {pk}")
        revoked = token_revoke(token=token, actor=ACTOR)
        self.stdout.write(json.dumps({"id": token.pk, "namespace": token.namespace.name,
                                      "revoked": True, "already": not revoked}))
