"""``manage.py pmem_trust NAMESPACE SOURCE LEVEL`` — set a source's trust level (SPEC §8).

Observations from a source trusted less than the sources supporting a key's head contest it
instead of superseding it; a write token may name a source with a level only when it is bound
to it (``pmem_token create --source``). ``--clear`` takes a source's level away; ``--list``
prints the namespace's levels. Each change is a row of the access audit log, signed ``cli``."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.models import Namespace, SourceTrust
from memory.services import trust_clear, trust_set

ACTOR = "cli"


class Command(BaseCommand):
    help = "Set, clear or list the trust level of evidence sources in a namespace."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("namespace")
        parser.add_argument("source", nargs="?")
        parser.add_argument("level", nargs="?", type=int)
        parser.add_argument("--list", action="store_true")
        parser.add_argument("--clear", action="store_true", help="take SOURCE's level away")

    def handle(self, *args: Any, **options: Any) -> None:
        namespace = Namespace.objects.filter(name=options["namespace"]).first()
        if namespace is None:
            raise CommandError(f"no namespace {options['namespace']!r}")
        source, level = options["source"], options["level"]
        try:
            if options["clear"]:
                if source is None or level is not None:
                    raise CommandError("--clear takes SOURCE alone")
                trust_clear(namespace=namespace, source=source, actor=ACTOR)
            elif not options["list"]:
                if source is None or level is None:
                    raise CommandError("give SOURCE and LEVEL, --clear SOURCE, or --list")
                trust_set(namespace=namespace, source=source, level=level, actor=ACTOR)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        levels = dict(SourceTrust.objects.filter(namespace=namespace).order_by("source")
                      .values_list("source", "level"))
        self.stdout.write(json.dumps({"namespace": namespace.name, "trust": levels}))
