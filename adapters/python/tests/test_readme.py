"""The README's examples run, against the local server instead of the example host."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from candor import Envelope, LifecycleState, OutcomeClass, SystemClock

from .conftest import Server

README = Path(__file__).parent.parent / "README.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def test_the_first_example_runs(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    example = blocks()[0]
    assert len(example.strip().splitlines()) <= 15
    code = example.replace("https://search.example/v1/items", server.url + "/items")
    exec(compile(code, str(README), "exec"), {})  # noqa: S102 - the README's own code
    assert '"class":"success"' in capsys.readouterr().out


def test_the_other_examples_run(
    server: Server, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    # Following an operation waits between status reads; the test does not.
    slept: list[int] = []
    monkeypatch.setattr(SystemClock, "sleep", lambda self, ns: slept.append(ns))
    setup = blocks()[0].replace("https://search.example/v1/items", server.url + "/items")
    with httpx.Client() as client:
        scope = {"client": client, "url": server.url + "/items"}
        exec(compile(setup, str(README), "exec"), scope)  # noqa: S102
        for example in blocks()[1:]:
            scope["client"] = client  # the first example closed its own
            code = example.replace("https://exports.example/v1/exports", server.url + "/exports")
            exec(compile(code, str(README), "exec"), scope)  # noqa: S102
            envelope = scope["envelope"]
            assert isinstance(envelope, Envelope)
            assert envelope.outcome_class is OutcomeClass.SUCCESS
    # The consumer's side: the match took the success arm, and the tool call was answered.
    assert scope["reply"] == "found 2 item(s)"
    message = scope["message"]
    assert isinstance(message, ToolMessage)
    assert message.status == "success"
    assert str(message.content).startswith("search: complete answer from ")
    # The last example followed the export through two status reads to its completion.
    followed = scope["envelope"]
    assert isinstance(followed, Envelope)
    assert followed.lifecycle is not None
    assert followed.lifecycle.state is LifecycleState.COMPLETED
    assert len(slept) == 2


def test_the_projects_readme_example_runs(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = Path(__file__).parents[3] / "README.md"
    (example,) = re.findall(r"```python\n(.*?)```", readme.read_text(encoding="utf-8"), re.DOTALL)
    code = example.replace("http://search.internal/v1/items", server.url + "/items")
    exec(compile(code, str(readme), "exec"), {})  # noqa: S102 - the README's own code
    assert '"class":"success"' in capsys.readouterr().out
