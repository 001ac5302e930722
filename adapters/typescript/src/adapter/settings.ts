/**
 * An adapter's settings: the options an author gives ({@link AdapterOptions}), their defaults,
 * and the checks that refuse a bad one (contract 10.1), made into the {@link AdapterSettings}
 * that a call and a following read.
 */

import type { MeterProvider, TracerProvider } from "@opentelemetry/api";
import type { LoggerProvider } from "@opentelemetry/api-logs";

import type { Classifier } from "../classify/classification.js";
import { type Clock, SystemClock } from "../clock.js";
import { nsOfMs } from "../duration.js";
import { type Authority, describeAuthority } from "../envelope.js";
import type { StatusReader } from "../follow.js";
import { redactUrl, urlParts } from "../redact.js";
import { InvalidSetting, type Jitter, RandomJitter, RetryPolicy, type RetryPolicyOptions } from "../retry.js";
import { Telemetry } from "../telemetry.js";
import { ADAPTER_VERSION } from "../version.js";
import { IDEMPOTENT_METHODS } from "./repeat.js";

/** The settings of an {@link Adapter}; each optional one has the contract's default (section 4). */
export interface AdapterOptions<R> {
  /** The logical tool name. Required, not blank. */
  readonly tool: string;
  /** The target as the author wrote it; credentials in it are redacted before any use. */
  readonly target: string;
  /** Classifies each attempt's raw result: an {@link HttpClassifier} or the author's own. */
  readonly classifier: Classifier<R>;
  /** The retry policy, or its settings. */
  readonly retry?: RetryPolicy | RetryPolicyOptions | undefined;
  /** How long one attempt may take, in milliseconds (default 10 s). */
  readonly attemptTimeoutMs?: number | undefined;
  /** How long the whole call, retries included, may take, in milliseconds (default 30 s). */
  readonly deadlineMs?: number | undefined;
  /** The request's method as RFC 9110 names it, in any case (default `GET`). */
  readonly method?: string | undefined;
  /** Whether the call may be made twice with the effect of once; by default, the method's. */
  readonly idempotent?: boolean | undefined;
  /** Whether the adapter makes one idempotency key per call and gives it to every attempt. */
  readonly idempotencyKey?: boolean | undefined;
  /** How the tool reports an accepted operation's progress, for following it. */
  readonly statusReader?: StatusReader<unknown> | undefined;
  /** How long a followed operation may take from its acceptance to its end (default 10 min). */
  readonly operationDeadlineMs?: number | undefined;
  /** `provenance.source_system`; by default the host of the redacted target. */
  readonly sourceSystem?: string | undefined;
  /** `provenance.actor`: who makes the calls. */
  readonly actor?: string | undefined;
  /** The principal and scope the calls run under; never a secret. */
  readonly authority?: Authority | undefined;
  /** Record a `tool.call` span for successes and empties too. */
  readonly traceEveryCall?: boolean | undefined;
  /** Where spans go; OpenTelemetry's global tracer provider by default. */
  readonly tracerProvider?: TracerProvider | undefined;
  /** Where the counters go; OpenTelemetry's global meter provider by default. */
  readonly meterProvider?: MeterProvider | undefined;
  /** Where the log records of events go; see `setLoggerProvider`. */
  readonly loggerProvider?: LoggerProvider | undefined;
  /** The backoff's random draws (a fixed one in tests). */
  readonly jitter?: Jitter | undefined;
  /** The clock (a fake one in tests). */
  readonly clock?: Clock | undefined;
}

/**
 * The host part of a target, cut as the redaction cuts it ({@link urlParts}); the whole target
 * when it has no scheme.
 */
export function hostOf(target: string): string {
  const parts = urlParts(target);
  return parts.scheme !== "" ? parts.host : target;
}

function methodName(method: string): string {
  if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(method)) {
    throw new InvalidSetting("method", method, "must be an HTTP method name such as \"POST\"");
  }
  return method.toUpperCase();
}

function positiveMs(setting: string, value: number): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new InvalidSetting(setting, value, "must be a duration above 0 ms");
  }
  return nsOfMs(value);
}

function notBlank(setting: string, value: string): string {
  if (typeof value !== "string" || value.trim() === "") {
    throw new InvalidSetting(setting, value, "must not be empty or white space");
  }
  return value;
}

/**
 * The settings of an {@link Adapter}, checked and with their defaults: what its calls and
 * followings read.
 *
 * @throws InvalidSetting when a setting is refused (contract 10.1): a blank tool or target, a
 *   zero attempt timeout, deadline or operation deadline, or a retry policy it refuses.
 */
export class AdapterSettings<R> {
  /** The logical tool name. */
  readonly tool: string;
  /** The target, credentials redacted. */
  readonly target: string;
  /** Classifies each attempt's raw result. */
  readonly classifier: Classifier<R>;
  /** The retry policy. */
  readonly policy: RetryPolicy;
  /** How long one attempt may take, in nanoseconds. */
  readonly attemptTimeoutNs: number;
  /** How long a call may take, in nanoseconds. */
  readonly deadlineNs: number;
  /** The request's method, in upper case. */
  readonly method: string;
  /** Whether a call may be made twice with the effect of once. */
  readonly idempotent: boolean;
  /** Whether the adapter makes one idempotency key per call. */
  readonly idempotencyKey: boolean;
  /** How the tool reports an accepted operation's progress, when declared. */
  readonly statusReader: StatusReader<unknown> | undefined;
  /** How long a followed operation may take, in nanoseconds. */
  readonly operationDeadlineNs: number;
  /** `provenance.source_system`. */
  readonly sourceSystem: string;
  /** `provenance.actor`. */
  readonly actor: string | undefined;
  /** The authority calls run under. */
  readonly authority: Authority | undefined;
  /** The backoff's random draws. */
  readonly jitter: Jitter;
  /** The clock. */
  readonly clock: Clock;
  /** Where spans, log records and counts go. */
  readonly telemetry: Telemetry;

  constructor(options: AdapterOptions<R>) {
    this.tool = notBlank("tool", options.tool);
    this.target = redactUrl(notBlank("target", options.target));
    this.classifier = options.classifier;
    this.policy = options.retry instanceof RetryPolicy ? options.retry : new RetryPolicy(options.retry);
    this.attemptTimeoutNs = positiveMs("attemptTimeoutMs", options.attemptTimeoutMs ?? 10_000);
    this.deadlineNs = positiveMs("deadlineMs", options.deadlineMs ?? 30_000);
    this.operationDeadlineNs = positiveMs("operationDeadlineMs", options.operationDeadlineMs ?? 600_000);
    this.method = methodName(options.method ?? "GET");
    this.idempotent = options.idempotent ?? IDEMPOTENT_METHODS.has(this.method);
    this.idempotencyKey = options.idempotencyKey ?? false;
    this.statusReader = options.statusReader;
    this.sourceSystem = options.sourceSystem ?? hostOf(this.target);
    this.actor = options.actor;
    this.authority = options.authority;
    this.jitter = options.jitter ?? new RandomJitter();
    this.clock = options.clock ?? new SystemClock();
    this.telemetry = new Telemetry({
      tool: this.tool,
      target: this.target,
      authority: this.authority === undefined ? undefined : describeAuthority(this.authority),
      sourceSystem: this.sourceSystem,
      actor: this.actor,
      adapterVersion: ADAPTER_VERSION,
      tracerProvider: options.tracerProvider,
      meterProvider: options.meterProvider,
      loggerProvider: options.loggerProvider,
      traceEveryCall: options.traceEveryCall ?? false,
    });
  }

  /** Whether a call may be sent again after a failure that may have been applied (rule RETRY-UNSAFE). */
  get safeToRepeat(): boolean {
    return this.idempotent || this.idempotencyKey;
  }
}
