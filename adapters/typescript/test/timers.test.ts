/**
 * Attempt timers on the real clock. The attempts of the attempt timeout share one queue and
 * one Node timer per adapter; an attempt that the deadline cuts has a timer of its own. The
 * process is held open while an attempt is pending, and released once none is (shown in child
 * processes).
 */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";

import {
  Adapter,
  type AdapterOptions,
  type AttemptContext,
  FixedJitter,
  HttpClassifier,
  type HttpExchange,
  HttpResponse,
} from "../src/index.js";
import { PACKAGE_ROOT } from "./support/paths.js";

function make(options: Partial<AdapterOptions<HttpExchange>>): Adapter<HttpExchange> {
  return new Adapter<HttpExchange>({
    tool: "search",
    target: "https://search.example/v1/items",
    classifier: new HttpClassifier({ notFound: "unreachable" }),
    ...options,
  });
}

/** An attempt that never answers. */
function never(): Promise<HttpExchange> {
  return new Promise<HttpExchange>(() => undefined);
}

test("attempts that never answer time out in the order they started, none before its time", async () => {
  const adapter = make({ attemptTimeoutMs: 120, retry: { maxAttempts: 1 } });
  const aborted: { call: number; afterMs: number }[] = [];
  const answered: AttemptContext[] = [];
  const calls: Promise<unknown>[] = [];
  for (let call = 0; call < 3; call += 1) {
    calls.push(
      adapter.call((attempt) => {
        const started = performance.now();
        attempt.signal.addEventListener("abort", () => aborted.push({ call, afterMs: performance.now() - started }));
        return never();
      }),
    );
    // One that answers between them: its timer is cancelled, and never fires.
    calls.push(
      adapter.call(async (attempt) => {
        answered.push(attempt);
        await sleep(30);
        return new HttpResponse({ status: 200, body: "[]" });
      }),
    );
    await sleep(25);
  }
  const envelopes = await Promise.all(calls);
  assert.deepEqual(
    aborted.map((a) => a.call),
    [0, 1, 2],
  );
  for (const { call, afterMs } of aborted) {
    assert.ok(afterMs >= 119, `call ${call} timed out ${afterMs} ms after it started`);
  }
  assert.equal(envelopes.length, 6);
  await sleep(150);
  assert.deepEqual(
    answered.map((attempt) => attempt.signal.aborted),
    [false, false, false],
    "an attempt that answered is never aborted",
  );
});

test("an attempt the deadline cuts has a timer of its own, and ends as a deadline", async () => {
  let attempts = 0;
  const timeouts: number[] = [];
  const adapter = make({
    attemptTimeoutMs: 400,
    deadlineMs: 300,
    retry: { maxAttempts: 2, initialBackoffMs: 100 },
    jitter: new FixedJitter(0.5),
  });
  const envelope = await adapter.call((attempt) => {
    attempts += 1;
    timeouts.push(attempt.timeoutMs);
    return attempts === 1 ? new HttpResponse({ status: 503 }) : never();
  });
  assert.ok(envelope.outcome.class === "access_failure", JSON.stringify(envelope.outcome));
  assert.equal(envelope.outcome.failure.kind, "deadline");
  assert.equal(timeouts[0], 300, "the first attempt has what is left of the deadline: all of it");
  const second = timeouts[1] ?? 0;
  assert.ok(second > 150 && second < 300, `the second attempt has what was left: ${second} ms`);
  assert.ok((envelope.attempts[1]?.duration_ms ?? 0) >= Math.floor(second));
});

/** Runs an ES module in a child process with the package's compiled sources; its output and how long it lived. */
async function inChild(source: string): Promise<{ stdout: string; ms: number }> {
  const index = path.join(PACKAGE_ROOT, "build-test/src/index.js");
  const script = `import { Adapter, FnClassifier, success } from ${JSON.stringify(index)};\n${source}`;
  const started = performance.now();
  const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], { timeout: 20_000 });
  return { stdout: stdout.trim(), ms: performance.now() - started };
}

/** An adapter whose attempts have the whole attempt timeout (the deadline is longer): their timers are the queue's. */
const CHILD_ADAPTER = `const adapter = (ms) => new Adapter({
  tool: "t", target: "https://t.example/", attemptTimeoutMs: ms, deadlineMs: 2 * ms, retry: { maxAttempts: 1 },
  classifier: new FnClassifier((raw) => success(raw)),
});`;

test("a call that answered leaves nothing holding the process open", async () => {
  // The attempt timeout is a minute: a timer still holding the process would keep it that long.
  const { stdout, ms } = await inChild(`${CHILD_ADAPTER}
const envelope = await adapter(60_000).call(() => 1);
console.log(envelope.outcome.class);`);
  assert.equal(stdout, "success");
  assert.ok(ms < 15_000, `the process ended ${ms} ms after it started`);
});

test("a pending attempt holds the process open until its time runs out, also after one that answered", async () => {
  // Without a timer holding it, Node would end the process with the top-level await unsettled.
  const { stdout } = await inChild(`${CHILD_ADAPTER}
const a = adapter(300);
await a.call(() => 1);
const envelope = await a.call(() => new Promise(() => {}));
console.log(envelope.outcome.failure.kind);`);
  assert.equal(stdout, "timeout");
});
