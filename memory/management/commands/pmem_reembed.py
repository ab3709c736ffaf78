"""``manage.py pmem_reembed [NAMESPACE]`` — re-embed after the embedder changed."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.llm.embedding import EmbeddingError, embedder_id
from memory.management.progress import Bar
from memory.models import Namespace
from memory.services.reembed import namespace_reembed, namespaces_to_reembed


class Command(BaseCommand):
    help = ("Re-embed a namespace's cells, keys and observations with the configured embedder "
            "(PMEM_EMBEDDER / PMEM_EMBED_BASE_URL), resuming a run that stopped. Without a "
            "name: every namespace whose vectors are not that embedder's. Reads of a namespace "
            "refuse until its vectors are all one embedder's.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("namespace", nargs="?", default=None)
        parser.add_argument("--force", action="store_true",
                            help="re-embed even a namespace that records this embedder")

    def handle(self, *args: Any, **options: Any) -> None:
        target = embedder_id()
        if options["namespace"]:
            namespace = Namespace.objects.filter(name=options["namespace"]).first()
            if namespace is None:
                raise CommandError(f"no namespace {options['namespace']!r}")
            todo = [namespace] if options["force"] or namespace.embedder != target else []
        else:
            todo = (list(Namespace.objects.order_by("name")) if options["force"]
                    else namespaces_to_reembed())
        for namespace in todo:
            was = namespace.embedder or "an unrecorded embedder"
            try:
                count = namespace_reembed(namespace=namespace,
                                          progress=Bar(f"re-embedding {namespace.name}"))
            except EmbeddingError as exc:
                raise CommandError(f"{namespace.name}: the embedder failed ({exc}); run the "
                                   "command again to resume") from exc
            self.stdout.write(f"{namespace.name}: {count} rows re-embedded ({was} -> {target})")
