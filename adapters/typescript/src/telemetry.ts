/**
 * Telemetry through the OpenTelemetry API (contract section 7): the `tool.call` span with its
 * `tool.outcome` and `tool.lifecycle` events, their log records, and the `tool.outcomes` counter.
 *
 * Each event is recorded when it happens (rule TELEMETRY-MOMENT): an attempt that failed and
 * will be retried, when its retry is decided, and each state of an operation, when the call sees
 * it. The call's first such event starts its span (at the call's start time), the event is added
 * to it, and it is also emitted at once as a log record in the span (the log-based form of
 * events), which reaches the pipeline while the call still runs. The call's end adds the terminal
 * event and ends the span. A success or an empty with no such event costs one counter increment
 * and no span, unless every call is traced.
 *
 * `tool.outcomes` is an observable counter over per-class totals: each meter provider gets one
 * instrument, whose callback reports the four classes of every tool and target from the first
 * adapter on, zeros included, and `accepted` from the first acceptance on.
 */

import {
  type Attributes,
  type Context,
  type Counter,
  diag,
  type HrTime,
  isSpanContextValid,
  type Meter,
  type MeterProvider,
  metrics,
  type ObservableResult,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
  type TracerProvider,
  ValueType,
} from "@opentelemetry/api";
import { type Logger, type LoggerProvider, logs, SeverityNumber } from "@opentelemetry/api-logs";

import { NS_PER_MS } from "./duration.js";
import type { Attempt, Envelope, Evidence, Lifecycle, Truncation } from "./envelope.js";
import {
  attr,
  EXPORT_INTERVAL_GAUGE,
  EXPORT_INTERVAL_GAUGE_UNIT,
  LIFECYCLE_EVENT,
  OUTCOME_EVENT,
  OUTCOMES_COUNTER,
  OUTCOMES_COUNTER_UNIT,
  TOOL_CALL_SPAN,
  UNRECORDED_SPANS_COUNTER,
  UNRECORDED_SPANS_COUNTER_UNIT,
} from "./names.js";
import { heldSecond, intoSecond } from "./seconds.js";
import { ADAPTER_NAME, ADAPTER_PACKAGE_VERSION } from "./version.js";
import { type FailureKind, isTerminalState, type LifecycleState, OutcomeClass } from "./vocab.js";

/** A time in nanoseconds since the epoch as OpenTelemetry takes it: `[seconds, nanoseconds]`. */
export function hrTime(ns: bigint): HrTime {
  const into = intoSecond(ns);
  if (into !== undefined) {
    return [heldSecond(), into];
  }
  return [Number(ns / 1_000_000_000n), Number(ns % 1_000_000_000n)];
}

let globalLoggerProvider: LoggerProvider | undefined;

/**
 * Sets the logger provider that adapters built without one emit the log-based form of their
 * events through, from their next event on. `undefined` goes back to OpenTelemetry's global
 * logger provider (`logs.setGlobalLoggerProvider`), which adapters use while none is set here.
 *
 * Without a logger provider, the events of a call reach the pipeline only when the call's span
 * ends, and are lost with it when the process dies first (rule TELEMETRY-MOMENT).
 */
export function setLoggerProvider(provider: LoggerProvider | undefined): void {
  globalLoggerProvider = provider;
}

/** Where one adapter emits the log-based form of its events. */
class LogSink {
  private readonly fixed: Logger | undefined;
  private provider: LoggerProvider | undefined;
  private logger: Logger | undefined;

  constructor(provider: LoggerProvider | undefined) {
    this.fixed = provider?.getLogger(ADAPTER_NAME, ADAPTER_PACKAGE_VERSION);
  }

  current(): Logger {
    if (this.fixed !== undefined) {
      return this.fixed;
    }
    const provider = globalLoggerProvider;
    if (this.logger === undefined || provider !== this.provider) {
      this.logger =
        provider === undefined
          ? logs.getLogger(ADAPTER_NAME, ADAPTER_PACKAGE_VERSION)
          : provider.getLogger(ADAPTER_NAME, ADAPTER_PACKAGE_VERSION);
      this.provider = provider;
    }
    return this.logger;
  }
}

/** A state of an asynchronous operation that a call saw, and when. */
export interface Transition {
  /** When the call saw it, in nanoseconds since the epoch. */
  readonly atNs: bigint;
  /** The state, with the operation. */
  readonly lifecycle: Lifecycle;
  /** For an acceptance, the evidence of the answer that accepted it. */
  readonly evidence?: Evidence | undefined;
}

/** A call's `tool.call` span, started at the call's first event, and what it started with. */
export interface LiveSpan {
  /** The span, not yet ended. */
  readonly span: Span;
  /** The `tool.failure.kind` it started with. */
  readonly failureKind: FailureKind | undefined;
  /** The `tool.lifecycle.state` it started with. */
  readonly state: LifecycleState | undefined;
}

/** The calls of one tool and target by final class, and its acceptances. */
class Counts {
  readonly totals = new Map<OutcomeClass, number>(OutcomeClass.values.map((cls) => [cls, 0]));
  readonly attributes: ReadonlyMap<OutcomeClass, Attributes>;
  accepted = 0;
  readonly acceptedAttributes: Attributes;

  constructor(tool: string, target: string) {
    this.attributes = new Map(
      OutcomeClass.values.map((cls) => [
        cls,
        { [attr.TOOL_NAME]: tool, [attr.TOOL_TARGET]: target, [attr.OUTCOME_CLASS]: cls },
      ]),
    );
    this.acceptedAttributes = { [attr.TOOL_NAME]: tool, [attr.TOOL_TARGET]: target, [attr.LIFECYCLE_STATE]: "accepted" };
  }
}

/**
 * The instruments of one meter provider, shared by every adapter that reports to it: adapters of
 * the same tool and target add to one series, for as long as the provider lives.
 */
class Instruments {
  private readonly counts = new Map<string, Counts>();
  readonly unrecorded: Counter;

  constructor(meter: Meter) {
    // Integer counters: a receiver refuses a count sent as a double (the JS SDK's default).
    this.unrecorded = meter.createCounter(UNRECORDED_SPANS_COUNTER, {
      valueType: ValueType.INT,
      unit: UNRECORDED_SPANS_COUNTER_UNIT,
      description: "tool.call spans that recorded a failure or an operation and were not recording",
    });
    meter
      .createObservableCounter(OUTCOMES_COUNTER, {
        valueType: ValueType.INT,
        unit: OUTCOMES_COUNTER_UNIT,
        description: "Tool calls by final outcome class",
      })
      .addCallback((result) => {
        this.observe(result);
      });
  }

  countsOf(tool: string, target: string): Counts {
    const key = JSON.stringify([tool, target]);
    let counts = this.counts.get(key);
    if (counts === undefined) {
      counts = new Counts(tool, target);
      this.counts.set(key, counts);
    }
    return counts;
  }

  private observe(result: ObservableResult): void {
    for (const counts of this.counts.values()) {
      for (const cls of OutcomeClass.values) {
        result.observe(counts.totals.get(cls) ?? 0, counts.attributes.get(cls));
      }
    }
    for (const counts of this.counts.values()) {
      if (counts.accepted > 0) {
        result.observe(counts.accepted, counts.acceptedAttributes);
      }
    }
  }
}

const instrumentsByProvider = new WeakMap<MeterProvider, Instruments>();

function instrumentsOf(provider: MeterProvider): Instruments {
  let instruments = instrumentsByProvider.get(provider);
  if (instruments === undefined) {
    instruments = new Instruments(provider.getMeter(ADAPTER_NAME, ADAPTER_PACKAGE_VERSION));
    instrumentsByProvider.set(provider, instruments);
  }
  return instruments;
}

/**
 * The gauge `candor.adapter.export_interval` of one meter provider (contract 10.6).
 *
 * A host that sets up its own OpenTelemetry SDK makes one per meter provider, right after
 * building it, with the interval of its periodic metric reader in seconds. Every metric export
 * then carries the gauge, without attributes, beside `tool.outcomes`: the seconds until the next
 * export, and 0 once {@link ExportHeartbeat.final} was called, so that the export at shutdown says
 * that none follows. Without it, a reader cannot tell an instance that shut down from one that
 * went silent.
 *
 * @throws RangeError unless `intervalS` is a finite number of seconds above 0.
 */
export class ExportHeartbeat {
  private finalExport = false;

  constructor(
    /** The seconds between two metric exports. */
    readonly intervalS: number,
    meterProvider: MeterProvider = metrics.getMeterProvider(),
  ) {
    if (typeof intervalS !== "number" || !Number.isFinite(intervalS) || intervalS <= 0) {
      throw new RangeError(`the export interval must be a finite number of seconds above 0, not ${String(intervalS)}`);
    }
    meterProvider
      .getMeter(ADAPTER_NAME, ADAPTER_PACKAGE_VERSION)
      .createObservableGauge(EXPORT_INTERVAL_GAUGE, {
        unit: EXPORT_INTERVAL_GAUGE_UNIT,
        description: "Seconds until this instance's next metric export; 0 in its last",
      })
      .addCallback((result) => {
        result.observe(this.finalExport ? 0 : this.intervalS);
      });
  }

  /**
   * From now on the gauge reports 0: no export follows the next one. Call it right before the
   * meter provider's `shutdown()`, whose final collection then says so.
   */
  final(): void {
    this.finalExport = true;
  }
}

/** What {@link Telemetry} is made of. */
export interface TelemetryOptions {
  /** The tool's name. */
  readonly tool: string;
  /** The redacted target. */
  readonly target: string;
  /** The authority as attributes carry it, when there is one. */
  readonly authority: string | undefined;
  /** The envelope's `provenance.source_system`. */
  readonly sourceSystem: string;
  /** The envelope's `provenance.actor`. */
  readonly actor: string | undefined;
  /** The envelope's `provenance.adapter`. */
  readonly adapterVersion: string;
  /** Where spans go; OpenTelemetry's global tracer provider by default. */
  readonly tracerProvider?: TracerProvider | undefined;
  /** Where the counters go; OpenTelemetry's global meter provider by default. */
  readonly meterProvider?: MeterProvider | undefined;
  /** Where the log records go; see {@link setLoggerProvider}. */
  readonly loggerProvider?: LoggerProvider | undefined;
  /** Whether a success or an empty gets a span too. */
  readonly traceEveryCall: boolean;
}

/** The times of a finished call, in nanoseconds since the epoch, and its live span. */
export interface Finished {
  /** The envelope's `provenance.started_at`. */
  readonly startedNs: bigint;
  /** The envelope's `provenance.finished_at`. */
  readonly finishedNs: bigint;
  /** The last attempt's `started_at`. */
  readonly lastStartedNs: bigint;
  /** The span the call's events started, if any. */
  readonly live: LiveSpan | undefined;
  /** The context the call ran in: the span's parent. */
  readonly parent: Context;
}

/** Where one adapter's spans, log records and counts go. */
export class Telemetry {
  private readonly tracer: Tracer;
  private readonly sink: LogSink;
  private readonly instruments: Instruments;
  private readonly counts: Counts;
  private readonly identity: Attributes;
  private readonly provenance: Attributes;
  /** {@link Telemetry.identity} and {@link Telemetry.provenance} as entries, copied into each call's attributes. */
  private readonly identityEntries: AttributeEntries;
  private readonly provenanceEntries: AttributeEntries;
  private readonly traceEveryCall: boolean;

  constructor(options: TelemetryOptions) {
    this.tracer = (options.tracerProvider ?? trace.getTracerProvider()).getTracer(ADAPTER_NAME, ADAPTER_PACKAGE_VERSION);
    this.sink = new LogSink(options.loggerProvider);
    this.instruments = instrumentsOf(options.meterProvider ?? metrics.getMeterProvider());
    this.counts = this.instruments.countsOf(options.tool, options.target);
    this.identity = { [attr.TOOL_NAME]: options.tool, [attr.TOOL_TARGET]: options.target };
    if (options.authority !== undefined) {
      this.identity[attr.AUTHORITY] = options.authority;
    }
    this.provenance = { [attr.PROVENANCE_SOURCE_SYSTEM]: options.sourceSystem };
    if (options.actor !== undefined) {
      this.provenance[attr.PROVENANCE_ACTOR] = options.actor;
    }
    this.provenance[attr.PROVENANCE_ADAPTER] = options.adapterVersion;
    this.identityEntries = Object.entries(this.identity);
    this.provenanceEntries = Object.entries(this.provenance);
    this.traceEveryCall = options.traceEveryCall;
  }

  /**
   * Records an attempt that failed and will be retried, when its retry is decided: its event
   * goes on the call's span (started now, at `startedNs`, when `live` is undefined) and is
   * emitted as a log record. Returns the call's span.
   */
  retried(
    live: LiveSpan | undefined,
    parent: Context,
    startedNs: bigint,
    attempt: Attempt,
    attemptStartedNs: bigint,
    maxAttempts: number,
  ): LiveSpan {
    const attributes = this.eventAttributes(attempt, maxAttempts, undefined, undefined);
    const span = live ?? this.startLive(parent, startedNs, attempt.failure_kind, undefined);
    this.emit(span.span, parent, OUTCOME_EVENT, eventNs(attempt, attemptStartedNs), attributes);
    return span;
  }

  /** Records a state of the operation the call accepted or follows, when it is seen. */
  transition(live: LiveSpan | undefined, parent: Context, startedNs: bigint, transition: Transition): LiveSpan {
    const attributes = this.lifecycleAttributes(transition);
    const span = live ?? this.startLive(parent, startedNs, undefined, transition.lifecycle.state);
    this.emit(span.span, parent, LIFECYCLE_EVENT, transition.atNs, attributes);
    return span;
  }

  /** Ends the span of a call that ended by an exception, at `atNs`, with the events it has. */
  abandon(live: LiveSpan, atNs: bigint): void {
    live.span.end(hrTime(atNs));
  }

  /**
   * Records a finished call: the counter counts it, and its span (the live one, or one made now
   * when the call had a failure, an operation, or every call is traced) gets the call's outcome,
   * its terminal event, and ends.
   */
  record(envelope: Envelope, maxAttempts: number, finished: Finished): void {
    const cls = envelope.outcome.class;
    const lifecycle = envelope.lifecycle;
    if (cls === "success" && lifecycle !== undefined && !isTerminalState(lifecycle.state)) {
      // Work accepted is not work done (rule TELEMETRY-COUNTER).
      this.counts.accepted += 1;
    } else {
      this.counts.totals.set(cls, (this.counts.totals.get(cls) ?? 0) + 1);
    }
    const last = envelope.attempts.at(-1);
    const terminal = last !== undefined && isTerminal(last) ? last : undefined;
    if (finished.live === undefined && terminal === undefined && lifecycle === undefined && !this.traceEveryCall) {
      return;
    }
    this.endSpan(envelope, maxAttempts, finished, terminal);
  }

  private endSpan(envelope: Envelope, maxAttempts: number, finished: Finished, terminal: Attempt | undefined): void {
    const cls = envelope.outcome.class;
    // The kind of the last attempt that failed marks the span for samplers, also when a later
    // attempt succeeded.
    const kind = envelope.attempts.findLast((a) => a.failure_kind !== undefined)?.failure_kind;
    const state = envelope.lifecycle?.state;
    let span: Span;
    const live = finished.live;
    if (live === undefined) {
      const attributes: Attributes = {};
      assign(attributes, this.identityEntries);
      attributes[attr.OUTCOME_CLASS] = cls;
      if (kind !== undefined) {
        attributes[attr.FAILURE_KIND] = kind;
      }
      if (state !== undefined) {
        attributes[attr.LIFECYCLE_STATE] = state;
      }
      span = this.startSpan(finished.parent, finished.startedNs, attributes);
    } else {
      span = live.span;
      span.setAttribute(attr.OUTCOME_CLASS, cls);
      if (kind !== undefined && kind !== live.failureKind) {
        span.setAttribute(attr.FAILURE_KIND, kind);
      }
      if (state !== undefined && state !== live.state) {
        span.setAttribute(attr.LIFECYCLE_STATE, state);
      }
    }
    const outcome = envelope.outcome;
    if (terminal !== undefined) {
      const truncation = outcome.class === "partial" ? outcome.truncation : undefined;
      // The terminal event happens at the call's end: on the span, which ends now.
      span.addEvent(
        OUTCOME_EVENT,
        this.eventAttributes(terminal, maxAttempts, truncation, envelope.evidence),
        hrTime(eventNs(terminal, finished.lastStartedNs)),
      );
    }
    if (!span.isRecording()) {
      this.instruments.unrecorded.add(1, this.counts.attributes.get(cls));
      diag.warn(
        `the host's sampler dropped a tool.call span of ${envelope.tool} that recorded a failure or an ` +
          "operation; keep tool.call spans that carry tool.failure.kind or tool.lifecycle.state",
      );
    }
    if (outcome.class === "access_failure") {
      span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.failure.message });
    }
    span.end(hrTime(finished.finishedNs));
  }

  private startLive(
    parent: Context,
    startedNs: bigint,
    failureKind: FailureKind | undefined,
    state: LifecycleState | undefined,
  ): LiveSpan {
    const attributes: Attributes = {};
    assign(attributes, this.identityEntries);
    if (failureKind !== undefined) {
      attributes[attr.FAILURE_KIND] = failureKind;
    }
    if (state !== undefined) {
      attributes[attr.LIFECYCLE_STATE] = state;
    }
    return { span: this.startSpan(parent, startedNs, attributes), failureKind, state };
  }

  private startSpan(parent: Context, startedNs: bigint, attributes: Attributes): Span {
    return this.tracer.startSpan(
      TOOL_CALL_SPAN,
      { kind: SpanKind.CLIENT, attributes, startTime: hrTime(startedNs) },
      parent,
    );
  }

  /** Adds one event to the span, and emits it as a log record in the span (when it has a valid context). */
  private emit(span: Span, parent: Context, name: string, atNs: bigint, attributes: Attributes): void {
    const time = hrTime(atNs);
    if (isSpanContextValid(span.spanContext())) {
      this.sink.current().emit({
        eventName: name,
        timestamp: time,
        context: trace.setSpan(parent, span),
        severityNumber: SeverityNumber.WARN,
        severityText: "WARN",
        attributes,
      });
    }
    span.addEvent(name, attributes, time);
  }

  private lifecycleAttributes(transition: Transition): Attributes {
    const lifecycle = transition.lifecycle;
    const attributes: Attributes = {
      ...this.identity,
      [attr.OPERATION_ID]: lifecycle.operation.id,
      [attr.LIFECYCLE_STATE]: lifecycle.state,
    };
    let evidence: Evidence | undefined;
    switch (lifecycle.state) {
      case "failed":
        attributes[attr.LIFECYCLE_REASON] = lifecycle.reason;
        break;
      case "partial":
        attributes[attr.COVERAGE] = lifecycle.covered;
        break;
      case "completed":
        evidence = lifecycle.verified_by;
        break;
      case "accepted":
        evidence = transition.evidence;
        break;
      default:
        break;
    }
    if (evidence !== undefined) {
      attributes[attr.EVIDENCE_KIND] = evidence.kind;
      attributes[attr.EVIDENCE_VALUE] = evidence.value;
    }
    const resource = lifecycle.state === "partial" || lifecycle.state === "completed" ? lifecycle.resource : undefined;
    if (resource !== undefined) {
      attributes[attr.RESOURCE_ID] = resource.id;
      if (resource.version !== undefined) {
        attributes[attr.RESOURCE_VERSION] = resource.version;
      }
    }
    return { ...attributes, ...this.provenance };
  }

  /**
   * The attributes of a `tool.outcome` event (rule TELEMETRY-EVENT): `truncation` is the call's
   * on its partial event, `evidence` the envelope's on the event that ends the call.
   */
  private eventAttributes(
    attempt: Attempt,
    maxAttempts: number,
    truncation: Truncation | undefined,
    evidence: Evidence | undefined,
  ): Attributes {
    const attributes: Attributes = {};
    assign(attributes, this.identityEntries);
    attributes[attr.OUTCOME_CLASS] = attempt.class;
    if (attempt.failure_kind !== undefined) {
      attributes[attr.FAILURE_KIND] = attempt.failure_kind;
    }
    if (attempt.retry_action !== undefined) {
      attributes[attr.RETRY_ACTION] = attempt.retry_action;
    }
    attributes[attr.RETRY_ATTEMPT] = attempt.number;
    attributes[attr.RETRY_MAX_ATTEMPTS] = maxAttempts;
    if (attempt.retry_action === "retry") {
      attributes[attr.RETRY_BACKOFF_MS] = attempt.backoff_ms ?? 0;
    }
    if (attempt.status !== undefined) {
      attributes[attr.HTTP_STATUS_CODE] = attempt.status;
    }
    if (attempt.error_type !== undefined) {
      attributes[attr.ERROR_TYPE] = attempt.error_type;
    }
    if (truncation !== undefined && attempt.class === "partial") {
      if (truncation.returned !== undefined) {
        attributes[attr.PARTIAL_RETURNED] = truncation.returned;
      }
      if (truncation.expected !== undefined) {
        attributes[attr.PARTIAL_EXPECTED] = truncation.expected;
      }
      attributes[attr.COVERAGE] = truncation.covered;
      attributes[attr.DROPPED] = truncation.dropped;
    }
    if (evidence !== undefined) {
      attributes[attr.EVIDENCE_KIND] = evidence.kind;
      attributes[attr.EVIDENCE_VALUE] = evidence.value;
    }
    assign(attributes, this.provenanceEntries);
    return attributes;
  }
}

/** Attributes as entries: fixed ones, copied into many objects. */
type AttributeEntries = readonly (readonly [string, Attributes[string]])[];

/**
 * Copies attributes onto `target`, as `{ ...target, ...Object.fromEntries(source) }` would (a
 * key already there keeps its place and takes the new value), without a new object.
 */
function assign(target: Attributes, source: AttributeEntries): void {
  for (const [key, value] of source) {
    target[key] = value;
  }
}

/** An attempt's event time: its start plus its whole milliseconds (rule TELEMETRY-EVENT). */
function eventNs(attempt: Attempt, startedNs: bigint): bigint {
  const ms = attempt.duration_ms;
  // The product as a double while it is exact (below 2^53 ns, 104 days): one BigInt conversion.
  return startedNs + (ms <= MAX_EXACT_MS ? BigInt(ms * NS_PER_MS) : BigInt(ms) * BigInt(NS_PER_MS));
}

/** The most milliseconds whose nanoseconds a double holds exactly. */
const MAX_EXACT_MS = Math.floor(Number.MAX_SAFE_INTEGER / NS_PER_MS);

/** Whether the call's last attempt ends it with an event (rule TELEMETRY-TERMINAL-EVENT). */
function isTerminal(last: Attempt): boolean {
  const action = last.retry_action;
  return action !== undefined && action !== "retry" && (last.class === "access_failure" || last.class === "partial");
}
