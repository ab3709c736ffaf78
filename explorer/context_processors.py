"""What every explorer template may name: the domain's vocabulary, so a template compares
``cell.status == cell_states.CONTESTED`` instead of restating the word."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from memory.domain import CellStatus, EvidenceState, Status

_VOCABULARY = {
    "cell_states": {s.name: s.value for s in CellStatus},
    "version_states": {s.name: s.value for s in Status},
    "evidence_states": {s.name: s.value for s in EvidenceState},
}


def vocabulary(request: HttpRequest) -> dict[str, Any]:
    return _VOCABULARY
