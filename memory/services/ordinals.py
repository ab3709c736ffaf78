"""A version named by its key's own ordinal (SPEC §11.5: ``"v3"``, the explorer's numbering)
wherever a version id is taken: the one parser of that form and the lookup of the id."""

from __future__ import annotations

import re

from memory.models import Version

_ORDINAL = re.compile(r"v([1-9][0-9]{0,9})")
#: The largest ordinal a version may have (``Version.ordinal`` is a PostgreSQL integer).
MAX_ORDINAL = 2**31 - 1


def parse_ordinal(text: str) -> int | None:
    """``"v3"`` -> 3; None for anything else (``"3"``, ``"v0"``, ``"V3"``)."""
    found = _ORDINAL.fullmatch(text)
    if found is None or int(found.group(1)) > MAX_ORDINAL:
        return None
    return int(found.group(1))


def version_of_ordinal(*, cell_id: int, ordinal: int) -> int | None:
    """The id of the cell's version ``ordinal``, or None when it has no such version."""
    return (Version.objects.filter(cell_id=cell_id, ordinal=ordinal)
            .values_list("id", flat=True).first())


class UnknownOrdinal(Exception):
    """``"vN"`` names no version of the key: the operation is refused, as one naming an id
    that is not a version of the key is."""

    def __init__(self, version: str) -> None:
        super().__init__(f"invalid: version {version} is not a version of this key")


def version_reference(*, cell_id: int | None, version: int | str | None) -> int | None:
    """A version of a cell (None: the key has none yet) as a client named it — an id, or
    ``"vN"`` — as its id (:class:`UnknownOrdinal` when the cell has no version ``N``)."""
    if version is None or isinstance(version, int):
        return version
    ordinal = parse_ordinal(version)
    found = None if ordinal is None or cell_id is None or cell_id < 0 else version_of_ordinal(
        cell_id=cell_id, ordinal=ordinal)
    if found is None:
        raise UnknownOrdinal(version)
    return found
