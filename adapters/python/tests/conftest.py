"""Shared fixtures: in-memory OpenTelemetry, and a real HTTP server on the loopback."""

from __future__ import annotations

import gzip
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from candor.names import OUTCOMES_COUNTER

STALLED_BODY = b'{"items":[1,2,'
"""What ``/stall`` sends of the 28 bytes its ``Content-Length`` declares before it stalls."""


@dataclass
class Telemetry:
    """In-memory providers and what they recorded."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    logger_provider: LoggerProvider
    logs: InMemoryLogRecordExporter

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def log_records(self) -> list[ReadableLogRecord]:
        """The log records emitted so far, in order."""
        return list(self.logs.get_finished_logs())

    def metric_points(self, name: str) -> dict[tuple[tuple[str, Any], ...], int | float]:
        """Every data point of the metric ``name``, by its sorted attributes."""
        points: dict[tuple[tuple[str, Any], ...], int | float] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            key = tuple(sorted((point.attributes or {}).items()))
                            points[key] = point.value  # type: ignore[union-attr]
        return points

    def outcomes(self) -> dict[str, int | float]:
        """``tool.outcomes`` by class (for tests with one tool)."""
        return {
            dict(key)["tool.outcome.class"]: value
            for key, value in self.metric_points(OUTCOMES_COUNTER).items()
        }


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    yield Telemetry(tracer_provider, meter_provider, exporter, reader, logger_provider, logs)
    tracer_provider.shutdown()
    meter_provider.shutdown()
    logger_provider.shutdown()


@dataclass
class Server:
    """A real HTTP server on the loopback, answering by path (see :class:`Handler`)."""

    httpd: ThreadingHTTPServer
    release: threading.Event = field(default_factory=threading.Event)
    hits: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    idempotency_keys: list[str | None] = field(default_factory=list)
    """The ``Idempotency-Key`` each ``POST /orders`` carried, in arrival order."""

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def hit(self, path: str) -> int:
        with self.lock:
            self.hits[path] = self.hits.get(path, 0) + 1
            return self.hits[path]


class Handler(BaseHTTPRequestHandler):
    """Answers by path:

    - ``/items``: 200 with two items and a request id; ``/none``: 200 with no items;
    - ``/auth``: 401; ``/error``: 500; ``/flaky``: 503 the first time, then 200;
    - ``/truncated``: declares 100 bytes, sends 14 and closes; ``/big``: 200 with 4 KiB;
    - ``/gzip``: a gzip-encoded answer; ``/hang``: answers when the test ends;
    - ``/stall``: a 200's head and half its body (:data:`STALLED_BODY`), then nothing until the
      test ends; ``/trickle``: a 200's head, then a byte of its body every 20 ms;
    - ``/disconnect``: closes without answering; ``/garbage``: answers with no HTTP;
    - ``POST /exports``: 202, accepted with the status URL ``/operations/1``, which reads as
      running the first time, then as succeeded;
    - ``POST /orders``: takes the order (and its ``Idempotency-Key``), then answers 500 the
      first time and 200 after.
    """

    server: ThreadingHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def state(self) -> Server:
        return self.server.state  # type: ignore[attr-defined, no-any-return]

    def send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        count = self.state.hit(path)
        json_type = {"Content-Type": "application/json"}
        if path == "/items":
            self.send(200, b'{"items":[1,2]}', {**json_type, "X-Request-Id": "req-42"})
        elif path == "/none":
            self.send(200, b'{"items":[]}', json_type)
        elif path == "/auth":
            self.send(401, b'{"error":"bad token=s3cret"}', json_type)
        elif path == "/error":
            self.send(500, b"boom")
        elif path == "/flaky":
            if count == 1:
                self.send(503, b"busy", {"Retry-After": "0"})
            else:
                self.send(200, b'{"items":[3]}', json_type)
        elif path == "/truncated":
            self.send(200, b'{"items":[1,2,', {**json_type, "Content-Length": "100"})
            self.close_connection = True
        elif path == "/big":
            self.send(200, json.dumps({"items": ["x" * 64] * 60}).encode(), json_type)
        elif path == "/gzip":
            body = gzip.compress(b'{"items":[1,2,3]}')
            self.send(200, body, {**json_type, "Content-Encoding": "gzip"})
        elif path == "/hang":
            self.state.release.wait(30)
            self.send(200, b'{"items":[]}', json_type)
        elif path == "/stall":
            self.send(200, STALLED_BODY, {**json_type, "Content-Length": "28"})
            self.state.release.wait(30)
            self.close_connection = True
        elif path == "/trickle":
            self.trickle()
        elif path == "/disconnect":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif path == "/garbage":
            self.wfile.write(b"this is not http\r\n\r\n")
            self.close_connection = True
        elif path == "/operations/1":
            state = "Running" if count == 1 else "Succeeded"
            self.send(200, json.dumps({"status": state}).encode(), json_type)
        else:
            self.send(404, b"no such path")

    def trickle(self) -> None:
        """A 200 whose body comes a byte at a time, until the client goes or the test ends."""
        self.send(200, b"[", {"Content-Type": "application/json", "Content-Length": "10000"})
        self.close_connection = True
        while not self.state.release.wait(0.02):
            try:
                self.wfile.write(b"1")
            except OSError:
                return

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        self.state.hit(path)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if path == "/exports":
            status_url = f"{self.state.url}/operations/1"
            self.send(202, b"", {"Operation-Location": status_url})
        elif path == "/orders":
            with self.state.lock:
                self.state.idempotency_keys.append(self.headers.get("Idempotency-Key"))
                taken = len(self.state.idempotency_keys)
            if taken == 1:
                self.send(500, b"applied, then failed to answer")
            else:
                self.send(200, b'{"items":[1]}', {"Content-Type": "application/json"})
        else:
            self.send(404, b"no such path")


@pytest.fixture
def server() -> Iterator[Server]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state = Server(httpd)
    httpd.state = state  # type: ignore[attr-defined]
    # A short poll interval makes shutdown() return quickly; nothing waits on it otherwise.
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield state
    state.release.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
