"""The limits of :mod:`memory.domain.admission` as this site configures them (``PMEM_MAX_*``):
the API and the importer both take them from here."""

from __future__ import annotations

from django.conf import settings

from memory.domain.admission import Limits


def limits() -> Limits:
    return Limits(text_chars=settings.PMEM_MAX_TEXT_CHARS,
                  value_chars=settings.PMEM_MAX_VALUE_CHARS,
                  key_chars=settings.PMEM_MAX_KEY_CHARS, facts=settings.PMEM_MAX_FACTS)
