/**
 * What the vectors cannot observe (contract section 10) and the adapter's own behaviour: refused
 * settings, the sampler wrapper, the unrecorded-span counter, the export heartbeat, the span's
 * parent, zeros on the counter, exceptions, and an author's classifier.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { context, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { AlwaysOffSampler, AlwaysOnSampler, TraceIdRatioBasedSampler } from "@opentelemetry/sdk-trace-base";

import {
  Adapter,
  type AdapterOptions,
  ADAPTER_NAME,
  ADAPTER_PACKAGE_VERSION,
  ADAPTER_VERSION,
  type AttemptContext,
  EXPORT_INTERVAL_GAUGE,
  ExportHeartbeat,
  FixedJitter,
  FnClassifier,
  HttpClassifier,
  type HttpExchange,
  HttpResponse,
  InvalidSetting,
  isToolFailure,
  KeepToolFailures,
  OUTCOMES_COUNTER,
  RetryPolicy,
  SeededJitter,
  TransportError,
  UNRECORDED_SPANS_COUNTER,
} from "../src/index.js";
import { FakeClock } from "../src/testing.js";
import { readJson, PACKAGE_ROOT } from "./support/paths.js";
import { MemoryTelemetry } from "./support/telemetry.js";

const START = "2027-01-15T08:00:00Z";

function make(telemetry: MemoryTelemetry, options: Partial<AdapterOptions<HttpExchange>> = {}): Adapter<HttpExchange> {
  return new Adapter<HttpExchange>({
    tool: "search",
    target: "https://search.example/v1/items",
    classifier: new HttpClassifier({ notFound: "unreachable", itemsAt: "/items" }),
    jitter: new FixedJitter(0.5),
    clock: new FakeClock(START),
    tracerProvider: telemetry.tracerProvider,
    meterProvider: telemetry.meterProvider,
    loggerProvider: telemetry.loggerProvider,
    ...options,
  });
}

function reply(status: number, body = ""): HttpResponse {
  return new HttpResponse({ status, body, receivedAt: new Date(START) });
}

test("the package's version is the adapter's", () => {
  const pkg = readJson(`${PACKAGE_ROOT}package.json`) as { version: string; name: string };
  assert.equal(ADAPTER_PACKAGE_VERSION, pkg.version);
  assert.equal(ADAPTER_VERSION, `${ADAPTER_NAME}/${pkg.version}`);
});

test("refused settings name the setting and the value given (10.1)", () => {
  const telemetry = new MemoryTelemetry();
  const cases: [Partial<AdapterOptions<HttpExchange>>, RegExp][] = [
    [{ tool: "  " }, /^tool .*" {2}"/],
    [{ target: "" }, /^target .*""/],
    [{ attemptTimeoutMs: 0 }, /^attemptTimeoutMs .* 0$/],
    [{ deadlineMs: 0 }, /^deadlineMs .* 0$/],
    [{ retry: { maxAttempts: 0 } }, /^maxAttempts .* 0$/],
    [{ retry: { initialBackoffMs: 0 } }, /^initialBackoffMs .* 0$/],
    [{ retry: { initialBackoffMs: 6_000, maxBackoffMs: 5_000 } }, /^initialBackoffMs .*maxBackoffMs.* 6000$/],
    [{ method: "GET /x" }, /^method .*"GET \/x"/],
  ];
  for (const [options, message] of cases) {
    assert.throws(() => make(telemetry, options), (error: unknown) => error instanceof InvalidSetting && message.test(error.message));
  }
  // max_elapsed and retry_after_cap take any value, zero included.
  assert.doesNotThrow(() => new RetryPolicy({ maxElapsedMs: 0, retryAfterCapMs: 0 }));
});

test("the counter reports all four classes from the start, zeros included", async () => {
  const telemetry = new MemoryTelemetry();
  make(telemetry);
  const points = (await telemetry.points()).filter((p) => p.name === OUTCOMES_COUNTER);
  assert.deepEqual(
    points.map((p) => [p.attributes["tool.outcome.class"], p.value]),
    [
      ["success", 0],
      ["empty", 0],
      ["partial", 0],
      ["access_failure", 0],
    ],
  );
  assert.ok(points.every((p) => p.kind === "sum" && p.monotonic && p.unit === "{call}" && p.scope === ADAPTER_NAME));
  // A count is an integer: a receiver refuses one sent as a double.
  assert.ok(points.every((p) => p.integer));
});

test("adapters of one tool and target add to one series", async () => {
  const telemetry = new MemoryTelemetry();
  await make(telemetry).call(() => reply(200, '{"items":[1]}'));
  await make(telemetry).call(() => reply(200, '{"items":[1]}'));
  const success = (await telemetry.points()).filter(
    (p) => p.name === OUTCOMES_COUNTER && p.attributes["tool.outcome.class"] === "success",
  );
  assert.deepEqual(
    success.map((p) => p.value),
    [2],
  );
});

test("the span is a child of the context current where the call runs", async () => {
  // A host registers a context manager (the Node SDK does); without one no context is current.
  const manager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(manager);
  const telemetry = new MemoryTelemetry();
  const tracer = telemetry.tracerProvider.getTracer("host");
  const parent = tracer.startSpan("handler");
  const adapter = make(telemetry, { retry: { maxAttempts: 1 } });
  await context.with(trace.setSpan(ROOT_CONTEXT, parent), async () => {
    await Promise.resolve();
    return adapter.call(() => reply(503));
  });
  parent.end();
  context.disable();
  const call = telemetry.finishedSpans().find((span) => span.name === "tool.call");
  assert.ok(call !== undefined);
  assert.equal(call.spanContext().traceId, parent.spanContext().traceId);
  assert.equal(call.parentSpanContext?.spanId, parent.spanContext().spanId);
});

test("KeepToolFailures keeps failure spans that the host's sampler would drop, and only those", async () => {
  const telemetry = new MemoryTelemetry(new KeepToolFailures(new AlwaysOffSampler()));
  const adapter = make(telemetry, { retry: { maxAttempts: 1 }, traceEveryCall: true });
  await adapter.call(() => reply(500, "down"));
  await adapter.call(() => reply(200, '{"items":[1]}'));
  const spans = telemetry.finishedSpans();
  assert.equal(spans.length, 1, "the success span was left to the host's sampler, which dropped it");
  assert.equal(spans[0]?.attributes["tool.outcome.class"], "access_failure");
  assert.equal(new KeepToolFailures(new TraceIdRatioBasedSampler(0.5)).toString(), "KeepToolFailures{TraceIdRatioBased{0.5}}");
  assert.ok(isToolFailure("tool.call", { "tool.lifecycle.state": "accepted" }));
  assert.ok(isToolFailure("tool.call", { "tool.outcome.class": "partial" }));
  assert.ok(!isToolFailure("tool.call", { "tool.outcome.class": "success" }));
  assert.ok(!isToolFailure("http.get", { "tool.failure.kind": "timeout" }));
});

test("a failure span the host's sampler drops is counted as unrecorded (10.2)", async () => {
  const telemetry = new MemoryTelemetry(new AlwaysOffSampler());
  await make(telemetry, { retry: { maxAttempts: 1 } }).call(() => reply(503, "busy"));
  const unrecorded = (await telemetry.points()).filter((p) => p.name === UNRECORDED_SPANS_COUNTER);
  assert.deepEqual(
    unrecorded.map((p) => [p.attributes, p.value, p.monotonic]),
    [
      [
        {
          "tool.name": "search",
          "tool.target": "https://search.example/v1/items",
          "tool.outcome.class": "access_failure",
        },
        1,
        true,
      ],
    ],
  );
  assert.equal(telemetry.finishedSpans().length, 0);
});

test("with every span recorded, nothing is counted as unrecorded", async () => {
  const telemetry = new MemoryTelemetry(new AlwaysOnSampler());
  await make(telemetry, { retry: { maxAttempts: 1 } }).call(() => reply(503, "busy"));
  assert.deepEqual(
    (await telemetry.points()).filter((p) => p.name === UNRECORDED_SPANS_COUNTER && p.value !== 0),
    [],
  );
});

test("the export heartbeat reports the interval without attributes, and 0 after final (10.6)", async () => {
  const telemetry = new MemoryTelemetry();
  const heartbeat = new ExportHeartbeat(60, telemetry.meterProvider);
  make(telemetry);
  const gauge = async (): Promise<unknown[]> =>
    (await telemetry.points())
      .filter((p) => p.name === EXPORT_INTERVAL_GAUGE)
      .map((p) => [p.kind, p.unit, p.attributes, p.value, p.scope]);
  assert.deepEqual(await gauge(), [["gauge", "s", {}, 60, ADAPTER_NAME]]);
  heartbeat.final();
  assert.deepEqual(await gauge(), [["gauge", "s", {}, 0, ADAPTER_NAME]]);
  for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(() => new ExportHeartbeat(bad, telemetry.meterProvider), RangeError);
  }
});

test("a thrown transport error is classified; any other exception propagates and counts nothing", async () => {
  const telemetry = new MemoryTelemetry();
  const adapter = make(telemetry, { retry: { maxAttempts: 1 } });
  const envelope = await adapter.call(() => {
    throw new TransportError("connect", "connect ECONNREFUSED 10.0.0.1:443");
  });
  assert.ok(envelope.outcome.class === "access_failure");
  assert.equal(envelope.outcome.failure.error_type, "connect_error");
  const other = make(new MemoryTelemetry(), { retry: { maxAttempts: 2 } });
  let calls = 0;
  await assert.rejects(
    other.call(() => {
      calls += 1;
      if (calls === 1) {
        return reply(503);
      }
      throw new RangeError("a bug");
    }),
    RangeError,
  );
});

test("a call ended by an exception ends the span its failures started, with their events", async () => {
  const telemetry = new MemoryTelemetry();
  let calls = 0;
  await assert.rejects(
    make(telemetry).call(async () => {
      calls += 1;
      if (calls === 1) {
        return reply(503, "busy");
      }
      return Promise.reject(new RangeError("a bug"));
    }),
    RangeError,
  );
  const [span] = telemetry.finishedSpans();
  assert.ok(span !== undefined);
  assert.deepEqual(
    span.events.map((event) => event.attributes?.["tool.retry.action"]),
    ["retry"],
  );
  assert.equal(span.attributes["tool.outcome.class"], undefined, "a call with no envelope has no final class");
  assert.equal(telemetry.logRecords().length, 1);
});

test("an author's classifier maps a tool that is not HTTP", async () => {
  const telemetry = new MemoryTelemetry();
  const rows = new Adapter<{ rows: number[] } | "offline">({
    tool: "orders",
    target: "postgres://app:s3cret@db.internal:5432/orders?sslmode=require",
    classifier: new FnClassifier((raw) =>
      raw === "offline"
        ? { class: "access_failure", failure: { kind: "connect", retryable: true, message: "database offline" } }
        : raw.rows.length === 0
          ? { class: "empty", extent: { items: 0 } }
          : { class: "success", payload: raw.rows, extent: { items: raw.rows.length } },
    ),
    jitter: new SeededJitter(7),
    clock: new FakeClock(START),
    tracerProvider: telemetry.tracerProvider,
    meterProvider: telemetry.meterProvider,
    loggerProvider: telemetry.loggerProvider,
  });
  assert.equal(rows.target, "postgres://REDACTED@db.internal:5432/orders?sslmode=require");
  assert.equal(rows.sourceSystem, "db.internal:5432");
  let calls = 0;
  const envelope = await rows.call(() => (++calls === 1 ? "offline" : { rows: [1, 2] }));
  assert.deepEqual(envelope.outcome, { class: "success", payload: [1, 2], extent: { items: 2 } });
  assert.deepEqual(
    envelope.attempts.map((a) => a.class),
    ["access_failure", "success"],
  );
});

test("an attempt is given an abort signal that aborts when its time runs out", async () => {
  const telemetry = new MemoryTelemetry();
  const seen: AttemptContext[] = [];
  const envelope = await make(telemetry, { attemptTimeoutMs: 2_000, retry: { maxAttempts: 1 } }).call(
    (attempt) =>
      new Promise<HttpExchange>(() => {
        seen.push(attempt);
      }),
  );
  assert.ok(envelope.outcome.class === "access_failure");
  assert.equal(envelope.outcome.failure.kind, "timeout");
  assert.deepEqual(
    seen.map((attempt) => [attempt.signal.aborted, attempt.timeoutMs]),
    [[true, 2_000]],
  );
  assert.equal(envelope.attempts[0]?.duration_ms, 2_000);
});

test("seeded jitter draws the same sequence as the other adapters", () => {
  const jitter = new SeededJitter(42);
  const draws = [jitter.next(), jitter.next(), jitter.next()];
  assert.ok(draws.every((d) => d >= 0 && d < 1));
  const again = new SeededJitter(42);
  assert.deepEqual([again.next(), again.next(), again.next()], draws);
});

test("backoff waits are the ceiling times the draw, rounded to the nanosecond", () => {
  const policy = new RetryPolicy({ initialBackoffMs: 100, maxBackoffMs: 5_000 });
  assert.equal(policy.backoffNs(1, 0.5), 50_000_000);
  assert.equal(policy.backoffNs(2, 0.25), 50_000_000);
  assert.equal(policy.backoffNs(7, 0.999), 4_995_000_000);
  assert.equal(policy.backoffNs(40, 1), 5_000_000_000);
  assert.equal(policy.backoffNs(1, Number.NaN), 0);
  assert.equal(policy.backoffNs(1, 1 / 3), 33_333_333);
});
