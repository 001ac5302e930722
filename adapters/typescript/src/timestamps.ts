/**
 * Wall-clock times as the envelope writes them: RFC 3339 in UTC with exactly six fractional
 * digits (`2027-01-15T08:00:00.040000Z`). Inside the adapter a time is a `bigint` of nanoseconds
 * since the Unix epoch.
 */

import { heldSecond, intoSecond } from "./seconds.js";

const NS_PER_MS = 1_000_000n;
const MAX_SECONDS = 253_402_300_800n - 1n; // the last second of the year 9999

function pad(value: number, width: number): string {
  return String(value).padStart(width, "0");
}

/**
 * `ns` nanoseconds after the epoch as the envelope writes it: UTC, six fractional digits (finer
 * digits dropped, not rounded), `Z`.
 */
export function formatTimestamp(ns: bigint): string {
  const into = intoSecond(ns);
  if (into !== undefined) {
    // The microseconds with their leading zeros: the digits after the 1 of 1,000,000 + them.
    return `${secondText(heldSecond())}${String(1_000_000 + Math.floor(into / 1000)).slice(1)}Z`;
  }
  // Before the epoch: the microseconds are cut toward zero, the second is the millisecond's.
  const micros = ns / 1000n;
  const fraction = Number(((micros % 1_000_000n) + 1_000_000n) % 1_000_000n);
  // The second of the millisecond `ns` falls in, as `new Date(ms)` reads it.
  const second = Math.floor(Number(ns / NS_PER_MS) / 1000);
  return `${secondText(second)}${pad(fraction, 6)}Z`;
}

/** The second last formatted, and its text up to the fraction: most times fall in the same second. */
let lastSecond = Number.NaN;
let lastSecondText = "";

/** `YYYY-MM-DDTHH:MM:SS.` of the second `second` seconds after the epoch (UTC). */
function secondText(second: number): string {
  if (second !== lastSecond) {
    const at = new Date(second * 1000);
    lastSecondText =
      `${pad(at.getUTCFullYear(), 4)}-${pad(at.getUTCMonth() + 1, 2)}-${pad(at.getUTCDate(), 2)}T` +
      `${pad(at.getUTCHours(), 2)}:${pad(at.getUTCMinutes(), 2)}:${pad(at.getUTCSeconds(), 2)}.`;
    lastSecond = second;
  }
  return lastSecondText;
}

/** Why a text is not a timestamp the contract accepts. */
export class InvalidTimestamp extends Error {
  constructor(text: string, reason: string) {
    super(`invalid timestamp ${JSON.stringify(text.slice(0, 64))}: ${reason}`);
    this.name = "InvalidTimestamp";
  }
}

function twoDigits(text: string, at: number): number {
  const a = text.charCodeAt(at);
  const b = text.charCodeAt(at + 1);
  if (!(a >= 0x30 && a <= 0x39 && b >= 0x30 && b <= 0x39)) {
    throw new Error("invalid digit");
  }
  return (a - 0x30) * 10 + (b - 0x30);
}

const DAYS_BEFORE_MONTH = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function isLeapYear(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

function parse(text: string): bigint {
  if (text.length < "2018-02-14T00:28:07Z".length) {
    throw new Error("invalid format");
  }
  if (text[10] !== "T" || (!text.endsWith("Z") && !text.endsWith("+00:00"))) {
    throw new Error("invalid format");
  }
  if (text[4] !== "-" || text[7] !== "-" || text[13] !== ":" || text[16] !== ":") {
    throw new Error("invalid format");
  }
  const year = twoDigits(text, 0) * 100 + twoDigits(text, 2);
  const month = twoDigits(text, 5);
  const day = twoDigits(text, 8);
  const hour = twoDigits(text, 11);
  const minute = twoDigits(text, 14);
  let second = twoDigits(text, 17);
  if (year < 1970 || hour > 23 || minute > 59 || second > 60 || month < 1 || month > 12) {
    throw new Error("out of range");
  }
  second = Math.min(second, 59);
  const leap = isLeapYear(year);
  const monthDays = month === 2 && leap ? 29 : (DAYS_IN_MONTH[month - 1] ?? 0);
  if (day === 0 || day > monthDays) {
    throw new Error("out of range");
  }
  let yearDays = (DAYS_BEFORE_MONTH[month - 1] ?? 0) + day - 1;
  if (leap && month > 2) {
    yearDays += 1;
  }
  const y = year - 1;
  const leapYears =
    Math.floor((y - 1968) / 4) - Math.floor((y - 1900) / 100) + Math.floor((y - 1600) / 400);
  const days = (year - 1970) * 365 + leapYears + yearDays;
  let nanos = 0n;
  if (text.length > 19 && text[19] === ".") {
    let multiplier = 100_000_000n;
    for (let index = 20; index < text.length; index += 1) {
      const c = text[index];
      if (c === "Z") {
        if (index === text.length - 1) {
          break;
        }
        throw new Error("invalid digit");
      }
      if (c === "+") {
        if (index === text.length - 6) {
          break;
        }
        throw new Error("invalid digit");
      }
      const code = text.charCodeAt(index);
      if (!(code >= 0x30 && code <= 0x39)) {
        throw new Error("invalid digit");
      }
      nanos += multiplier * BigInt(code - 0x30);
      multiplier /= 10n;
    }
  } else if (text.length !== 19 && (text.length > 25 || (text[19] !== "Z" && text.slice(19) !== "+00:00"))) {
    throw new Error("invalid format");
  }
  const seconds = BigInt(second + minute * 60 + hour * 3600) + BigInt(days) * 86_400n;
  if (seconds > MAX_SECONDS) {
    throw new Error("out of range");
  }
  return seconds * 1_000_000_000n + nanos;
}

/**
 * Nanoseconds since the epoch of an RFC 3339 timestamp in UTC, as a reader of the contract
 * accepts it: `YYYY-MM-DDTHH:MM:SS` from the year 1970 on, any number of fractional digits or
 * none, then `Z` or `+00:00`. A leap second (`:60`) reads as `:59`.
 *
 * @throws {@link InvalidTimestamp} for any other text.
 */
export function parseTimestamp(text: string): bigint {
  try {
    return parse(text);
  } catch (error) {
    throw new InvalidTimestamp(text, error instanceof Error ? error.message : "invalid format");
  }
}

/** A timestamp in the envelope's own form: {@link parseTimestamp}, then {@link formatTimestamp}. */
export function normalizeTimestamp(text: string): string {
  return formatTimestamp(parseTimestamp(text));
}
