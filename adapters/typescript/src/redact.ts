/**
 * Removing credentials from text before it is recorded anywhere (contract section 8).
 *
 * Targets are URLs more often than not, and URLs carry secrets: user-info
 * (`https://user:pass@host`), signed-URL parameters (`sig=`, `X-Amz-Signature=`) and tokens
 * (`?access_token=`). Everything that becomes an attribute, an envelope field or a log record
 * passes through {@link redactUrl} or {@link redactText} first.
 */

/** What a removed secret is replaced with. */
export const REDACTED = "REDACTED";

const SECRET_NAMES: ReadonlySet<string> = new Set([
  "sig",
  "signature",
  "token",
  "key",
  "apikey",
  "api_key",
  "auth",
  "authorization",
  "password",
  "passwd",
  "pwd",
  "secret",
  "code",
  "jwt",
  "session",
  "sessionid",
  "x_amz_credential",
  "x_goog_credential",
]);

const SECRET_FRAGMENTS = ["token", "secret", "password", "signature", "api_key", "apikey", "credential"];
/** Whether a normalised name contains a secret fragment: one test for them all. */
const SECRET_FRAGMENT = new RegExp(SECRET_FRAGMENTS.join("|"));

/** Unicode White_Space: what ends a secret value in free text, and what a trim removes. */
export const WHITE_SPACE: ReadonlySet<string> = new Set(
  Array.from(
    "\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008" +
      "\u2009\u200a\u2028\u2029\u202f\u205f\u3000",
  ),
);

/** {@link WHITE_SPACE} as UTF-16 code units (each is one). */
const WHITE_SPACE_CODES: ReadonlySet<number> = new Set(Array.from(WHITE_SPACE, (c) => c.charCodeAt(0)));

/** What ends a secret value, as UTF-16 code units: these characters, and Unicode White_Space. */
const VALUE_ENDS: ReadonlySet<number> = new Set([...Array.from("\"'&,;}])<", (c) => c.charCodeAt(0)), ...WHITE_SPACE_CODES]);

/** Whether a UTF-16 code unit is White_Space; those up to 0x20 and the ones above 0x84 are looked up. */
function isWhiteSpaceCode(code: number): boolean {
  return code === 0x20 || ((code < 0x20 || code > 0x84) && WHITE_SPACE_CODES.has(code));
}

function asciiLower(text: string): string {
  for (let i = 0; i < text.length; i += 1) {
    const code = text.charCodeAt(i);
    if (code >= 0x41 && code <= 0x5a) {
      return text.replace(/[A-Z]/g, (c) => c.toLowerCase());
    }
  }
  return text;
}

/**
 * Whether a parameter or field with this name holds a secret: after ASCII lower-casing and
 * reading each `-` as `_`, it is one of the secret names or contains one of the secret
 * fragments.
 */
export function isSecretName(name: string): boolean {
  const lower = asciiLower(name);
  const normalised = lower.includes("-") ? lower.replaceAll("-", "_") : lower;
  return SECRET_NAMES.has(normalised) || SECRET_FRAGMENT.test(normalised);
}

const lossy = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const encoder = new TextEncoder();

function hexValue(byte: number | undefined): number | undefined {
  if (byte === undefined) {
    return undefined;
  }
  if (byte >= 0x30 && byte <= 0x39) {
    return byte - 0x30;
  }
  if (byte >= 0x41 && byte <= 0x46) {
    return byte - 0x41 + 10;
  }
  if (byte >= 0x61 && byte <= 0x66) {
    return byte - 0x61 + 10;
  }
  return undefined;
}

/** The byte that the two bytes after a `%` spell; a leading `+` reads as a sign, as Rust reads it. */
function escapedByte(first: number | undefined, second: number | undefined): number | undefined {
  if (first === undefined || second === undefined) {
    return undefined;
  }
  if (first === 0x2b) {
    return hexValue(second);
  }
  const high = hexValue(first);
  const low = hexValue(second);
  return high === undefined || low === undefined ? undefined : high * 16 + low;
}

function percentDecodeLossy(raw: string): string {
  const data = encoder.encode(raw);
  const out: number[] = [];
  for (let at = 0; at < data.length; ) {
    const byte = data[at] ?? 0;
    const escaped = byte === 0x25 ? escapedByte(data[at + 1], data[at + 2]) : undefined;
    if (escaped !== undefined) {
      out.push(escaped);
      at += 3;
    } else {
      out.push(byte);
      at += 1;
    }
  }
  return lossy.decode(new Uint8Array(out));
}

function isSecretPair(pair: string): boolean {
  const equals = pair.indexOf("=");
  return equals >= 0 && isSecretName(percentDecodeLossy(pair.slice(0, equals)));
}

function redactParams(params: string): string {
  const pairs = params.split("&");
  if (!pairs.some(isSecretPair)) {
    return params;
  }
  return pairs.map((pair) => (isSecretPair(pair) ? `${pair.slice(0, pair.indexOf("="))}=${REDACTED}` : pair)).join("&");
}

function splitAt(raw: string, separator: string): [string, string | undefined] {
  const at = raw.indexOf(separator);
  return at < 0 ? [raw, undefined] : [raw.slice(0, at), raw.slice(at + separator.length)];
}

/**
 * Where a URL's user-info ends: the index, in `head` (the text after the scheme up to the next
 * `?`), of the `@` that ends it, or -1 (contract rule REDACT-TARGET, step 1). The authority is
 * the head up to its first `/`. When it holds an `@`, the user-info ends at its last `@` (a `#`
 * its client failed to encode stays in it). When it does not, but it holds a `:` and the rest of
 * the head holds an `@`, a password whose `/` its client failed to encode (`user:pa/ss@host`)
 * runs to the head's last `@`: a host with a port and an `@` later in its path or fragment
 * (`host:8080/p#a@b`) then loses its host to the redaction, which never shows a password.
 */
function userInfoEnd(head: string): number {
  const slash = head.indexOf("/");
  const authority = slash >= 0 ? head.slice(0, slash) : head;
  const at = authority.lastIndexOf("@");
  if (at >= 0) {
    return at;
  }
  return authority.includes(":") ? head.lastIndexOf("@") : -1;
}

/**
 * A URL cut as contract rule REDACT-TARGET cuts it (steps 1 and 2): the user-info first, over
 * the text before the query, so that a `/` or `#` in a password stays with it; then the
 * fragment at the first `#` after it, the query at the first `?` before that, and the host at
 * the first `/`.
 */
export interface UrlParts {
  /** The scheme with its `://` (`https://`); empty for a text without a scheme. */
  readonly scheme: string;
  /** The user-info, without the `@` that ends it. */
  readonly userInfo: string | undefined;
  /** The host and port; empty for a text without a scheme. */
  readonly host: string;
  /** What follows the host up to the query or the fragment (all of it, without a scheme). */
  readonly path: string;
  /** The query, without its `?`. */
  readonly query: string | undefined;
  /** The fragment, without its `#`. */
  readonly fragment: string | undefined;
}

/**
 * Cuts `raw` into its {@link UrlParts}. A `://` counts only before the first `?` and `#`:
 * `db?next=https://x` has no scheme.
 *
 * @example
 * urlParts("https://bob:p#ss@api.example:8443/v1?q=1#top")
 * // { scheme: "https://", userInfo: "bob:p#ss", host: "api.example:8443", path: "/v1", query: "q=1", fragment: "top" }
 */
export function urlParts(raw: string): UrlParts {
  const end = raw.search(/[?#]/);
  const schemeEnd = raw.indexOf("://");
  const hasScheme = schemeEnd >= 0 && (end < 0 || schemeEnd < end);
  const scheme = hasScheme ? raw.slice(0, schemeEnd + 3) : "";
  const after = hasScheme ? raw.slice(schemeEnd + 3) : raw;
  const userAt = hasScheme ? userInfoEnd(splitAt(after, "?")[0]) : -1;
  const userInfo = userAt >= 0 ? after.slice(0, userAt) : undefined;
  const rest = userAt >= 0 ? after.slice(userAt + 1) : after;
  const [beforeFragment, fragment] = splitAt(rest, "#");
  const [beforeQuery, query] = splitAt(beforeFragment, "?");
  const slash = beforeQuery.indexOf("/");
  const hostEnd = !hasScheme ? 0 : slash >= 0 ? slash : beforeQuery.length;
  return { scheme, userInfo, host: beforeQuery.slice(0, hostEnd), path: beforeQuery.slice(hostEnd), query, fragment };
}

/**
 * A URL with its user-info and its secret query and fragment parameters replaced by
 * `REDACTED` (rule REDACT-TARGET). A text that is not a URL passes unchanged unless it has a
 * query; a URL in which nothing was replaced is returned unchanged.
 *
 * @example
 * redactUrl("https://bob:hunter2@api.example.com/v1/search?q=cats&access_token=abc#x")
 * // "https://REDACTED@api.example.com/v1/search?q=cats&access_token=REDACTED#x"
 */
export function redactUrl(raw: string): string {
  const parts = urlParts(raw);
  const queryRedacted = parts.query === undefined ? undefined : redactParams(parts.query);
  const fragmentRedacted = parts.fragment === undefined ? undefined : redactParams(parts.fragment);
  // User-info that is already REDACTED stays as it is: redacting twice replaces nothing.
  const userInfoRedacted = parts.userInfo !== undefined && parts.userInfo !== REDACTED;
  if (!userInfoRedacted && queryRedacted === parts.query && fragmentRedacted === parts.fragment) {
    return raw;
  }
  let out = parts.scheme + (parts.userInfo !== undefined ? `${REDACTED}@` : "") + parts.host + parts.path;
  if (queryRedacted !== undefined) {
    out += `?${queryRedacted}`;
  }
  if (fragmentRedacted !== undefined) {
    out += `#${fragmentRedacted}`;
  }
  return out;
}

/** Whether the UTF-16 code unit `code` is one of `0-9A-Za-z_-` (a name's character); `NaN` is not. */
function isNameCode(code: number): boolean {
  return (
    (code >= 0x30 && code <= 0x39) ||
    (code >= 0x41 && code <= 0x5a) ||
    (code >= 0x61 && code <= 0x7a) ||
    code === 0x5f ||
    code === 0x2d
  );
}

/** Whether `text` from `start` to `end` (a name) introduces a credential by itself: `Bearer` or `Basic`, in any case. */
function isScheme(text: string, start: number, end: number): boolean {
  const scheme = end - start === 6 ? "bearer" : end - start === 5 ? "basic" : undefined;
  if (scheme === undefined) {
    return false;
  }
  for (let i = 0; i < scheme.length; i += 1) {
    // Of a name's characters, only a letter ORed with 0x20 is its lower-case letter.
    if ((text.charCodeAt(start + i) | 0x20) !== scheme.charCodeAt(i)) {
      return false;
    }
  }
  return true;
}

/**
 * Free text with its credentials replaced by `REDACTED` (rule REDACT-TEXT): every word that
 * holds `://` is redacted as a URL, then the value after `Bearer ` or `Basic `, and the value
 * after a secret name followed by `=` or `:` (an optional quote before it), is replaced.
 *
 * @example
 * redactText("Authorization: Basic abc.def") // "Authorization: Basic REDACTED"
 */
export function redactText(raw: string): string {
  const text = raw.includes("://")
    ? raw
        .split(" ")
        .map((word) => (word.includes("://") ? redactUrl(word) : word))
        .join(" ")
    : raw;
  return redactSecretValues(text);
}

/**
 * The values that follow `Bearer `, `Basic ` or a secret name and `=` or `:`, replaced. The text
 * is scanned by code unit; what is kept is copied a run at a time, and a text with nothing to
 * replace is returned as it is.
 */
function redactSecretValues(text: string): string {
  const n = text.length;
  let out = "";
  // `text` up to `copied` is in `out`, redacted.
  let copied = 0;
  let at = 0;
  while (at < n) {
    if (!isNameCode(text.charCodeAt(at))) {
      at += 1;
      continue;
    }
    const start = at;
    while (at < n && isNameCode(text.charCodeAt(at))) {
      at += 1;
    }
    // A name from `start` to `at`: does it introduce a value, and where does the value start?
    let valueAt = at;
    if (isScheme(text, start, at)) {
      while (valueAt < n && text.charCodeAt(valueAt) === 0x20) {
        valueAt += 1;
      }
      if (valueAt === at) {
        continue;
      }
    } else {
      let cursor = at;
      if (isQuote(text.charCodeAt(cursor))) {
        cursor += 1;
      }
      const separator = text.charCodeAt(cursor);
      if (!((separator === 0x3d || separator === 0x3a) && isSecretName(text.slice(start, at)))) {
        continue;
      }
      cursor += 1;
      while (cursor < n && (text.charCodeAt(cursor) === 0x20 || isQuote(text.charCodeAt(cursor)))) {
        cursor += 1;
      }
      valueAt = cursor;
    }
    // `token: Bearer abc`: the value is the credential after the scheme.
    let wordEnd = valueAt;
    while (wordEnd < n && isNameCode(text.charCodeAt(wordEnd))) {
      wordEnd += 1;
    }
    if (isScheme(text, valueAt, wordEnd) && text.charCodeAt(wordEnd) === 0x20) {
      valueAt = wordEnd;
      while (valueAt < n && text.charCodeAt(valueAt) === 0x20) {
        valueAt += 1;
      }
    }
    let valueEnd = valueAt;
    while (valueEnd < n && !VALUE_ENDS.has(text.charCodeAt(valueEnd))) {
      valueEnd += 1;
    }
    if (valueEnd === valueAt) {
      continue;
    }
    out += text.slice(copied, valueAt) + REDACTED;
    copied = valueEnd;
    at = valueEnd;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/** `"` or `'`. */
function isQuote(code: number): boolean {
  return code === 0x22 || code === 0x27;
}

/** `text` without Unicode White_Space at either end. */
export function trimWhiteSpace(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && isWhiteSpaceCode(text.charCodeAt(start))) {
    start += 1;
  }
  while (end > start && isWhiteSpaceCode(text.charCodeAt(end - 1))) {
    end -= 1;
  }
  return text.slice(start, end);
}
