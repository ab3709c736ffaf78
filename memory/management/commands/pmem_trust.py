"""``manage.py pmem_trust NAMESPACE SOURCE LEVEL`` — set a source's trust level (SPEC §8).

Observations from a source trusted less than the sources supporting a key's head contest it
instead of superseding it. ``--list`` prints the namespace's levels."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.models import Namespace, SourceTrust


class Command(BaseCommand):
    help = "Set (or list) the trust level of evidence sources in a namespace."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("namespace")
        parser.add_argument("source", nargs="?")
        parser.add_argument("level", nargs="?", type=int)
        parser.add_argument("--list", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        namespace = Namespace.objects.filter(name=options["namespace"]).first()
        if namespace is None:
            raise CommandError(f"no namespace {options['namespace']!r}")
        if not options["list"]:
            if options["source"] is None or options["level"] is None:
                raise CommandError("give SOURCE and LEVEL, or --list")
            SourceTrust.objects.update_or_create(namespace=namespace, source=options["source"],
                                                 defaults={"level": options["level"]})
        levels = dict(SourceTrust.objects.filter(namespace=namespace).order_by("source")
                      .values_list("source", "level"))
        self.stdout.write(json.dumps({"namespace": namespace.name, "trust": levels}))
