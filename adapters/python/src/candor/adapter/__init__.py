"""The adapter: a configured tool that runs calls through classification, retry and telemetry.

Build one :class:`Adapter` per tool and share it. A call is made in one of four ways:

- ``await adapter.acall(fn)``: ``fn(attempt)`` returns an awaitable of the raw result; the
  attempt timeout is enforced (the attempt is cancelled when it runs out) and backoffs are
  asynchronous sleeps;
- ``adapter.call(fn)``: the same, synchronous. A synchronous attempt cannot be interrupted:
  pass ``attempt.timeout_seconds`` to the client. An attempt that returns after its timeout is
  classified as the asynchronous path would have classified it when it cut the attempt there
  (the late result is dropped); backoffs are real sleeps that block the thread;
- ``@adapter.wrap`` on a function that takes the attempt context as the keyword ``attempt``:
  calling the decorated function makes a call and returns the envelope;
- ``with adapter.attempt() as observed: …; observed.record(raw)``: for code that makes the
  request itself. One attempt is observed, classified and recorded, and never retried: a
  transient AccessFailure ends as ``exhausted`` (its next actions are retry and escalate), so
  the caller decides whether to open another attempt.

When an attempt's time runs out (its timeout, or what is left of the call's deadline), the
attempt is an AccessFailure ``timeout`` (``deadline``) with no answer, unless its response had
begun to arrive: a client integration records the status and headers, then the body as it
arrives, on the attempt's context (:meth:`AttemptContext.receiving`), and the attempt's outcome
is then that response with the body received by then (a 2xx is a Partial ``mid_stream``; rule
``RETRY-ATTEMPT-TIMEOUT``). The httpx and requests integrations record it. Which of the
adapter's timer and the client's own reading stops first does not matter: both give the bytes
that arrived within the attempt's time.

A call that may have been applied is not sent again unless it is safe to repeat (rule
``RETRY-UNSAFE``): its ``method`` is idempotent, the author declares it ``idempotent``, or the
adapter gives every attempt the call's ``idempotency_key``. A failure known not to have been
processed (no connection made, a 408, 429 or 503) is retried whatever the method.

An adapter with a status reader (:mod:`candor.follow`) can also follow an operation that a call
accepted to its end: ``adapter.call_and_follow(fn, read_status)`` makes the call and, when its
answer accepted an operation, reads the operation's status with ``read_status(operation,
attempt)`` until it ends; ``adapter.resume(operation, read_status)`` follows an operation that an
earlier call accepted. ``acall_and_follow`` and ``aresume`` are their asynchronous forms.

The package's modules, each of which reads on its own:

- :mod:`candor.adapter._adapter`: the :class:`Adapter`, its settings and its public methods;
- :mod:`candor.adapter._attempt`: the :class:`AttemptContext` of one attempt, what it records as
  its response arrives, and what the call and the following share to run one attempt;
- :mod:`candor.adapter._call`: one call in progress, its retry loops and its envelope;
- :mod:`candor.adapter._follow`: the following of an operation a call accepted;
- :mod:`candor.adapter._observe`: the ``wrap`` decorator and the :class:`Observation` of one
  attempt.
"""

from __future__ import annotations

from candor.adapter._adapter import Adapter
from candor.adapter._adapter import host_of as host_of
from candor.adapter._attempt import AttemptContext
from candor.adapter._call import ADAPTER_VERSION
from candor.adapter._observe import Observation

__all__ = ["ADAPTER_VERSION", "Adapter", "AttemptContext", "Observation"]
