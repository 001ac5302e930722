/**
 * A sampler that keeps the adapter's failure spans whatever the host's sampler says (contract
 * 10.2). It implements OpenTelemetry's `Sampler` interface from `@opentelemetry/api`, which the
 * SDK's tracer provider takes:
 *
 * @example
 * new BasicTracerProvider({ sampler: new KeepToolFailures(new TraceIdRatioBasedSampler(0.01)) })
 */

// The API's `Sampler` declarations are deprecated in favour of the SDK's, which have the same
// shape; they are used here so that the adapter depends at run time on `@opentelemetry/api` only.
/* eslint-disable @typescript-eslint/no-deprecated */
import {
  type Attributes,
  type Context,
  type Link,
  type Sampler,
  SamplingDecision,
  type SamplingResult,
  type SpanKind,
  trace,
} from "@opentelemetry/api";

import { attr, TOOL_CALL_SPAN } from "./names.js";

/**
 * Whether a span about to start is an adapter span to keep: a `tool.call` span whose start
 * attributes hold `tool.failure.kind`, `tool.lifecycle.state` (a lost acceptance hides an
 * operation that never finished), or `tool.outcome.class` `access_failure` or `partial`.
 */
export function isToolFailure(name: string, attributes: Attributes | undefined): boolean {
  if (name !== TOOL_CALL_SPAN || attributes === undefined) {
    return false;
  }
  const cls = attributes[attr.OUTCOME_CLASS];
  return (
    attributes[attr.FAILURE_KIND] !== undefined ||
    attributes[attr.LIFECYCLE_STATE] !== undefined ||
    cls === "access_failure" ||
    cls === "partial"
  );
}

/**
 * Wraps the host's sampler so that no failure span is dropped: a `tool.call` span that records
 * an access failure, a partial or an operation's states is always recorded and sampled, with the
 * parent's trace state; every other span is left to the wrapped sampler.
 */
export class KeepToolFailures implements Sampler {
  constructor(
    /** The host's sampler. */
    readonly inner: Sampler,
  ) {}

  /** Records and samples a failure span; asks the wrapped sampler about every other. */
  shouldSample(
    context: Context,
    traceId: string,
    spanName: string,
    spanKind: SpanKind,
    attributes: Attributes,
    links: Link[],
  ): SamplingResult {
    if (isToolFailure(spanName, attributes)) {
      const traceState = trace.getSpanContext(context)?.traceState;
      return traceState === undefined
        ? { decision: SamplingDecision.RECORD_AND_SAMPLED }
        : { decision: SamplingDecision.RECORD_AND_SAMPLED, traceState };
    }
    return this.inner.shouldSample(context, traceId, spanName, spanKind, attributes, links);
  }

  /** `KeepToolFailures{inner}`. */
  toString(): string {
    return `KeepToolFailures{${this.inner.toString()}}`;
  }
}
/* eslint-enable @typescript-eslint/no-deprecated */
