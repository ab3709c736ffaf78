"""Model-facing side of P-Mem: an OpenAI-compatible client, every prompt, extraction (the
model or the rule extractor), soft key identity, annotation, the answer step and readout, the
pruned read's judgement, embedders and an observation's vectors. It talks to models and
nothing else: no ORM, no SQL, no services or selectors (``make lint`` enforces it)."""

from __future__ import annotations

from .facts import ASSERTIONS, OPS, Fact, coerce_assertion

__all__ = ["ASSERTIONS", "OPS", "Fact", "coerce_assertion"]
