"""What the HTTP client integrations share (rule ``RETRY-UNSAFE``).

The request's method is checked against the adapter's, and the call's idempotency key is sent
with every attempt.
"""

from __future__ import annotations

from typing import Any

from candor.adapter import Adapter, AttemptContext

IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
"""The header that carries a call's idempotency key (the IETF HTTPAPI draft)."""


def check_method(adapter: Adapter[Any], method: str) -> None:
    """Refuses a request whose method is not the adapter's.

    Whether a failed call may be sent again follows from the adapter's method; a POST through
    an adapter built for GET would be retried as a GET.
    """
    if method.upper() != adapter.method:
        raise ValueError(
            f"the request is a {method.upper()} but the adapter is for {adapter.method}: "
            f"build it with method={method.upper()!r}, so that a request that may have been "
            "applied is not sent again"
        )


def with_idempotency_key(attempt: AttemptContext, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with the call's idempotency key in ``headers``.

    Only when the call has one and the caller set none.
    """
    if attempt.idempotency_key is None:
        return kwargs
    headers = dict(kwargs.get("headers") or {})
    if not any(name.lower() == IDEMPOTENCY_KEY_HEADER.lower() for name in headers):
        headers[IDEMPOTENCY_KEY_HEADER] = attempt.idempotency_key
    return {**kwargs, "headers": headers}
