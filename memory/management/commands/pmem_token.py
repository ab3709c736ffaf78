"""``manage.py pmem_token create|list|revoke`` (CONTRACT "Tokens and roles").

- ``create NAMESPACE [--scope read|write|review] [--name NAME] [--expires-days N]
  [--source NAME ...]`` prints the token once, as one JSON line ``{"id", "namespace", "scope",
  "token"}`` (default scope write; ``--source``, repeatable, binds it to the trusted sources it
  may name, SPEC §8, and adds ``sources`` to the line);
- ``create --prefix PREFIX [...]`` makes an application token: it reaches every namespace
  whose name starts with PREFIX, and its first write to one creates it; the line is
  ``{"id", "namespace": null, "namespace_prefix", "scope", "token", "namespaces"}``
  (``namespaces``: how many existing ones it reaches now);
- ``list NAMESPACE`` (or ``list --prefix PREFIX``: the application tokens of that prefix)
  prints one JSON line per token, without the secret (the database does not have it), with
  its sources;
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
from memory.selectors.access import application_token_rows, token_rows
from memory.services import clean_namespace_prefix, token_bind, token_create, token_revoke

ACTOR = "cli"


class Command(BaseCommand):
    help = "Create, list, bind to sources and revoke API tokens."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="make a token and print it once")
        create.add_argument("namespace", nargs="?", help="the namespace it reaches")
        create.add_argument("--prefix", default=None, metavar="PREFIX",
                            help="instead: an application token for every namespace whose "
                                 "name starts with PREFIX (created on its first write)")
        create.add_argument("--scope", choices=[s.value for s in Scope], default=DEFAULT_SCOPE.value)
        create.add_argument("--name", default="", help="a label, also the client operations are "
                                                       "signed with (api:NAME)")
        create.add_argument("--expires-days", type=int, default=None, metavar="N")
        create.add_argument("--source", action="append", default=[], metavar="NAME",
                            help="a trusted source the token may name (repeatable); sources "
                                 "without a trust level need none")
        listing = sub.add_parser("list", help="the namespace's tokens, without secrets")
        listing.add_argument("namespace", nargs="?")
        listing.add_argument("--prefix", default=None, metavar="PREFIX",
                             help="instead: the application tokens of this prefix")
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
            self._list(options)
        elif action == "bind":
            self._bind(options["id"], options["source"])
        else:
            self._revoke(options["id"])

    def _namespace(self, name: str) -> Namespace:
        namespace = Namespace.objects.filter(name=name).first()
        if namespace is None:
            raise CommandError(f"no namespace {name!r}; make it with pmem_namespace create {name}")
        return namespace

    def _reach(self, options: dict[str, Any]) -> tuple[Namespace | None, str]:
        """The namespace or the prefix named (exactly one)."""
        name, prefix = options["namespace"], options["prefix"]
        if (name is None) == (prefix is None):
            raise CommandError("name a NAMESPACE, or --prefix PREFIX (not both)")
        if prefix is None:
            return self._namespace(name), ""
        try:
            return None, clean_namespace_prefix(prefix)
        except ValueError as exc:
            raise CommandError(f"--prefix: {exc}") from None

    def _list(self, options: dict[str, Any]) -> None:
        namespace, prefix = self._reach(options)
        rows = (token_rows(namespace=namespace) if namespace is not None
                else application_token_rows(namespace_prefix=prefix))
        for row in rows:
            self.stdout.write(json.dumps(row, default=str))

    def _create(self, options: dict[str, Any]) -> None:
        namespace, prefix = self._reach(options)
        if prefix and prefix[-1] not in "-_":
            self.stderr.write(f"note: {prefix!r} also reaches names like {prefix}x…; a prefix "
                              f"ending in '-' or '_' ({prefix}-) keeps to one application")
        days = options["expires_days"]
        if days is not None and days < 1:
            raise CommandError("--expires-days must be at least 1")
        name = options["name"].strip()
        try:
            token = token_create(
                namespace=namespace, namespace_prefix=prefix, scope=options["scope"], name=name,
                client=name or "cli",
                expires_at=timezone.now() + timedelta(days=days) if days else None,
                actor=ACTOR, sources=options["source"])
        except ValueError as exc:
            raise CommandError(f"--source: {exc}") from None
        line: dict[str, Any] = {"id": token.pk, "namespace": namespace.name if namespace else None,
                                "scope": token.scope, "token": token.key}
        if prefix:
            line["namespace_prefix"] = prefix
            line["namespaces"] = Namespace.objects.filter(name__startswith=prefix).count()
        if token.sources:  # the line CONTRACT shows stays as it was for an unbound token
            line["sources"] = list(token.sources)
        self.stdout.write(json.dumps(line))

    def _bind(self, pk: int, sources: list[str]) -> None:
        token = self._token(pk)
        try:
            changed = token_bind(token=token, sources=sources, actor=ACTOR)
        except ValueError as exc:
            raise CommandError(f"--source: {exc}") from None
        self.stdout.write(json.dumps({"id": token.pk, **_reach_of(token),
                                      "sources": list(token.sources), "changed": changed}))

    def _token(self, pk: int) -> ApiToken:
        token = ApiToken.objects.select_related("namespace").filter(pk=pk).first()
        if token is None:
            raise CommandError(f"no token with id {pk}")
        return token

    def _revoke(self, pk: int) -> None:
        token = self._token(pk)
        revoked = token_revoke(token=token, actor=ACTOR)
        self.stdout.write(json.dumps({"id": token.pk, **_reach_of(token),
                                      "revoked": True, "already": not revoked}))


def _reach_of(token: ApiToken) -> dict[str, Any]:
    if token.namespace is not None:
        return {"namespace": token.namespace.name}
    return {"namespace": None, "namespace_prefix": token.namespace_prefix}
