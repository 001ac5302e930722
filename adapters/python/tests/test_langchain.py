"""The LangChain integration: the ToolMessage a tool call is answered with, and what a chat model
is given in the conversation that follows."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import tool_call
from langchain_core.outputs import ChatResult
from pydantic import Field

from candor import Envelope
from candor.integrations.langchain import EnvelopeTool, envelope_tool

from .outcomes import OUTCOMES, answered, answered_async


def search(query: str) -> Envelope:
    """Searches the catalogue; the query names the class the call ends in."""
    return answered(OUTCOMES[query])


async def search_async(query: str) -> Envelope:
    """Searches the catalogue asynchronously."""
    return await answered_async(OUTCOMES[query])


def call(name: str, query: str) -> dict[str, Any]:
    """A model's tool call ``call-1``, as a tool is invoked with it."""
    return dict(tool_call(name=name, args={"query": query}, id="call-1"))


def message(tool: EnvelopeTool, query: str) -> ToolMessage:
    answer = tool.invoke(call(tool.name, query))
    assert isinstance(answer, ToolMessage)
    return answer


def assert_answers(answer: ToolMessage, name: str) -> None:
    """``answer`` carries the call's summary and outcome, and the status its class has."""
    assert answer.tool_call_id == "call-1"
    assert answer.status == ("error" if name == "access_failure" else "success")
    envelope = Envelope.from_dict(answer.artifact)
    assert envelope.outcome_class.value == name
    assert isinstance(answer.content, str)
    summary, outcome = answer.content.split("\n")
    assert summary == envelope.summary()
    assert json.loads(outcome) == {
        "outcome": envelope.outcome.to_dict(),
        "next_actions": [action.value for action in envelope.next_actions],
    }


@pytest.mark.parametrize("name", OUTCOMES)
def test_a_tool_call_is_answered_with_the_class_and_the_summary(name: str) -> None:
    assert_answers(message(envelope_tool(search), name), name)


def test_an_access_failure_is_an_error_message() -> None:
    answer = message(envelope_tool(search), "access_failure")
    assert answer.status == "error"
    assert isinstance(answer.content, str)
    assert answer.content.startswith(
        "catalogue.search: FAILED to get an answer from "
        "https://catalogue.example/v1/items?api_key=REDACTED "
        "(server_error, HTTP 503, exhausted after 3 attempt(s)): HTTP 503: the catalogue is busy."
        " The source's contents are unknown; nothing can be concluded from this call.\n"
    )
    assert '"class":"access_failure"' in answer.content


@pytest.mark.parametrize("name", OUTCOMES)
def test_an_async_function_answers_the_same(name: str) -> None:
    tool = envelope_tool(search_async)
    answer = asyncio.run(tool.ainvoke(call(tool.name, name)))
    assert isinstance(answer, ToolMessage)
    assert_answers(answer, name)


def test_a_plain_function_answers_the_same_when_awaited() -> None:
    tool = envelope_tool(search)
    answer = asyncio.run(tool.ainvoke(call(tool.name, "access_failure")))
    assert isinstance(answer, ToolMessage)
    assert_answers(answer, "access_failure")
    direct = asyncio.run(tool.arun({"query": "access_failure"}, tool_call_id="call-1"))
    assert isinstance(direct, ToolMessage)
    assert_answers(direct, "access_failure")


def test_without_a_tool_call_the_tool_answers_with_the_content() -> None:
    text = envelope_tool(search).invoke({"query": "access_failure"})
    assert isinstance(text, str)
    assert text.startswith("catalogue.search: FAILED to get an answer")


def test_the_tool_is_the_functions() -> None:
    tool = envelope_tool(search)
    assert tool.name == "search"
    assert tool.description == "Searches the catalogue; the query names the class the call ends in."
    assert tool.args == {"query": {"title": "Query", "type": "string"}}
    named = envelope_tool(search_async, name="find", description="Finds items.")
    assert (named.name, named.description) == ("find", "Finds items.")


def test_a_function_that_returns_no_envelope_is_a_bug() -> None:
    def broken(query: str) -> Envelope:
        """Returns a list."""
        return []  # type: ignore[return-value]

    with pytest.raises(TypeError, match="returned a list, not an Envelope"):
        envelope_tool(broken).invoke(call("broken", "cats"))


class RecordingChatModel(FakeMessagesListChatModel):
    """A fake chat model that keeps the messages it was given."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.received.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_the_model_is_given_the_failure() -> None:
    tool = envelope_tool(search)
    model = RecordingChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[
                    tool_call(name="search", args={"query": "access_failure"}, id="call-1")
                ],
            ),
            AIMessage("The catalogue could not be searched."),
        ]
    )
    messages: list[BaseMessage] = [HumanMessage("find cats")]
    reply = model.invoke(messages)
    assert isinstance(reply, AIMessage)
    messages.append(reply)
    for requested in reply.tool_calls:
        messages.append(tool.invoke({**requested, "type": "tool_call"}))
    model.invoke(messages)
    given = model.received[-1][-1]
    assert isinstance(given, ToolMessage)
    assert given.status == "error"
    assert isinstance(given.content, str)
    assert given.content.startswith("catalogue.search: FAILED to get an answer")
    assert "The source's contents are unknown" in given.content
    assert given.content not in ("", "[]")
