"""The pydantic-ai integration: what the model was given, read from the requests a FunctionModel
received after it called the tool."""

from __future__ import annotations

import json

import pytest
from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from candor import Envelope
from candor.integrations.pydantic_ai import OnAccessFailure, envelope_tool

from .outcomes import OUTCOMES, answered, answered_async

FAILED_WORDS = ("FAILED", "The source's contents are unknown")


def search(query: str) -> Envelope:
    """Searches the catalogue.

    Args:
        query: what to search for; here, the class the call ends in.
    """
    return answered(OUTCOMES[query])


async def search_async(ctx: RunContext[None], query: str) -> Envelope:
    """Searches the catalogue, asynchronously."""
    return await answered_async(OUTCOMES[query])


class Model:
    """A model that calls one tool once, then answers; it keeps every request it received."""

    def __init__(self, tool: str, query: str) -> None:
        self.tool = tool
        self.query = query
        self.requests: list[ModelRequest] = []
        self.tools: list[AgentInfo] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        self.requests.append(last)
        self.tools.append(info)
        if len(self.requests) == 1:
            return ModelResponse(parts=[ToolCallPart(self.tool, {"query": self.query})])
        return ModelResponse(parts=[TextPart("done")])

    def given(self) -> ToolReturnPart:
        """The tool's result, as the model was given it."""
        [part] = [part for part in self.requests[-1].parts if isinstance(part, ToolReturnPart)]
        return part


def run(tool: Tool[None], query: str) -> Model:
    """Runs an agent whose model calls ``tool`` with ``query``."""
    model = Model(tool.name, query)
    agent = Agent(FunctionModel(model), tools=[tool])
    assert agent.run_sync("find cats").output == "done"
    return model


def assert_failure(text: str) -> None:
    """``text`` says that the call failed and that nothing can be concluded from it."""
    for words in FAILED_WORDS:
        assert words in text
    assert "catalogue.search" in text
    assert "s3cret" not in text


@pytest.mark.parametrize("name", ["success", "empty", "partial"])
@pytest.mark.parametrize("on_access_failure", ["fail", "retry", "return"])
def test_an_answer_reaches_the_model_with_its_class_and_summary(
    name: str, on_access_failure: OnAccessFailure
) -> None:
    part = run(envelope_tool(search, on_access_failure=on_access_failure), name).given()
    assert part.outcome == "success"
    content = part.content
    assert isinstance(content, dict)
    assert list(content) == ["summary", "outcome", "next_actions"]
    envelope = Envelope.from_dict(part.metadata)
    assert content["summary"] == envelope.summary()
    assert content["outcome"] == envelope.outcome.to_dict()
    assert content["outcome"]["class"] == name
    assert json.loads(part.model_response_str()) == content


def test_an_access_failure_reaches_the_model_as_a_failed_call() -> None:
    part = run(envelope_tool(search, on_access_failure="fail"), "access_failure").given()
    assert part.outcome == "failed"
    assert isinstance(part.content, str)
    summary, outcome = part.content.split("\n")
    assert_failure(summary)
    assert json.loads(outcome) == {
        "outcome": {
            "class": "access_failure",
            "failure": {
                "kind": "server_error",
                "retryable": True,
                "message": "HTTP 503: the catalogue is busy",
                "status": 503,
            },
        },
        "next_actions": ["retry", "escalate"],
    }
    assert_failure(part.model_response_str())


def test_an_access_failure_can_ask_the_model_to_retry() -> None:
    part = run(envelope_tool(search, on_access_failure="retry"), "access_failure").given()
    assert part.outcome == "retried"
    assert isinstance(part.content, str)
    assert_failure(part.content.split("\n")[0])
    assert '"class":"access_failure"' in part.content


def test_an_access_failure_can_be_returned_as_the_result() -> None:
    part = run(envelope_tool(search, on_access_failure="return"), "access_failure").given()
    assert part.outcome == "success"
    content = part.content
    assert isinstance(content, dict)
    assert_failure(content["summary"])
    assert content["outcome"]["class"] == "access_failure"
    assert "payload" not in content["outcome"]
    assert Envelope.from_dict(part.metadata).outcome_class.value == "access_failure"


@pytest.mark.parametrize("on_access_failure", ["fail", "retry", "return"])
def test_an_access_failure_is_never_an_empty_result(on_access_failure: OnAccessFailure) -> None:
    part = run(envelope_tool(search, on_access_failure=on_access_failure), "access_failure").given()
    assert part.content not in (None, "", [], {})
    assert_failure(part.model_response_str())
    assert "nothing matches" not in part.model_response_str()


def test_the_tool_is_the_functions() -> None:
    model = run(envelope_tool(search, on_access_failure="fail"), "success")
    [definition] = model.tools[0].function_tools
    assert definition.name == "search"
    assert definition.description == "Searches the catalogue."
    assert definition.parameters_json_schema == {
        "additionalProperties": False,
        "properties": {
            "query": {
                "description": "what to search for; here, the class the call ends in.",
                "type": "string",
            }
        },
        "required": ["query"],
        "type": "object",
    }


def test_an_async_function_that_takes_the_run_context_is_a_tool() -> None:
    tool = envelope_tool(
        search_async, on_access_failure="fail", name="find", description="Finds items."
    )
    model = run(tool, "access_failure")
    [definition] = model.tools[0].function_tools
    assert (definition.name, definition.description) == ("find", "Finds items.")
    assert list(definition.parameters_json_schema["properties"]) == ["query"]
    part = model.given()
    assert part.outcome == "failed"
    assert_failure(str(part.content))


def test_the_choice_for_an_access_failure_is_checked() -> None:
    with pytest.raises(ValueError, match="on_access_failure"):
        envelope_tool(search, on_access_failure="ignore")  # type: ignore[arg-type]


def test_a_function_that_returns_no_envelope_is_a_bug() -> None:
    def broken(query: str) -> Envelope:
        """Returns a list."""
        return []  # type: ignore[return-value]

    tool = envelope_tool(broken, on_access_failure="fail")
    with pytest.raises(TypeError, match="returned a list, not an Envelope"):
        tool.function("cats")  # type: ignore[arg-type]
