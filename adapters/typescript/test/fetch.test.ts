/**
 * The fetch wrapper against a real HTTP server on the loopback address: statuses, `Retry-After`,
 * a body cut mid-stream, a slow body past the attempt's time, a size cap, an unreachable port, the
 * idempotency key, and a 202 followed to its end. The adapter runs on the real clock.
 *
 * The cases that read a response (a success, the statuses, a body cut or still arriving, a 202
 * followed) run twice: with Node's global `fetch`, and with the `undici` package's own `fetch`
 * passed as the `fetch` option, whose `Response` is not the global one.
 */

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { after, before, test } from "node:test";

import { fetch as undiciFetch } from "undici";

import {
  Adapter,
  type AdapterOptions,
  type Envelope,
  fetchCall,
  fetchCallAndFollow,
  fetchExchange,
  type FetchOptions,
  fetchResume,
  HttpClassifier,
  type HttpExchange,
  HttpResponse,
  InvalidSetting,
  StatusUrl,
  TransportError,
  transportError,
} from "../src/index.js";
import { MemoryTelemetry } from "./support/telemetry.js";

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

const routes = new Map<string, Handler>();
const seen: { path: string; method: string; key: string | undefined; agent: string | undefined }[] = [];
const sockets = new Set<Socket>();
let server: Server;
let base: string;

before(async () => {
  server = createServer((request, response) => {
    const path = request.url ?? "/";
    const key = request.headers["idempotency-key"];
    seen.push({
      path,
      method: request.method ?? "",
      key: typeof key === "string" ? key : undefined,
      agent: request.headers["user-agent"],
    });
    const handler = routes.get(path);
    if (handler === undefined) {
      response.writeHead(404).end("no such route");
      return;
    }
    handler(request, response);
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  for (const socket of sockets) {
    socket.destroy();
  }
  await new Promise<void>((resolve) => server.close(() => {
      resolve();
    }));
});

const telemetry = new MemoryTelemetry();

function adapter(path: string, options: Partial<AdapterOptions<HttpExchange>> = {}): Adapter<HttpExchange> {
  return new Adapter<HttpExchange>({
    tool: "search",
    target: `${base}${path}`,
    classifier: new HttpClassifier({ notFound: "unreachable", itemsAt: "/items" }),
    retry: { maxAttempts: 3, initialBackoffMs: 5, maxBackoffMs: 20 },
    tracerProvider: telemetry.tracerProvider,
    meterProvider: telemetry.meterProvider,
    loggerProvider: telemetry.loggerProvider,
    ...options,
  });
}

function json(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): ServerResponse {
  return response.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
}

function checked(envelope: Envelope): Envelope {
  assert.equal(envelope.constructor.name, "Envelope");
  return envelope;
}

/** A `fetch` the read cases run with, and the `User-Agent` it sends by default: it tells which one sent a request. */
interface Client {
  readonly name: string;
  readonly options: FetchOptions;
  readonly agent: string;
}

const CLIENTS: readonly Client[] = [
  { name: "the global fetch", options: {}, agent: "node" },
  // The cast: undici's own types and @types/node's copy of them (undici-types) differ in
  // `Dispatcher.compose`, so its `fetch` is not `typeof globalThis.fetch` to the compiler.
  { name: "undici's fetch", options: { fetch: undiciFetch as typeof globalThis.fetch }, agent: "undici" },
];

/** How many requests the server saw from its `from`th on, each checked to have been sent by `client`. */
function sentBy(client: Client, from: number): number {
  const agents = seen.slice(from).map((s) => s.agent);
  assert.deepEqual(agents, agents.map(() => client.agent), `every request was sent by ${client.name}`);
  return agents.length;
}

for (const client of CLIENTS) {
  test(`a 200 with its items is a success with its extent and the request id as evidence (${client.name})`, async () => {
    routes.set("/ok", (_, response) => json(response, 200, { items: [1, 2, 3] }, { "x-request-id": "r-1" }));
    const before = seen.length;
    const envelope = checked(await fetchCall(adapter("/ok"), `${base}/ok`, undefined, client.options));
    assert.deepEqual(envelope.outcome, { class: "success", payload: { items: [1, 2, 3] }, extent: { items: 3 } });
    assert.deepEqual(envelope.evidence, { kind: "request_id", value: "r-1" });
    assert.equal(envelope.attempts.length, 1);
    assert.equal(sentBy(client, before), 1);
  });

  test(`statuses are classified: 404 as declared, 401 auth, 503 retried with its Retry-After (${client.name})`, async () => {
    const before = seen.length;
    routes.set("/gone", (_, response) => response.writeHead(404).end("nothing here"));
    const absent = await fetchCall(
      adapter("/gone", { classifier: new HttpClassifier({ notFound: "confirmed_absent" }) }),
      `${base}/gone`,
      undefined,
      client.options,
    );
    assert.deepEqual(absent.outcome, { class: "empty", extent: { items: 0 } });

    routes.set("/denied", (_, response) => response.writeHead(401).end('{"error":"invalid_token","token":"s3cr3t"}'));
    const denied = await fetchCall(adapter("/denied"), `${base}/denied`, undefined, client.options);
    assert.ok(denied.outcome.class === "access_failure");
    assert.equal(denied.outcome.failure.kind, "auth");
    assert.equal(denied.outcome.failure.retryable, false);
    assert.equal(denied.outcome.failure.status, 401);
    assert.ok(!denied.outcome.failure.message.includes("s3cr3t"), denied.outcome.failure.message);
    assert.equal(denied.attempts.length, 1);

    let calls = 0;
    routes.set("/busy", (_, response) => {
      calls += 1;
      if (calls === 1) {
        response.writeHead(503, { "retry-after": "1" }).end("busy");
      } else {
        json(response, 200, { items: [1] });
      }
    });
    const started = performance.now();
    const retried = await fetchCall(adapter("/busy"), `${base}/busy`, undefined, client.options);
    assert.equal(retried.outcome.class, "success");
    assert.equal(retried.attempts[0]?.status, 503);
    assert.equal(retried.attempts[0].backoff_ms, 1000, "the Retry-After is the floor of the wait");
    assert.ok(performance.now() - started >= 1000, "the retry waited the second the source asked for");
    assert.equal(sentBy(client, before), 4, "one request for the 404, one for the 401, two for the 503 then the 200");
  });

  test(`a body cut mid-stream is a partial mid_stream with the bytes that arrived (${client.name})`, async () => {
    routes.set("/cut", (_, response) => {
      response.writeHead(200, { "content-type": "application/json", "content-length": "100" });
      response.write('{"items":[1,2,');
      setTimeout(() => response.socket?.destroy(), 20);
    });
    const before = seen.length;
    const envelope = await fetchCall(adapter("/cut"), `${base}/cut`, undefined, client.options);
    assert.ok(envelope.outcome.class === "partial", JSON.stringify(envelope.outcome));
    assert.equal(envelope.outcome.truncation.kind, "mid_stream");
    assert.equal(envelope.outcome.truncation.covered, "the first 14 bytes of the body");
    assert.equal(envelope.outcome.payload, '{"items":[1,2,');
    assert.equal(envelope.attempts.length, 1, "a partial is accepted, never retried");
    assert.equal(sentBy(client, before), 1);
  });

  test(`a body still arriving when the attempt's time runs out is what arrived by then (${client.name})`, async () => {
    routes.set("/trickle", (_, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.write('{"items":[1,2,3,');
      const timer = setTimeout(() => response.end("4]}"), 3_000);
      response.on("close", () => {
        clearTimeout(timer);
      });
    });
    const before = seen.length;
    const started = performance.now();
    const envelope = await fetchCall(adapter("/trickle", { attemptTimeoutMs: 300 }), `${base}/trickle`, undefined, client.options);
    const took = performance.now() - started;
    assert.ok(envelope.outcome.class === "partial", JSON.stringify(envelope.outcome));
    assert.equal(envelope.outcome.truncation.kind, "mid_stream");
    assert.equal(envelope.outcome.truncation.covered, "the first 16 bytes of the body");
    assert.equal(envelope.outcome.payload, '{"items":[1,2,3,');
    assert.ok(envelope.outcome.truncation.dropped.includes("ran out"), envelope.outcome.truncation.dropped);
    assert.ok(took >= 300 && took < 2_000, `the attempt was cut at its time: ${took} ms`);
    assert.ok((envelope.attempts[0]?.duration_ms ?? 0) >= 300);
    assert.equal(sentBy(client, before), 1, "a partial is accepted, never retried");
  });

  test(`a source that sends no status within the attempt's time is an access failure timeout (${client.name})`, async () => {
    routes.set("/silent", (_, response) => {
      const timer = setTimeout(() => json(response, 200, { items: [1] }), 3_000);
      response.on("close", () => {
        clearTimeout(timer);
      });
    });
    const before = seen.length;
    const envelope = await fetchCall(
      adapter("/silent", { attemptTimeoutMs: 200, retry: { maxAttempts: 1 } }),
      `${base}/silent`,
      undefined,
      client.options,
    );
    assert.ok(envelope.outcome.class === "access_failure");
    assert.equal(envelope.outcome.failure.kind, "timeout");
    assert.equal(envelope.outcome.failure.error_type, "timeout");
    assert.equal(envelope.attempts[0]?.retry_action, "exhausted");
    assert.equal(sentBy(client, before), 1);
  });

  test(`a 202 is followed through its status URL to a verified completion (${client.name})`, async () => {
    let reads = 0;
    routes.set("/exports", (_, response) => {
      response.writeHead(202, { "operation-location": `${base}/operations/op-1`, "retry-after": "0" }).end();
    });
    routes.set("/operations/op-1", (_, response) => {
      reads += 1;
      if (reads === 1) {
        json(response, 200, { status: "Running", percentComplete: 40 });
      } else {
        json(response, 200, { status: "Succeeded", resourceLocation: `${base}/files/e-9` });
      }
    });
    const exporter = adapter("/exports", {
      method: "POST",
      idempotencyKey: true,
      classifier: new HttpClassifier({ notFound: "unreachable" }),
      statusReader: new StatusUrl(),
    });
    const before = seen.length;
    const envelope = await fetchCallAndFollow(exporter, `${base}/exports`, { method: "POST", body: "{}" }, client.options);
    assert.equal(envelope.outcome.class, "success", JSON.stringify(envelope.toJSON()));
    assert.deepEqual(envelope.lifecycle, {
      state: "completed",
      operation: { id: `${base}/operations/op-1`, status_url: `${base}/operations/op-1` },
      verified_by: { kind: "query", value: `${base}/operations/op-1` },
      resource: { id: `${base}/files/e-9` },
    });
    assert.deepEqual(envelope.next_actions, ["finish"]);
    assert.equal(envelope.attempts.length, 2, "the start's attempt, then one for the following");
    assert.equal(reads, 2);
    assert.equal(sentBy(client, before), 3, "the start, then both status reads");
    const states = telemetry
      .finishedSpans()
      .at(-1)
      ?.events.map((event) => event.attributes?.["tool.lifecycle.state"]);
    assert.deepEqual(states, ["accepted", "running", "completed"]);
  });
}

test("a Retry-After above the cap ends the call exhausted and is recorded", async () => {
  routes.set("/slow-down", (_, response) => response.writeHead(429, { "retry-after": "120" }).end("slow down"));
  const envelope = await fetchCall(adapter("/slow-down"), `${base}/slow-down`);
  assert.ok(envelope.outcome.class === "access_failure");
  assert.equal(envelope.outcome.failure.kind, "rate_limited");
  assert.equal(envelope.outcome.failure.retry_after_ms, 120_000);
  assert.equal(envelope.attempts[0]?.retry_action, "exhausted");
  assert.deepEqual(envelope.next_actions, ["retry", "escalate"]);
});

test("a body past the size cap is a partial size_cap", async () => {
  routes.set("/big", (_, response) => json(response, 200, { items: Array.from({ length: 100 }, (_, i) => i) }));
  const envelope = await fetchCall(adapter("/big"), `${base}/big`, undefined, { maxBodyBytes: 32 });
  assert.ok(envelope.outcome.class === "partial");
  assert.equal(envelope.outcome.truncation.kind, "size_cap");
  assert.equal(envelope.outcome.truncation.covered, "the first 32 bytes of the body");
  assert.ok(envelope.outcome.truncation.dropped.includes("32"));
});

test("a port that refuses connections is a connect error, retried until exhausted", async () => {
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => {
      resolve();
    }));
  const target = `http://127.0.0.1:${port}/x`;
  const envelope = await fetchCall(adapter("/x", { target }), target);
  assert.ok(envelope.outcome.class === "access_failure");
  assert.equal(envelope.outcome.failure.kind, "connect");
  assert.equal(envelope.outcome.failure.error_type, "connect_error");
  assert.deepEqual(
    envelope.attempts.map((a) => a.retry_action),
    ["retry", "retry", "exhausted"],
  );
});

test("a transport failure is mapped; an error that is no transport failure is not", async () => {
  const failure = (code: string): Error =>
    new TypeError("fetch failed", { cause: Object.assign(new Error(`failed with ${code}`), { code }) });
  assert.equal(transportError(failure("ECONNREFUSED"))?.kind, "connect");
  assert.equal(transportError(failure("ENOTFOUND"))?.kind, "connect");
  assert.equal(transportError(failure("UND_ERR_SOCKET"))?.kind, "reset");
  assert.equal(transportError(failure("ECONNRESET"))?.kind, "reset");
  assert.equal(transportError(failure("UND_ERR_HEADERS_TIMEOUT"))?.kind, "timeout");
  assert.equal(transportError(failure("HPE_INVALID_HEADER_TOKEN"))?.kind, "protocol");
  assert.equal(transportError(failure("ECONNREFUSED"))?.message, "fetch failed: failed with ECONNREFUSED");
  assert.equal(transportError(new RangeError("a bug")), undefined);
  const injected = await fetchExchange("http://127.0.0.1/", undefined, undefined, {
    fetch: () => Promise.reject(failure("ECONNRESET")),
  });
  assert.ok(injected instanceof TransportError && injected.kind === "reset");
  await assert.rejects(fetchExchange("not a url", undefined, undefined), TypeError);
});

test("a POST with an idempotency key sends the same key with every attempt, and is retried after a reset", async () => {
  let calls = 0;
  routes.set("/orders", (request, response) => {
    calls += 1;
    if (calls === 1) {
      request.socket.destroy();
      return;
    }
    json(response, 201, { items: [{ id: "o-1" }] });
  });
  const before = seen.length;
  const envelope = await fetchCall(adapter("/orders", { method: "POST", idempotencyKey: true }), `${base}/orders`, {
    method: "POST",
    body: '{"sku":"a1"}',
  });
  assert.equal(envelope.outcome.class, "success", JSON.stringify(envelope.outcome));
  const keys = seen.slice(before).map((s) => s.key);
  assert.equal(keys.length, 2);
  assert.match(keys[0] ?? "", /^candor-[0-9a-f]{32}$/);
  assert.equal(keys[0], keys[1]);
});

test("a POST without a key is not sent again after a reset", async () => {
  routes.set("/charge", (request) => {
    request.socket.destroy();
  });
  const before = seen.length;
  const envelope = await fetchCall(adapter("/charge", { method: "POST" }), `${base}/charge`, { method: "POST", body: "{}" });
  assert.ok(envelope.outcome.class === "access_failure");
  assert.equal(envelope.outcome.failure.retryable, false);
  assert.ok(envelope.outcome.failure.message.startsWith("the request may have been applied"));
  assert.equal(seen.length - before, 1);
});

test("a request whose method is not the adapter's is refused", async () => {
  await assert.rejects(fetchCall(adapter("/ok"), `${base}/ok`, { method: "DELETE" }), InvalidSetting);
});

test("an acceptance returned at once can be resumed later", async () => {
  routes.set("/jobs", (_, response) => response.writeHead(202, { location: `${base}/jobs/j-1` }).end());
  routes.set("/jobs/j-1", (_, response) => response.writeHead(303, { location: `${base}/results/j-1` }).end());
  const jobs = adapter("/jobs", { classifier: new HttpClassifier({ notFound: "unreachable" }), statusReader: new StatusUrl() });
  const accepted = await fetchCall(jobs, `${base}/jobs`);
  assert.equal(accepted.lifecycle?.state, "accepted");
  assert.deepEqual(accepted.next_actions, ["poll", "compensate", "escalate"]);
  const resumed = await fetchResume(jobs, accepted.lifecycle.operation);
  assert.deepEqual(resumed.outcome, { class: "success", payload: `${base}/results/j-1`, extent: {} });
  assert.equal(resumed.lifecycle?.state, "completed");
});

test("fetchExchange without an adapter reads a whole response", async () => {
  routes.set("/plain", (_, response) => json(response, 200, [1, 2]));
  const exchange = await fetchExchange(`${base}/plain`, undefined, undefined);
  assert.ok(exchange instanceof HttpResponse);
  assert.equal(exchange.status, 200);
  assert.equal(new TextDecoder().decode(exchange.body), "[1,2]");
  assert.equal(exchange.bodyEnd.kind, "complete");
});

after(async () => {
  await telemetry.shutdown();
});
