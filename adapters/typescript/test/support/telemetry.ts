/**
 * An OpenTelemetry SDK set up in memory for one test: spans, metrics and log records are kept
 * where the test can read them.
 */

import { type Attributes, type HrTime, SpanKind, SpanStatusCode, ValueType } from "@opentelemetry/api";
import {
  InMemoryLogRecordExporter,
  LoggerProvider,
  type ReadableLogRecord,
  SimpleLogRecordProcessor,
} from "@opentelemetry/sdk-logs";
import {
  type CollectionResult,
  DataPointType,
  MeterProvider,
  MetricReader,
} from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  type Sampler,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

import { formatTimestamp, type JsonValue } from "../../src/index.js";

/** A metric reader that collects when asked. */
export class CollectingReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {
    // Nothing is buffered.
  }

  protected override async onShutdown(): Promise<void> {
    // Nothing to release.
  }
}

/** One data point of a sum or a gauge, as a test reads it. */
export interface Point {
  readonly name: string;
  readonly unit: string;
  readonly scope: string;
  readonly kind: "sum" | "gauge" | "other";
  readonly monotonic: boolean;
  /** Whether the instrument records integers (an OTLP `as_int` point). */
  readonly integer: boolean;
  readonly attributes: Record<string, JsonValue>;
  readonly value: number;
}

/** An in-memory OpenTelemetry SDK. */
export class MemoryTelemetry {
  readonly spans = new InMemorySpanExporter();
  readonly tracerProvider: BasicTracerProvider;
  readonly reader = new CollectingReader();
  readonly meterProvider: MeterProvider;
  readonly logs = new InMemoryLogRecordExporter();
  readonly loggerProvider: LoggerProvider;

  constructor(sampler?: Sampler) {
    this.tracerProvider = new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(this.spans)],
      ...(sampler === undefined ? {} : { sampler }),
    });
    this.meterProvider = new MeterProvider({ readers: [this.reader] });
    this.loggerProvider = new LoggerProvider({ processors: [new SimpleLogRecordProcessor({ exporter: this.logs })] });
  }

  /** The finished spans, in the order they ended. */
  finishedSpans(): ReadableSpan[] {
    return this.spans.getFinishedSpans();
  }

  /** The log records emitted. */
  logRecords(): readonly ReadableLogRecord[] {
    return this.logs.getFinishedLogRecords();
  }

  /** Every data point of every metric, collected now. */
  async points(): Promise<Point[]> {
    const result: CollectionResult = await this.reader.collect();
    const points: Point[] = [];
    for (const scope of result.resourceMetrics.scopeMetrics) {
      for (const metric of scope.metrics) {
        const kind =
          metric.dataPointType === DataPointType.SUM ? "sum" : metric.dataPointType === DataPointType.GAUGE ? "gauge" : "other";
        const monotonic = metric.dataPointType === DataPointType.SUM && metric.isMonotonic;
        for (const point of metric.dataPoints) {
          points.push({
            name: metric.descriptor.name,
            unit: metric.descriptor.unit,
            scope: scope.scope.name,
            kind,
            monotonic,
            integer: metric.descriptor.valueType === ValueType.INT,
            attributes: attributes(point.attributes),
            value: typeof point.value === "number" ? point.value : Number.NaN,
          });
        }
      }
    }
    return points;
  }

  async shutdown(): Promise<void> {
    await this.tracerProvider.shutdown();
    await this.meterProvider.shutdown();
    await this.loggerProvider.shutdown();
  }
}

/** An HrTime as the envelope writes a time. */
export function timeText(time: HrTime): string {
  return formatTimestamp(BigInt(time[0]) * 1_000_000_000n + BigInt(time[1]));
}

/** Attributes as JSON values. */
export function attributes(values: Attributes | undefined): Record<string, JsonValue> {
  const out: Record<string, JsonValue> = {};
  for (const [key, value] of Object.entries(values ?? {})) {
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") {
      out[key] = value;
    } else if (value !== undefined) {
      out[key] = String(value);
    }
  }
  return out;
}

const KINDS: Record<SpanKind, string> = {
  [SpanKind.INTERNAL]: "internal",
  [SpanKind.SERVER]: "server",
  [SpanKind.CLIENT]: "client",
  [SpanKind.PRODUCER]: "producer",
  [SpanKind.CONSUMER]: "consumer",
};

/** A span as the vectors write one. */
export function spanJson(span: ReadableSpan): Record<string, JsonValue> {
  let status: Record<string, JsonValue>;
  if (span.status.code === SpanStatusCode.ERROR) {
    status = { code: "error", description: span.status.message ?? "" };
  } else if (span.status.code === SpanStatusCode.OK) {
    status = { code: "ok" };
  } else {
    status = { code: "unset" };
  }
  return {
    name: span.name,
    kind: KINDS[span.kind],
    start: timeText(span.startTime),
    end: timeText(span.endTime),
    status,
    attributes: attributes(span.attributes),
  };
}
