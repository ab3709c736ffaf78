"""``manage.py pmem_namespace create NAME`` — prints {"namespace": NAME, "token": ...}."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.services import InvalidName, namespace_create, token_create


class Command(BaseCommand):
    help = "Create a namespace if it does not exist and print a new API token scoped to it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["create"])
        parser.add_argument("name")
        parser.add_argument("--client", default="cli", help="name recorded as the token's client")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            namespace = namespace_create(name=options["name"])
        except InvalidName as exc:
            raise CommandError(str(exc)) from exc
        token = token_create(namespace=namespace, client=options["client"])
        self.stdout.write(json.dumps({"namespace": namespace.name, "token": token.key}))
