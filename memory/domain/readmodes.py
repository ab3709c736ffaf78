"""What each read mode is (SPEC §7), in words and numbers: the half of the read-mode registry
that needs no database. :data:`memory.reads.READ_MODES` pairs each entry with the function that
reads; the API's validation, the explorer's comparison and help text, the answer step, the
benchmarks and the MCP tool's enum all take their modes from there (the MCP server, which runs
without Django, from :data:`READ_MODE_NAMES` here).

A new read mode is one entry below and one function in :mod:`memory.reads`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReadModeSpec:
    name: str
    title: str  # as the explorer's comparison names it
    help: str  # the mode in one sentence, as a reviewer reads it
    default_k: int
    needs_model: bool
    prompt: str  # the answer prompt that reads this mode's context: "state" or "flat"

    @property
    def reads_cells(self) -> bool:
        """Its items are cells (key, value, status), not observations."""
        return self.prompt == "state"


READ_MODE_SPECS: tuple[ReadModeSpec, ...] = (
    ReadModeSpec(
        "frontier", "Frontier",
        "One line per key with the value that holds now, ranked by meaning and by the query's "
        "exact words: what an agent reads by default (the API's and the MCP tool's mode).",
        12, False, "state"),
    # The paper's ranking (cosine alone): its benchmarks read with it, so their rows stand.
    ReadModeSpec(
        "frontier_cosine", "Frontier (cosine)",
        "The same lines ranked by meaning alone, as the paper ranks them: a key named in the "
        "query gets no extra weight.", 12, False, "state"),
    ReadModeSpec(
        "raw", "Raw",
        "The observations closest in meaning to the query, as they were written, old and "
        "retracted ones included: what plain retrieval would give an agent.", 10, False, "flat"),
    ReadModeSpec(
        "evidence", "Evidence",
        "The observations that best match the query by meaning and by its exact words (rare "
        "words count most), as they were written: what was said, found even before its "
        "embedding is computed.", 10, False, "flat"),
    ReadModeSpec(
        "raw_ordered", "Raw + order tags",
        "The same observations in the order they arrived, each tagged [t=…], so a reader can "
        "tell which is newer.", 10, False, "flat"),
    ReadModeSpec(
        "pruned", "Pruned",
        "The raw observations with those a newer one replaces taken out, decided by a language "
        "model.", 12, True, "flat"),
)
READ_MODE_NAMES: tuple[str, ...] = tuple(spec.name for spec in READ_MODE_SPECS)
_BY_NAME = {spec.name: spec for spec in READ_MODE_SPECS}


def read_mode_spec(name: str) -> ReadModeSpec:
    """The spec of the read mode ``name`` (KeyError for none)."""
    return _BY_NAME[name]


#: The read mode agents use unless they ask for another (API and MCP).
AGENT_MODE = "frontier"
#: The answer step reads in every read mode, and in one of its own: the iterative readout.
ITERATIVE = "iterative"
ANSWER_MODE_NAMES: tuple[str, ...] = (*READ_MODE_NAMES, ITERATIVE)
