"""The one reading of typed times (memory.domain.instants): UTC out, and a refusal naming the
field for everything PostgreSQL (or the calendar) cannot hold."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.domain.instants import MAX_OFFSET, TimeRefused, parse_instant, zone_named


@pytest.mark.parametrize(("raw", "expected"), [
    ("2026-12-01T10:00:00Z", datetime(2026, 12, 1, 10, tzinfo=UTC)),
    ("2026-12-01T10:00:00+01:00", datetime(2026, 12, 1, 9, tzinfo=UTC)),
    ("2026-12-01T10:00:00 01:00", datetime(2026, 12, 1, 9, tzinfo=UTC)),  # '+' unencoded
    ("2026-12-01 10:00:00Z", datetime(2026, 12, 1, 10, tzinfo=UTC)),
    ("2026-12-01T10:00:00+15:59", datetime(2026, 11, 30, 18, 1, tzinfo=UTC)),
    ("2026-12-01T10:00:00-15:59", datetime(2026, 12, 2, 1, 59, tzinfo=UTC)),
    ("9999-12-31T23:59:59.999999Z", datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
    ("  2026-12-01T10:00Z ", datetime(2026, 12, 1, 10, tzinfo=UTC)),
])
def test_an_iso_time_with_a_zone_is_read_in_utc(raw: str, expected: datetime) -> None:
    moment = parse_instant(raw)
    assert moment == expected and moment.utcoffset().total_seconds() == 0


@pytest.mark.parametrize(("raw", "says"), [
    ("2026-12-01T10:00:00+16:00", "±15:59"),  # the probe's: PostgreSQL refuses the offset
    ("2026-12-01T10:00:00-23:59", "±15:59"),
    ("9999-12-31T23:59:59-14:00", "years 1 to 9999"),  # the probe's: past 9999 in UTC
    ("0001-01-01T00:00:00+14:00", "years 1 to 9999"),
    ("2026-12-01T10:00:00", "needs a zone"),
    ("2026-12-01", "needs a zone"),
    ("2026-02-30T00:00Z", "ISO-8601"),
    ("yesterday", "ISO-8601"),
    ("２０２６-12-01T10:00Z", "ISO-8601"),
    ("2026-12-01T10:00\x00Z", "ISO-8601"),
    ("2026-12-01T10:00:00Z" + " " * 60 + "x", "ISO-8601"),
])
def test_what_cannot_be_held_is_refused_naming_the_field(raw: str, says: str) -> None:
    with pytest.raises(TimeRefused) as refused:
        parse_instant(raw, field="observed_at")
    assert refused.value.field == "observed_at" and says in refused.value.message


def test_empty_is_the_present() -> None:
    assert parse_instant(None) is None and parse_instant("") is None and parse_instant("  ") is None


def test_a_zone_less_time_is_read_in_the_zone_given() -> None:
    tokyo = zone_named("Asia/Tokyo")
    assert parse_instant("2026-12-01T09:00", zone=tokyo) == datetime(2026, 12, 1, tzinfo=UTC)
    assert parse_instant("2026-12-01", zone=UTC) == datetime(2026, 12, 1, tzinfo=UTC)
    # the probe's: 00:10 on 1 January of year 1 in Tokyo is in year 0 in UTC
    with pytest.raises(TimeRefused, match="years 1 to 9999"):
        parse_instant("0001-01-01T00:10", field="at", zone=tokyo)


@pytest.mark.parametrize("name", ["Nope/Zone", "../../etc/passwd", "/etc/localtime", "Europe",
                                  "x" * 65, "Asia/Tokyo\x00"])
def test_a_name_that_is_no_zone_is_refused(name: str) -> None:
    with pytest.raises(TimeRefused) as refused:
        zone_named(name)
    assert refused.value.field == "tz"


@given(st.datetimes(timezones=st.timezones()))
def test_every_time_that_reads_back_is_utc_within_the_calendar(moment: datetime) -> None:
    """Whatever is accepted is an instant PostgreSQL holds: UTC, years 1-9999."""
    try:
        read = parse_instant(moment.isoformat())
    except TimeRefused as refused:
        offset = moment.utcoffset()
        assert offset is not None
        assert abs(offset) > MAX_OFFSET or "years" in refused.message
        return
    # (an ambiguous local time never equals another zone's: compare the UTC forms)
    assert read is not None and read.tzinfo is UTC and read == moment.astimezone(UTC)
