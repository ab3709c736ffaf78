"""``manage.py pmem_mcp --namespace NAME`` (or ``--token TOKEN``): P-Mem's MCP tools over
stdio, for MCP clients that start their servers as commands.

With ``--token`` the agent acts as that token, within its scope and the sources it is bound
to; an application token (one for every namespace of a prefix) names the namespace with
``--namespace`` too. With ``--namespace`` the command makes a write token of the namespace for the session
(its client name, ``--client``, signs the writes ``mcp:<client>``; ``--source`` binds it to
trusted sources, SPEC §8) and revokes it when the session ends; the namespace is created if it
does not exist, as ``pmem_namespace create`` does.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from django.core.management.base import BaseCommand, CommandError, CommandParser

import pmem_client
from memory.models import ApiToken
from memory.services import InvalidName, namespace_create, token_create, token_revoke
from pmem_mcp.stdio import in_process_client, serve


class Command(BaseCommand):
    help = "Serve P-Mem's MCP tools over stdio (stdout carries the protocol only)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--namespace", help="the memory to serve (a token is made for it; "
                                                "with --token: the namespace of that "
                                                "application token to serve)")
        parser.add_argument("--token", help="an API token: serve its namespace, as it")
        parser.add_argument("--client", default="stdio",
                            help="with --namespace: the client name writes are signed with")
        parser.add_argument("--source", action="append", default=[], metavar="NAME",
                            help="with --namespace: a trusted source the session may claim "
                                 "(repeatable; one alone is what its writes claim)")

    def handle(self, *args: Any, **options: Any) -> None:
        made: ApiToken | None = None
        token, named = options["token"], options["namespace"]
        if token is None and named is None:
            raise CommandError("name the memory: --namespace NAME, or --token TOKEN")
        if token is not None and options["source"]:
            raise CommandError("--source binds the session's own token (with --namespace); "
                               "a --token keeps the sources it is bound to")
        if token is None:
            try:
                namespace = namespace_create(name=options["namespace"])
            except InvalidName as exc:
                raise CommandError(str(exc)) from exc
            # The tools need scope write at most (retract/contest/resolve are observations).
            try:
                made = token_create(namespace=namespace, client=options["client"],
                                    scope="write", name="mcp stdio session",
                                    sources=options["source"])
            except ValueError as exc:
                raise CommandError(f"--source: {exc}") from None
            token = made.key
        try:
            anyio.run(self._serve, token, named if options["token"] is not None else None)
        finally:
            if made is not None:
                # The session's own token: nothing else holds it, so it ends with the session
                # (revoked, not deleted: the access audit log keeps its whole life).
                token_revoke(token=made, actor="system")

    async def _serve(self, token: str, named: str | None) -> None:
        client = in_process_client(token, namespace=named)
        try:
            who = await client.whoami()
            namespace = named or who.namespace
            if not namespace:
                raise CommandError(f"this application token reaches the namespaces starting "
                                   f"with {who.namespace_prefix!r}: name one with --namespace")
            sys.stderr.write(f"pmem_mcp: serving namespace {namespace!r} over stdio "
                             f"as mcp:{who.client}\n")
            await serve(client)
        except pmem_client.ApiError as refused:
            raise CommandError(f"the token was refused: {refused.error}") from None
        finally:
            await client.aclose()
