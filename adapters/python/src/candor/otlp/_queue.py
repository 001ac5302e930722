"""The queue between the exporters and the collector.

Batches are kept and sent in order, sent again after a refusal, within bounds, and every one
ends counted in :class:`ExportStats`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, Literal

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, set_value

from candor.retry import Jitter, RandomJitter

_log = logging.getLogger("candor.otlp")

_SHUTDOWN_TIMEOUT: Final = timedelta(seconds=5)
"""How long shutdown waits for the queue to be sent, by default."""


@dataclass(frozen=True, slots=True)
class ResendConfig:
    """How batches the collector could not take are kept and sent again."""

    enabled: bool = True
    """Whether a refused batch is sent again. Off, a batch refused once is lost and counted, as
    a plain OTLP exporter does."""
    max_age: timedelta = timedelta(minutes=10)
    """The oldest a batch may grow before it is given up."""
    max_batches: int = 4096
    """The most batches kept (ten minutes of a service exporting a span batch and a log batch
    every 500 ms and counters every 10 s, more than once over); at least 1."""
    max_bytes: int = 64 << 20
    """The most bytes kept, by each batch's estimated encoded size."""
    initial_backoff: timedelta = timedelta(milliseconds=250)
    """The first wait before a batch is sent again; it doubles after each refusal up to
    :attr:`max_backoff`, and each wait is drawn between half of it and all of it."""
    max_backoff: timedelta = timedelta(seconds=10)
    """The longest wait between two sends."""
    attempt_timeout: timedelta = timedelta(seconds=10)
    """The longest one send may take, connecting included: the OTLP exporter's ``timeout``,
    within which it makes its own attempts."""

    @classmethod
    def off(cls) -> ResendConfig:
        """No resending: a refused batch is lost and counted."""
        return cls(enabled=False)


@dataclass(frozen=True, slots=True)
class ExportStats:
    """What the exporters have done so far."""

    sent_batches: int = 0
    """Batches the collector took (span batches, log batches and metric exports)."""
    sent_spans: int = 0
    """Spans in the span batches the collector took."""
    refused_sends: int = 0
    """Sends that were refused for now and left their batch queued to be sent again."""
    dropped_span_batches: int = 0
    """Span batches dropped unsent: the queue was full, the batch grew older than ``max_age``,
    or shutdown's deadline passed."""
    dropped_metric_batches: int = 0
    """Metric exports dropped unsent, for the same reasons."""
    rejected_batches: int = 0
    """Batches refused for good: refused while resending is off, or whose send raised."""
    lost_spans: int = 0
    """Spans in every span batch dropped or rejected: spans lost before the collector."""
    queued_batches: int = 0
    """Batches waiting to be sent now, the one being sent included."""
    queued_bytes: int = 0
    """Estimated encoded bytes waiting to be sent now, the batch being sent included."""
    sent_log_records: int = 0
    """Log records (events recorded at the moment they happened) in the log batches the
    collector took."""
    dropped_log_batches: int = 0
    """Log batches dropped unsent, for the same reasons as span batches."""
    lost_log_records: int = 0
    """Log records in every log batch dropped or rejected."""

    def __str__(self) -> str:
        return (
            f"{self.sent_batches} batches sent ({self.sent_spans} spans, "
            f"{self.sent_log_records} log records), "
            f"{self.refused_sends} sends refused and kept to send again, "
            f"{self.queued_batches} batches queued ({self.queued_bytes} bytes), "
            f"{self.dropped_span_batches} span batches, {self.dropped_log_batches} log batches "
            f"and {self.dropped_metric_batches} metric exports dropped, "
            f"{self.rejected_batches} batches rejected: {self.lost_spans} spans and "
            f"{self.lost_log_records} log records lost"
        )


_Kind = Literal["spans", "log records", "metrics"]
"""What a batch holds."""


@dataclass(slots=True, eq=False)
class _Batch:
    """One export handed over by the SDK, and how to send it through the inner exporter."""

    send: Callable[[], bool]
    """Sends it once: true when the collector took it, false when it was refused; raises when
    it cannot be sent at all."""
    kind: _Kind
    """What it holds."""
    items: int
    """How many spans or log records it holds; 0 for a metric export."""
    size: int
    """Its estimated encoded size in bytes."""
    queued_at: float
    """When it was queued, on the monotonic clock."""


class _Backoff:
    """Exponential backoff with equal jitter: each wait is between half of its step and all."""

    def __init__(self, config: ResendConfig, jitter: Jitter) -> None:
        self._initial = config.initial_backoff.total_seconds()
        self._max = max(config.max_backoff.total_seconds(), self._initial)
        self._next = self._initial
        self._jitter = jitter

    def delay(self) -> float:
        base = self._next
        self._next = min(self._next * 2, self._max)
        return base / 2 + base * self._jitter.next_fraction() / 2

    def reset(self) -> None:
        self._next = self._initial


class Resender:
    """The queue between exporters and the collector, with the thread that sends it in order.

    The exporters of one service share one resender (:func:`providers` makes it): its bounds
    hold for spans, log records and counters together, and its :meth:`stats` count them all. A
    batch whose send is refused goes back to the head of the queue and is sent again after a
    backoff; past ``max_batches`` or ``max_bytes`` the oldest batch is dropped, and a batch
    older than ``max_age`` is given up. The sender thread starts here and ends at
    :meth:`close`; it is a daemon thread, so a process that never closes it exits without
    sending what is queued.

    ``jitter`` draws where each backoff falls between half of its step and all of it (default:
    :class:`~candor.retry.RandomJitter`).
    """

    def __init__(self, config: ResendConfig | None = None, *, jitter: Jitter | None = None) -> None:
        self._config = ResendConfig() if config is None else config
        self._max_age = self._config.max_age.total_seconds()
        self._max_batches = max(self._config.max_batches, 1)
        self._max_bytes = self._config.max_bytes
        self._jitter: Jitter = RandomJitter() if jitter is None else jitter
        self._changed = threading.Condition()
        self._queue: deque[_Batch] = deque()
        self._bytes = 0
        # The last send was refused and the collector has not taken a batch since.
        self._backing_off = False
        # The batch the sender took from the queue and is sending, if any.
        self._sending: _Batch | None = None
        # Set by close(): the sender ends when the queue is empty or at this instant.
        self._closing_at: float | None = None
        # The sender thread has ended; batches handed over now are dropped.
        self._finished = False
        self._sent_batches = 0
        self._sent_spans = 0
        self._refused_sends = 0
        self._dropped_span_batches = 0
        self._dropped_metric_batches = 0
        self._rejected_batches = 0
        self._lost_spans = 0
        self._sent_log_records = 0
        self._dropped_log_batches = 0
        self._lost_log_records = 0
        self._thread = threading.Thread(
            target=self._send_in_order, name="candor-otlp-sender", daemon=True
        )
        self._thread.start()

    @property
    def config(self) -> ResendConfig:
        """How batches are kept and sent again."""
        return self._config

    def submit(
        self,
        send: Callable[[], bool],
        *,
        spans: int | None = None,
        log_records: int | None = None,
        size: int,
    ) -> bool:
        """Queues a batch and returns at once; false when the resender is closed.

        ``send`` sends the batch once and says whether the collector took it (it raises when the
        batch cannot be sent at all); ``spans`` is how many spans a span batch holds,
        ``log_records`` how many log records a log batch holds (neither for a metric export),
        and ``size`` its estimated encoded size in bytes. A batch handed over after the sender
        ended is dropped and counted. Raises :class:`ValueError` when given both ``spans`` and
        ``log_records``.
        """
        if spans is not None and log_records is not None:
            raise ValueError("a batch holds spans or log records, not both")
        kind: _Kind
        if spans is not None:
            kind, items = "spans", spans
        elif log_records is not None:
            kind, items = "log records", log_records
        else:
            kind, items = "metrics", 0
        batch = _Batch(send, kind, items, size, time.monotonic())
        with self._changed:
            if self._finished:
                self._drop([batch], "the exporter was shut down")
                return False
            self._queue.append(batch)
            self._bytes += batch.size
            self._drop(self._evict(), "the resend queue is full")
            self._changed.notify_all()
            return True

    def drained(self, timeout_s: float) -> bool:
        """Waits up to ``timeout_s`` seconds for every queued batch to be sent.

        Returns true once nothing is queued or being sent, and false at the timeout, or at once
        while the collector is away (a refused batch waits for its backoff) or after
        :meth:`close`.
        """
        deadline = time.monotonic() + max(timeout_s, 0.0)
        with self._changed:
            while True:
                if not self._queue and self._sending is None:
                    return True
                now = time.monotonic()
                if self._backing_off or self._finished or now >= deadline:
                    return False
                self._changed.wait(deadline - now)

    def close(self, timeout_s: float) -> bool:
        """Sends what is queued for up to ``timeout_s`` seconds, then ends the sender thread.

        What is still queued at the deadline is dropped and counted; a send in flight then is
        given the attempt timeout to end. Returns true when nothing was dropped and nothing is
        left queued. Closing again only shortens the deadline.
        """
        before = self.stats()
        closing_at = time.monotonic() + max(timeout_s, 0.0)
        give_up = closing_at + self._config.attempt_timeout.total_seconds()
        with self._changed:
            if self._closing_at is None or closing_at < self._closing_at:
                self._closing_at = closing_at
            self._changed.notify_all()
            while not self._finished:
                now = time.monotonic()
                if now >= give_up:
                    break
                self._changed.wait(give_up - now)
        after = self.stats()
        return (
            after.dropped_span_batches == before.dropped_span_batches
            and after.dropped_metric_batches == before.dropped_metric_batches
            and after.queued_batches == 0
        )

    def stats(self) -> ExportStats:
        """The counts so far, and what is queued now."""
        with self._changed:
            sending = self._sending
            return ExportStats(
                sent_batches=self._sent_batches,
                sent_spans=self._sent_spans,
                refused_sends=self._refused_sends,
                dropped_span_batches=self._dropped_span_batches,
                dropped_metric_batches=self._dropped_metric_batches,
                rejected_batches=self._rejected_batches,
                lost_spans=self._lost_spans,
                sent_log_records=self._sent_log_records,
                dropped_log_batches=self._dropped_log_batches,
                lost_log_records=self._lost_log_records,
                queued_batches=len(self._queue) + (sending is not None),
                queued_bytes=self._bytes + (0 if sending is None else sending.size),
            )

    # What follows runs with the lock held, but for the sender thread's own loop.

    def _evict(self) -> list[_Batch]:
        """Removes the oldest batches that no longer fit within the bounds."""
        evicted: list[_Batch] = []
        while self._queue and (
            len(self._queue) > self._max_batches or self._bytes > self._max_bytes
        ):
            evicted.append(self._pop())
        return evicted

    def _pop(self) -> _Batch:
        batch = self._queue.popleft()
        self._bytes -= batch.size
        return batch

    def _drop(self, batches: list[_Batch], why: str) -> None:
        """Counts batches that leave unsent."""
        for batch in batches:
            if batch.kind == "spans":
                self._dropped_span_batches += 1
            elif batch.kind == "log records":
                self._dropped_log_batches += 1
            else:
                self._dropped_metric_batches += 1
            self._lose(batch)
            _log.warning(
                "candor: a telemetry batch (%s) was dropped before the collector: %s",
                "metrics" if batch.kind == "metrics" else f"{batch.items} {batch.kind}",
                why,
            )

    def _lose(self, batch: _Batch) -> None:
        """Counts the spans or log records of a batch that will never reach the collector."""
        if batch.kind == "spans":
            self._lost_spans += batch.items
        elif batch.kind == "log records":
            self._lost_log_records += batch.items

    def _next_batch(self) -> _Batch | None:
        """The next batch to send, waiting for one; ``None`` when the sender should end."""
        with self._changed:
            while True:
                now = time.monotonic()
                # Batches are queued in time order, and one put back was queued before all
                # others: the expired ones are at the head.
                expired: list[_Batch] = []
                while self._queue and self._queue[0].queued_at < now - self._max_age:
                    expired.append(self._pop())
                self._drop(expired, "older than the resend queue's max_age")
                closing_at = self._closing_at
                if closing_at is not None and now >= closing_at:
                    left = list(self._queue)
                    self._queue.clear()
                    self._bytes = 0
                    self._drop(left, "shutdown's deadline passed")
                if self._queue:
                    self._sending = self._pop()
                    return self._sending
                if closing_at is not None:
                    self._finished = True
                    self._changed.notify_all()
                    return None
                self._changed.wait(max(self._max_age, 1.0))

    def _delivered(self, batch: _Batch) -> None:
        with self._changed:
            self._sent_batches += 1
            if batch.kind == "spans":
                self._sent_spans += batch.items
            elif batch.kind == "log records":
                self._sent_log_records += batch.items
            if self._backing_off:
                _log.info(
                    "candor: the collector takes telemetry again (%d batches queued)",
                    len(self._queue),
                )
            self._backing_off = False
            self._sending = None
            self._changed.notify_all()

    def _rejected(self, batch: _Batch, reason: str) -> None:
        with self._changed:
            self._rejected_batches += 1
            self._lose(batch)
            _log.warning("candor: a telemetry batch was rejected: %s", reason)
            self._sending = None
            self._changed.notify_all()

    def _refused(self, batch: _Batch, delay: float) -> None:
        """Puts a refused batch back at the head and waits ``delay`` or until the deadline."""
        with self._changed:
            self._refused_sends += 1
            if not self._backing_off:
                _log.warning(
                    "candor: the collector cannot take telemetry now; batches are kept and "
                    "sent again"
                )
            self._backing_off = True
            self._sending = None
            self._queue.appendleft(batch)
            self._bytes += batch.size
            self._drop(self._evict(), "the resend queue is full")
            self._changed.notify_all()
            until = time.monotonic() + delay
            while True:
                now = time.monotonic()
                closing_at = self._closing_at
                end = until if closing_at is None else min(until, closing_at)
                if now >= end:
                    return
                self._changed.wait(end - now)

    def _send_in_order(self) -> None:
        """The sender thread: one batch at a time, in order."""
        # What the inner exporters do (a gRPC call) is not itself traced, as the SDK's own
        # export threads ensure.
        attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        backoff = _Backoff(self._config, self._jitter)
        while (batch := self._next_batch()) is not None:
            try:
                taken = batch.send()
            except Exception as error:  # noqa: BLE001 - counted; the sender goes on
                self._rejected(batch, f"its export raised {error!r}")
                continue
            if taken:
                backoff.reset()
                self._delivered(batch)
            elif self._config.enabled:
                self._refused(batch, backoff.delay())
            else:
                self._rejected(batch, "the collector refused it and resending is off")
