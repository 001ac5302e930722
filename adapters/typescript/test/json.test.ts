import assert from "node:assert/strict";
import { test } from "node:test";

import {
  compact,
  encodeUtf8,
  fromPlain,
  jsonEqual,
  JsonNumber,
  JsonParseError,
  JsonPointer,
  type JsonValue,
  parseJsonBytes,
  parseJsonPlain,
  parseJsonText,
  pointer,
  toPlain,
} from "../src/index.js";

function parseError(text: string): JsonParseError {
  try {
    parseJsonText(text);
  } catch (error) {
    assert.ok(error instanceof JsonParseError, String(error));
    return error;
  }
  assert.fail(`${text} parsed`);
}

test("an integer is not a float, and true is not 1 (section 5.3)", () => {
  assert.ok(!jsonEqual(parseJsonText("1"), parseJsonText("1.0")));
  assert.ok(!jsonEqual(parseJsonText("true"), parseJsonText("1")));
  assert.ok(jsonEqual(parseJsonText('{"a":1,"b":[2]}'), parseJsonText('{"b":[2],"a":1}')));
  assert.ok(jsonEqual(parseJsonText("1"), fromPlain(1)));
  assert.ok(jsonEqual(parseJsonText("1.5"), fromPlain(1.5)));
});

test("integers keep their exact value up to 2^64−1, and beyond it are floats", () => {
  const big = parseJsonText("18446744073709551615");
  assert.ok(big instanceof JsonNumber && big.integer === 18446744073709551615n);
  const beyond = parseJsonText("18446744073709551616");
  assert.ok(beyond instanceof JsonNumber && beyond.integer === undefined);
  const minusZero = parseJsonText("-0");
  assert.ok(minusZero instanceof JsonNumber && minusZero.integer === undefined);
});

test("a text that ends early is told apart from one that is not JSON", () => {
  const early = parseError('{"items":[1,2,');
  assert.equal(early.eof, true);
  assert.equal(early.message, "EOF while parsing a value at line 1 column 14");
  assert.equal(parseError("[1,2").message, "EOF while parsing a list at line 1 column 4");
  assert.equal(parseError('{"a":"b').eof, true);
  const html = parseError("<html>");
  assert.equal(html.eof, false);
  assert.equal(html.message, "expected value at line 1 column 1");
  assert.equal(parseError("[1,]").message, "trailing comma at line 1 column 4");
  assert.equal(parseError("NaN").eof, false);
  assert.equal(parseError("1e999").message, "number out of range at line 1 column 5");
  assert.equal(parseError("[1]\n x").message, "trailing characters at line 2 column 2");
});

test("strings are read as UTF-8, escapes and surrogate pairs included", () => {
  assert.equal(parseJsonText('"a\\u00e9\\ud83d\\ude00\\n"'), "aé😀\n");
  assert.equal(parseError('"\\udc00"').message, "lone leading surrogate in hex escape at line 1 column 7");
  const invalid = new Uint8Array([0x22, 0xff, 0x22]);
  assert.throws(() => parseJsonBytes(invalid), /invalid unicode code point/);
  assert.throws(() => parseJsonBytes(encodeUtf8("\ufeff[]")), /expected value/);
});

test("nesting deeper than 127 levels is refused", () => {
  assert.doesNotThrow(() => parseJsonText("[".repeat(127) + "]".repeat(127)));
  assert.match(parseError("[".repeat(128) + "]".repeat(128)).message, /recursion limit exceeded/);
});

test("a key given twice is refused when asked, else the last counts", () => {
  assert.deepEqual(toPlain(parseJsonText('{"a":1,"a":2}')), { a: 2 });
  assert.throws(() => parseJsonText('{"a":1,"a":2}', { refuseDuplicateKeys: true }), /duplicate field `a`/);
});

test("JSON pointers follow RFC 6901", () => {
  const doc = parseJsonText('{"a/b":{"m~n":[10,20]},"":0}');
  assert.ok(jsonEqual(pointer(doc, "/a~1b/m~0n/1") ?? null, fromPlain(20)));
  assert.equal(pointer(doc, "/a~1b/m~0n/01"), undefined);
  assert.equal(pointer(doc, "/missing"), undefined);
  assert.ok(jsonEqual(pointer(doc, "/") ?? null, fromPlain(0)));
  assert.equal(pointer(doc, "a"), undefined);
});

test("compact JSON lists keys in order and writes floats as the Rust writer does", () => {
  assert.equal(compact(parseJsonText('{"b":1.0,"a":[true,null,"x"],"c":1e20,"d":0.00001,"e":1.5e-7}')),
    '{"a":[true,null,"x"],"b":1.0,"c":1e+20,"d":0.00001,"e":1.5e-7}');
  assert.equal(compact(parseJsonText("42")), "42");
  assert.equal(compact(parseJsonText("-2.5")), "-2.5");
});

test("a key named __proto__ is an own member of a payload", () => {
  const plain = toPlain(parseJsonText('{"__proto__":{"x":1}}'));
  assert.ok(plain !== null && typeof plain === "object" && !Array.isArray(plain));
  assert.deepEqual(Object.keys(plain), ["__proto__"]);
  assert.equal(Object.getPrototypeOf(plain), Object.prototype);
});

/** What parseJsonPlain gives for `data`, and what the parser and toPlain give: a value or the error's message. */
function bothReadings(data: Uint8Array): [JsonValue | string, JsonValue | string] {
  const read = (parse: () => JsonValue): JsonValue | string => {
    try {
      return parse();
    } catch (error) {
      assert.ok(error instanceof JsonParseError, String(error));
      return `${error.message} (eof: ${error.eof})`;
    }
  };
  return [read(() => parseJsonPlain(data)), read(() => toPlain(parseJsonBytes(data)))];
}

test("parseJsonPlain reads a body as the parser then toPlain do, values and errors", () => {
  const texts = [
    '{"items":[1,2],"next":null,"total":1.50,"big":18446744073709551616,"neg":-0}',
    '{"a":1,"a":2,"b":{"c":[true,false,""]}}',
    '{"__proto__":{"x":1},"2":"two","1":"one"}',
    // What JSON.parse reads otherwise, or takes where the parser refuses: the parser reads them.
    '"\\ud83d\\ude00"',
    '"\\udc00"',
    "[1e5, 2.5E-3, -1e400]",
    "1" + "0".repeat(400),
    "[".repeat(127) + "]".repeat(127),
    "[".repeat(128) + "]".repeat(128),
    // Not JSON.
    '{"items":[1,2,',
    "<html>",
    "[1,]",
  ];
  for (const text of texts) {
    const [plain, parsed] = bothReadings(encodeUtf8(text));
    assert.deepEqual(plain, parsed, text.slice(0, 40));
  }
  const [plain, parsed] = bothReadings(new Uint8Array([0x5b, 0x22, 0xff, 0x22, 0x5d]));
  assert.equal(plain, parsed);
  assert.ok(typeof plain === "string" && plain.includes("invalid unicode code point"), JSON.stringify(plain));
});

test("parseJsonPlain keeps what the parser keeps: -0, key order, a __proto__ member", () => {
  const value = parseJsonPlain(encodeUtf8('{"b":-0,"__proto__":[1],"a":{"x":1.0}}'));
  assert.ok(value !== null && typeof value === "object" && !Array.isArray(value));
  assert.deepEqual(Object.keys(value), ["b", "__proto__", "a"]);
  assert.ok(Object.is(value["b"], -0));
  assert.equal(Object.getPrototypeOf(value), Object.prototype);
  assert.deepEqual(Object.getOwnPropertyDescriptor(value, "__proto__")?.value, [1]);
  assert.throws(() => parseJsonPlain(encodeUtf8("[1e999]")), /number out of range at line 1 column 6/);
  assert.throws(() => parseJsonPlain(encodeUtf8('["\\udc00"]')), /lone leading surrogate/);
});

test("a JsonPointer resolves in nodes and in plain values alike, own members only", () => {
  const text = '{"a/b":{"m~n":[10,20]},"":0,"constructor":"own","list":[{"k":null}]}';
  const node = parseJsonText(text);
  const plain = parseJsonPlain(encodeUtf8(text));
  const paths = ["", "/", "/a~1b/m~0n/1", "/a~1b/m~0n/01", "/a~1b/m~0n/2", "/missing", "a", "/constructor", "/list/0/k", "/list/0/k/x", "/list/-"];
  for (const path of paths) {
    const at = new JsonPointer(path);
    const found = at.in(node);
    assert.deepEqual(at.inPlain(plain), found === undefined ? undefined : toPlain(found), path);
    assert.equal(found, pointer(node, path));
  }
  assert.equal(new JsonPointer("/toString").inPlain({}), undefined, "an inherited member is none");
  assert.equal(new JsonPointer("/constructor").inPlain(plain), "own");
});
