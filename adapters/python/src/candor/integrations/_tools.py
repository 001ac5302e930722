"""What the framework integrations that declare tools share.

A tool is declared from a function that returns an :class:`~candor.Envelope`. The framework
reads the tool's parameters from a wrapper that renders the envelope; the wrapper gets the
function's name, docstring and parameters, and the return type the framework expects.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from candor.envelope import Envelope

__all__ = ["EnvelopeFunction", "checked", "declare"]

T = TypeVar("T")

EnvelopeFunction = Callable[..., Envelope] | Callable[..., Awaitable[Envelope]]
"""A function that makes a call through a Candor adapter and returns its envelope."""


def checked(envelope: object, function: str) -> Envelope:
    """The envelope the function ``function`` returned; anything else is a bug in it."""
    if not isinstance(envelope, Envelope):
        raise TypeError(f"{function} returned a {type(envelope).__name__}, not an Envelope")
    return envelope


def declare(
    function: EnvelopeFunction, render: Callable[[Envelope], T], returns: object
) -> Callable[..., T] | Callable[..., Awaitable[T]]:
    """A function with the parameters of ``function`` that returns ``render`` of its envelope.

    It is a coroutine function when ``function`` is one. Its annotations are those of
    ``function``, resolved, with ``returns`` as the return annotation, and so is its signature.
    """
    name = function.__qualname__
    wrapper: Callable[..., T] | Callable[..., Awaitable[T]]
    if inspect.iscoroutinefunction(function):
        call_async = function

        @functools.wraps(function)
        async def run_async(*args: Any, **kwargs: Any) -> T:
            return render(checked(await call_async(*args, **kwargs), name))

        wrapper = run_async
    else:

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> T:
            return render(checked(function(*args, **kwargs), name))

        wrapper = run
    hints = typing.get_type_hints(function, include_extras=True)
    signature = inspect.signature(function, eval_str=True)
    _annotate(wrapper, {**hints, "return": returns}, signature.replace(return_annotation=returns))
    return wrapper


def _annotate(wrapper: Any, annotations: dict[str, object], signature: inspect.Signature) -> None:
    """Sets the annotations and the signature that frameworks read a tool's parameters from."""
    wrapper.__annotations__ = annotations
    wrapper.__signature__ = signature
