"""pydantic-ai: a tool whose result reaches the model as the call's class and summary.

:func:`envelope_tool` turns a function that makes a call through a Candor adapter and returns
its :class:`~candor.Envelope` into a pydantic-ai :class:`~pydantic_ai.Tool`. The tool's
parameters, name and description are the function's::

    def find(query: str) -> Envelope:
        \"\"\"Searches the catalogue.\"\"\"
        return candor_httpx.call(search, client, "GET", url, params={"q": query})

    agent = Agent(model, tools=[envelope_tool(find, on_access_failure="fail")])

What the model is given:

========================  =================================================================
the call ended as         the tool result
========================  =================================================================
Success, Empty, Partial   :func:`candor.consumer.model_view`: ``summary``, ``outcome`` (its
                          ``class`` and what that class carries) and ``next_actions``; the
                          envelope's JSON is the part's ``metadata``, not sent to the model
AccessFailure             by ``on_access_failure``: ``"fail"`` raises
                          :class:`~pydantic_ai.exceptions.ToolFailed`, a failed result
                          (``outcome="failed"``, the provider's error channel) the model
                          adapts to; ``"retry"`` raises :class:`~pydantic_ai.ModelRetry`, a
                          result the model is asked to call again after (it counts against the
                          tool's ``max_retries``, past which the run fails); both carry
                          :func:`candor.consumer.model_text`, the summary first. ``"return"``
                          returns the summary and the outcome as for the other classes
========================  =================================================================

An AccessFailure is never handed to the model as an empty result: whichever is chosen, the
model reads that the call failed and that the source's contents are unknown. The adapter's own
retries have run by then; the choice is what the model does next.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from pydantic_ai import ModelRetry, Tool
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import ToolReturn

from candor.consumer import model_text, model_view
from candor.envelope import AccessFailure, Envelope
from candor.integrations._tools import EnvelopeFunction, declare

__all__ = ["OnAccessFailure", "envelope_tool", "tool_return"]

OnAccessFailure: TypeAlias = Literal["fail", "retry", "return"]
"""What the model is given for an AccessFailure: a failed tool result (``ToolFailed``), a retry
request (``ModelRetry``), or the summary and outcome as the tool's result."""

_CHOICES: tuple[OnAccessFailure, ...] = ("fail", "retry", "return")


def tool_return(envelope: Envelope, on_access_failure: OnAccessFailure) -> ToolReturn:
    """The tool result for an envelope, or the exception an AccessFailure raises.

    The result is :func:`candor.consumer.model_view` of the envelope, with the envelope's JSON
    as its ``metadata``. An AccessFailure raises ``ToolFailed`` (``"fail"``) or ``ModelRetry``
    (``"retry"``) with :func:`candor.consumer.model_text`, or is returned as well
    (``"return"``).
    """
    if isinstance(envelope.outcome, AccessFailure):
        if on_access_failure == "fail":
            raise ToolFailed(model_text(envelope))
        if on_access_failure == "retry":
            raise ModelRetry(model_text(envelope))
    return ToolReturn(model_view(envelope), metadata=envelope.to_dict())


def envelope_tool(
    function: EnvelopeFunction,
    *,
    on_access_failure: OnAccessFailure,
    name: str | None = None,
    description: str | None = None,
    max_retries: int | None = None,
) -> Tool[Any]:
    """A pydantic-ai tool that gives the model the class and the summary of ``function``'s call.

    ``function`` (a plain or an ``async`` function, which may take a ``RunContext`` first)
    makes the call through a Candor adapter and returns the :class:`~candor.Envelope`; its
    parameters are the tool's, its name and docstring the tool's name and description unless
    ``name`` and ``description`` are given. ``on_access_failure`` is required: ``"fail"``,
    ``"retry"`` or ``"return"`` (see the module). ``max_retries`` bounds the model's retries of
    this tool, as for any pydantic-ai tool.
    """
    if on_access_failure not in _CHOICES:
        raise ValueError(f"on_access_failure must be one of {_CHOICES}, not {on_access_failure!r}")
    wrapper = declare(
        function,
        lambda envelope: tool_return(envelope, on_access_failure),
        # A bare ToolReturn: pydantic-ai declares no return schema for it.
        ToolReturn,
    )
    return Tool(wrapper, name=name, description=description, max_retries=max_retries)
