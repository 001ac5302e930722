"""Reading what a response says besides its JSON: numbers, ``Retry-After``, a body snippet.

Header numbers are read as the Rust classifier reads them (an optional ``+``, digits only, under
2**64, with Unicode white space trimmed); ``Retry-After`` is a number of seconds or an HTTP-date;
a failing response's body is quoted in a failure message as one redacted line of at most
:data:`BODY_SNIPPET_CHARS` characters. The classifier and the status readers
(:mod:`candor.follow`) both read responses this way.
"""

from __future__ import annotations

import re
from typing import Final

from candor.classify.http._exchange import HttpResponse
from candor.classify.httpdate import parse_http_date_ns
from candor.redact import redact_text

BODY_SNIPPET_CHARS: Final = 200
"""The most characters of a failing response's body repeated in a failure message."""


_UINT: Final = re.compile(r"\+?[0-9]+")
_U64_END: Final = 2**64


def _parse_uint(text: str) -> int | None:
    """An unsigned 64-bit integer, read as Rust reads one (an optional ``+``, digits only)."""
    if not _UINT.fullmatch(text):
        return None
    value = int(text)
    return value if value < _U64_END else None


def _trim(text: str) -> str:
    return text.strip(_WHITE_SPACE)


# Unicode White_Space, what Rust's `trim` removes.
_WHITE_SPACE: Final = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def _content_length(response: HttpResponse) -> int | None:
    value = response.header("content-length")
    return None if value is None else _parse_uint(_trim(value))


def _retry_after_ms(response: HttpResponse) -> int | None:
    value = response.header("retry-after")
    if value is None:
        return None
    value = _trim(value)
    seconds = _parse_uint(value)
    if seconds is not None:
        return min(seconds * 1000, _U64_END - 1)
    at = parse_http_date_ns(value)
    if at is None:
        return None
    wait_ns = at - response.received_at_ns
    return max(wait_ns, 0) // 1_000_000


# C0 controls, DEL and C1 controls, each read as a space in a snippet.
_CONTROLS_AS_SPACES: Final = dict.fromkeys((*range(0x20), *range(0x7F, 0xA0)), " ")


_SNIPPET_BYTES: Final = 4 * BODY_SNIPPET_CHARS
"""The bytes of a body that a snippet is read from. Each character comes from at most four bytes
(a U+FFFD that stands for invalid bytes, from one to three), so the snippet's characters all lie
within them, and the rest of a large body is never decoded."""


def _body_snippet(body: bytes) -> str:
    text = body[:_SNIPPET_BYTES].decode("utf-8", errors="replace")[:BODY_SNIPPET_CHARS]
    # Printable text holds no control character (they are all unprintable), and testing
    # for that costs a fraction of what translating does.
    one_line = text if text.isprintable() else text.translate(_CONTROLS_AS_SPACES)
    return redact_text(_trim(one_line))
