"""The HTTP classifier: the rules of the contract for tools reached over HTTP.

What came back, and the outcome it is:

- no response (connect error, reset, malformed framing): AccessFailure, transient;
- 5xx, 429, 408: AccessFailure, transient (``Retry-After`` read);
- 401, 403: AccessFailure ``auth``, permanent;
- 404: the tool's declaration: ``confirmed_absent`` → Empty, ``unreachable`` → AccessFailure;
- other 4xx: AccessFailure ``client_error``, permanent;
- 1xx, 3xx: AccessFailure ``protocol``, permanent;
- 2xx whose body was cut (size cap, broken stream, the attempt's time running out while it
  arrived, ``Content-Length`` mismatch, JSON ending early): Partial;
- 2xx whose body is not JSON: AccessFailure ``protocol``, transient;
- 2xx whose declared collection is missing or not a list: AccessFailure ``protocol``,
  permanent;
- 2xx with a declared total (body field or ``X-Total-Count``) above the items returned:
  Partial ``declared_total``;
- 2xx with a truncation marker set, or ``has_more`` without a cursor: Partial
  ``truncation_marker``;
- 202 whose body arrived whole: Success with the lifecycle ``accepted``: accepted, never
  completed;
- 204, an empty body, ``null``, or an empty collection: Empty;
- any other 2xx: Success.

Where the collection sits in the body is the tool author's declaration (``items_at``); without
one, a top-level JSON array is the collection and any other JSON value is a single answer.

A response whose attempt's time ran out while it was arriving is classified as what had arrived
by then: a client integration records it as an :class:`HttpArrival` on the attempt's context
(:meth:`candor.AttemptContext.receiving`), and the adapter hands it to
:meth:`HttpClassifier.classify_arrival` (rule ``RETRY-ATTEMPT-TIMEOUT``).

The package's modules, each of which reads on its own:

- :mod:`candor.classify.http._exchange`: what came back from one attempt, :class:`HttpResponse`,
  :class:`HttpArrival` and :class:`TransportError`;
- :mod:`candor.classify.http._parse`: the reading of header numbers, ``Retry-After``,
  ``Content-Length`` and the body snippet a failure quotes;
- :mod:`candor.classify.http._classifier`: the :class:`HttpClassifier` and its rules.
"""

from __future__ import annotations

from candor.classify.http._classifier import GENERATED_ID_PREFIX as GENERATED_ID_PREFIX
from candor.classify.http._classifier import ArrivalClassifier, HttpClassifier, NotFound
from candor.classify.http._classifier import generated_operation_id as generated_operation_id
from candor.classify.http._exchange import (
    BodyBroken,
    BodyComplete,
    BodyEnd,
    BodySizeCap,
    BodyTimedOut,
    HttpArrival,
    HttpExchange,
    HttpResponse,
    TransportError,
    TransportErrorKind,
)
from candor.classify.http._exchange import Headers as Headers
from candor.classify.http._parse import BODY_SNIPPET_CHARS as BODY_SNIPPET_CHARS

__all__ = [
    "ArrivalClassifier",
    "BodyBroken",
    "BodyComplete",
    "BodyEnd",
    "BodySizeCap",
    "BodyTimedOut",
    "HttpArrival",
    "HttpClassifier",
    "HttpExchange",
    "HttpResponse",
    "NotFound",
    "TransportError",
    "TransportErrorKind",
]
