/**
 * JSON values as the contract reads them (section 5.3).
 *
 * A response body is parsed by {@link parseJsonBytes} into a {@link JsonNode}, which keeps what
 * `JSON.parse` loses: whether a number was written as an integer (`1` is not `1.0`), integers
 * beyond 2^53 exactly, and whether a text that is not JSON merely ended early (a cut body) or is
 * not JSON at all, in the words of the Rust reader (`EOF while parsing a list at line 1 column
 * 14`). {@link toPlain} turns a node into the plain {@link JsonValue} a payload holds, and
 * {@link parseJsonPlain} parses bytes straight into that value, for a reader that needs no more.
 */

/** Any JSON value, as a payload holds it. */
export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;

/** A JSON object, as a payload holds it. */
export interface JsonObject {
  [key: string]: JsonValue;
}

/** A JSON number, with how it was written. */
export class JsonNumber {
  /**
   * @param value - the number as a double.
   * @param integer - the exact integer, when the number was written without a fraction or an
   *   exponent and is within the 64-bit range (-2^63 to 2^64−1); otherwise `undefined`, and the
   *   number is a float.
   */
  constructor(
    readonly value: number,
    readonly integer: bigint | undefined,
  ) {}

  /** Whether the number is an integer (and not a float whose value happens to be whole). */
  get isInteger(): boolean {
    return this.integer !== undefined;
  }
}

/** A JSON value that keeps integers apart from floats: objects are maps in document order. */
export type JsonNode = null | boolean | string | JsonNumber | JsonNode[] | Map<string, JsonNode>;

/** Why a text is not one JSON document. */
export class JsonParseError extends Error {
  /**
   * @param message - what is wrong and where.
   * @param eof - whether the text merely ended early: every byte so far could start a JSON text.
   * @param duplicate - the key given twice, when that is what is wrong.
   */
  constructor(
    message: string,
    readonly eof: boolean,
    readonly duplicate?: string,
  ) {
    super(message);
    this.name = "JsonParseError";
  }
}

/** The deepest nesting accepted, as the Rust reader accepts it (the 128th level is refused). */
export const MAX_DEPTH = 127;

const I64_MIN = -(2n ** 63n);
const U64_END = 2n ** 64n;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const lossyUtf8 = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const utf8 = new TextEncoder();

/** The bytes decoded as UTF-8, each invalid sequence replaced by U+FFFD ("the body as text"). */
export function decodeLossy(bytes: Uint8Array): string {
  return lossyUtf8.decode(bytes);
}

/** A text's UTF-8 bytes. */
export function encodeUtf8(text: string): Uint8Array {
  return utf8.encode(text);
}

/** Where the parser stopped, and why; turned into a {@link JsonParseError} with its line and column. */
class Stop extends Error {
  constructor(
    readonly code: string,
    readonly index: number,
    readonly eof: boolean,
  ) {
    super(code);
  }
}

function isDigit(byte: number | undefined): byte is number {
  return byte !== undefined && byte >= 0x30 && byte <= 0x39;
}

function isHex(byte: number | undefined): boolean {
  return (
    byte !== undefined &&
    ((byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66))
  );
}

class Parser {
  private index = 0;
  private depth = 0;

  constructor(
    private readonly data: Uint8Array,
    private readonly refuseDuplicates: boolean,
  ) {}

  private peek(): number | undefined {
    return this.data[this.index];
  }

  private whitespace(): number | undefined {
    for (;;) {
      const byte = this.data[this.index];
      if (byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d) {
        this.index += 1;
      } else {
        return byte;
      }
    }
  }

  private peekError(code: string, eof = false): Stop {
    return new Stop(code, Math.min(this.data.length, this.index + 1), eof);
  }

  private error(code: string, eof = false): Stop {
    return new Stop(code, this.index, eof);
  }

  private eofValue(): Stop {
    return this.peekError("EOF while parsing a value", true);
  }

  document(): JsonNode {
    const value = this.value();
    if (this.whitespace() !== undefined) {
      throw this.peekError("trailing characters");
    }
    return value;
  }

  private value(): JsonNode {
    const byte = this.whitespace();
    if (byte === undefined) {
      throw this.eofValue();
    }
    switch (byte) {
      case 0x6e: // n
        this.index += 1;
        this.ident("ull");
        return null;
      case 0x74: // t
        this.index += 1;
        this.ident("rue");
        return true;
      case 0x66: // f
        this.index += 1;
        this.ident("alse");
        return false;
      case QUOTE:
        this.index += 1;
        return this.string();
      case 0x5b: // [
        this.nest();
        this.index += 1;
        try {
          return this.list();
        } finally {
          this.depth -= 1;
        }
      case 0x7b: // {
        this.nest();
        this.index += 1;
        try {
          return this.object();
        } finally {
          this.depth -= 1;
        }
      default:
        if (byte === 0x2d || isDigit(byte)) {
          return this.number();
        }
        throw this.peekError("expected value");
    }
  }

  private nest(): void {
    this.depth += 1;
    if (this.depth > MAX_DEPTH) {
      throw this.peekError("recursion limit exceeded");
    }
  }

  private ident(rest: string): void {
    for (let i = 0; i < rest.length; i += 1) {
      const byte = this.peek();
      if (byte === undefined) {
        throw this.error("EOF while parsing a value", true);
      }
      this.index += 1;
      if (byte !== rest.charCodeAt(i)) {
        throw this.error("expected ident");
      }
    }
  }

  private digits(): number {
    const start = this.index;
    while (isDigit(this.data[this.index])) {
      this.index += 1;
    }
    return this.index - start;
  }

  private number(): JsonNumber {
    const start = this.index;
    if (this.peek() === 0x2d) {
      this.index += 1;
    }
    const first = this.peek();
    if (first !== undefined) {
      this.index += 1;
    }
    if (first === 0x30) {
      if (isDigit(this.peek())) {
        throw this.peekError("invalid number");
      }
    } else if (first !== undefined && first >= 0x31 && first <= 0x39) {
      this.digits();
    } else {
      throw this.error("invalid number");
    }
    let integer = true;
    if (this.peek() === 0x2e) {
      integer = false;
      this.index += 1;
      if (this.digits() === 0) {
        if (this.peek() === undefined) {
          throw this.eofValue();
        }
        throw this.peekError("invalid number");
      }
    }
    const e = this.peek();
    if (e === 0x65 || e === 0x45) {
      integer = false;
      this.index += 1;
      const sign = this.peek();
      if (sign === 0x2b || sign === 0x2d) {
        this.index += 1;
      }
      const byte = this.peek();
      if (byte === undefined) {
        throw this.error("EOF while parsing a value", true);
      }
      this.index += 1;
      if (!isDigit(byte)) {
        throw this.error("invalid number");
      }
      this.digits();
    }
    let text = "";
    for (let i = start; i < this.index; i += 1) {
      text += String.fromCharCode(this.data[i] ?? 0);
    }
    if (integer && text !== "-0") {
      const exact = BigInt(text);
      if (exact >= I64_MIN && exact < U64_END) {
        return new JsonNumber(Number(exact), exact);
      }
    }
    const value = Number(text);
    if (!Number.isFinite(value)) {
      throw this.error("number out of range");
    }
    return new JsonNumber(value, undefined);
  }

  private hexEscape(): number {
    if (this.index + 4 > this.data.length) {
      this.index = this.data.length;
      throw this.error("EOF while parsing a string", true);
    }
    let unit = 0;
    let valid = true;
    for (let i = 0; i < 4; i += 1) {
      const byte = this.data[this.index + i];
      if (!isHex(byte)) {
        valid = false;
      } else {
        unit = unit * 16 + Number.parseInt(String.fromCharCode(byte ?? 0), 16);
      }
    }
    this.index += 4;
    if (!valid) {
      throw this.error("invalid escape");
    }
    return unit;
  }

  /** Reads one escape (the backslash read) and returns the code point it stands for. */
  private escape(): number {
    const byte = this.peek();
    if (byte === undefined) {
      throw this.error("EOF while parsing a string", true);
    }
    this.index += 1;
    switch (byte) {
      case QUOTE:
        return 0x22;
      case BACKSLASH:
        return 0x5c;
      case 0x2f:
        return 0x2f;
      case 0x62:
        return 0x08;
      case 0x66:
        return 0x0c;
      case 0x6e:
        return 0x0a;
      case 0x72:
        return 0x0d;
      case 0x74:
        return 0x09;
      case 0x75:
        break;
      default:
        throw this.error("invalid escape");
    }
    const unit = this.hexEscape();
    if (unit >= 0xdc00 && unit <= 0xdfff) {
      throw this.error("lone leading surrogate in hex escape");
    }
    if (unit < 0xd800 || unit > 0xdbff) {
      return unit;
    }
    for (const expected of [BACKSLASH, 0x75]) {
      const next = this.peek();
      if (next === undefined) {
        throw this.error("EOF while parsing a string", true);
      }
      this.index += 1;
      if (next !== expected) {
        throw this.error("unexpected end of hex escape");
      }
    }
    const low = this.hexEscape();
    if (low < 0xdc00 || low > 0xdfff) {
      throw this.error("lone leading surrogate in hex escape");
    }
    return 0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00);
  }

  /** Decodes the bytes from `start` to `end` into `parts`; whether they were valid UTF-8. */
  private decodeRun(parts: string[], start: number, end: number): boolean {
    if (end <= start) {
      return true;
    }
    try {
      parts.push(strictUtf8.decode(this.data.subarray(start, end)));
      return true;
    } catch {
      return false;
    }
  }

  private string(): string {
    const parts: string[] = [];
    let runStart = this.index;
    let valid = true;
    for (;;) {
      const byte = this.peek();
      if (byte === undefined) {
        throw this.error("EOF while parsing a string", true);
      }
      if (byte !== QUOTE && byte !== BACKSLASH && byte >= 0x20) {
        this.index += 1;
        continue;
      }
      valid = this.decodeRun(parts, runStart, this.index) && valid;
      this.index += 1;
      if (byte === QUOTE) {
        if (!valid) {
          throw this.error("invalid unicode code point");
        }
        return parts.join("");
      }
      if (byte === BACKSLASH) {
        parts.push(String.fromCodePoint(this.escape()));
        runStart = this.index;
      } else {
        throw this.error("control character (\\u0000-\\u001F) found while parsing a string");
      }
    }
  }

  private list(): JsonNode[] {
    const items: JsonNode[] = [];
    let first = true;
    for (;;) {
      let byte = this.whitespace();
      if (byte === 0x5d) {
        this.index += 1;
        return items;
      }
      if (byte === 0x2c && !first) {
        this.index += 1;
        byte = this.whitespace();
      } else if (byte === undefined) {
        throw this.peekError("EOF while parsing a list", true);
      } else if (first) {
        first = false;
      } else {
        throw this.peekError("expected `,` or `]`");
      }
      if (byte === 0x5d) {
        throw this.peekError("trailing comma");
      }
      if (byte === undefined) {
        throw this.eofValue();
      }
      items.push(this.value());
    }
  }

  private object(): Map<string, JsonNode> {
    const members = new Map<string, JsonNode>();
    let first = true;
    for (;;) {
      let byte = this.whitespace();
      if (byte === 0x7d) {
        this.index += 1;
        return members;
      }
      if (byte === 0x2c && !first) {
        this.index += 1;
        byte = this.whitespace();
      } else if (byte === undefined) {
        throw this.peekError("EOF while parsing an object", true);
      } else if (first) {
        first = false;
      } else {
        throw this.peekError("expected `,` or `}`");
      }
      if (byte === 0x7d) {
        throw this.peekError("trailing comma");
      }
      if (byte === undefined) {
        throw this.eofValue();
      }
      if (byte !== QUOTE) {
        throw this.peekError("key must be a string");
      }
      this.index += 1;
      const key = this.string();
      const colon = this.whitespace();
      if (colon === undefined) {
        throw this.peekError("EOF while parsing an object", true);
      }
      if (colon !== 0x3a) {
        throw this.peekError("expected `:`");
      }
      this.index += 1;
      const value = this.value();
      if (this.refuseDuplicates && members.has(key)) {
        throw new JsonParseError(`duplicate field \`${key}\``, false, key);
      }
      members.set(key, value);
    }
  }
}

/** Options of {@link parseJsonBytes}. */
export interface ParseOptions {
  /** Refuse an object that names a key twice (by default the last value counts). */
  readonly refuseDuplicateKeys?: boolean;
}

/**
 * Parses bytes as one JSON text (RFC 8259) in UTF-8, with optional white space around it and
 * nothing else.
 *
 * Numbers are read as the Rust reader reads them: an integer outside the 64-bit range is a
 * float, `-0` is a float, and a number too large for a double is refused.
 *
 * @throws {@link JsonParseError}, whose `eof` says whether the text merely ended early.
 */
export function parseJsonBytes(data: Uint8Array, options: ParseOptions = {}): JsonNode {
  try {
    return new Parser(data, options.refuseDuplicateKeys ?? false).document();
  } catch (error) {
    if (error instanceof Stop) {
      let lineStart = 0;
      let line = 1;
      for (let i = 0; i < error.index; i += 1) {
        if (data[i] === 0x0a) {
          line += 1;
          lineStart = i + 1;
        }
      }
      throw new JsonParseError(`${error.code} at line ${line} column ${error.index - lineStart}`, error.eof);
    }
    throw error;
  }
}

/** Parses a text as one JSON document; see {@link parseJsonBytes}. */
export function parseJsonText(text: string, options: ParseOptions = {}): JsonNode {
  return parseJsonBytes(utf8.encode(text), options);
}

/**
 * Parses bytes as {@link parseJsonBytes} does, into the plain value {@link toPlain} would make of
 * its node: numbers as doubles, objects as plain objects. Text that the engine's `JSON.parse`
 * reads as the parser does is read by it (much the faster); any other text, and every text that
 * is not JSON, by the parser.
 *
 * @throws {@link JsonParseError}, as {@link parseJsonBytes}.
 */
export function parseJsonPlain(data: Uint8Array): JsonValue {
  let text: string | undefined;
  try {
    text = strictUtf8.decode(data);
  } catch {
    // Not UTF-8: the parser says where.
  }
  if (text !== undefined && readsAsJsonParse(text, data)) {
    try {
      return JSON.parse(text) as JsonValue;
    } catch {
      // Not JSON: the parser says why, in its own words.
    }
  }
  return toPlain(parseJsonBytes(data));
}

/** A digit then an exponent's `e`, or 300 digits in a row: a number `JSON.parse` may read as Infinity. */
const MAY_OVERFLOW = /[0-9][eE]|[0-9]{300}/;

/**
 * Whether `JSON.parse` reads `text` (the UTF-8 text of `data`) as {@link Parser} reads it, or
 * refuses it. It reads everything alike but three things: a `\u` escape (the parser refuses a
 * lone surrogate, `JSON.parse` takes it); a number beyond a double's range, which needs an
 * exponent or 309 digits (the parser refuses it, `JSON.parse` reads Infinity); and nesting
 * deeper than {@link MAX_DEPTH}, which needs 256 bytes at least. It may say no of a text that
 * `JSON.parse` reads alike (one with a `\u` or a digit and an `e` in a string): the parser then
 * reads it, slower, to the same value.
 */
function readsAsJsonParse(text: string, data: Uint8Array): boolean {
  if (text.includes("\\u") || MAY_OVERFLOW.test(text)) {
    return false;
  }
  return data.length < 2 * (MAX_DEPTH + 1) || nestsWithin(data, MAX_DEPTH);
}

/** Whether the brackets of `data` outside its strings nest `depth` deep at most. */
function nestsWithin(data: Uint8Array, depth: number): boolean {
  const n = data.length;
  let open = 0;
  for (let i = 0; i < n; i += 1) {
    const byte = data[i];
    if (byte === QUOTE) {
      for (i += 1; i < n && data[i] !== QUOTE; i += 1) {
        if (data[i] === BACKSLASH) {
          i += 1;
        }
      }
    } else if (byte === 0x5b || byte === 0x7b) {
      open += 1;
      if (open > depth) {
        return false;
      }
    } else if (byte === 0x5d || byte === 0x7d) {
      open -= 1;
    }
  }
  return true;
}

/** A node as the plain value a payload holds (an integer beyond 2^53 becomes the nearest double). */
export function toPlain(node: JsonNode): JsonValue {
  if (node instanceof JsonNumber) {
    return node.value;
  }
  if (Array.isArray(node)) {
    return node.map(toPlain);
  }
  if (node instanceof Map) {
    const out: JsonObject = {};
    for (const [key, value] of node) {
      setMember(out, key, toPlain(value));
    }
    return out;
  }
  return node;
}

/**
 * Sets `out[key]` as a data property, as `JSON.parse` and `Object.fromEntries` do: an assignment
 * to `__proto__` would set the object's prototype instead.
 */
function setMember(out: JsonObject, key: string, value: JsonValue): void {
  if (key === "__proto__") {
    Object.defineProperty(out, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    out[key] = value;
  }
}

function isPlainObject(value: object): boolean {
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/**
 * A plain value (as `JSON.parse` returns it, or as a caller builds it) as a node: a number that
 * is a safe integer, or a bigint, is an integer; any other finite number a float.
 *
 * @throws TypeError naming where the value is not JSON (a non-finite number, `undefined`, a
 *   function, an object that is not a plain object or an array).
 */
export function fromPlain(value: unknown, path = "$"): JsonNode {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "bigint":
      if (value < I64_MIN || value >= U64_END) {
        throw new TypeError(`${path}: ${value} is outside the 64-bit range`);
      }
      return new JsonNumber(Number(value), value);
    case "number":
      if (!Number.isFinite(value)) {
        throw new TypeError(`${path}: a JSON number must be finite`);
      }
      return Number.isSafeInteger(value) && !Object.is(value, -0)
        ? new JsonNumber(value, BigInt(value))
        : new JsonNumber(value, undefined);
    case "object": {
      if (value === null) {
        return null;
      }
      if (Array.isArray(value)) {
        return value.map((item: unknown, index) => fromPlain(item, `${path}[${index}]`));
      }
      if (value instanceof Map) {
        const members = new Map<string, JsonNode>();
        for (const [key, item] of value as Map<unknown, unknown>) {
          if (typeof key !== "string") {
            throw new TypeError(`${path}: object keys must be strings`);
          }
          members.set(key, fromPlain(item, `${path}.${key}`));
        }
        return members;
      }
      if (value instanceof JsonNumber) {
        return value;
      }
      if (!isPlainObject(value)) {
        throw new TypeError(`${path}: a ${value.constructor.name} is not a JSON value`);
      }
      const members = new Map<string, JsonNode>();
      for (const [key, item] of Object.entries(value)) {
        members.set(key, fromPlain(item, `${path}.${key}`));
      }
      return members;
    }
    default:
      throw new TypeError(`${path}: ${typeof value} is not a JSON value`);
  }
}

function pointerIndex(token: string): number | undefined {
  if (!/^(0|[1-9][0-9]*)$/.test(token)) {
    return undefined;
  }
  const index = Number(token);
  return Number.isSafeInteger(index) ? index : undefined;
}

/**
 * A JSON pointer (RFC 6901; `""` is the whole value), read once and resolved in any number of
 * values: as nodes ({@link JsonPointer.in}) or as plain values ({@link JsonPointer.inPlain}).
 */
export class JsonPointer {
  /** The reference tokens, unescaped; `undefined` for a text that is no pointer (it resolves nowhere). */
  private readonly tokens: readonly string[] | undefined;
  /** Each token's array index, when it is one. */
  private readonly indexes: readonly (number | undefined)[];

  constructor(
    /** The pointer's text. */
    readonly path: string,
  ) {
    if (path === "") {
      this.tokens = [];
    } else if (path.startsWith("/")) {
      this.tokens = path
        .slice(1)
        .split("/")
        .map((raw) => raw.replaceAll("~1", "/").replaceAll("~0", "~"));
    } else {
      this.tokens = undefined;
    }
    this.indexes = (this.tokens ?? []).map(pointerIndex);
  }

  /** The node it points at in `node`, or `undefined` when it does not resolve. */
  in(node: JsonNode): JsonNode | undefined {
    const tokens = this.tokens;
    if (tokens === undefined) {
      return undefined;
    }
    let target: JsonNode = node;
    for (let i = 0; i < tokens.length; i += 1) {
      let next: JsonNode | undefined;
      if (target instanceof Map) {
        next = target.get(tokens[i] ?? "");
      } else if (Array.isArray(target)) {
        const index = this.indexes[i];
        next = index === undefined ? undefined : target[index];
      }
      if (next === undefined) {
        return undefined;
      }
      target = next;
    }
    return target;
  }

  /**
   * The value it points at in a plain value (as {@link toPlain} and {@link parseJsonPlain} make
   * them), or `undefined` when it does not resolve: what {@link JsonPointer.in} finds in the node.
   */
  inPlain(value: JsonValue): JsonValue | undefined {
    const tokens = this.tokens;
    if (tokens === undefined) {
      return undefined;
    }
    let target: JsonValue = value;
    for (let i = 0; i < tokens.length; i += 1) {
      let next: JsonValue | undefined;
      if (Array.isArray(target)) {
        const index = this.indexes[i];
        next = index === undefined ? undefined : target[index];
      } else if (target !== null && typeof target === "object") {
        // Own members only: `constructor` is no member of `{}`.
        const token = tokens[i] ?? "";
        next = Object.hasOwn(target, token) ? target[token] : undefined;
      }
      if (next === undefined) {
        return undefined;
      }
      target = next;
    }
    return target;
  }
}

/**
 * The value at the JSON pointer `path` (RFC 6901; `""` is the whole value), or `undefined`
 * when the pointer does not resolve. A pointer resolved again and again is read once as a
 * {@link JsonPointer}.
 */
export function pointer(node: JsonNode, path: string): JsonNode | undefined {
  return new JsonPointer(path).in(node);
}

/**
 * Equality of JSON values (section 5.3): the same type and the same value. An integer never
 * equals a float or a boolean; objects are equal with the same members in any order.
 */
export function jsonEqual(a: JsonNode, b: JsonNode): boolean {
  if (a instanceof JsonNumber || b instanceof JsonNumber) {
    if (!(a instanceof JsonNumber && b instanceof JsonNumber)) {
      return false;
    }
    if (a.integer !== undefined || b.integer !== undefined) {
      return a.integer !== undefined && a.integer === b.integer;
    }
    return a.value === b.value;
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    return (
      Array.isArray(a) &&
      Array.isArray(b) &&
      a.length === b.length &&
      a.every((item, index) => jsonEqual(item, b[index] ?? null))
    );
  }
  if (a instanceof Map || b instanceof Map) {
    if (!(a instanceof Map && b instanceof Map) || a.size !== b.size) {
      return false;
    }
    for (const [key, value] of a) {
      const other = b.get(key);
      if (other === undefined || !jsonEqual(value, other)) {
        return false;
      }
    }
    return true;
  }
  return a === b;
}

/** The JSON type's name, as the classifier's messages say it, of a node or a plain value. */
export function jsonType(node: JsonNode | JsonValue): string {
  if (node === null) {
    return "null";
  }
  if (typeof node === "boolean") {
    return "boolean";
  }
  if (typeof node === "string") {
    return "string";
  }
  if (typeof node === "number" || node instanceof JsonNumber) {
    return "number";
  }
  return Array.isArray(node) ? "list" : "object";
}

/** A float laid out as the Rust writer lays it out: `1.0`, `0.00001`, `1e+16`, `1.5e-7`. */
function formatFloat(value: number): string {
  if (!Number.isFinite(value)) {
    return "null";
  }
  const [mantissa = "", exponentText = "0"] = value.toExponential().split("e");
  const exponent = Number(exponentText);
  if (exponent >= -5 && exponent <= 15) {
    const negative = mantissa.startsWith("-");
    const digits = mantissa.replace("-", "").replace(".", "");
    const sign = negative || Object.is(value, -0) ? "-" : "";
    if (exponent < 0) {
      return `${sign}0.${"0".repeat(-exponent - 1)}${digits}`;
    }
    const whole = digits.padEnd(exponent + 1, "0");
    const integerPart = whole.slice(0, exponent + 1);
    const fraction = whole.slice(exponent + 1);
    return `${sign}${integerPart}.${fraction === "" ? "0" : fraction}`;
  }
  return `${mantissa}e${exponent >= 0 ? "+" : "-"}${Math.abs(exponent)}`;
}

/** A node as compact JSON text, object keys in order, numbers as written by the Rust writer. */
export function compact(node: JsonNode): string {
  if (node === null) {
    return "null";
  }
  if (typeof node === "boolean") {
    return node ? "true" : "false";
  }
  if (typeof node === "string") {
    return JSON.stringify(node);
  }
  if (node instanceof JsonNumber) {
    return node.integer !== undefined ? node.integer.toString() : formatFloat(node.value);
  }
  if (Array.isArray(node)) {
    return `[${node.map(compact).join(",")}]`;
  }
  const keys = Array.from(node.keys()).sort(compareKeys);
  return `{${keys.map((key) => `${JSON.stringify(key)}:${compact(node.get(key) ?? null)}`).join(",")}}`;
}

/** Orders object keys as the Rust writer does: by their UTF-8 bytes. */
export function compareKeys(a: string, b: string): number {
  if (a === b) {
    return 0;
  }
  const x = utf8.encode(a);
  const y = utf8.encode(b);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i += 1) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) {
      return d;
    }
  }
  return x.length - y.length;
}

/** A copy of `value` whose objects list their keys in order, as the Rust writer writes them. */
export function sortedKeys(value: JsonValue): JsonValue {
  if (Array.isArray(value)) {
    return value.map(sortedKeys);
  }
  if (value !== null && typeof value === "object") {
    return Object.fromEntries<JsonValue>(
      Object.keys(value)
        .sort(compareKeys)
        .map((key) => [key, sortedKeys(value[key] ?? null)]),
    );
  }
  return value;
}
