"""``manage.py pmem_namespace create NAME`` — prints {"namespace": NAME, "token": ...};
``manage.py pmem_namespace delete NAME`` — deletes it with everything in it (SPEC §13) and
prints {"deleted": NAME, "name_digest", "counts"}."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.selectors.access import namespace_named
from memory.services import InvalidName, namespace_create, namespace_delete, token_create
from memory.services.namespace_delete import deletions_vacuum


class Command(BaseCommand):
    help = ("Create a namespace if it does not exist and print a new API token scoped to it; "
            "or delete one with everything in it.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["create", "delete"])
        parser.add_argument("name")
        parser.add_argument("--client", default="cli", help="name recorded as the token's client")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "delete":
            self._delete(options["name"])
            return
        try:
            namespace = namespace_create(name=options["name"])
        except InvalidName as exc:
            raise CommandError(str(exc)) from exc
        token = token_create(namespace=namespace, client=options["client"])
        self.stdout.write(json.dumps({"namespace": namespace.name, "token": token.key}))

    def _delete(self, name: str) -> None:
        namespace = namespace_named(name)
        if namespace is None or name.startswith("."):
            raise CommandError(f"no namespace named {name!r}")
        report = namespace_delete(namespace=namespace, actor="cli").report()
        deletions_vacuum()
        self.stdout.write(json.dumps({"deleted": name, **report}))
