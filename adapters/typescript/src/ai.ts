/**
 * The Vercel AI SDK (`ai`): a tool whose result reaches the model as the call's class and
 * summary, `@candor/adapter/ai`.
 *
 * {@link envelopeTool} makes an AI SDK tool (`tool({ execute, toModelOutput })`) of a function that
 * makes a call through a Candor adapter and returns its {@link Envelope}:
 *
 * ```ts
 * const tools = {
 *   search: envelopeTool({
 *     description: "Searches the catalogue.",
 *     inputSchema: z.object({ q: z.string() }),
 *     execute: ({ q }) => fetchCall(catalogue, `https://catalogue.example/items?q=${encodeURIComponent(q)}`),
 *     onAccessFailure: "fail",
 *   }),
 * };
 * const result = await generateText({ model, tools, prompt, stopWhen: stepCountIs(5) });
 * ```
 *
 * The tool's output (what the application reads in the steps' tool results and UI messages) is
 * the envelope's JSON: `Envelope.fromJSON(output)` reads it back. What the model is given:
 *
 * | the call ended as | the model is given |
 * |---|---|
 * | success, empty, partial | a `json` output: {@link modelView}, the summary, the outcome (its `class` and what the class carries) and the next actions |
 * | access failure | by `onAccessFailure`: `"fail"` gives an `error-text` output, {@link modelText} (the summary first), which providers that have one send through their error channel; `"throw"` makes `execute` throw a {@link ToolAccessFailure} whose message is {@link modelText}, which the SDK records as a `tool-error` (its `ai.toolCall` span ends with status ERROR) and gives the model as an `error-text` output; `"return"` gives the `json` output of the other classes |
 *
 * An access failure is never handed to the model as an empty result: whichever is chosen, the
 * model reads that the call failed and that the source's contents are unknown. The adapter's own
 * retries have run by then; the choice is what the model does next.
 *
 * `ai` is an optional peer dependency of the package: only this module uses it.
 */

import { type FlexibleSchema, type JSONValue, type Tool, tool, type ToolExecutionOptions } from "ai";

import { modelText, modelView } from "./consumer.js";
import { Envelope, type EnvelopeJson } from "./envelope.js";

/**
 * What the model is given for an access failure: a failed tool output (`"fail"`), a thrown
 * {@link ToolAccessFailure} that the SDK reports as a tool error (`"throw"`), or the summary and
 * the outcome as for the other classes (`"return"`).
 */
export type OnAccessFailure = "fail" | "throw" | "return";

const CHOICES: readonly OnAccessFailure[] = ["fail", "throw", "return"];

/** What {@link modelOutput} gives the model: the AI SDK's tool output, `json` or `error-text`. */
export type EnvelopeModelOutput =
  | { readonly type: "json"; readonly value: JSONValue }
  | { readonly type: "error-text"; readonly value: string };

/**
 * The error an envelope tool's `execute` throws for an access failure, with `onAccessFailure:
 * "throw"`: its message is {@link modelText} of the envelope, what the model is given.
 */
export class ToolAccessFailure extends Error {
  override readonly name = "ToolAccessFailure";

  constructor(
    /** The envelope of the call, an access failure. */
    readonly envelope: Envelope,
  ) {
    super(modelText(envelope));
  }
}

/**
 * What the model is given for an envelope (or its JSON, as a tool's output holds it): an
 * `error-text` output of {@link modelText} for an access failure unless `onAccessFailure` is
 * `"return"`, else a `json` output of {@link modelView}.
 *
 * @throws InvalidEnvelope when `output` is not an envelope's JSON.
 */
export function modelOutput(output: unknown, onAccessFailure: OnAccessFailure): EnvelopeModelOutput {
  const envelope = output instanceof Envelope ? output : Envelope.fromJSON(output);
  if (envelope.outcome.class === "access_failure" && onAccessFailure !== "return") {
    return { type: "error-text", value: modelText(envelope) };
  }
  const { summary, outcome, next_actions } = modelView(envelope);
  return { type: "json", value: { summary, outcome, next_actions: [...next_actions] } };
}

/** How an envelope tool is declared. */
export interface EnvelopeToolOptions<INPUT> {
  /** What the tool does, for the model. */
  readonly description?: string;
  /** The tool's title. */
  readonly title?: string;
  /** The tool's parameters: a zod schema, or the SDK's `jsonSchema(...)`. */
  readonly inputSchema: FlexibleSchema<INPUT>;
  /** Makes the call through a Candor adapter and returns its envelope. */
  readonly execute: (input: INPUT, options: ToolExecutionOptions) => Envelope | PromiseLike<Envelope>;
  /** What the model is given for an access failure; required, see the module. */
  readonly onAccessFailure: OnAccessFailure;
  /** Strict mode for the tool's input, for providers that have one. */
  readonly strict?: boolean;
  /** Provider-specific options of the tool. */
  readonly providerOptions?: NonNullable<Tool<INPUT, EnvelopeJson>["providerOptions"]>;
}

/**
 * An AI SDK tool that gives the model the class and the summary of the call that `execute`
 * makes, and the application the envelope's JSON as the tool's output (see the module).
 *
 * @throws TypeError when `onAccessFailure` is not one of `"fail"`, `"throw"`, `"return"`.
 */
export function envelopeTool<INPUT>(options: EnvelopeToolOptions<INPUT>): Tool<INPUT, EnvelopeJson> {
  const { execute, onAccessFailure, ...declared } = options;
  if (!CHOICES.includes(onAccessFailure)) {
    throw new TypeError(`onAccessFailure must be one of ${CHOICES.join(", ")}, not ${JSON.stringify(onAccessFailure)}`);
  }
  return tool<INPUT, EnvelopeJson>({
    ...declared,
    execute: async (input: INPUT, executionOptions: ToolExecutionOptions): Promise<EnvelopeJson> => {
      const envelope: unknown = await execute(input, executionOptions);
      if (!(envelope instanceof Envelope)) {
        throw new TypeError(`the tool's execute returned ${envelope === null ? "null" : typeof envelope}, not an Envelope`);
      }
      if (envelope.outcome.class === "access_failure" && onAccessFailure === "throw") {
        throw new ToolAccessFailure(envelope);
      }
      return envelope.toJSON();
    },
    toModelOutput: ({ output }) => modelOutput(output, onAccessFailure),
  });
}
