"""Model-facing side of P-Mem: an OpenAI-compatible client, prompts, extraction, soft key
identity, annotation, embedders and the rule extractor. No Django import at module level;
the ``*_from_settings`` helpers import settings lazily."""

from __future__ import annotations

from .facts import ASSERTIONS, OPS, Fact, coerce_assertion

__all__ = ["ASSERTIONS", "OPS", "Fact", "coerce_assertion"]
