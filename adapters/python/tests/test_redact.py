"""Redaction, with the cases of the Rust module and of the contract's examples."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from candor import redact_text, redact_url
from candor.adapter import host_of
from candor.redact import (
    _NAME_CHARS,
    _SECRET_FRAGMENTS,
    _SECRET_PARAMS,
    REDACTED,
    _may_introduce_secret,
    _redact_secret_values,
    _scan_secret_values,
    is_secret_param,
    url_parts,
)

REDACTION_VECTORS = Path(__file__).parents[3] / "spec" / "vectors" / "redaction.json"


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("https://user:pass@host.example/a", "https://REDACTED@host.example/a"),
        (
            "https://s3.example/b/k?X-Amz-Signature=abc&X-Amz-Credential=AK%2F1&x=1",
            "https://s3.example/b/k?X-Amz-Signature=REDACTED&X-Amz-Credential=REDACTED&x=1",
        ),
        ("https://blob.example/c?sv=2020&sig=zzz", "https://blob.example/c?sv=2020&sig=REDACTED"),
        (
            "http://h/p?api_key=k1&q=ok#access_token=t2",
            "http://h/p?api_key=REDACTED&q=ok#access_token=REDACTED",
        ),
        ("http://h/p?X%2DAmz%2DSignature=s", "http://h/p?X%2DAmz%2DSignature=REDACTED"),
        (
            "https://bob:hunter2@api.example.com/v1/search?q=cats&access_token=abc#x",
            "https://REDACTED@api.example.com/v1/search?q=cats&access_token=REDACTED#x",
        ),
        ("orders-db?token=x", "orders-db?token=REDACTED"),
    ],
)
def test_removes_every_planted_secret(raw: str, want: str) -> None:
    assert redact_url(raw) == want


@pytest.mark.parametrize(
    "raw",
    [
        "https://api.example.com/v1/search?q=cats&page=2",
        "search-index",
        "../../etc/passwd",
        "mailto:someone@example.com",
    ],
)
def test_leaves_clean_urls_and_plain_names_untouched(raw: str) -> None:
    assert redact_url(raw) is raw


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        # A '/', '@', ':' or '#' in a password, unencoded: the password is gone all the same.
        ("https://bob:pa/ss@api.example/v1", "https://REDACTED@api.example/v1"),
        ("https://bob:p@ss@api.example/v1", "https://REDACTED@api.example/v1"),
        ("https://bob:pa:ss@api.example/v1", "https://REDACTED@api.example/v1"),
        ("https://bob:pa#ss@api.example", "https://REDACTED@api.example"),
        ("https://bob:pa/s#s@api.example/v1", "https://REDACTED@api.example/v1"),
        (
            "https://bob:12#34@api.example/v1?token=x#frag",
            "https://REDACTED@api.example/v1?token=REDACTED#frag",
        ),
        # A host with a port and an '@' after it is taken for user-info: the host is hidden.
        ("https://api.example:8443/p#a@b", "https://REDACTED@b"),
        ("http://h:8080/@me", "http://REDACTED@me"),
        # A '://' after the query is no scheme: the query is still redacted.
        ("orders-db?token=x&next=https://u:p@h", "orders-db?token=REDACTED&next=https://u:p@h"),
    ],
)
def test_user_info_with_unencoded_delimiters(raw: str, want: str) -> None:
    assert redact_url(raw) == want
    assert redact_url(want) == want


@pytest.mark.parametrize(
    "raw",
    [
        "https://api.example/p#a@b",
        "https://social.example/@bob/statuses?q=cats",
        "https://REDACTED@api.example/x",
        "orders-db?next=https://u:p@h",
    ],
)
def test_an_at_sign_that_is_not_user_info_and_redacted_user_info_stay(raw: str) -> None:
    assert redact_url(raw) is raw


def test_no_password_made_of_delimiters_shows() -> None:
    # Any '/', '#' and ':', and '@' after the last '/' (an '@' before a '/' ends the authority's
    # user-info there, by the rule).
    rng = random.Random(20270115)  # noqa: S311 - test data, not a secret
    for _ in range(2000):
        password = "".join(rng.choice("qk/#:") for _ in range(rng.randrange(0, 6))) + "".join(
            rng.choice("qk#:@") for _ in range(rng.randrange(1, 5))
        )
        for tail, want in (("/v1", "/v1"), ("/v1?q=1#top", "/v1?q=1#top"), ("", "")):
            raw = f"https://bob:{password}@host.test{tail}"
            assert redact_url(raw) == f"https://REDACTED@host.test{want}", raw


@pytest.mark.parametrize(
    ("target", "host"),
    [
        ("https://bob:12#34@api.example/v1?token=x#frag", "api.example"),
        ("https://bob:pa/ss@api.example/v1", "api.example"),
        ("https://bob:p@ss@api.example:8443/v1", "api.example:8443"),
        ("https://api.example/p#a@b", "api.example"),
        ("https://api.example:8443/p#a@b", "b"),
        ("http://127.0.0.1:8080/x?y", "127.0.0.1:8080"),
        ("orders-db?token=x", "orders-db?token=REDACTED"),
        ("orders-db?next=https://h", "orders-db?next=https://h"),
    ],
)
def test_the_host_of_a_redacted_target_is_cut_as_the_redaction_cuts(target: str, host: str) -> None:
    assert host_of(redact_url(target)) == host


def test_url_parts() -> None:
    assert url_parts("https://bob:p#ss@api.example:8443/v1?q=1#top") == (
        "https://",
        "bob:p#ss",
        "api.example:8443",
        "/v1",
        "q=1",
        "top",
    )
    assert url_parts("orders-db?next=https://u:p@h#x") == (
        "",
        None,
        "",
        "orders-db",
        "next=https://u:p@h",
        "x",
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"error":"bad token","echo":"Bearer abc.def.ghi"}',
        '{"access_token": "abc.def.ghi", "ok": true}',
        "password=abc.def.ghi&user=bob",
        "Authorization: Basic abc.def.ghi",
        "x-api-key: abc.def.ghi",
    ],
)
def test_redacts_secret_values_in_json_and_form_text(text: str) -> None:
    redacted = redact_text(text)
    assert "abc.def.ghi" not in redacted
    assert REDACTED in redacted


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Authorization: Basic abc.def", "Authorization: Basic REDACTED"),
        ('{"access_token": "abc.def", "ok": true}', '{"access_token": "REDACTED", "ok": true}'),
        ("sent Bearer eyJhbGci and gave up", "sent Bearer REDACTED and gave up"),
        ("the token expired", "the token expired"),
        ("user=bob&page=2", "user=bob&page=2"),
        ("Authorization: Bearer  t0k", "Authorization: Bearer  REDACTED"),
    ],
)
def test_the_contracts_examples(text: str, want: str) -> None:
    assert redact_text(text) == want


def test_redacts_credentials_inside_free_text() -> None:
    text = "request to http://u:p@h/x?token=abc failed; sent Bearer eyJhbGci and gave up"
    redacted = redact_text(text)
    assert "abc" not in redacted
    assert "eyJhbGci" not in redacted
    assert "u:p" not in redacted
    assert "gave up" in redacted


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("access_token", True),
        ("X-Amz-Signature", True),
        ("client_secret", True),
        ("x-api-key", True),
        ("x_api_key", True),
        ("user", False),
        ("page", False),
        ("q", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_param(name) is secret


def _reference_redact_text(raw: str) -> str:
    """:func:`redact_text` without its shortcut: every text that may hold a credential scanned."""
    lowered = "".join(c.lower() if c.isascii() else c for c in raw)
    if not ("=" in raw or ":" in raw or "basic" in lowered or "bearer" in lowered):
        return raw
    words = [redact_url(word) if "://" in word else word for word in raw.split(" ")]
    return _scan_secret_values(" ".join(words))


def _strings(value: object) -> Iterator[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


_WORDS = (
    *sorted(_SECRET_PARAMS | set(_SECRET_FRAGMENTS)),
    *("Bearer", "BASIC", "basic", "bearer", "Authorization", "X-Amz-Credential", "x-API-key"),
    *("design", "keyboard", "passport", "codec", "sessions", "REDACTED", "bob", "page"),
)
_SEPARATORS = ("=", ":", '"', "'", " ", "  ")
_PUNCTUATION = (
    *("\t", "\n", "&", ",", ";", "}", "]", ")", "<", "{", "["),
    *("://", "https://", "http://u:p@h/", "@", "?", "#", "%2D", "%", "/", "."),
    *("\u212a", "\u017f", "\u0131", "\u00e9", "\u00a0", "\u3000", "\x85"),
    *sorted(_NAME_CHARS),
)


def _generated(count: int) -> Iterator[str]:
    """Texts of words and punctuation that start, end and interrupt secret names and values."""
    rng = random.Random(20270115)  # noqa: S311 - test data, not a secret
    for _ in range(count):
        yield "".join(
            rng.choice(rng.choice((_WORDS, _SEPARATORS, _PUNCTUATION)))
            for _ in range(rng.randint(0, 14))
        )


def _cases() -> Iterator[str]:
    yield from _strings(json.loads(REDACTION_VECTORS.read_text(encoding="utf-8")))
    yield from _generated(30_000)


def test_the_shortcut_never_changes_what_is_redacted() -> None:
    """Text the pattern passes over comes out of the scan unchanged, so skipping it is exact."""
    passed_over = scanned_unchanged = redacted = 0
    for text in _cases():
        scanned = _scan_secret_values(text)
        assert _redact_secret_values(text) == scanned, text
        assert redact_text(text) == _reference_redact_text(text), text
        if not _may_introduce_secret(text):
            passed_over += 1
        elif scanned == text:
            scanned_unchanged += 1
        else:
            redacted += 1
    # The texts reach every side of the shortcut, the scan's near misses included.
    assert min(passed_over, scanned_unchanged, redacted) > 2_000, (
        passed_over,
        scanned_unchanged,
        redacted,
    )
