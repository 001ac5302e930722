"""A Python service whose call the end-to-end suite kills while it runs (tests/e2e/moment.rs).

Usage: killed_python.py ENDPOINT SERVICE URL [--follow]

Calls URL with GET through Candor's Python adapter and its httpx integration, reporting to the
collector at ENDPOINT through ``candor.otlp`` (metric interval 300 ms). The call makes up to
three attempts of up to 600 s each; with ``--follow`` it follows the operation the answer
accepts (a 202 naming its status URL). The suite's source answers so that the call never ends:
the process is killed while it runs, and what it reported before must already be stored.
"""

from __future__ import annotations

import sys
from datetime import timedelta

import httpx

from candor import Adapter, HttpClassifier, HttpExchange, NotFound, RetryPolicy, StatusUrl
from candor.integrations import httpx as candor_httpx
from candor.otlp import OtlpConfig, providers


def main() -> int:
    endpoint, service, url = sys.argv[1:4]
    follow = "--follow" in sys.argv[4:]
    telemetry = providers(
        OtlpConfig(endpoint, service, metric_interval=timedelta(milliseconds=300))
    )
    adapter: Adapter[HttpExchange] = Adapter(
        "probe",
        url,
        HttpClassifier(NotFound.UNREACHABLE),
        retry=RetryPolicy(max_attempts=3),
        attempt_timeout=timedelta(seconds=600),
        deadline=timedelta(seconds=1800),
        status_reader=StatusUrl() if follow else None,
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        logger_provider=telemetry.logger_provider,
    )
    with httpx.Client() as client:
        if follow:
            envelope = adapter.call_and_follow(
                lambda attempt: candor_httpx.request(client, "GET", url, attempt),
                lambda operation, attempt: candor_httpx.request(
                    client, "GET", operation.status_url or url, attempt
                ),
            )
        else:
            envelope = candor_httpx.call(adapter, client, "GET", url)
    print(envelope.outcome_class.value, flush=True)
    telemetry.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
