/**
 * Following asynchronous operations (contract 10.8): a status URL, a long-running operation and
 * an author's read. Status reads are scripted raw results, and time is a fake clock: waits take
 * no real time and are recorded.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  Adapter,
  type AdapterOptions,
  Envelope,
  type Evidence,
  FixedJitter,
  FnStatus,
  HttpClassifier,
  type HttpExchange,
  HttpResponse,
  LongRunning,
  type Operation,
  operationStatus,
  type StatusReader,
  StatusUrl,
  TransportError,
} from "../src/index.js";
import { FakeClock } from "../src/testing.js";
import { MemoryTelemetry } from "./support/telemetry.js";

const START = "2027-01-15T08:00:00Z";
const S = 1_000_000_000;
const TARGET = "https://exports.example/v1/exports";
const STATUS_URL = "https://exports.example/v1/operations/op-1";

function reply(status: number, body?: unknown, headers: Record<string, string> = {}): HttpResponse {
  return new HttpResponse({
    status,
    headers,
    body: body === undefined ? "" : JSON.stringify(body),
    receivedAt: new Date(START),
  });
}

function accepted(retryAfter?: number): HttpResponse {
  return reply(202, undefined, {
    "Operation-Location": STATUS_URL,
    ...(retryAfter === undefined ? {} : { "Retry-After": String(retryAfter) }),
  });
}

function status(state: string, fields: Record<string, unknown> = {}): HttpResponse {
  return reply(200, { status: state, ...fields });
}

/** A scripted tool: its start answers and status answers in turn, the last one repeated. */
class Source {
  starts = 0;
  readonly reads: Operation[] = [];

  constructor(
    private readonly start: HttpExchange[],
    private readonly answers: HttpExchange[],
  ) {}

  private static next(answers: HttpExchange[]): HttpExchange {
    const answer = answers.length > 1 ? answers.shift() : answers[0];
    if (answer === undefined) {
      throw new Error("the script has no answer");
    }
    return answer;
  }

  attempt = (): Promise<HttpExchange> => {
    this.starts += 1;
    return Promise.resolve(Source.next(this.start));
  };

  read = (operation: Operation): Promise<HttpExchange> => {
    this.reads.push(operation);
    return Promise.resolve(Source.next(this.answers));
  };
}

function make(
  telemetry: MemoryTelemetry,
  clock: FakeClock,
  reader: StatusReader<HttpExchange> | StatusReader<never> = new StatusUrl(),
  options: Partial<AdapterOptions<HttpExchange>> = {},
): Adapter<HttpExchange> {
  return new Adapter<HttpExchange>({
    tool: "export",
    target: TARGET,
    method: "POST",
    idempotencyKey: true,
    classifier: new HttpClassifier({ notFound: "unreachable" }),
    statusReader: reader,
    retry: { maxAttempts: 3, initialBackoffMs: 1_000, maxBackoffMs: 8_000 },
    operationDeadlineMs: 300_000,
    jitter: new FixedJitter(0.5),
    clock,
    tracerProvider: telemetry.tracerProvider,
    meterProvider: telemetry.meterProvider,
    loggerProvider: telemetry.loggerProvider,
    ...options,
  });
}

/** The envelope, once its JSON has been read back: its shape and next actions are legal. */
function checked(envelope: Envelope): Envelope {
  assert.equal(Envelope.parse(envelope.stringify()).stringify(), envelope.stringify());
  return envelope;
}

function lifecycleEvents(telemetry: MemoryTelemetry): unknown[] {
  const span = telemetry.finishedSpans().at(-1);
  return (span?.events ?? [])
    .filter((event) => event.name === "tool.lifecycle")
    .map((event) => event.attributes?.["tool.lifecycle.state"]);
}

test("a status URL is followed to a verified completion, honouring Retry-After", async () => {
  const telemetry = new MemoryTelemetry();
  const clock = new FakeClock(START);
  const source = new Source(
    [accepted(7)],
    [reply(202, undefined, { "Retry-After": "3" }), status("Running", { percentComplete: 40 }), status("Succeeded", { rows: 1200 })],
  );
  const envelope = checked(await make(telemetry, clock).callAndFollow(source.attempt, source.read));
  assert.deepEqual(envelope.outcome, { class: "success", payload: { status: "Succeeded", rows: 1200 }, extent: {} });
  const verifiedBy: Evidence = { kind: "query", value: STATUS_URL };
  assert.deepEqual(envelope.lifecycle, {
    state: "completed",
    operation: { id: STATUS_URL, status_url: STATUS_URL },
    verified_by: verifiedBy,
  });
  assert.deepEqual(envelope.evidence, verifiedBy);
  assert.deepEqual(envelope.next_actions, ["finish"]);
  // The acceptance asked for 7 s and the first read for 3 s: neither was shortened. The third
  // wait is the backoff of read 2: its ceiling of 2 s times the jitter of 0.5.
  assert.deepEqual(clock.slept, [7 * S, 3 * S, 1 * S]);
  assert.equal(envelope.attempts.length, 2);
  assert.equal(envelope.attempts[1]?.started_at, "2027-01-15T08:00:00.000000Z");
  assert.equal(envelope.attempts[1].duration_ms, 11_000);
  assert.deepEqual(lifecycleEvents(telemetry), ["accepted", "running", "completed"]);
  const counted = (await telemetry.points()).filter((p) => p.name === "tool.outcomes" && p.value !== 0);
  assert.deepEqual(
    counted.map((p) => p.attributes["tool.outcome.class"]),
    ["success"],
    "a followed call is counted by how it ended, never as accepted",
  );
  // Each state but the terminal one was emitted as a log record when it was seen.
  assert.deepEqual(
    telemetry.logRecords().map((r) => r.attributes["tool.lifecycle.state"]),
    ["accepted", "running", "completed"],
  );
});

test("an operation that reports failure ends the call as a permanent tool_error", async () => {
  const telemetry = new MemoryTelemetry();
  const source = new Source([accepted()], [status("Failed", { error: { code: "Quota", message: "quota exceeded" } })]);
  const envelope = checked(await make(telemetry, new FakeClock(START)).callAndFollow(source.attempt, source.read));
  assert.ok(envelope.outcome.class === "access_failure");
  assert.equal(envelope.outcome.failure.kind, "tool_error");
  assert.equal(envelope.outcome.failure.error_type, "operation_failed");
  assert.ok(envelope.outcome.failure.message.includes("quota exceeded"));
  assert.equal(envelope.lifecycle?.state, "failed");
  assert.equal(envelope.attempts[1]?.retry_action, "permanent");
  assert.deepEqual(envelope.next_actions, ["escalate"]);
});

test("an operation done in part ends the call as a partial operation_partial", async () => {
  const telemetry = new MemoryTelemetry();
  const source = new Source(
    [accepted()],
    [status("PartiallySucceeded", { covered: "3 of 5 files", resourceLocation: "https://exports.example/e-9" })],
  );
  const envelope = checked(await make(telemetry, new FakeClock(START)).callAndFollow(source.attempt, source.read));
  assert.ok(envelope.outcome.class === "partial");
  assert.deepEqual(envelope.outcome.truncation, {
    kind: "operation_partial",
    covered: "3 of 5 files",
    dropped: "the rest of the operation's work",
  });
  assert.deepEqual(envelope.lifecycle, {
    state: "partial",
    operation: { id: STATUS_URL, status_url: STATUS_URL },
    covered: "3 of 5 files",
    resource: { id: "https://exports.example/e-9" },
  });
  assert.equal(envelope.attempts[1]?.retry_action, "accept_partial");
});

test("an operation that never finishes ends at the operation deadline with its last state", async () => {
  const telemetry = new MemoryTelemetry();
  const clock = new FakeClock(START);
  const source = new Source([accepted()], [status("Running")]);
  const envelope = checked(
    await make(telemetry, clock, new StatusUrl(), { operationDeadlineMs: 20_000 }).callAndFollow(source.attempt, source.read),
  );
  assert.ok(envelope.outcome.class === "access_failure");
  assert.equal(envelope.outcome.failure.kind, "deadline");
  assert.equal(envelope.outcome.failure.retryable, true);
  assert.ok(envelope.outcome.failure.message.includes("was still running"), envelope.outcome.failure.message);
  assert.equal(envelope.lifecycle?.state, "running");
  assert.equal(envelope.attempts[1]?.retry_action, "exhausted");
  assert.ok(clock.elapsedNs < 20 * S, "no read starts at or after the operation deadline");
});

test("a status URL that cannot be reached is read again, then exhausted with the last state known", async () => {
  const telemetry = new MemoryTelemetry();
  const source = new Source([accepted()], [status("Queued"), new TransportError("reset", "connection reset")]);
  const envelope = checked(await make(telemetry, new FakeClock(START)).callAndFollow(source.attempt, source.read));
  assert.ok(envelope.outcome.class === "access_failure");
  assert.equal(envelope.outcome.failure.kind, "connect");
  assert.ok(envelope.outcome.failure.message.includes("last seen queued"), envelope.outcome.failure.message);
  assert.equal(envelope.lifecycle?.state, "queued");
  assert.equal(envelope.attempts[1]?.retry_action, "exhausted");
  assert.equal(source.reads.length, 4, "one queued read, then three failed reads in a row");
});

test("a status no rule knows is a protocol failure, never a success", async () => {
  const telemetry = new MemoryTelemetry();
  const source = new Source([accepted()], [status("Mostly")]);
  const envelope = checked(await make(telemetry, new FakeClock(START)).callAndFollow(source.attempt, source.read));
  assert.ok(envelope.outcome.class === "access_failure");
  assert.equal(envelope.outcome.failure.kind, "protocol");
  assert.equal(envelope.attempts[1]?.retry_action, "permanent");
});

test("an acceptance without a status URL cannot be followed and says so, with no read made", async () => {
  const telemetry = new MemoryTelemetry();
  const source = new Source([reply(202, { job: 1 })], [status("Succeeded")]);
  const envelope = checked(await make(telemetry, new FakeClock(START)).callAndFollow(source.attempt, source.read));
  assert.ok(envelope.outcome.class === "access_failure");
  assert.equal(envelope.outcome.failure.error_type, "no_status_url");
  assert.equal(source.reads.length, 0);
});

test("an answer that accepted nothing is returned as call returns it", async () => {
  const telemetry = new MemoryTelemetry();
  const source = new Source([reply(200, { id: "e-1" })], [status("Succeeded")]);
  const envelope = await make(telemetry, new FakeClock(START)).callAndFollow(source.attempt, source.read);
  assert.deepEqual(envelope.outcome, { class: "success", payload: { id: "e-1" }, extent: {} });
  assert.equal(envelope.lifecycle, undefined);
  assert.equal(source.reads.length, 0);
});

test("a long-running operation is followed until done, its response the result", async () => {
  const telemetry = new MemoryTelemetry();
  const clock = new FakeClock(START);
  const operation = { name: "operations/op-7", done: false };
  const source = new Source(
    [reply(200, operation)],
    [
      reply(200, { ...operation, metadata: { progressPercent: 50 } }),
      reply(200, { ...operation, done: true, response: { name: "exports/e-7", etag: "v3", rows: 9 } }),
    ],
  );
  const envelope = checked(await make(telemetry, clock, new LongRunning()).callAndFollow(source.attempt, source.read));
  assert.deepEqual(envelope.outcome, { class: "success", payload: { name: "exports/e-7", etag: "v3", rows: 9 }, extent: {} });
  assert.deepEqual(envelope.lifecycle, {
    state: "completed",
    operation: { id: "operations/op-7" },
    verified_by: { kind: "job_id", value: "operations/op-7" },
    resource: { id: "exports/e-7", version: "v3" },
  });
});

test("a long-running operation done with an error is failed, or cancelled by code 1", () => {
  const reader = new LongRunning();
  const op = { id: "operations/op-8" };
  const failed = reader.read(op, reply(200, { name: op.id, done: true, error: { code: 13, message: "internal" } }));
  assert.deepEqual(failed.status, { state: "failed", reason: "internal" });
  const cancelled = reader.read(op, reply(200, { name: op.id, done: true, error: { code: 1 } }));
  assert.deepEqual(cancelled.status, { state: "cancelled" });
  const nothing = reader.read(op, reply(200, { name: op.id, done: true }));
  assert.ok("kind" in nothing.status && nothing.status.kind === "protocol", "a completion with nothing to show is refused");
});

test("an author's status read verifies completion by reading the resource back", async () => {
  const telemetry = new MemoryTelemetry();
  const reader = new FnStatus<{ state: string; version?: number }>((operation, raw) =>
    raw.state === "done" && raw.version !== undefined
      ? operationStatus.completed(raw.version, {
          kind: "query",
          value: `GET /exports/${operation.id}?version=${raw.version}`,
        })
      : operationStatus.running(),
  );
  const adapter = new Adapter<HttpExchange>({
    tool: "export",
    target: TARGET,
    classifier: new HttpClassifier({ notFound: "unreachable" }),
    statusReader: reader,
    retry: { initialBackoffMs: 1_000 },
    jitter: new FixedJitter(0),
    clock: new FakeClock(START),
    tracerProvider: telemetry.tracerProvider,
    meterProvider: telemetry.meterProvider,
    loggerProvider: telemetry.loggerProvider,
  });
  const reads = [{ state: "running" }, { state: "done", version: 7 }];
  const envelope = checked(
    await adapter.resume({ id: "e-1" }, () => reads.shift() ?? { state: "running" }),
  );
  assert.deepEqual(envelope.outcome, { class: "success", payload: 7, extent: {} });
  assert.deepEqual(envelope.evidence, { kind: "query", value: "GET /exports/e-1?version=7" });
  assert.equal(envelope.attempts.length, 1, "a resumed following has one attempt, the following");
  assert.deepEqual(lifecycleEvents(telemetry), ["running", "completed"]);
});

test("following needs a status reader", async () => {
  const telemetry = new MemoryTelemetry();
  const adapter = make(telemetry, new FakeClock(START), new StatusUrl(), { statusReader: undefined });
  await assert.rejects(adapter.resume({ id: "op" }, () => status("Running")), TypeError);
});

test("a status read that never answers is cut at its timeout", async () => {
  const telemetry = new MemoryTelemetry();
  const clock = new FakeClock(START);
  const adapter = make(telemetry, clock, new StatusUrl(), { attemptTimeoutMs: 5_000 });
  let reads = 0;
  const envelope = checked(
    await adapter.callAndFollow(
      () => accepted(),
      () => {
        reads += 1;
        return reads === 1 ? new Promise<HttpExchange>(() => undefined) : Promise.resolve(status("Succeeded"));
      },
    ),
  );
  assert.equal(envelope.outcome.class, "success");
  assert.deepEqual(clock.slept, [0.5 * S, 5 * S, 0.5 * S]);
});
