"""Removing credentials from strings before they are recorded anywhere.

Targets are URLs more often than not, and URLs carry secrets: user-info
(``https://user:pass@host``), signed-URL parameters (``sig=``, ``X-Amz-Signature=``) and tokens
(``?access_token=``). Everything that becomes an attribute, a record or a log line passes
through :func:`redact_url` or :func:`redact_text` first.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

__all__ = ["REDACTED", "UrlParts", "is_secret_param", "redact_text", "redact_url", "url_parts"]

REDACTED: Final = "REDACTED"
"""What a removed secret is replaced with."""

_SECRET_PARAMS: Final = frozenset(
    {
        "sig",
        "signature",
        "token",
        "key",
        "apikey",
        "api_key",
        "auth",
        "authorization",
        "password",
        "passwd",
        "pwd",
        "secret",
        "code",
        "jwt",
        "session",
        "sessionid",
        "x_amz_credential",
        "x_goog_credential",
    }
)
"""Parameter names (lower case, ``-`` read as ``_``) that always hold a secret."""

_SECRET_FRAGMENTS: Final = (
    "token",
    "secret",
    "password",
    "signature",
    "api_key",
    "apikey",
    "credential",
)
"""Fragments that mark a parameter name as secret wherever they appear in it."""

# Unicode White_Space: what ends a secret value in free text.
_WHITESPACE: Final = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_HEX_DIGITS: Final = frozenset(b"0123456789abcdefABCDEF")
_VALUE_ENDS: Final = frozenset("\"'&,;}])<") | _WHITESPACE


def _ascii_lower(text: str) -> str:
    if text.isascii():
        return text.lower()
    return "".join(c.lower() if c.isascii() else c for c in text)


def is_secret_param(name: str) -> bool:
    """Whether a query parameter (or a field) with this name holds a secret."""
    normalised = _ascii_lower(name).replace("-", "_")
    return normalised in _SECRET_PARAMS or any(
        fragment in normalised for fragment in _SECRET_FRAGMENTS
    )


def _split_keep(raw: str, separator: str) -> tuple[str, str | None]:
    head, found, tail = raw.partition(separator)
    return (head, tail) if found else (raw, None)


def _hex_byte(pair: bytes) -> int | None:
    """The byte two hex digits spell (a leading ``+`` is read as a sign, as Rust reads it)."""
    digits = pair[1:] if pair[:1] == b"+" else pair
    if len(pair) != 2 or not digits or not all(b in _HEX_DIGITS for b in digits):
        return None
    return int(digits, 16)


def _percent_decode_lossy(raw: str) -> str:
    data = raw.encode("utf-8")
    out = bytearray()
    at = 0
    while at < len(data):
        escaped = _hex_byte(data[at + 1 : at + 3]) if data[at] == ord("%") else None
        if escaped is not None:
            out.append(escaped)
            at += 3
            continue
        out.append(data[at])
        at += 1
    return out.decode("utf-8", errors="replace")


def _is_secret_pair(pair: str) -> bool:
    name, found, _ = pair.partition("=")
    return bool(found) and is_secret_param(_percent_decode_lossy(name))


def _redact_params(params: str) -> str:
    pairs = params.split("&")
    if not any(_is_secret_pair(pair) for pair in pairs):
        return params
    return "&".join(
        f"{pair.partition('=')[0]}={REDACTED}" if _is_secret_pair(pair) else pair for pair in pairs
    )


def _user_info_end(head: str) -> int:
    """Where a URL's user-info ends, by contract rule REDACT-TARGET's step 1.

    The index, in ``head`` (the text after the scheme up to the next ``?``), of the ``@`` that
    ends it, or -1. The authority is the head up to its first ``/``. When it holds an ``@``, the
    user-info ends at its last ``@`` (a ``#`` its client failed to encode stays in it). When it
    does not, but it holds a ``:`` and the rest of the head holds an ``@``, a password whose
    ``/`` its client failed to encode (``user:pa/ss@host``) runs to the head's last ``@``: a host
    with a port and an ``@`` later in its path or fragment (``host:8080/p#a@b``) then loses its
    host to the redaction, which never shows a password.
    """
    slash = head.find("/")
    authority = head if slash < 0 else head[:slash]
    at = authority.rfind("@")
    if at >= 0:
        return at
    return head.rfind("@") if ":" in authority else -1


class UrlParts(NamedTuple):
    """A URL cut as contract rule REDACT-TARGET cuts it (steps 1 and 2).

    The user-info first, over the text before the query, so that a ``/`` or ``#`` in a password
    stays with it; then the fragment at the first ``#`` after it, the query at the first ``?``
    before that, and the host at the first ``/``.
    """

    scheme: str
    """The scheme with its ``://`` (``https://``); empty for a text without a scheme."""
    user_info: str | None
    """The user-info, without the ``@`` that ends it."""
    host: str
    """The host and port; empty for a text without a scheme."""
    path: str
    """What follows the host up to the query or the fragment (all of it, without a scheme)."""
    query: str | None
    """The query, without its ``?``."""
    fragment: str | None
    """The fragment, without its ``#``."""


def url_parts(raw: str) -> UrlParts:
    """Cuts ``raw`` into its parts.

    A ``://`` counts only before the first ``?`` and ``#``: ``db?next=https://x`` has no scheme.

    >>> parts = url_parts("https://bob:p#ss@api.example:8443/v1?q=1#top")
    >>> parts.user_info, parts.host, parts.path, parts.query, parts.fragment
    ('bob:p#ss', 'api.example:8443', '/v1', 'q=1', 'top')
    """
    end = min((i for i in (raw.find("?"), raw.find("#")) if i >= 0), default=len(raw))
    at = raw.find("://", 0, end)
    scheme, after = (raw[: at + 3], raw[at + 3 :]) if at >= 0 else ("", raw)
    user_at = _user_info_end(after.partition("?")[0]) if scheme else -1
    user_info, rest = (after[:user_at], after[user_at + 1 :]) if user_at >= 0 else (None, after)
    before_fragment, fragment = _split_keep(rest, "#")
    before_query, query = _split_keep(before_fragment, "?")
    host = before_query.partition("/")[0] if scheme else ""
    return UrlParts(scheme, user_info, host, before_query[len(host) :], query, fragment)


def redact_url(raw: str) -> str:
    """Removes user-info and secret query or fragment parameters from a URL.

    Strings that are not URLs pass through unchanged unless they carry a query string.

    >>> redact_url("https://bob:hunter2@api.example.com/v1/search?q=cats&access_token=abc#x")
    'https://REDACTED@api.example.com/v1/search?q=cats&access_token=REDACTED#x'
    """
    parts = url_parts(raw)
    query = None if parts.query is None else _redact_params(parts.query)
    fragment = None if parts.fragment is None else _redact_params(parts.fragment)
    # User-info that is already REDACTED stays as it is: redacting twice replaces nothing.
    changed = (
        parts.user_info not in (None, REDACTED)
        or query != parts.query
        or fragment != parts.fragment
    )
    if not changed:
        return raw
    user_info = "" if parts.user_info is None else f"{REDACTED}@"
    out = [parts.scheme, user_info, parts.host, parts.path]
    if query is not None:
        out.append("?" + query)
    if fragment is not None:
        out.append("#" + fragment)
    return "".join(out)


def redact_text(raw: str) -> str:
    """Redacts credentials inside free text, such as an error message or a response body.

    Removes URLs' user-info and secret parameters, ``Bearer``/``Basic`` credentials, and the
    values of secret-named fields (``token=…``, ``"api_key": "…"``).
    """
    if "://" not in raw and not _may_introduce_secret(raw):
        return raw
    words = [redact_url(word) if "://" in word else word for word in raw.split(" ")]
    return _redact_secret_values(" ".join(words))


_NAME_CHARS: Final = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-")
"""What a field name is made of: ASCII letters and digits, ``_`` and ``-``."""


def _shortest_secret_words() -> list[str]:
    """The secret names and fragments that contain none of the others.

    Every name :func:`is_secret_param` accepts contains one of them (``-`` read as ``_``).
    """
    words = _SECRET_PARAMS | frozenset(_SECRET_FRAGMENTS)
    return sorted(w for w in words if not any(o != w and o in w for o in words))


_MAY_INTRODUCE_SECRET: Final = re.compile(
    "|".join(
        re.escape(word).replace("_", "[-_]") + r"[0-9a-z_-]*[\"']?[=:]"
        for word in _shortest_secret_words()
    )
    + "|bearer |basic "
)
"""Matches, in lower-cased text, wherever :func:`_scan_secret_values` could redact a value.

The scan redacts only after a name (a run of :data:`_NAME_CHARS`) that either is ``bearer``
or ``basic`` followed by a space, or holds a secret word and is followed by ``=`` or ``:``
(after at most one quote). Either is a match of this pattern in the text lower-cased, so text
with no match passes through the scan unchanged and need not be scanned: most bodies and
messages have none, and the scan goes character by character.

The pattern is case-sensitive, over :meth:`str.lower`'s text, because that is several times
faster than an ``IGNORECASE`` pattern. :meth:`str.lower` lower-cases every ASCII letter as
the scan's comparisons do and leaves the other ASCII characters as they are; what it does to
other characters (some become ASCII letters) can only add matches, which the scan then settles.
Equality with the scan is tested on generated text.

Every alternative starts with a letter of its own (no group in front), so that the search skips
the positions where no alternative can start instead of trying each one there.
"""


def _may_introduce_secret(text: str) -> bool:
    """Whether :func:`_scan_secret_values` could change ``text`` (see the pattern)."""
    return _MAY_INTRODUCE_SECRET.search(text.lower()) is not None


def _redact_secret_values(text: str) -> str:
    """Replaces the values of secrets in free text (see :func:`_scan_secret_values`)."""
    if not _may_introduce_secret(text):
        return text
    return _scan_secret_values(text)


def _scan_secret_values(text: str) -> str:
    """Replaces the values of secrets in free text, scanning it character by character.

    A value follows a secret-named field (``name=``, ``name:``, ``"name": "``) or the scheme
    word of an ``Authorization`` credential (``Bearer``, ``Basic``).
    """
    chars = text
    out: list[str] = []
    at = 0
    n = len(chars)
    while at < n:
        if chars[at] not in _NAME_CHARS:
            out.append(chars[at])
            at += 1
            continue
        start = at
        while at < n and chars[at] in _NAME_CHARS:
            at += 1
        name = chars[start:at]
        out.append(name)
        lower = _ascii_lower(name)
        value_at = at
        if lower in ("bearer", "basic"):
            while value_at < n and chars[value_at] == " ":
                value_at += 1
            introduces = value_at > at
        elif is_secret_param(name):
            cursor = at
            if cursor < n and chars[cursor] in "\"'":
                cursor += 1
            introduces = cursor < n and chars[cursor] in "=:"
            if introduces:
                cursor += 1
                while cursor < n and chars[cursor] in " \"'":
                    cursor += 1
                value_at = cursor
        else:
            introduces = False
        # `Authorization: Bearer x`: keep the scheme word, hide what follows it.
        word_end = value_at
        while word_end < n and chars[word_end] in _NAME_CHARS:
            word_end += 1
        word = _ascii_lower(chars[value_at:word_end])
        if introduces and word in ("bearer", "basic") and word_end < n and chars[word_end] == " ":
            value_at = word_end
            while value_at < n and chars[value_at] == " ":
                value_at += 1
        value_end = value_at
        while value_end < n and chars[value_end] not in _VALUE_ENDS:
            value_end += 1
        if not introduces or value_end == value_at:
            continue
        out.append(chars[at:value_at])
        out.append(REDACTED)
        at = value_end
    return "".join(out)
