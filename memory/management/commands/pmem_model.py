"""``manage.py pmem_model check``: what the configured model endpoints can do.

Probes the chat endpoint (``PMEM_LLM_*``) for each structured-output form, times one
one-sentence extraction, and embeds one sentence at the embeddings endpoint (``PMEM_EMBED_*``).
Exits non-zero with the cause in words when an endpoint cannot serve P-Mem. ``--summary`` prints
two lines and never fails (``make run`` shows them at start).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.llm.check import (
    ChatCheck,
    EmbedCheck,
    check_chat,
    check_embeddings,
    embed_client_from_settings,
    model_status,
)
from memory.llm.client import FORMS, client_from_settings
from memory.llm.embedding import DEFAULT_DIM


class Command(BaseCommand):
    help = "Probe the configured chat and embeddings endpoints and print what works."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["check"])
        parser.add_argument("--timeout", type=float, default=None,
                            help="seconds per request (default PMEM_LLM_TIMEOUT, at most 30)")
        parser.add_argument("--summary", action="store_true",
                            help="two lines (model and form, embeddings); never fails")

    def handle(self, *args: Any, **options: Any) -> None:
        timeout = options["timeout"] or min(30.0, float(settings.PMEM_LLM_TIMEOUT))
        chat = client_from_settings(timeout=timeout, max_retries=0)
        embed = embed_client_from_settings(timeout=timeout)
        if options["summary"]:
            self._summary(chat, embed)
            return
        causes = []
        if chat is None:
            self.stdout.write("chat: none configured (PMEM_LLM_BASE_URL unset): the rule "
                              "extractor and deterministic annotation are used")
        else:
            found = check_chat(chat)
            self._print_chat(found)
            if found.cause:
                causes.append(f"chat endpoint {found.base_url}: {found.cause}")
        if embed is None:
            self.stdout.write(f"embeddings: the local embedder ({DEFAULT_DIM} dimensions; "
                              "PMEM_EMBED_BASE_URL unset)")
        else:
            vectors = check_embeddings(embed)
            self._print_embed(vectors)
            if vectors.cause:
                causes.append(f"embeddings endpoint {vectors.base_url}: {vectors.cause}")
        if causes:
            raise CommandError("; ".join(causes))

    def _print_chat(self, found: ChatCheck) -> None:
        served = f" (the server lists: {', '.join(found.served)})" if found.served else ""
        self.stdout.write(f"chat: {found.base_url} model {found.model!r}{served}")
        for form in FORMS:
            error = found.forms.get(form)
            self.stdout.write(f"  {form:<19} {'ok' if error is None else 'no: ' + error}")
        self.stdout.write(f"  structured output: {found.structured_output or 'none'}")
        if found.extraction_s is not None:
            facts = ", ".join(f"{k} = {v}" for k, v in found.extraction_facts) or "no facts"
            error = f", error: {found.extraction_error}" if found.extraction_error else ""
            self.stdout.write(f"  one-sentence extraction: {found.extraction_s:.2f} s, "
                              f"{facts}{error}")

    def _print_embed(self, found: EmbedCheck) -> None:
        if found.cause:
            self.stdout.write(f"embeddings: {found.base_url} model {found.model!r}: "
                              f"{found.cause}")
        else:
            self.stdout.write(f"embeddings: {found.base_url} model {found.model!r}: "
                              f"{found.dim} dimensions, {found.seconds:.2f} s")

    def _summary(self, chat: Any, embed: Any) -> None:
        status = model_status(chat)
        if status is None:
            self.stdout.write("Model: none (rule extractor; set PMEM_LLM_BASE_URL for a model)")
        elif status["structured_output"]:
            self.stdout.write(f"Model: {status['name']} at {chat.base_url}, structured output: "
                              f"{status['structured_output']}")
        else:
            self.stdout.write(f"Model: {status['name']} at {chat.base_url} is not answering "
                              f"({status.get('error')}): observations wait or fail visibly")
        if embed is None:
            self.stdout.write("Embeddings: the local embedder (PMEM_EMBED_BASE_URL unset)")
            return
        found = check_embeddings(embed)
        self.stdout.write(f"Embeddings: {found.base_url} answered ({found.dim} dimensions)"
                          if found.ok else f"Embeddings: {found.base_url} did not answer "
                                           f"({found.cause})")
