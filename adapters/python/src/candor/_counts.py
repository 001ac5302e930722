"""The ``tool.outcomes`` counter and the ``candor.adapter.export_interval`` gauge.

``tool.outcomes`` is an observable counter over per-class totals: each meter provider gets one
instrument, whose callback reports four totals per tool and target, zeros included, and the
acceptances of each from the first one on. :class:`ExportHeartbeat` is the gauge that tells
Candor when an instance's next metric export is due.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Iterable
from typing import Final

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Counter, Meter, MeterProvider, Observation
from opentelemetry.util.types import AttributeValue

from candor import names
from candor._version import __version__
from candor.names import attr
from candor.vocab import LifecycleState, OutcomeClass

__all__ = ["ExportHeartbeat", "instruments"]

_CLASSES: Final = tuple(OutcomeClass)

Attributes = dict[str, AttributeValue]


class _Counts:
    """Calls of one tool and target by final class and its acceptances, with their attributes."""

    __slots__ = ("accepted", "accepted_attributes", "attributes", "totals")

    def __init__(self, tool: str, target: str) -> None:
        self.totals = dict.fromkeys(_CLASSES, 0)
        self.attributes: dict[OutcomeClass, Attributes] = {
            cls: {attr.TOOL_NAME: tool, attr.TOOL_TARGET: target, attr.OUTCOME_CLASS: cls.value}
            for cls in _CLASSES
        }
        self.accepted = 0
        self.accepted_attributes: Attributes = {
            attr.TOOL_NAME: tool,
            attr.TOOL_TARGET: target,
            attr.LIFECYCLE_STATE: LifecycleState.ACCEPTED.value,
        }


class _Instruments:
    """The instruments of one meter provider, shared by every adapter that reports to it.

    The totals are kept per tool and target, for as long as the provider: adapters of the same
    tool and target add to one series, and a call counted by an adapter that is gone is still
    reported.
    """

    def __init__(self, meter: Meter) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], _Counts] = {}
        self.unrecorded: Counter = meter.create_counter(
            names.UNRECORDED_SPANS_COUNTER,
            unit="{span}",
            description="Failure spans the host's sampler dropped",
        )
        meter.create_observable_counter(
            names.OUTCOMES_COUNTER,
            callbacks=[self._observe],
            unit=names.OUTCOMES_COUNTER_UNIT,
            description="Tool calls by final outcome class",
        )

    def counts(self, tool: str, target: str) -> _Counts:
        """The totals of ``tool`` at ``target``, reported from now on (zeros included)."""
        with self._lock:
            return self._counts.setdefault((tool, target), _Counts(tool, target))

    def add(self, counts: _Counts, cls: OutcomeClass) -> None:
        """Counts one call."""
        with self._lock:
            counts.totals[cls] += 1

    def add_accepted(self, counts: _Counts) -> None:
        """Counts one call whose answer accepted an operation: never as a success."""
        with self._lock:
            counts.accepted += 1

    def _observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            observations = [
                Observation(counts.totals[cls], counts.attributes[cls])
                for counts in self._counts.values()
                for cls in _CLASSES
            ]
            # Acceptances from the first one on.
            observations.extend(
                Observation(counts.accepted, counts.accepted_attributes)
                for counts in self._counts.values()
                if counts.accepted
            )
            return observations


_GLOBAL: Final = object()
_registry_lock = threading.Lock()
_registry: weakref.WeakKeyDictionary[object, _Instruments] = weakref.WeakKeyDictionary()
_global_instruments: list[_Instruments] = []


def instruments(provider: MeterProvider | None) -> _Instruments:
    """The instruments of ``provider`` (``None``: the global one), made on first use."""
    with _registry_lock:
        if provider is None or provider is metrics.get_meter_provider():
            if not _global_instruments:
                _global_instruments.append(
                    _Instruments(metrics.get_meter(names.ADAPTER_NAME, __version__))
                )
            return _global_instruments[0]
        instruments = _registry.get(provider)
        if instruments is None:
            instruments = _Instruments(provider.get_meter(names.ADAPTER_NAME, __version__))
            _registry[provider] = instruments
        return instruments


class ExportHeartbeat:
    """The gauge ``candor.adapter.export_interval`` of one meter provider (contract, 10.6).

    A host that sets up its own OpenTelemetry SDK makes one per meter provider, right after
    building it, with the interval of its periodic metric reader in seconds (the reader's
    ``export_interval_millis / 1000``). Every metric export then carries the gauge, without
    attributes, beside ``tool.outcomes``: the seconds until the next export, and 0 once
    :meth:`final` was called, so that the export at shutdown says that none follows. Without it,
    Candor cannot tell an instance that shut down from one that went silent, and answers about
    its targets turn partial after its last export.

    The gauge is registered on the meter of ``meter_provider`` (the global provider when
    ``None``) under this adapter's instrumentation scope, and lives as long as the provider. The
    SDK keeps the first instrument of a name: a second heartbeat on the same provider reports
    nothing, and its :meth:`final` changes nothing.

    Raises :class:`ValueError` unless ``interval_s`` is a finite number of seconds above 0.
    """

    def __init__(self, interval_s: float, *, meter_provider: MeterProvider | None = None) -> None:
        if (
            isinstance(interval_s, bool)
            or not isinstance(interval_s, int | float)
            or not (math.isfinite(interval_s) and interval_s > 0)
        ):
            raise ValueError(
                "the export interval must be a finite number of seconds above 0, "
                f"not {interval_s!r}"
            )
        self._interval_s = float(interval_s)
        # Set once by final(), on the thread that shuts down, and read by the callback on the
        # reader's thread: an Event is safe to share between them without relying on the GIL.
        self._final = threading.Event()
        meter = (
            metrics.get_meter(names.ADAPTER_NAME, __version__)
            if meter_provider is None
            else meter_provider.get_meter(names.ADAPTER_NAME, __version__)
        )
        meter.create_observable_gauge(
            names.EXPORT_INTERVAL_GAUGE,
            callbacks=[self._observe],
            unit=names.EXPORT_INTERVAL_GAUGE_UNIT,
            description="Seconds until this instance's next metric export; 0 in its last",
        )

    @property
    def interval_s(self) -> float:
        """The seconds between two metric exports, as reported until :meth:`final`."""
        return self._interval_s

    def final(self) -> None:
        """From now on the gauge reports 0: no export follows the next one.

        Call right before ``meter_provider.shutdown()``: the SDK's shutdown collects once more,
        and that export then says no export follows. Calling it again changes nothing; calling
        it without shutting down makes every later export say the instance stopped.
        """
        self._final.set()

    def _observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(0.0 if self._final.is_set() else self._interval_s)]
