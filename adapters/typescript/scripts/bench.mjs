// The TypeScript adapter's overhead per call, beside bare OpenTelemetry SDK spans, in one process.
// The peer of tests/bench/python_adapter.py. It runs against the built package: `npm run build`
// first, then, in this directory:
//
//   npm run bench                          # a table (node --expose-gc scripts/bench.mjs)
//   npm run bench -- --json                # the same figures as JSON
//   npm run bench -- --iterations 200000 --rounds 50 --warmup 5000
//
// What is measured, per call, in microseconds: the median and the p99 of every timed call, each
// call timed on its own with process.hrtime.bigint(), after a warm-up. The timed calls are split
// into rounds that interleave the cases, in an order that rotates, so that a change of load on the
// machine falls on every case alike. An adapter call is timed up to the moment its promise has
// resolved to the caller (`await adapter.call(fn)`): the promise hops are part of what an
// asynchronous call costs. A bare case is synchronous and is timed as such, the stricter baseline.
//
// The cases:
//
// - `bare`: the OpenTelemetry SDK alone: start a `tool.call` span (kind CLIENT) with the
//   attributes the adapter puts on a failure's span, add one `tool.outcome` event with the
//   attributes of the adapter's failure event, set an error status with the adapter's message, end
//   it. What a hand-instrumented tool call costs. (`startSpan`, not `startActiveSpan`: the adapter
//   does not make its span active either, and the cheaper baseline is the stricter one.)
// - `bare + counter`: the same plus one `Counter.add` with three attributes: the adapter counts
//   every call too. (The adapter's `tool.outcomes` is an observable counter: a call adds one to a
//   total in a map, which is cheaper than `Counter.add`, and the totals are read at collection.)
// - `adapter success`: `adapter.call(fn)` whose `fn` returns a prebuilt 200 with a small JSON
//   body, classified by an `HttpClassifier`: a success. By default the adapter records no span for
//   a success, only the count.
// - `adapter success, traced`: the same with `traceEveryCall: true`: one span, no event, the count.
// - `adapter failure`: `fn` returns a prebuilt 401: an access failure `auth`, which is permanent,
//   so one attempt, one span with one `tool.outcome` event (added at the call's end, so no log
//   record), an error status, the count.
// - `adapter retried once`: a 503, then a 200, on a clock whose backoff sleeps end at once: two
//   attempts, one span (a success, so no error status) with the failed attempt's `tool.outcome`
//   event, that event also emitted as a log record at the moment the retry is decided, the count.
// - `bare span + event + log record`: the peer of the retried case: start a `tool.call` span with
//   the attributes the retried call's span ends with, emit one log record as the adapter emits
//   the event's (event name, severity WARN, the span's context, the event's attributes), add the
//   event, end the span.
//
// The bare cases' attributes and status message are read from what the adapter itself emitted
// for a 401 and for a retried 503 (a probe run first on providers of its own, with in-memory
// exporters), with `tool.name` set to the case's, so that they stay the adapter's when it changes.
//
// The tool functions return prebuilt objects and do nothing else, so the adapter figures are the
// adapter's own work: the attempt context and its timer, classification, the retry decision, the
// envelope and telemetry. The adapter runs with its defaults (the real clock, random jitter), but
// for the retried case, whose clock is the real one except that a sleep without an abort signal
// (the backoff) ends at once; the attempt's own timer (a sleep with a signal, aborted when the
// attempt answers) stays the real one, as in every other adapter case. A check fails loudly when
// a call makes another number of attempts or ends in another class than its case's.
//
// The OpenTelemetry setup is the same for every case, and does the work a production setup does
// on the calling thread, with no network:
//
// - a BasicTracerProvider (default sampler, always on) with a BatchSpanProcessor over an exporter
//   that counts the spans and their events and drops them. In Node the batch processor's export
//   runs on the calling thread too: the span that fills a batch (512) exports it at once, a cost
//   that falls on one call in 512, past the p99;
// - a MeterProvider with a reader that is collected only after the timing: an instrument's cost
//   on the calling thread does not depend on the reader, and a periodic reader collects once a
//   minute by default;
// - a LoggerProvider with a BatchLogRecordProcessor over an exporter that counts and drops.
//
// No context manager is set (the API's no-op one): the adapter reads the active context once per
// call, the SDK once per span, both the root. After each timed call the loop awaits one resolved
// promise, untimed, so that the batch processors' completions (microtasks) run between calls as
// they would between requests. Each case's part of a round starts after a turn of the event loop
// and, when node runs with --expose-gc (as `npm run bench` does), a minor garbage collection (a
// scavenge), so that no case scavenges the young objects another left. Not a full collection: V8
// shrinks the young generation after one, and the calls that follow scavenge far more often than a
// running service's do (the adapter cases' p99 rose from tens of microseconds to milliseconds).
//
// After the timing, the script checks that every span, event and log record reached the exporters
// (none dropped) and that the counters hold every call. It reports; it does not assert: it exits 0
// whether or not the goal (each adapter case at most 1.5 times the bare span's median) is met, and
// writes what a check found to stderr. Expect some noise on a loaded machine: the spread of the
// rounds' medians shows how much.

import { createRequire } from "node:module";
import process from "node:process";
import { setImmediate as nextTurn } from "node:timers/promises";
import { parseArgs } from "node:util";

import { context, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import {
  BatchLogRecordProcessor,
  InMemoryLogRecordExporter,
  LoggerProvider,
  SimpleLogRecordProcessor,
} from "@opentelemetry/sdk-logs";
import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

const USAGE = `usage: node [--expose-gc] scripts/bench.mjs [--iterations N] [--rounds N] [--warmup N] [--json]

The TypeScript adapter's overhead per call, beside bare OpenTelemetry SDK spans (run npm run build
first; npm run bench runs it with --expose-gc, for a scavenge before each case's part of a round).

  --iterations N  timed calls per case, in all rounds together (default 60000)
  --rounds N      interleaved rounds, 1 to --iterations (default 30)
  --warmup N      untimed calls per case first (default 3000)
  --json          print the figures as JSON
  -h, --help      this text`;

/** The most an adapter call may cost, as a multiple of the bare span's median. */
const GOAL = 1.5;
const TARGET = "https://search.example/v1/items";
const SUCCESS_BODY = '{"items":[1,2],"next":null}';
const FAILURE_BODY = '{"error":"invalid credentials"}';
const UNAVAILABLE_BODY = '{"error":"try again later"}';
/** `ExportResultCode.SUCCESS` of @opentelemetry/core, which the package does not depend on directly. */
const EXPORT_SUCCESS = 0;

const require = createRequire(import.meta.url);

function fail(message) {
  console.error(`bench: ${message}`);
  process.exit(2);
}

function options() {
  let parsed;
  try {
    parsed = parseArgs({
      options: {
        iterations: { type: "string", default: "60000" },
        rounds: { type: "string", default: "30" },
        warmup: { type: "string", default: "3000" },
        json: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
    }).values;
  } catch (error) {
    fail(`${error instanceof Error ? error.message : String(error)}\n${USAGE}`);
  }
  if (parsed.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const count = (name) => {
    const text = parsed[name];
    if (!/^\d+$/.test(text)) {
      fail(`--${name} must be a whole number, got ${JSON.stringify(text)}`);
    }
    return Number(text);
  };
  const chosen = { iterations: count("iterations"), rounds: count("rounds"), warmup: count("warmup"), json: parsed.json };
  if (chosen.rounds < 1 || chosen.rounds > chosen.iterations) {
    fail("--rounds must be 1 to --iterations");
  }
  return chosen;
}

async function loadAdapter() {
  try {
    return await import("../dist/index.js");
  } catch (error) {
    if (error instanceof Error && "code" in error && error.code === "ERR_MODULE_NOT_FOUND") {
      fail(`the built package is missing (${error.message}): run npm run build first`);
    }
    throw error;
  }
}

const args = options();
const candor = await loadAdapter();
const { Adapter, HttpClassifier, HttpResponse, SystemClock, attr, OUTCOME_EVENT, OUTCOMES_COUNTER, TOOL_CALL_SPAN } = candor;

/** Counts the spans and events it is handed, and drops them. */
class DiscardingSpanExporter {
  spans = 0;
  events = 0;

  export(spans, done) {
    this.spans += spans.length;
    for (const span of spans) {
      this.events += span.events.length;
    }
    done({ code: EXPORT_SUCCESS });
  }

  forceFlush() {
    return Promise.resolve();
  }

  shutdown() {
    return Promise.resolve();
  }
}

/** Counts the log records it is handed, and drops them. */
class DiscardingLogExporter {
  records = 0;

  export(records, done) {
    this.records += records.length;
    done({ code: EXPORT_SUCCESS });
  }

  forceFlush() {
    return Promise.resolve();
  }

  shutdown() {
    return Promise.resolve();
  }
}

/** A metric reader that collects only when asked: after the timing. */
class CollectedAfterReader extends MetricReader {
  onForceFlush() {
    return Promise.resolve();
  }

  onShutdown() {
    return Promise.resolve();
  }
}

/**
 * The real clock, except that a sleep without an abort signal (the backoff before a retry) ends at
 * once. A sleep with a signal (an attempt's timer, aborted when the attempt answers) is real.
 */
class NoWaitClock extends SystemClock {
  sleep(ns, signal) {
    return signal === undefined ? Promise.resolve() : super.sleep(ns, signal);
  }
}

function jsonResponse(status, body) {
  return new HttpResponse({
    status,
    headers: { "Content-Type": "application/json", "Content-Length": String(body.length), "X-Request-Id": "req-42" },
    body,
  });
}

const OK = jsonResponse(200, SUCCESS_BODY);
const UNAUTHORIZED = jsonResponse(401, FAILURE_BODY);
const UNAVAILABLE = jsonResponse(503, UNAVAILABLE_BODY);

const succeed = () => OK;
const refuse = () => UNAUTHORIZED;
/** A 503 on the first attempt, a 200 on the second. */
const flaky = (attempt) => (attempt.number === 1 ? UNAVAILABLE : OK);

function classifier() {
  return new HttpClassifier({ notFound: "unreachable", itemsAt: "/items" });
}

/**
 * What the adapter emits for a 401 and for a retried 503, on providers of the probe's own with
 * in-memory exporters: the attributes, the status message and the log record the bare cases copy.
 */
async function probe() {
  const spans = new InMemorySpanExporter();
  const records = new InMemoryLogRecordExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  const loggerProvider = new LoggerProvider({ processors: [new SimpleLogRecordProcessor({ exporter: records })] });
  const meterProvider = new MeterProvider();
  const common = { tool: "probe", target: TARGET, classifier: classifier(), tracerProvider, meterProvider, loggerProvider };
  await new Adapter(common).call(refuse);
  await new Adapter({ ...common, clock: new NoWaitClock() }).call(flaky);
  await tracerProvider.forceFlush();
  await loggerProvider.forceFlush();
  const [failure, retried] = spans.getFinishedSpans();
  const emitted = records.getFinishedLogRecords();
  if (failure?.events.length !== 1 || retried?.events.length !== 1 || emitted.length !== 1) {
    throw new Error(
      `the probe expected two spans of one event each and one log record, got ${spans.getFinishedSpans().length} span(s) ` +
        `and ${emitted.length} log record(s)`,
    );
  }
  const [record] = emitted;
  const found = {
    failureSpan: { ...failure.attributes },
    failureEvent: { ...failure.events[0].attributes },
    failureMessage: failure.status.message,
    retriedSpan: { ...retried.attributes },
    retriedEvent: { ...retried.events[0].attributes },
    record: { eventName: record.eventName, severityNumber: record.severityNumber, severityText: record.severityText },
  };
  await Promise.all([tracerProvider.shutdown(), loggerProvider.shutdown(), meterProvider.shutdown()]);
  return found;
}

function withTool(attributes, tool) {
  return { ...attributes, [attr.TOOL_NAME]: tool };
}

/** The shared OpenTelemetry setup, and the cases that run on it. */
class Bench {
  constructor(emitted) {
    this.spanExporter = new DiscardingSpanExporter();
    this.logExporter = new DiscardingLogExporter();
    this.tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(this.spanExporter)] });
    this.reader = new CollectedAfterReader();
    this.meterProvider = new MeterProvider({ readers: [this.reader] });
    this.loggerProvider = new LoggerProvider({
      processors: [new BatchLogRecordProcessor({ exporter: this.logExporter })],
    });
    this.emitted = emitted;
    this.cases = [
      this.bare("bare", false),
      this.bare("bare + counter", true),
      this.adapter("adapter success", succeed, { traced: false, cls: "success", attempts: 1, spans: 0, events: 0, logs: 0 }),
      this.adapter("adapter success, traced", succeed, { traced: true, cls: "success", attempts: 1, spans: 1, events: 0, logs: 0 }),
      this.adapter("adapter failure", refuse, { traced: false, cls: "access_failure", attempts: 1, spans: 1, events: 1, logs: 0 }),
      this.adapter("adapter retried once", flaky, {
        traced: false,
        cls: "success",
        attempts: 2,
        spans: 1,
        events: 1,
        logs: 1,
        noWait: true,
        peer: "bare span + event + log record",
      }),
      this.peer("bare span + event + log record"),
    ];
  }

  newCase(name, tool, fields) {
    return { name, tool, isAsync: false, check: undefined, spans: 0, events: 0, logs: 0, counted: false, calls: 0, peer: undefined, samples: [], roundMedians: [], ...fields };
  }

  bare(name, withCounter) {
    const tool = name.replaceAll(" ", "");
    const tracer = this.tracerProvider.getTracer("bench-bare", "1");
    const spanAttributes = withTool(this.emitted.failureSpan, tool);
    const eventAttributes = withTool(this.emitted.failureEvent, tool);
    const status = { code: SpanStatusCode.ERROR, message: this.emitted.failureMessage };
    const options = { kind: SpanKind.CLIENT, attributes: spanAttributes };
    const run = () => {
      const span = tracer.startSpan(TOOL_CALL_SPAN, options);
      span.addEvent(OUTCOME_EVENT, eventAttributes);
      span.setStatus(status);
      span.end();
    };
    if (!withCounter) {
      return this.newCase(name, tool, { run, spans: 1, events: 1 });
    }
    const counter = this.meterProvider.getMeter("bench-bare", "1").createCounter(OUTCOMES_COUNTER, { unit: "{call}" });
    const countAttributes = { [attr.TOOL_NAME]: tool, [attr.TOOL_TARGET]: TARGET, [attr.OUTCOME_CLASS]: "access_failure" };
    const counted = () => {
      run();
      counter.add(1, countAttributes);
    };
    return this.newCase(name, tool, { run: counted, spans: 1, events: 1, counted: true });
  }

  peer(name) {
    const tool = "bare-span-event-log";
    const tracer = this.tracerProvider.getTracer("bench-bare", "1");
    const logger = this.loggerProvider.getLogger("bench-bare", "1");
    const spanAttributes = withTool(this.emitted.retriedSpan, tool);
    const eventAttributes = withTool(this.emitted.retriedEvent, tool);
    const { eventName, severityNumber, severityText } = this.emitted.record;
    const options = { kind: SpanKind.CLIENT, attributes: spanAttributes };
    const run = () => {
      const span = tracer.startSpan(TOOL_CALL_SPAN, options);
      logger.emit({
        eventName,
        context: trace.setSpan(context.active(), span),
        severityNumber,
        severityText,
        attributes: eventAttributes,
      });
      span.addEvent(OUTCOME_EVENT, eventAttributes);
      span.end();
    };
    return this.newCase(name, tool, { run, spans: 1, events: 1, logs: 1 });
  }

  adapter(name, fn, expected) {
    const tool = name.replaceAll(", ", "-").replaceAll(" ", "");
    const adapter = new Adapter({
      tool,
      target: TARGET,
      classifier: classifier(),
      traceEveryCall: expected.traced,
      tracerProvider: this.tracerProvider,
      meterProvider: this.meterProvider,
      loggerProvider: this.loggerProvider,
      clock: expected.noWait === true ? new NoWaitClock() : undefined,
    });
    const check = (envelope) => {
      if (envelope.attempts.length !== expected.attempts || envelope.outcome.class !== expected.cls) {
        throw new Error(
          `${name}: ${envelope.outcome.class} after ${envelope.attempts.length} attempt(s), ` +
            `not ${expected.cls} after ${expected.attempts}`,
        );
      }
    };
    return this.newCase(name, tool, {
      run: () => adapter.call(fn),
      isAsync: true,
      check,
      spans: expected.spans,
      events: expected.events,
      logs: expected.logs,
      counted: true,
      peer: expected.peer,
    });
  }

  /** One call of every adapter case, checked, before anything else. */
  async firstCalls() {
    for (const c of this.cases) {
      if (c.isAsync) {
        c.check(await c.run());
        c.calls += 1;
      }
    }
  }

  /** Calls `c` `count` times; fills `samples` (nanoseconds per call) when given. */
  async repeat(c, count, samples) {
    const { run, check } = c;
    const clock = process.hrtime.bigint;
    if (c.isAsync) {
      for (let i = 0; i < count; i++) {
        const started = clock();
        const envelope = await run();
        const took = clock() - started;
        if (samples !== undefined) {
          samples[i] = Number(took);
        }
        check(envelope);
        // Untimed: lets the batch processors' completions run between calls, as for a bare case.
        await Promise.resolve();
      }
    } else {
      for (let i = 0; i < count; i++) {
        const started = clock();
        run();
        const took = clock() - started;
        if (samples !== undefined) {
          samples[i] = Number(took);
        }
        // Untimed: a batch processor's export completes in microtasks; without them running, a
        // synchronous loop would fill its queue and the processor would drop spans.
        await Promise.resolve();
      }
    }
    c.calls += count;
  }

  /** Warms every case up, then times `iterations` calls of each in interleaved rounds. */
  async run(iterations, rounds, warmup, gc) {
    await this.firstCalls();
    for (const c of this.cases) {
      await this.repeat(c, warmup, undefined);
    }
    const n = this.cases.length;
    for (let round = 0; round < rounds; round++) {
      // Rotate the order so that no case always runs right after the same other one.
      const turn = round % n;
      const count = Math.floor(iterations / rounds) + (round < iterations % rounds ? 1 : 0);
      for (const c of [...this.cases.slice(turn), ...this.cases.slice(0, turn)]) {
        await nextTurn();
        gc?.({ type: "minor" });
        const samples = new Float64Array(count);
        await this.repeat(c, count, samples);
        c.samples.push(samples);
        c.roundMedians.push(median(samples.slice().sort()) / 1000);
      }
    }
  }

  /** What the run should have recorded and did not (empty when all is well). */
  async checks() {
    await this.tracerProvider.forceFlush();
    await this.loggerProvider.forceFlush();
    const problems = [];
    const expected = (field) => this.cases.reduce((sum, c) => sum + c[field] * c.calls, 0);
    const spans = expected("spans");
    const events = expected("events");
    const logs = expected("logs");
    if (this.spanExporter.spans !== spans) {
      problems.push(`${this.spanExporter.spans} spans exported, ${spans} expected (dropped?)`);
    }
    if (this.spanExporter.events !== events) {
      problems.push(`${this.spanExporter.events} span events exported, ${events} expected`);
    }
    if (this.logExporter.records !== logs) {
      problems.push(`${this.logExporter.records} log records exported, ${logs} expected (dropped?)`);
    }
    const { resourceMetrics, errors } = await this.reader.collect();
    for (const error of errors) {
      problems.push(`metric collection: ${String(error)}`);
    }
    const sums = new Map();
    for (const scope of resourceMetrics.scopeMetrics) {
      for (const metric of scope.metrics) {
        if (metric.descriptor.name !== OUTCOMES_COUNTER) {
          continue;
        }
        for (const point of metric.dataPoints) {
          const tool = String(point.attributes[attr.TOOL_NAME]);
          sums.set(tool, (sums.get(tool) ?? 0) + Number(point.value));
        }
      }
    }
    for (const c of this.cases) {
      const counted = sums.get(c.tool) ?? 0;
      const due = c.counted ? c.calls : 0;
      if (counted !== due) {
        problems.push(`${c.name}: ${counted} calls counted, ${due} expected`);
      }
    }
    return problems;
  }

  async shutdown() {
    await Promise.all([this.tracerProvider.shutdown(), this.meterProvider.shutdown(), this.loggerProvider.shutdown()]);
  }
}

/** The median of sorted values (the mean of the two middle ones for an even count). */
function median(sorted) {
  const n = sorted.length;
  const mid = Math.floor(n / 2);
  return n % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function percentile(sorted, fraction) {
  return sorted[Math.min(sorted.length - 1, Math.round(fraction * (sorted.length - 1)))];
}

/** The median cost of the timing itself, in nanoseconds: two clock reads around a no-op call. */
function timerFloorNs() {
  const clock = process.hrtime.bigint;
  const nothing = () => undefined;
  const samples = new Float64Array(20_000);
  for (let i = 0; i < samples.length; i++) {
    const started = clock();
    nothing();
    samples[i] = Number(clock() - started);
  }
  return median(samples.sort());
}

function joined(chunks) {
  const all = new Float64Array(chunks.reduce((sum, chunk) => sum + chunk.length, 0));
  let at = 0;
  for (const chunk of chunks) {
    all.set(chunk, at);
    at += chunk.length;
  }
  return all.sort();
}

const round3 = (value) => Math.round(value * 1000) / 1000;

function versionOf(pkg) {
  try {
    return String(require(`${pkg}/package.json`).version);
  } catch {
    return "?";
  }
}

/** The figures, as the JSON output holds them. */
function report(bench, floorNs, problems, gc, elapsedS) {
  const sorted = new Map(bench.cases.map((c) => [c.name, joined(c.samples)]));
  const medians = new Map(bench.cases.map((c) => [c.name, median(sorted.get(c.name)) / 1000]));
  const bare = medians.get("bare");
  const bareCounter = medians.get("bare + counter");
  const cases = bench.cases.map((c) => {
    const value = medians.get(c.name);
    return {
      case: c.name,
      median_us: round3(value),
      p99_us: round3(percentile(sorted.get(c.name), 0.99) / 1000),
      round_medians_us: c.roundMedians.map(round3),
      ratio_to_bare: round3(value / bare),
      ratio_to_bare_counter: round3(value / bareCounter),
      peer: c.peer ?? null,
      ratio_to_peer: c.peer === undefined ? null : round3(value / medians.get(c.peer)),
      within_goal: c.name.startsWith("adapter") ? value <= GOAL * bare : null,
      samples: sorted.get(c.name).length,
    };
  });
  return {
    node: process.versions.node,
    opentelemetry_sdk_trace_base: versionOf("@opentelemetry/sdk-trace-base"),
    opentelemetry_sdk_metrics: versionOf("@opentelemetry/sdk-metrics"),
    opentelemetry_sdk_logs: versionOf("@opentelemetry/sdk-logs"),
    candor_adapter: candor.ADAPTER_PACKAGE_VERSION,
    iterations: args.iterations,
    rounds: args.rounds,
    warmup: args.warmup,
    gc_between_rounds: gc === undefined ? "none" : "minor",
    timer_floor_us: round3(floorNs / 1000),
    goal_ratio_to_bare: GOAL,
    elapsed_s: Math.round(elapsedS * 10) / 10,
    bare_attributes: {
      span: Object.keys(bench.emitted.failureSpan).length,
      event: Object.keys(bench.emitted.failureEvent).length,
      peer_span: Object.keys(bench.emitted.retriedSpan).length,
      peer_event: Object.keys(bench.emitted.retriedEvent).length,
    },
    cases,
    problems,
  };
}

function printTable(figures) {
  const fixed = (value, width, digits = 2) => value.toFixed(digits).padStart(width);
  const a = figures.bare_attributes;
  console.log(
    `Node ${figures.node}, @opentelemetry/sdk-trace-base ${figures.opentelemetry_sdk_trace_base}, ` +
      `sdk-metrics ${figures.opentelemetry_sdk_metrics}, sdk-logs ${figures.opentelemetry_sdk_logs}, ` +
      `@candor/adapter ${figures.candor_adapter}; batch span and log processors; ` +
      `${figures.iterations} calls per case in ${figures.rounds} interleaved rounds, after ${figures.warmup} ` +
      `warm-up calls; ${figures.gc_between_rounds === "minor" ? "a minor gc before each case's part of a round" : "no gc between rounds (run node with --expose-gc)"}; ` +
      `timer floor ${figures.timer_floor_us.toFixed(3)} µs (included in every figure); bare span ` +
      `${a.span} attributes, event ${a.event} (peer: ${a.peer_span}, ${a.peer_event})`,
  );
  const header =
    `${"case".padEnd(32)}${"median µs".padStart(10)}${"p99 µs".padStart(9)}${"× bare".padStart(8)}` +
    `${"× peer".padStart(8)}  rounds' medians µs`;
  console.log(header);
  console.log("-".repeat(header.length));
  for (const c of figures.cases) {
    const spread = `${Math.min(...c.round_medians_us).toFixed(2)}–${Math.max(...c.round_medians_us).toFixed(2)}`;
    const peer = c.ratio_to_peer === null ? "".padStart(8) : fixed(c.ratio_to_peer, 8);
    console.log(
      `${c.case.padEnd(32)}${fixed(c.median_us, 10)}${fixed(c.p99_us, 9)}${fixed(c.ratio_to_bare, 8)}${peer}  ${spread}`,
    );
  }
  const verdicts = figures.cases
    .filter((c) => c.within_goal !== null)
    .map((c) => `${c.case} ${c.ratio_to_bare.toFixed(2)}× ${c.within_goal ? "within" : "OVER"}`);
  console.log(`goal: each adapter case at most ${figures.goal_ratio_to_bare}× the bare span (medians): ${verdicts.join("; ")}`);
  console.log(`the run took ${figures.elapsed_s.toFixed(1)} s`);
}

const began = process.hrtime.bigint();
const gc = typeof globalThis.gc === "function" ? globalThis.gc : undefined;
const floorNs = timerFloorNs();
const bench = new Bench(await probe());
let figures;
try {
  await bench.run(args.iterations, args.rounds, args.warmup, gc);
  const problems = await bench.checks();
  figures = report(bench, floorNs, problems, gc, Number(process.hrtime.bigint() - began) / 1e9);
} finally {
  await bench.shutdown();
}
if (args.json) {
  console.log(JSON.stringify(figures, null, 2));
} else {
  printTable(figures);
}
for (const problem of figures.problems) {
  console.error(`CHECK FAILED: ${problem}`);
}
