"""The two other ways to make a call: the ``wrap`` decorator, and one observed attempt.

:func:`_wrapped` makes what :meth:`Adapter.wrap <candor.Adapter.wrap>` returns: from a function
that makes one attempt, one that makes a call. :class:`Observation` is what
:meth:`Adapter.attempt <candor.Adapter.attempt>` returns: a ``with`` (or ``async with``) block
that makes one attempt itself, which is classified and recorded when the block is left, and never
retried.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from candor.adapter._attempt import AttemptContext
from candor.adapter._call import _Call
from candor.classify import Classification
from candor.envelope import Envelope

if TYPE_CHECKING:
    # Only a type here: the adapter's module imports this one.
    from candor.adapter._adapter import Adapter

R = TypeVar("R")


def _wrapped(adapter: Adapter[Any], fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, which makes one attempt, as a function that makes a call (:meth:`Adapter.wrap`).

    A coroutine function becomes a coroutine function (:meth:`Adapter.acall`), any other
    function a synchronous one (:meth:`Adapter.call`).
    """
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def call_async(*args: Any, **kwargs: Any) -> Envelope:
            return await adapter.acall(lambda attempt: fn(*args, attempt=attempt, **kwargs))

        return call_async

    @functools.wraps(fn)
    def call_sync(*args: Any, **kwargs: Any) -> Envelope:
        return adapter.call(lambda attempt: fn(*args, attempt=attempt, **kwargs))

    return call_sync


class Observation(Generic[R]):
    """One attempt observed by :meth:`Adapter.attempt`."""

    def __init__(self, adapter: Adapter[R]) -> None:
        self._adapter = adapter
        self._call: _Call[R] | None = None
        self._context: AttemptContext | None = None
        self._classification: Classification | None = None
        self._envelope: Envelope | None = None

    @property
    def context(self) -> AttemptContext:
        """The attempt's number (always 1), timeout and idempotency key."""
        if self._context is None:
            raise RuntimeError("the observation has not started: use it in a with block")
        return self._context

    @property
    def envelope(self) -> Envelope:
        """The envelope, once the block has been left."""
        if self._envelope is None:
            raise RuntimeError("the envelope is made when the with block is left")
        return self._envelope

    def _settle(self, classification: Classification) -> None:
        call, context = self._call, self.context
        if call is None:  # pragma: no cover - context is set with the call
            raise RuntimeError("the observation has not started")
        if self._classification is not None:
            raise RuntimeError("an observation records one attempt; record was called twice")
        if call.late(context):
            classification = call.timed_out(context)
        classification = call.unsafe_to_repeat(classification)
        call.settle(classification)
        self._classification = classification

    def record(self, raw: R) -> None:
        """Records what the attempt returned; it is classified at once."""
        self._settle(self._adapter.classifier.classify(raw))

    def __enter__(self) -> Observation[R]:
        if self._call is not None:
            raise RuntimeError("an observation can be entered once")
        self._call = _Call(self._adapter, replace(self._adapter.policy, max_attempts=1))
        self._context = self._call.next_context()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        call = self._call
        if call is None:  # pragma: no cover - __enter__ sets it
            return False
        suppress = False
        if self._classification is None:
            if exc is None:
                raise RuntimeError(
                    "the with block recorded no result: call observed.record(...) with what the "
                    "attempt returned"
                )
            classification = call.classified(exc)
            if classification is None:
                return False
            self._settle(classification)
            suppress = True
        assert self._classification is not None  # noqa: S101 - set by _settle
        self._envelope = call.finish(self._classification)
        # An exception that became the outcome is not raised again; one raised after the
        # result was recorded still is.
        return suppress

    async def __aenter__(self) -> Observation[R]:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        return self.__exit__(exc_type, exc, traceback)
