// The consumer's side: one arm per class, none left to a default, checked by the TypeScript
// compiler; and what a model is given for a call.

import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";

import ts from "typescript";

import { type Envelope, matchOutcome, modelText, modelView, type Outcome, type OutcomeArms } from "../src/index.js";
import { answered, CLASSES, OUTCOMES } from "./support/envelopes.js";
import { PACKAGE_ROOT } from "./support/paths.js";

type Seen = [string, Outcome, Envelope][];

function recordingArms(seen: Seen): OutcomeArms<string, string, string, string> {
  const arm =
    (name: string) =>
    (outcome: Outcome, envelope: Envelope): string => {
      seen.push([name, outcome, envelope]);
      return name;
    };
  return { success: arm("success"), empty: arm("empty"), partial: arm("partial"), access_failure: arm("access_failure") };
}

for (const name of CLASSES) {
  test(`matchOutcome calls the ${name} arm with the outcome and the envelope`, () => {
    const envelope = answered(OUTCOMES[name]);
    const seen: Seen = [];
    assert.equal(matchOutcome(envelope, recordingArms(seen)), name);
    assert.deepEqual(seen, [[name, envelope.outcome, envelope]]);
  });
}

test("matchOutcome returns what the arm returns, each arm given its class's fields", () => {
  const describe = (envelope: Envelope): string | number | null =>
    matchOutcome(envelope, {
      success: (outcome) => outcome.extent.items ?? null,
      empty: (_, whole) => `nothing in ${whole.target}`,
      partial: (outcome) => outcome.truncation.covered,
      access_failure: (outcome) => outcome.failure.message,
    });
  assert.equal(describe(answered(OUTCOMES.success)), 2);
  assert.equal(describe(answered(OUTCOMES.empty)), "nothing in https://catalogue.example/v1/items");
  assert.equal(describe(answered(OUTCOMES.partial)), "items 1-1 of 5");
  assert.equal(describe(answered(OUTCOMES.access_failure)), "HTTP 503: the catalogue is busy");
});

test("an arm left out is refused at run time too, whatever the class", () => {
  const arms = recordingArms([]);
  const withoutPartial = { success: arms.success, empty: arms.empty, access_failure: arms.access_failure };
  assert.throws(
    () => matchOutcome(answered(OUTCOMES.success), withoutPartial as unknown as typeof arms),
    (error: unknown) => error instanceof TypeError && error.message.includes("missing: partial"),
  );
});

const SNIPPETS = ["all", "missing", "mistyped"] as const;
type Snippet = (typeof SNIPPETS)[number];

/**
 * Type-checks the snippets, as files of the package's tests, in one program (one compilation),
 * and returns each one's diagnostics as text: `line: TScode message`.
 */
function typeCheck(sources: Readonly<Record<Snippet, string>>): Record<Snippet, string[]> {
  const fileOf = (snippet: Snippet): string => path.join(PACKAGE_ROOT, "test", `__match_${snippet}__.ts`);
  const virtual = new Map(SNIPPETS.map((snippet) => [fileOf(snippet), sources[snippet]]));
  const config = ts.getParsedCommandLineOfConfigFile(path.join(PACKAGE_ROOT, "tsconfig.test.json"), {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"));
    },
  });
  assert.ok(config !== undefined);
  const options = { ...config.options, noEmit: true };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, version, ...rest) => {
    const source = virtual.get(path.resolve(name));
    return source === undefined ? getSourceFile(name, version, ...rest) : ts.createSourceFile(name, source, version);
  };
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => virtual.has(path.resolve(name)) || fileExists(name);
  const program = ts.createProgram({ rootNames: [...virtual.keys()], options, host });
  const found: Record<Snippet, string[]> = { all: [], missing: [], mistyped: [] };
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const snippet = SNIPPETS.find((s) => d.file !== undefined && path.resolve(d.file.fileName) === fileOf(s));
    assert.ok(snippet !== undefined && d.start !== undefined, ts.flattenDiagnosticMessageText(d.messageText, " "));
    const line = (d.file?.getLineAndCharacterOfPosition(d.start).line ?? 0) + 1;
    found[snippet].push(`${line}: TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, " ")}`);
  }
  return found;
}

const SNIPPET = (arms: string): string => `
import type { Envelope } from "../src/envelope.js";
import { matchOutcome } from "../src/consumer.js";

export function describe(envelope: Envelope): string {
  return matchOutcome(envelope, {
${arms}
  });
}
`;

const ALL_ARMS = [
  "    success: (outcome) => String(outcome.extent.items),",
  "    empty: (_, envelope) => envelope.target,",
  "    partial: (outcome) => outcome.truncation.covered,",
  "    access_failure: (outcome) => outcome.failure.message,",
];

const MISTYPED = [...ALL_ARMS];
MISTYPED[0] = "    success: (outcome) => outcome.truncation.covered,";
MISTYPED[3] = "    access_failure: (outcome) => String(outcome.payload),";

let checked: Record<Snippet, string[]> | undefined;

/** The diagnostics of the three snippets, compiled once for the three tests. */
function diagnostics(snippet: Snippet): string[] {
  checked ??= typeCheck({
    all: SNIPPET(ALL_ARMS.join("\n")),
    missing: SNIPPET(ALL_ARMS.filter((arm) => !arm.includes("partial:")).join("\n")),
    mistyped: SNIPPET(MISTYPED.join("\n")),
  });
  return checked[snippet];
}

test("the type checker accepts a match with the four arms", () => {
  assert.deepEqual(diagnostics("all"), []);
});

test("the type checker refuses a match without an arm", () => {
  const found = diagnostics("missing");
  assert.equal(found.length, 1, found.join("\n"));
  assert.match(found[0] ?? "", /^6: TS2345 .*Property 'partial' is missing in type .* but required in type 'OutcomeArms<string, string, string, string>'/);
});

test("the type checker gives each arm its class's outcome, and no other", () => {
  const found = diagnostics("mistyped");
  assert.deepEqual(
    found.map((d) => d.replace(/^(\d+: TS\d+) .*(on type '\w+').*$/, "$1 $2")),
    ["7: TS2339 on type 'SuccessOutcome'", "10: TS2339 on type 'AccessFailureOutcome'"],
    found.join("\n"),
  );
});

for (const name of CLASSES) {
  test(`the model view of ${name} is the summary, the outcome and the next actions`, () => {
    const envelope = answered(OUTCOMES[name]);
    const view = modelView(envelope);
    assert.deepEqual(view, {
      summary: envelope.summary(),
      outcome: envelope.toJSON()["outcome"],
      next_actions: [...envelope.next_actions],
    });
    assert.deepEqual(Object.keys(view), ["summary", "outcome", "next_actions"]);
    const [summary, rest, ...more] = modelText(envelope).split("\n");
    assert.equal(summary, envelope.summary());
    assert.deepEqual(JSON.parse(rest ?? ""), { outcome: view.outcome, next_actions: view.next_actions });
    assert.deepEqual(more, []);
  });
}

test("an access failure is handed over as a failure, never as an absence", () => {
  const envelope = answered(OUTCOMES.access_failure);
  const view = modelView(envelope);
  assert.deepEqual(view.outcome, {
    class: "access_failure",
    failure: {
      kind: "server_error",
      retryable: true,
      message: "HTTP 503: the catalogue is busy",
      status: 503,
      error_type: "503",
    },
  });
  assert.deepEqual(view.next_actions, ["retry", "escalate"]);
  assert.match(view.summary, /FAILED/);
  assert.match(view.summary, /exhausted after 3 attempt\(s\)/);
  assert.match(view.summary, /The source's contents are unknown; nothing can be concluded/);
  assert.doesNotMatch(view.summary, /no results|not found|nothing matches|empty/i);
});
