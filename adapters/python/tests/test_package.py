"""The package: its version, and what ``import candor`` loads."""

from __future__ import annotations

import gc
import importlib.metadata
import logging
import subprocess
import sys
import types
from pathlib import Path

import pytest

import candor
from candor import ADAPTER_VERSION, Adapter, FixedJitter, HttpClassifier, HttpResponse, NotFound
from candor.telemetry import MIRROR_LOGGER
from candor.testing import FakeClock

from .conftest import Telemetry


def test_the_version_is_the_distributions() -> None:
    assert importlib.metadata.version("candor-adapter") == candor.__version__
    assert f"candor-adapter-python/{candor.__version__}" == ADAPTER_VERSION


def test_import_candor_needs_no_client_library_and_no_sdk() -> None:
    blocked = ["httpx", "requests", "mcp", "pydantic_ai", "langchain_core", "opentelemetry.sdk"]
    script = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None\n"
        "import candor, candor.consumer, candor.testing, candor.mcp_result\n"
        "print(candor.__version__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_each_event_is_mirrored_in_the_log(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = Adapter(
        "search",
        "https://search.example",
        HttpClassifier(NotFound.UNREACHABLE),
        jitter=FixedJitter(0.0),
        clock=FakeClock(),
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
    )
    with caplog.at_level(logging.INFO, logger=MIRROR_LOGGER):
        adapter.call(lambda attempt: HttpResponse(503 if attempt.number == 1 else 401))
    assert [record.levelno for record in caplog.records] == [logging.INFO, logging.WARNING]
    assert "retrying" in caplog.records[0].getMessage()


def test_the_mirror_records_are_what_the_logger_makes(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = Adapter(
        "search",
        "https://search.example",
        HttpClassifier(NotFound.UNREACHABLE),
        jitter=FixedJitter(0.0),
        clock=FakeClock(),
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
    )
    with caplog.at_level(logging.INFO, logger=MIRROR_LOGGER):
        adapter.call(lambda attempt: HttpResponse(503 if attempt.number == 1 else 401))
    retried, ended = caplog.records
    fields = {
        "tool": "search",
        "tool_target": "https://search.example",
        "class": "access_failure",
        "kind": "auth",
        "action": "permanent",
        "attempt": 2,
        "status": 401,
    }
    assert ended.name == MIRROR_LOGGER
    assert ended.getMessage() == f"tool call ended without a complete answer: {fields}"
    assert ended.candor == fields  # type: ignore[attr-defined]
    assert retried.candor["action"] == "retry"  # type: ignore[attr-defined]
    assert retried.getMessage().startswith("tool attempt failed; retrying after ")
    for record in (retried, ended):
        # The caller is the adapter's function that logs, as Logger.warning would find it.
        assert record.funcName == "_mirror"
        assert record.pathname == candor.telemetry.__file__
        assert record.lineno > 0
        assert record.exc_info is None
        assert record.stack_info is None


def test_a_mirrored_call_leaves_no_frame_for_the_garbage_collector(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """The mirror reads its own frame without keeping it: the call's frames are freed at once.

    A frame kept by a variable of its own would be a reference cycle holding every frame of the
    call and all they hold (the envelope, the span) until the garbage collector ran.
    """
    adapter = Adapter(
        "search",
        "https://search.example",
        HttpClassifier(NotFound.UNREACHABLE),
        jitter=FixedJitter(0.0),
        clock=FakeClock(),
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
    )
    package = Path(candor.__file__).parent
    with caplog.at_level(logging.INFO, logger=MIRROR_LOGGER):
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            adapter.call(lambda attempt: HttpResponse(503 if attempt.number == 1 else 401))
            gc.collect()
            # The adapter's own frames: another thread's garbage is none of this test's.
            frames = [
                found.f_code.co_name
                for found in gc.garbage
                if isinstance(found, types.FrameType)
                and Path(found.f_code.co_filename).is_relative_to(package)
            ]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    assert len(caplog.records) == 2  # both events were mirrored
    assert frames == []
