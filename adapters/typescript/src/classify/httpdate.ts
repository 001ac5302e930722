/**
 * HTTP-dates (RFC 9110), read as strictly as the Rust classifier reads them: IMF-fixdate
 * (`Sun, 06 Nov 1994 08:49:37 GMT`) and the obsolete RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`)
 * and asctime (`Sun Nov  6 08:49:37 1994`) forms, in GMT only, from 1970 to 9999, with the
 * weekday that the date falls on.
 */

const DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const LONG_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const DAY = DAYS.join("|");
const MONTH = MONTHS.join("|");
const TIME = "([0-9]{2}):([0-9]{2}):([0-9]{2})";
const IMF = new RegExp(`^(${DAY}), ([0-9]{2}) (${MONTH}) ([0-9]{4}) ${TIME} GMT$`);
const RFC850 = new RegExp(`^(${LONG_DAYS.join("|")}), ([0-9]{2})-(${MONTH})-([0-9]{2}) ${TIME} GMT$`);
const ASCTIME = new RegExp(`^(${DAY}) (${MONTH}) ( [0-9]|[0-9]{2}) ${TIME} ([0-9]{4})$`);

function trimHttpSpace(text: string): string {
  return text.replace(/^[ \t\n\r\f]+|[ \t\n\r\f]+$/g, "");
}

/** Nanoseconds since the epoch of an HTTP-date, or `undefined` when `text` is not one. */
export function parseHttpDateNs(raw: string): bigint | undefined {
  const text = trimHttpSpace(raw);
  let weekday: number;
  let parts: string[];
  let found = IMF.exec(text);
  if (found !== null) {
    const [, w = "", day = "", month = "", year = "", h = "", m = "", s = ""] = found;
    weekday = DAYS.indexOf(w);
    parts = [year, month, day, h, m, s];
  } else if ((found = RFC850.exec(text)) !== null) {
    const [, w = "", day = "", month = "", shortYear = "", h = "", m = "", s = ""] = found;
    const short = Number(shortYear);
    weekday = LONG_DAYS.indexOf(w);
    parts = [String(short + (short < 70 ? 2000 : 1900)), month, day, h, m, s];
  } else if ((found = ASCTIME.exec(text)) !== null) {
    const [, w = "", month = "", day = "", h = "", m = "", s = "", year = ""] = found;
    weekday = DAYS.indexOf(w);
    parts = [year, month, day.trim(), h, m, s];
  } else {
    return undefined;
  }
  const [year, month, day, hour, minute, second] = parts.map((part, index) =>
    index === 1 ? MONTHS.indexOf(part) : Number(part),
  ) as [number, number, number, number, number, number];
  if (year < 1970 || year > 9999 || second > 59 || hour > 23 || minute > 59) {
    return undefined;
  }
  const ms = Date.UTC(year, month, day, hour, minute, second);
  const at = new Date(ms);
  if (at.getUTCMonth() !== month || at.getUTCDate() !== day) {
    return undefined;
  }
  // getUTCDay counts from Sunday; the tables count from Monday.
  return (at.getUTCDay() + 6) % 7 === weekday ? BigInt(ms) * 1_000_000n : undefined;
}
