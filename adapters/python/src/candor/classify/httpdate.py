"""HTTP-dates (RFC 9110), read as strictly as the Rust classifier reads them.

IMF-fixdate (``Sun, 06 Nov 1994 08:49:37 GMT``) and the obsolete RFC 850
(``Sunday, 06-Nov-94 08:49:37 GMT``) and asctime (``Sun Nov  6 08:49:37 1994``) forms, in GMT
only, from 1970 to 9999, with the weekday that the date falls on.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Final

from candor.timestamps import datetime_to_ns

__all__ = ["parse_http_date_ns"]

_DAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_LONG_DAYS: Final = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS: Final = (
    "Jan",
    "Feb",
    "Mar",
    "Apr",
    "May",
    "Jun",
    "Jul",
    "Aug",
    "Sep",
    "Oct",
    "Nov",
    "Dec",
)
_DAY = "|".join(_DAYS)
_MONTH = "|".join(_MONTHS)
_TIME = r"([0-9]{2}):([0-9]{2}):([0-9]{2})"
_IMF: Final = re.compile(rf"({_DAY}), ([0-9]{{2}}) ({_MONTH}) ([0-9]{{4}}) {_TIME} GMT")
_RFC850: Final = re.compile(
    rf"({'|'.join(_LONG_DAYS)}), ([0-9]{{2}})-({_MONTH})-([0-9]{{2}}) {_TIME} GMT"
)
_ASCTIME: Final = re.compile(rf"({_DAY}) ({_MONTH}) ( [0-9]|[0-9]{{2}}) {_TIME} ([0-9]{{4}})")


def parse_http_date_ns(text: str) -> int | None:
    """Nanoseconds since the epoch of an HTTP-date, or ``None`` when ``text`` is not one."""
    text = text.strip(" \t\n\r\x0c")
    if not text.isascii():
        return None
    if found := _IMF.fullmatch(text):
        weekday, day, month, year, hour, minute, second = found.groups()
        weekday_index = _DAYS.index(weekday)
    elif found := _RFC850.fullmatch(text):
        weekday, day, month, short_year, hour, minute, second = found.groups()
        year = str(int(short_year) + (2000 if int(short_year) < 70 else 1900))
        weekday_index = _LONG_DAYS.index(weekday)
    elif found := _ASCTIME.fullmatch(text):
        weekday, month, day, hour, minute, second, year = found.groups()
        weekday_index = _DAYS.index(weekday)
    else:
        return None
    if not 1970 <= int(year) <= 9999 or int(second) > 59:
        return None
    try:
        at = datetime(
            int(year),
            _MONTHS.index(month) + 1,
            int(day),
            int(hour),
            int(minute),
            int(second),
            tzinfo=UTC,
        )
    except ValueError:
        return None
    return datetime_to_ns(at) if at.weekday() == weekday_index else None
