"""``manage.py pmem_token create|list|revoke`` (CONTRACT "Tokens and roles").

- ``create NAMESPACE [--scope read|write|review] [--name NAME] [--expires-days N]
  [--source NAME ...]`` prints the token once, as one JSON line ``{"id", "namespace", "scope",
  "token"}`` (default scope write; ``--source``, repeatable, binds it to the trusted sources it
  may name, SPEC §8, and adds ``sources`` to the line);
- ``list NAMESPACE`` prints one JSON line per token, without the secret (the database does not
  have it), with its sources;
- ``bind ID [--source NAME ...]`` binds a token to exactly those sources (none: unbound);
- ``revoke ID`` revokes a token: its next request gets 401.

Every change is a row of the namespace's access audit log, signed ``cli``.
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
from memory.services import token_bind, token_create, token_revoke

ACTOR = "cli"


class Command(BaseCommand):
    help = "Create, list, bind to sources and revoke API tokens."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="make a token and print it once")
        create.add_argument("namespace")
        create.add_argument("--scope", choices=[s.value for s in Scope], default=DEFAULT_SCOPE.value)
        create.add_argument("--name", default="", help="a label, also the client operations are "
                                                       "signed with (api:NAME)")
        create.add_argument("--expires-days", type=int, default=None, metavar="N")
        create.add_argument("--source", action="append", default=[], metavar="NAME",
                            help="a trusted source the token may name (repeatable); sources "
                                 "without a trust level need none")
        listing = sub.add_parser("list", help="the namespace's tokens, without secrets")
        listing.add_argument("namespace")
        bind = sub.add_parser("bind", help="bind a token to exactly these sources")
        bind.add_argument("id", type=int)
        bind.add_argument("--source", action="append", default=[], metavar="NAME")
        revoke = sub.add_parser("revoke", help="revoke a token by id")
        revoke.add_argument("id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "create":
            self._create(options)
        elif action == "list":
            for row in token_rows(namespace=self._namespace(options["namespace"])):
                self.stdout.write(json.dumps(row, default=str))
        elif action == "bind":
            self._bind(options["id"], options["source"])
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
        try:
            token = token_create(
                namespace=namespace, scope=options["scope"], name=name, client=name or "cli",
                expires_at=timezone.now() + timedelta(days=days) if days else None,
                actor=ACTOR, sources=options["source"])
        except ValueError as exc:
            raise CommandError(f"--source: {exc}") from None
        line = {"id": token.pk, "namespace": namespace.name, "scope": token.scope,
                "token": token.key}
        if token.sources:  # the line CONTRACT shows stays as it was for an unbound token
            line["sources"] = list(token.sources)
        self.stdout.write(json.dumps(line))

    def _bind(self, pk: int, sources: list[str]) -> None:
        token = self._token(pk)
        try:
            changed = token_bind(token=token, sources=sources, actor=ACTOR)
        except ValueError as exc:
            raise CommandError(f"--source: {exc}") from None
        self.stdout.write(json.dumps({"id": token.pk, "namespace": token.namespace.name,
                                      "sources": list(token.sources), "changed": changed}))

    def _token(self, pk: int) -> ApiToken:
        token = ApiToken.objects.select_related("namespace").filter(pk=pk).first()
        if token is None:
            raise CommandError(f"no token with id {pk}")
        return token

    def _revoke(self, pk: int) -> None:
        token = self._token(pk)
        revoked = token_revoke(token=token, actor=ACTOR)
        self.stdout.write(json.dumps({"id": token.pk, "namespace": token.namespace.name,
                                      "revoked": True, "already": not revoked}))
