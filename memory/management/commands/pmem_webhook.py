"""``manage.py pmem_webhook create|list|delete|resume`` (CONTRACT "Change events").

- ``create NAMESPACE --url URL [--ops accept,reject,...]`` makes an endpoint that receives
  the namespace's change events committed from now on, and prints one JSON line
  ``{"id", "namespace", "url", "secret"}`` — the signing secret ``whsec_…``, shown this once;
- ``list NAMESPACE`` prints one JSON line per endpoint (no secret), with its state;
- ``delete ID`` deletes an endpoint; ``resume ID`` makes a paused one deliver again from where
  it stopped.

Only http(s) URLs whose host resolves to global addresses are taken, unless
``PMEM_WEBHOOK_ALLOW_PRIVATE=1``. Every change is a row of the namespace's audit log,
signed ``cli``.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.models import Namespace, WebhookEndpoint
from memory.selectors.webhooks import webhook_find, webhook_row, webhook_rows
from memory.services.webhooks import TargetRefused, webhook_create, webhook_delete, webhook_resume

ACTOR = "cli"


class Command(BaseCommand):
    help = "Create, list, delete and resume the webhooks of a namespace's change events."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="make an endpoint and print its secret once")
        create.add_argument("namespace")
        create.add_argument("--url", required=True)
        create.add_argument("--ops", default="", help="comma-separated ops it receives "
                                                     "(default: every event)")
        sub.add_parser("list", help="the namespace's endpoints").add_argument("namespace")
        sub.add_parser("delete", help="delete an endpoint").add_argument("id", type=int)
        sub.add_parser("resume", help="resume a paused endpoint").add_argument("id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "create":
            self._create(self._namespace(options["namespace"]), options["url"], options["ops"])
        elif action == "list":
            for row in webhook_rows(namespace=self._namespace(options["namespace"])):
                self.stdout.write(json.dumps(row, default=str))
        elif action == "delete":
            endpoint = self._endpoint(options["id"])
            webhook_delete(endpoint=endpoint, actor=ACTOR)
            self.stdout.write(json.dumps({"id": options["id"], "deleted": True}))
        else:
            endpoint = self._endpoint(options["id"])
            webhook_resume(endpoint=endpoint, actor=ACTOR)
            endpoint.refresh_from_db()
            self.stdout.write(json.dumps(webhook_row(endpoint), default=str))

    def _namespace(self, name: str) -> Namespace:
        namespace = Namespace.objects.filter(name=name).first()
        if namespace is None:
            raise CommandError(f"no namespace {name!r}; make it with pmem_namespace create {name}")
        return namespace

    def _endpoint(self, pk: int) -> WebhookEndpoint:
        endpoint = webhook_find(pk)
        if endpoint is None:
            raise CommandError(f"no webhook with id {pk}")
        return endpoint

    def _create(self, namespace: Namespace, url: str, ops: str) -> None:
        try:
            endpoint = webhook_create(namespace=namespace, url=url, actor=ACTOR,
                                      ops=ops.split(",") if ops else None)
        except TargetRefused as exc:
            raise CommandError(f"--url: {exc}") from None
        except ValueError as exc:
            raise CommandError(f"--ops: {exc}") from None
        self.stdout.write(json.dumps({"id": endpoint.pk, "namespace": namespace.name,
                                      "url": endpoint.url, "secret": endpoint.secret}))
