"""Wall-clock timestamps as they appear on the wire: RFC 3339 in UTC, six fractional digits.

Times inside the adapter are integer nanoseconds since the Unix epoch (what OpenTelemetry
takes); the envelope holds :class:`datetime.datetime` values in UTC, with microseconds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["datetime_from_ns", "datetime_to_ns", "format_rfc3339", "parse_rfc3339"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_SECONDS = 253_402_300_800 - 1  # the last second of the year 9999
_MICROSECOND = timedelta(microseconds=1)


def datetime_from_ns(ns: int) -> datetime:
    """The UTC datetime ``ns`` nanoseconds after the epoch, cut to microseconds."""
    # timedelta(days, seconds, microseconds): positional arguments cost less than keywords.
    return EPOCH + timedelta(0, 0, ns // 1000)


def datetime_to_ns(at: datetime) -> int:
    """Nanoseconds since the epoch; a naive datetime is read as UTC."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return (at - EPOCH) // _MICROSECOND * 1000


def format_rfc3339(at: datetime) -> str:
    """``2027-01-15T08:00:00.040000Z``: UTC, always six fractional digits, ``Z``.

    A naive datetime is read as UTC.
    """
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    at = at.astimezone(UTC)
    return (
        f"{at.year:04d}-{at.month:02d}-{at.day:02d}T"
        f"{at.hour:02d}:{at.minute:02d}:{at.second:02d}.{at.microsecond:06d}Z"
    )


def _two_digits(raw: bytes, at: int) -> int:
    a, b = raw[at], raw[at + 1]
    if not (0x30 <= a <= 0x39 and 0x30 <= b <= 0x39):
        raise ValueError("invalid digit")
    return (a - 0x30) * 10 + (b - 0x30)


def _is_leap_year(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


_MONTHS = {
    1: (0, 31),
    2: (31, 28),
    3: (59, 31),
    4: (90, 30),
    5: (120, 31),
    6: (151, 30),
    7: (181, 31),
    8: (212, 31),
    9: (243, 30),
    10: (273, 31),
    11: (304, 30),
    12: (334, 31),
}


def parse_rfc3339_ns(text: str) -> int:
    """Nanoseconds since the epoch of an RFC 3339 timestamp in UTC.

    Accepts exactly what the Rust reader accepts: ``YYYY-MM-DDTHH:MM:SS``, any number of
    fractional digits, then ``Z`` or ``+00:00``; no other offset, no year before 1970. A leap
    second (``:60``) reads as ``:59``. Raises :class:`ValueError` naming the timestamp.
    """
    try:
        return _parse(text.encode("utf-8"))
    except (ValueError, IndexError) as err:
        raise ValueError(f"invalid timestamp {text[:64]!r}: {err or 'invalid format'}") from None


def parse_rfc3339(text: str) -> datetime:
    """The UTC datetime of an RFC 3339 timestamp, as :func:`parse_rfc3339_ns` reads it."""
    return datetime_from_ns(parse_rfc3339_ns(text))


def _parse(raw: bytes) -> int:
    if len(raw) < len("2018-02-14T00:28:07Z"):
        raise ValueError("invalid format")
    if raw[10] != ord("T") or (not raw.endswith(b"Z") and not raw.endswith(b"+00:00")):
        raise ValueError("invalid format")
    if raw[4] != ord("-") or raw[7] != ord("-") or raw[13] != ord(":") or raw[16] != ord(":"):
        raise ValueError("invalid format")
    year = _two_digits(raw, 0) * 100 + _two_digits(raw, 2)
    month = _two_digits(raw, 5)
    day = _two_digits(raw, 8)
    hour = _two_digits(raw, 11)
    minute = _two_digits(raw, 14)
    second = _two_digits(raw, 17)
    if year < 1970 or hour > 23 or minute > 59 or second > 60:
        raise ValueError("out of range")
    second = min(second, 59)
    if month not in _MONTHS:
        raise ValueError("out of range")
    leap = _is_leap_year(year)
    ydays, mdays = _MONTHS[month]
    if month == 2 and leap:
        mdays = 29
    if day > mdays or day == 0:
        raise ValueError("out of range")
    ydays += day - 1
    if leap and month > 2:
        ydays += 1
    leap_years = ((year - 1) - 1968) // 4 - ((year - 1) - 1900) // 100 + ((year - 1) - 1600) // 400
    days = (year - 1970) * 365 + leap_years + ydays
    nanos = 0
    if len(raw) > 19 and raw[19] == ord("."):
        mult = 100_000_000
        for index in range(20, len(raw)):
            byte = raw[index]
            if byte == ord("Z"):
                if index == len(raw) - 1:
                    break
                raise ValueError("invalid digit")
            if byte == ord("+"):
                if index == len(raw) - 6:
                    break
                raise ValueError("invalid digit")
            if not 0x30 <= byte <= 0x39:
                raise ValueError("invalid digit")
            nanos += mult * (byte - 0x30)
            mult //= 10
    elif len(raw) != 19 and (len(raw) > 25 or (raw[19] != ord("Z") and raw[19:] != b"+00:00")):
        raise ValueError("invalid format")
    total_seconds = second + minute * 60 + hour * 3600 + days * 86400
    if total_seconds > _MAX_SECONDS:
        raise ValueError("out of range")
    return total_seconds * 1_000_000_000 + nanos
