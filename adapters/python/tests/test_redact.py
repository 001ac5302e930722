"""Redaction, with the cases of the Rust module and of the contract's examples."""

from __future__ import annotations

import pytest

from candor import redact_text, redact_url
from candor.redact import REDACTED, is_secret_param


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
