// Real Vercel AI SDK emitter for Candor's end-to-end tests.
//
// Runs `generateText` from the `ai` package with a mock language model that
// asks for tool calls, with `experimental_telemetry` on, so the SDK itself
// emits its `ai.generateText` / `ai.generateText.doGenerate` / `ai.toolCall`
// spans. The spans are exported over OTLP/HTTP protobuf to the collector.
//
// Input (stdin, JSON):
//   {
//     "endpoint": "http://127.0.0.1:4318",      // OTLP/HTTP base URL; spans go to ${endpoint}/v1/traces
//     "resource": {"service.name": "...", ...},  // resource attributes
//     "call_id_prefix": "call_"                  // optional; prefix of every toolCallId
//   }
// Output (stdout, JSON):
//   {"service": "...", "calls": {"weather": 2, "explode": 1, "mcp_search": 1},
//    "sdk": "<ai version>", "tool_call_ids": {...}}
//
// Tools:
//   weather     returns a normal result (2 calls)
//   explode     execute throws an Error (1 call) -> span status ERROR + exception event
//   mcp_search  returns an MCP CallToolResult with isError: true as a normal
//               value (1 call) -> span stays OK; the failure is only visible in
//               `ai.toolCall.result`
//
// Dump mode: with CANDOR_DUMP_SPANS=/path.json the spans go to an in-memory
// exporter instead and are written to that file as JSON (no endpoint needed).
//
// Install with `npm ci` in this folder, run with `node emit.mjs < spec.json`.

import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

import { SpanKind } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { generateText, stepCountIs, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';

const require = createRequire(import.meta.url);
const AI_VERSION = require('ai/package.json').version;

const FUNCTION_ID = 'candor-e2e-vercel-ai';

function readSpec() {
  let raw = '';
  try {
    raw = readFileSync(0, 'utf8');
  } catch {
    raw = '';
  }
  raw = raw.trim();
  return raw === '' ? {} : JSON.parse(raw);
}

const spec = readSpec();
const dumpPath = process.env.CANDOR_DUMP_SPANS || '';
const resourceAttrs = { ...(spec.resource ?? {}) };
const prefix = typeof spec.call_id_prefix === 'string' ? spec.call_id_prefix : 'call_';

if (!dumpPath && !spec.endpoint) {
  console.error('emit.mjs: spec.endpoint is required unless CANDOR_DUMP_SPANS is set');
  process.exit(2);
}

// ---------------------------------------------------------------- telemetry

const resource = resourceFromAttributes(resourceAttrs);
let memoryExporter = null;
const exportFailures = [];
let spanProcessor;
if (dumpPath) {
  memoryExporter = new InMemorySpanExporter();
  spanProcessor = new SimpleSpanProcessor(memoryExporter);
} else {
  const url = `${String(spec.endpoint).replace(/\/+$/, '')}/v1/traces`;
  const otlp = new OTLPTraceExporter({ url });
  // Count failed exports so a collector that refused the spans fails the run.
  const counting = {
    export(spans, done) {
      otlp.export(spans, (result) => {
        if (result.code !== 0) {
          exportFailures.push(String(result.error?.message ?? result.error ?? 'export failed'));
        }
        done(result);
      });
    },
    shutdown: () => otlp.shutdown(),
    forceFlush: () => otlp.forceFlush(),
  };
  spanProcessor = new BatchSpanProcessor(counting, { scheduledDelayMillis: 200 });
}
const provider = new NodeTracerProvider({ resource, spanProcessors: [spanProcessor] });
// Global tracer provider plus the AsyncLocalStorage context manager, so the
// SDK's nested spans get their parents.
provider.register();

// ---------------------------------------------------------------- the run

const ids = {
  weather: [`${prefix}weather_1`, `${prefix}weather_2`],
  explode: [`${prefix}explode_1`],
  mcp_search: [`${prefix}mcp_search_1`],
};

const usage = (input, output) => ({
  inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: output, text: output, reasoning: undefined },
});

const toolCall = (toolCallId, toolName, input) => ({
  type: 'tool-call',
  toolCallId,
  toolName,
  input: JSON.stringify(input),
});

// One model response per step: step 0 and 1 ask for tools, step 2 answers.
const steps = [
  [
    toolCall(ids.weather[0], 'weather', { city: 'Oslo' }),
    toolCall(ids.explode[0], 'explode', { reason: 'e2e' }),
  ],
  [
    toolCall(ids.weather[1], 'weather', { city: 'Lima' }),
    toolCall(ids.mcp_search[0], 'mcp_search', { query: 'candor' }),
  ],
];

let modelCalls = 0;
const model = new MockLanguageModelV3({
  provider: 'candor-mock',
  modelId: 'candor-mock-tools',
  doGenerate: async () => {
    const step = modelCalls++;
    const now = new Date();
    if (step < steps.length) {
      return {
        content: steps[step],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage: usage(10 + step, 5),
        response: { id: `resp-${step}`, modelId: 'candor-mock-tools', timestamp: now },
        warnings: [],
      };
    }
    return {
      content: [{ type: 'text', text: 'Oslo is mild, Lima is warm; the search index was unavailable.' }],
      finishReason: { unified: 'stop', raw: 'stop' },
      usage: usage(20, 12),
      response: { id: `resp-${step}`, modelId: 'candor-mock-tools', timestamp: now },
      warnings: [],
    };
  },
});

const executed = { weather: 0, explode: 0, mcp_search: 0 };

const tools = {
  weather: tool({
    description: 'Current weather for a city.',
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      executed.weather++;
      return { city, temperature_c: city === 'Oslo' ? 7 : 22, conditions: 'clear' };
    },
  }),
  explode: tool({
    description: 'Always fails.',
    inputSchema: z.object({ reason: z.string() }),
    execute: async ({ reason }) => {
      executed.explode++;
      throw new Error(`explode tool failed: ${reason}`);
    },
  }),
  mcp_search: tool({
    description: 'Search through an MCP server.',
    inputSchema: z.object({ query: z.string() }),
    // What @ai-sdk/mcp hands back for a server-side tool error: a normal
    // return value carrying isError: true.
    execute: async () => {
      executed.mcp_search++;
      return { content: [{ type: 'text', text: 'upstream index unavailable' }], isError: true };
    },
  }),
};

let exitCode = 0;
try {
  await generateText({
    model,
    tools,
    prompt: 'Weather in Oslo and Lima, then search the index for candor.',
    stopWhen: stepCountIs(steps.length + 1),
    experimental_telemetry: {
      isEnabled: true,
      recordInputs: true,
      recordOutputs: true,
      functionId: FUNCTION_ID,
    },
  });
} catch (err) {
  console.error('emit.mjs: generateText failed:', err);
  exitCode = 1;
}

const expected = { weather: 2, explode: 1, mcp_search: 1 };
for (const [name, n] of Object.entries(expected)) {
  if (executed[name] !== n) {
    console.error(`emit.mjs: tool ${name} ran ${executed[name]} times, expected ${n}`);
    exitCode = 1;
  }
}

// ---------------------------------------------------------------- flush

try {
  await provider.forceFlush();
} catch (err) {
  exportFailures.push(`flush: ${err?.message ?? err}`);
}

if (memoryExporter) {
  const kindName = Object.fromEntries(Object.entries(SpanKind).filter(([, v]) => typeof v === 'number').map(([k, v]) => [v, k]));
  const statusName = { 0: 'UNSET', 1: 'OK', 2: 'ERROR' };
  const hr = (t) => `${t[0]}.${String(t[1]).padStart(9, '0')}`;
  const spans = memoryExporter.getFinishedSpans().map((s) => {
    const ctx = s.spanContext();
    return {
      name: s.name,
      kind: s.kind,
      kind_name: kindName[s.kind],
      trace_id: ctx.traceId,
      span_id: ctx.spanId,
      parent_span_id: s.parentSpanContext?.spanId ?? null,
      status: { code: s.status.code, code_name: statusName[s.status.code], message: s.status.message ?? null },
      start_time: hr(s.startTime),
      end_time: hr(s.endTime),
      attributes: s.attributes,
      events: s.events.map((e) => ({ name: e.name, time: hr(e.time), attributes: e.attributes ?? {} })),
      links: s.links,
      instrumentation_scope: s.instrumentationScope,
      resource: s.resource.attributes,
    };
  });
  writeFileSync(dumpPath, `${JSON.stringify({ sdk: `ai@${AI_VERSION}`, spans }, null, 2)}\n`);
}

try {
  await provider.shutdown();
} catch (err) {
  exportFailures.push(`shutdown: ${err?.message ?? err}`);
}

if (exportFailures.length > 0) {
  console.error(`emit.mjs: ${exportFailures.length} OTLP export(s) failed: ${exportFailures.join('; ')}`);
  exitCode = 1;
}

const service = resourceAttrs['service.name'] ?? provider.resource?.attributes?.['service.name'] ?? null;
process.stdout.write(
  `${JSON.stringify({ service, calls: executed, sdk: AI_VERSION, tool_call_ids: ids })}\n`,
);
process.exit(exitCode);
