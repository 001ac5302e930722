import assert from "node:assert/strict";
import { test } from "node:test";

import {
  type Attempt,
  Envelope,
  type EnvelopeInit,
  InvalidEnvelope,
  accessFailure,
  empty,
  hostOf,
  partial,
  redactText,
  redactUrl,
  success,
  urlParts,
} from "../src/index.js";

const PROVENANCE = {
  source_system: "search.example",
  adapter: "candor-adapter-typescript/0.1.0",
  started_at: "2027-01-15T08:00:00.000000Z",
  finished_at: "2027-01-15T08:00:00.040000Z",
};
const ATTEMPT: Attempt = { number: 1, started_at: PROVENANCE.started_at, duration_ms: 40, class: "success" };

function envelope(init: Partial<EnvelopeInit>): Envelope {
  return new Envelope({
    tool: "search",
    target: "https://search.example/v1/items",
    outcome: success([1, 2], { items: 2 }),
    provenance: PROVENANCE,
    attempts: [ATTEMPT],
    ...init,
  });
}

function refusal(action: () => unknown): InvalidEnvelope {
  try {
    action();
  } catch (error) {
    assert.ok(error instanceof InvalidEnvelope, String(error));
    return error;
  }
  assert.fail("the envelope was read");
}

test("an envelope written and read back is the same JSON", () => {
  const written = envelope({ authority: { principal: "svc-search" }, evidence: { kind: "request_id", value: "r-1" } });
  const text = written.stringify();
  assert.equal(Envelope.parse(text).stringify(), text);
  assert.deepEqual(Envelope.fromJSON(JSON.parse(text)).toJSON(), written.toJSON());
});

test("an optional field without a value is left out, never written as null", () => {
  const json = envelope({}).toJSON();
  assert.deepEqual(Object.keys(json), [
    "schema_version",
    "tool",
    "target",
    "outcome",
    "next_actions",
    "provenance",
    "attempts",
  ]);
});

test("an optional field given as null is read as absent", () => {
  const json = envelope({}).toJSON();
  const read = Envelope.fromJSON({ ...json, evidence: null, lifecycle: null, authority: null });
  assert.deepEqual(read.toJSON(), json);
});

test("payload objects are written with their keys in order", () => {
  const written = envelope({ outcome: success({ b: 1, a: { d: 2, c: 3 } }, {}) }).stringify();
  assert.ok(written.includes('"payload":{"a":{"c":3,"d":2},"b":1}'), written);
});

test("an integer field written with a fraction is refused in text", () => {
  const text = envelope({}).stringify().replace('"duration_ms":40', '"duration_ms":40.0');
  assert.equal(refusal(() => Envelope.parse(text)).rule, "schema");
});

test("a field given twice is refused", () => {
  const text = envelope({}).stringify().replace('"tool":"search"', '"tool":"search","tool":"other"');
  assert.equal(refusal(() => Envelope.parse(text)).rule, "schema");
});

test("text that is not JSON is a schema error", () => {
  assert.equal(refusal(() => Envelope.parse("{")).rule, "schema");
});

test("a timestamp with any number of fractional digits or +00:00 is accepted and written in six digits", () => {
  const json = envelope({}).toJSON();
  const read = Envelope.fromJSON({
    ...json,
    provenance: { ...PROVENANCE, started_at: "2027-01-15T08:00:00Z", finished_at: "2027-01-15T08:00:00.04012345+00:00" },
  });
  assert.equal(read.provenance.started_at, "2027-01-15T08:00:00.000000Z");
  assert.equal(read.provenance.finished_at, "2027-01-15T08:00:00.040123Z");
});

test("a timestamp before 1970 is refused", () => {
  const json = envelope({}).toJSON();
  const provenance = { ...PROVENANCE, started_at: "1969-12-31T23:59:59Z" };
  assert.equal(refusal(() => Envelope.fromJSON({ ...json, provenance })).rule, "schema");
});

test("the checks run in order: shape, then version, then next actions", () => {
  const json = envelope({}).toJSON();
  assert.equal(refusal(() => Envelope.fromJSON({ ...json, schema_version: 2, next_actions: ["retry"] })).rule, "version");
  assert.equal(refusal(() => Envelope.fromJSON({ ...json, schema_version: 2, extra: 1 })).rule, "schema");
});

test("a success summary says the answer is complete, with its items", () => {
  assert.equal(envelope({}).summary(), "search: complete answer from https://search.example/v1/items with 2 item(s).");
  assert.equal(
    envelope({ outcome: success({ id: 1 }) }).summary(),
    "search: complete answer from https://search.example/v1/items.",
  );
});

test("an acceptance's summary says it has not completed", () => {
  const accepted = envelope({
    outcome: success(null),
    lifecycle: { state: "accepted", operation: { id: "op-1" } },
  });
  assert.equal(
    accepted.summary(),
    "search: https://search.example/v1/items accepted the request; operation op-1 is accepted and has not " +
      "completed yet. Poll its status before relying on the result.",
  );
  assert.deepEqual(accepted.next_actions, ["poll", "compensate", "escalate"]);
});

test("an empty summary is a verified absence", () => {
  assert.equal(
    envelope({ outcome: empty({ items: 0 }) }).summary(),
    "search: https://search.example/v1/items was reached and confirmed that nothing matches. This is a verified absence.",
  );
});

test("a partial summary gives what it covered and dropped and is never the whole", () => {
  const cut = envelope({
    outcome: partial([1, 2, 3], { kind: "declared_total", covered: "items 1-3 of 10", dropped: "7 item(s)" }),
  });
  assert.equal(
    cut.summary(),
    "search: PARTIAL answer from https://search.example/v1/items (declared_total): covered items 1-3 of 10; " +
      "dropped 7 item(s). Do not treat it as the whole answer.",
  );
});

test("an access failure summary says the contents are unknown, never an absence", () => {
  const failed = envelope({
    outcome: accessFailure({ kind: "server_error", retryable: true, message: "HTTP 503 Service Unavailable", status: 503 }),
    attempts: [ATTEMPT, { ...ATTEMPT, number: 2 }, { ...ATTEMPT, number: 3 }],
  });
  const summary = failed.summary();
  assert.equal(
    summary,
    "search: FAILED to get an answer from https://search.example/v1/items (server_error, HTTP 503, exhausted after " +
      "3 attempt(s)): HTTP 503 Service Unavailable. The source's contents are unknown; nothing can be concluded " +
      "from this call.",
  );
  const own = summary.replace("HTTP 503 Service Unavailable", "");
  for (const absence of ["no results", "not found", "nothing matches", "empty"]) {
    assert.ok(!own.toLowerCase().includes(absence), absence);
  }
  const permanent = envelope({ outcome: accessFailure({ kind: "auth", retryable: false, message: "denied" }) });
  assert.ok(permanent.summary().includes("(auth, permanent after 1 attempt(s))"));
});

test("a '/', '@', ':' or '#' its client did not encode in a password is redacted with it", () => {
  const cases: [string, string][] = [
    ["https://bob:pa/ss@api.example/v1", "https://REDACTED@api.example/v1"],
    ["https://bob:p@ss@api.example/v1", "https://REDACTED@api.example/v1"],
    ["https://bob:pa:ss@api.example/v1", "https://REDACTED@api.example/v1"],
    ["https://bob:pa#ss@api.example", "https://REDACTED@api.example"],
    ["https://bob:pa/s#s@api.example/v1", "https://REDACTED@api.example/v1"],
    ["https://bob:12#34@api.example/v1?token=x#frag", "https://REDACTED@api.example/v1?token=REDACTED#frag"],
    // A host with a port and an '@' after it is taken for user-info: the host is hidden.
    ["https://api.example:8443/p#a@b", "https://REDACTED@b"],
    ["http://h:8080/@me", "http://REDACTED@me"],
    // A '://' after the query is no scheme: the query is still redacted.
    ["orders-db?token=x&next=https://u:p@h", "orders-db?token=REDACTED&next=https://u:p@h"],
  ];
  for (const [raw, want] of cases) {
    assert.equal(redactUrl(raw), want, raw);
    assert.equal(redactUrl(want), want, want);
  }
  for (const raw of [
    "https://api.example/p#a@b",
    "https://social.example/@bob/statuses?q=cats",
    "https://REDACTED@api.example/x",
    "orders-db?next=https://u:p@h",
  ]) {
    assert.equal(redactUrl(raw), raw, raw);
  }
  // Any '/', '#' and ':', and an '@' after the last '/' (an '@' before a '/' ends the
  // authority's user-info there, by the rule).
  let seed = 20270115;
  const pick = (alphabet: string): string => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return alphabet.charAt(seed % alphabet.length);
  };
  for (let i = 0; i < 2000; i += 1) {
    const before = Array.from({ length: i % 6 }, () => pick("qk/#:")).join("");
    const password = before + Array.from({ length: 1 + (i % 4) }, () => pick("qk#:@")).join("");
    for (const tail of ["/v1", "/v1?q=1#top", ""]) {
      assert.equal(redactUrl(`https://bob:${password}@host.test${tail}`), `https://REDACTED@host.test${tail}`, password);
    }
  }
});

test("the host of a redacted target is cut as the redaction cuts", () => {
  const cases: [string, string][] = [
    ["https://bob:12#34@api.example/v1?token=x#frag", "api.example"],
    ["https://bob:pa/ss@api.example/v1", "api.example"],
    ["https://bob:p@ss@api.example:8443/v1", "api.example:8443"],
    ["https://api.example/p#a@b", "api.example"],
    ["https://api.example:8443/p#a@b", "b"],
    ["http://127.0.0.1:8080/x?y", "127.0.0.1:8080"],
    ["orders-db?token=x", "orders-db?token=REDACTED"],
    ["orders-db?next=https://h", "orders-db?next=https://h"],
  ];
  for (const [target, host] of cases) {
    assert.equal(hostOf(redactUrl(target)), host, target);
  }
  assert.deepEqual(urlParts("https://bob:p#ss@api.example:8443/v1?q=1#top"), {
    scheme: "https://",
    userInfo: "bob:p#ss",
    host: "api.example:8443",
    path: "/v1",
    query: "q=1",
    fragment: "top",
  });
  assert.deepEqual(urlParts("orders-db?next=https://u:p@h#x"), {
    scheme: "",
    userInfo: undefined,
    host: "",
    path: "orders-db",
    query: "next=https://u:p@h",
    fragment: "x",
  });
});

test("the contract's redaction examples", () => {
  assert.equal(
    redactUrl("https://bob:hunter2@api.example.com/v1/search?q=cats&access_token=abc#x"),
    "https://REDACTED@api.example.com/v1/search?q=cats&access_token=REDACTED#x",
  );
  assert.equal(redactUrl("orders-db?token=x"), "orders-db?token=REDACTED");
  assert.equal(redactText("Authorization: Basic abc.def"), "Authorization: Basic REDACTED");
  assert.equal(
    redactText('{"access_token": "abc.def", "ok": true}'),
    '{"access_token": "REDACTED", "ok": true}',
  );
  assert.equal(redactText("sent Bearer eyJhbGci and gave up"), "sent Bearer REDACTED and gave up");
  assert.equal(redactText("the token expired"), "the token expired");
  assert.equal(redactUrl("https://h.example/p?X-Amz-Signature=s&user=u"), "https://h.example/p?X-Amz-Signature=REDACTED&user=u");
  assert.equal(redactUrl("https://h.example/p?x%2Dapi%2Dkey=k"), "https://h.example/p?x%2Dapi%2Dkey=REDACTED");
});
