"""The one reading of a point in time that a person or a client typed: ``as_of``, ``observed_at``,
the explorer's date fields and its "jump to" dates (CONTRACT, "Input that is refused").

Everything that reaches PostgreSQL from here is an aware datetime in UTC, so a query never
carries an offset it might refuse. What cannot be such a datetime is refused with the field's
name: an offset beyond ±15:59 (PostgreSQL's limit; no zone on Earth goes past ±14:00), a time
that leaves years 1–9999 once shifted to UTC (``9999-12-31T23:59:59-14:00``, ``0001-01-01T00:10``
in Tokyo), a missing zone where one is needed. Pure Python: no Django import.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .model import BadParameter

#: The widest offset PostgreSQL's ``timestamptz`` input takes.
MAX_OFFSET = timedelta(hours=15, minutes=59)
#: Longer than any ISO-8601 time with microseconds and an offset.
MAX_CHARS = 64
MAX_ZONE_CHARS = 64
EXAMPLE = "2026-12-01T10:00:00Z"

# A '+' of an offset that reached a query string unencoded arrives as a space:
# "2026-12-01T10:00:00 01:00" means "+01:00".
_SPACED_OFFSET = re.compile(r"(\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?) (\d\d(?::?\d\d)?)")
# A date and a time separated by a space rather than 'T' ("2026-12-01 10:00:00Z").
_SPACED_TIME = re.compile(r"(\d{4}-\d\d-\d\d) (\d\d:\d\d.*)")


class TimeRefused(BadParameter):
    """A time that cannot be used: ``field`` names the input, ``message`` says why."""


def parse_instant(raw: str | None, *, field: str = "as_of",
                  zone: tzinfo | None = None) -> datetime | None:
    """``raw`` as an aware datetime in UTC; None when it is empty (the present).

    ISO 8601 (what :meth:`datetime.fromisoformat` reads: ``Z``, offsets, a space for the
    'T', a date alone) and the unencoded '+' of a query string. A time without a zone is read
    in ``zone`` when one is given, else refused: without one it is ambiguous."""
    if raw is None:
        return None
    text = raw.strip()
    if not text:
        return None
    if len(text) > MAX_CHARS or not text.isascii() or not text.isprintable():
        raise TimeRefused(field, f"an ISO-8601 time with a zone, e.g. {EXAMPLE}")
    spaced = _SPACED_OFFSET.fullmatch(text)
    if spaced:
        text = f"{spaced.group(1)}+{spaced.group(2)}"
    text = _SPACED_TIME.sub(r"\1T\2", text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise TimeRefused(field, f"an ISO-8601 time with a zone, e.g. {EXAMPLE}") from None
    offset = moment.utcoffset()
    if offset is None:
        if zone is None:
            raise TimeRefused(field, "needs a zone (Z or an offset such as +01:00): a time "
                                     "without one is ambiguous")
        moment = moment.replace(tzinfo=zone)
        offset = moment.utcoffset()
    elif abs(offset) > MAX_OFFSET:
        raise TimeRefused(field, "an offset of at most ±15:59 (real zones reach ±14:00)")
    return _in_utc(moment, field)


def _in_utc(moment: datetime, field: str) -> datetime:
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise TimeRefused(field, "out of range: the time in UTC must fall in years 1 to "
                                 "9999") from None


def zone_named(name: str | None, field: str = "tz") -> tzinfo:
    """The IANA zone ``name`` (a browser's ``Intl`` zone); empty: UTC."""
    name = (name or "").strip()
    if not name:
        return UTC
    if len(name) > MAX_ZONE_CHARS or not name.isascii() or not name.isprintable():
        raise TimeRefused(field, "not a time zone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        # OSError: a name ZoneInfo takes for a path it cannot open (a directory, '..').
        raise TimeRefused(field, "not a time zone") from None

