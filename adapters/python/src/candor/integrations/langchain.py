"""LangChain: a tool whose ``ToolMessage`` carries the call's class and summary.

:func:`envelope_tool` turns a function that makes a call through a Candor adapter and returns
its :class:`~candor.Envelope` into a LangChain tool (an :class:`EnvelopeTool`, a
``StructuredTool``). The tool's arguments, name and description are the function's::

    def find(query: str) -> Envelope:
        \"\"\"Searches the catalogue.\"\"\"
        return candor_httpx.call(search, client, "GET", url, params={"q": query})

    tools = [envelope_tool(find)]
    message = tools[0].invoke({"type": "tool_call", "id": "call-1", "name": "find", "args": {...}})

Invoked with a tool call, as a model's tool calls are, the tool answers with a ``ToolMessage``:

- ``content`` is :func:`candor.consumer.model_text`: the summary on the first line (its words
  follow the class), then the outcome (its ``class`` and what that class carries) and the next
  actions as JSON;
- ``artifact`` is the envelope's JSON (``Envelope.from_dict(message.artifact)`` reads it back);
  it is not sent to the model;
- ``status`` is ``"error"`` for an AccessFailure and ``"success"`` for the other classes,
  Partial included.

An AccessFailure is therefore never an empty result: the model reads that the call failed and
that the source's contents are unknown, through the provider's error channel where it has one.
Invoked with bare arguments, the tool returns the content alone.
"""

from __future__ import annotations

import inspect
from contextvars import ContextVar
from typing import Any, cast

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool

from candor.consumer import model_text
from candor.envelope import AccessFailure
from candor.integrations._tools import EnvelopeFunction, checked

__all__ = ["EnvelopeTool", "envelope_tool"]

_TOOL_CALL_ID: ContextVar[str | None] = ContextVar("candor_langchain_tool_call_id", default=None)
"""The id of the tool call being run, while an :class:`EnvelopeTool` runs one."""


class EnvelopeTool(StructuredTool):
    """A ``StructuredTool`` whose function returns an :class:`~candor.Envelope`.

    Run for a tool call, it answers with a ``ToolMessage`` whose content is the summary and the
    outcome, whose artifact is the envelope's JSON, and whose status is ``"error"`` exactly for
    an AccessFailure. Build one with :func:`envelope_tool`.
    """

    def run(
        self,
        tool_input: str | dict[str, Any],
        *args: Any,
        tool_call_id: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """Runs the tool, as ``StructuredTool.run`` does, for the tool call ``tool_call_id``."""
        token = _TOOL_CALL_ID.set(tool_call_id)
        try:
            return super().run(tool_input, *args, tool_call_id=tool_call_id, **kwargs)
        finally:
            _TOOL_CALL_ID.reset(token)

    async def arun(
        self,
        tool_input: str | dict[str, Any],
        *args: Any,
        tool_call_id: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """Runs the tool, as ``StructuredTool.arun`` does, for the tool call ``tool_call_id``."""
        token = _TOOL_CALL_ID.set(tool_call_id)
        try:
            return await super().arun(tool_input, *args, tool_call_id=tool_call_id, **kwargs)
        finally:
            _TOOL_CALL_ID.reset(token)

    def _run(
        self,
        *args: Any,
        config: RunnableConfig,
        run_manager: CallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> Any:
        envelope = super()._run(*args, config=config, run_manager=run_manager, **kwargs)
        return self._output(envelope)

    async def _arun(
        self,
        *args: Any,
        config: RunnableConfig,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> Any:
        output = await super()._arun(*args, config=config, run_manager=run_manager, **kwargs)
        if self.coroutine is None:
            return output  # the function ran through _run, which made the output already
        return self._output(output)

    def _output(self, envelope: object) -> ToolMessage | str:
        """The message for a tool call's envelope, or its content outside a tool call."""
        envelope = checked(envelope, f"the function of the tool {self.name}")
        content = model_text(envelope)
        tool_call_id = _TOOL_CALL_ID.get()
        if tool_call_id is None:
            return content
        failed = isinstance(envelope.outcome, AccessFailure)
        return ToolMessage(
            content,
            artifact=envelope.to_dict(),
            tool_call_id=tool_call_id,
            name=self.name,
            status="error" if failed else "success",
        )


def envelope_tool(
    function: EnvelopeFunction,
    *,
    name: str | None = None,
    description: str | None = None,
    parse_docstring: bool = False,
) -> EnvelopeTool:
    """A LangChain tool that answers with the class and the summary of ``function``'s call.

    ``function`` (a plain or an ``async`` function) makes the call through a Candor adapter and
    returns the :class:`~candor.Envelope`; its parameters are the tool's arguments, its name
    and docstring the tool's name and description unless ``name`` and ``description`` are
    given. ``parse_docstring`` reads the arguments' descriptions from a Google-style docstring,
    as ``StructuredTool.from_function`` does.
    """
    if inspect.iscoroutinefunction(function):
        tool = EnvelopeTool.from_function(
            coroutine=function,
            name=name,
            description=description,
            parse_docstring=parse_docstring,
        )
    else:
        tool = EnvelopeTool.from_function(
            func=function,
            name=name,
            description=description,
            parse_docstring=parse_docstring,
        )
    return cast(EnvelopeTool, tool)
