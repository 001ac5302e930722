// A Node service that calls a scripted HTTP tool through Candor's TypeScript adapter.
//
// The adapter (`@candor/adapter`, this checkout's adapters/typescript, built) reports through the
// official OpenTelemetry JS SDK, which exports OTLP/HTTP (protobuf) to the collector under test.
// Reads a JSON spec on stdin, written by the Rust end-to-end suite (which owns every wire name
// and script), the same as tests/e2e/clients/adapter_service.py reads:
//   {"endpoint": "http://127.0.0.1:PORT", "resource": {...}, "tool": "...", "target": "...",
//    "max_attempts": n, "jitter": fraction, "items_at": "/pointer", "total_at": "/pointer",
//    "calls": [[{"status": n, "body": "..."}, ...], ...]}
// Each call answers its attempts with its responses in order. Prints {"classes": [...]}, the
// class of every call. Exits 1 when a flush did not finish.

import { readFileSync } from 'node:fs';

import { Adapter, ExportHeartbeat, FixedJitter, HttpClassifier, HttpResponse } from '@candor/adapter';
import { OTLPLogExporter } from '@opentelemetry/exporter-logs-otlp-proto';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchLogRecordProcessor, LoggerProvider } from '@opentelemetry/sdk-logs';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';

/** The periodic metric reader's interval, which the export heartbeat reports. */
const EXPORT_INTERVAL_MILLIS = 500;

const spec = JSON.parse(readFileSync(0, 'utf8'));
const resource = resourceFromAttributes(spec.resource);
const tracerProvider = new BasicTracerProvider({
  resource,
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: `${spec.endpoint}/v1/traces` }))],
});
const loggerProvider = new LoggerProvider({
  resource,
  processors: [new BatchLogRecordProcessor({ exporter: new OTLPLogExporter({ url: `${spec.endpoint}/v1/logs` }) })],
});
const meterProvider = new MeterProvider({
  resource,
  readers: [
    new PeriodicExportingMetricReader({
      exporter: new OTLPMetricExporter({ url: `${spec.endpoint}/v1/metrics` }),
      exportIntervalMillis: EXPORT_INTERVAL_MILLIS,
    }),
  ],
});
// candor.adapter.export_interval in every export: the seconds until the next one, and 0 in the
// one at shutdown, so that the collector reads this instance as stopped, not silent.
const heartbeat = new ExportHeartbeat(EXPORT_INTERVAL_MILLIS / 1000, meterProvider);
const adapter = new Adapter({
  tool: spec.tool,
  target: spec.target,
  classifier: new HttpClassifier({ notFound: 'unreachable', itemsAt: spec.items_at, totalAt: spec.total_at }),
  retry: { maxAttempts: spec.max_attempts },
  jitter: new FixedJitter(spec.jitter),
  tracerProvider,
  meterProvider,
  loggerProvider,
});

const classes = [];
for (const script of spec.calls) {
  const responses = [...script];
  const envelope = await adapter.call(() => {
    const response = responses.shift();
    return new HttpResponse({ status: response.status, body: response.body });
  });
  classes.push(envelope.outcome.class);
}

let flushed = true;
for (const provider of [tracerProvider, loggerProvider, meterProvider]) {
  try {
    await provider.forceFlush();
  } catch (error) {
    flushed = false;
    console.error(`an export failed: ${error}`);
  }
}
// The shutdown collects once more: that last export says no export follows.
heartbeat.final();
await meterProvider.shutdown();
await loggerProvider.shutdown();
await tracerProvider.shutdown();
console.log(JSON.stringify({ classes }));
process.exit(flushed ? 0 : 1);
