const DATE = /^\d{4}-\d{2}-\d{2}$/;
/** RFC 3339's date-time, as the API document's `format: date-time` reads it: seconds and a zone required. */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:?\d{2})$/;

const FIRST_MS = Date.parse('0001-01-01T00:00:00.000Z');
const LAST_MS = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * An instant as the stored timestamps are written (and compared, as text on SQLite), kept within years
 * 0001-9999: toISOString writes a year past 9999 as `+010000-...`, which sorts before every real timestamp, and
 * PostgreSQL refuses a year 0 or past 9999 (a 500, not an answer).
 */
const iso = (ms: number) => new Date(Math.min(Math.max(ms, FIRST_MS), LAST_MS)).toISOString();

/** Whether `YYYY-MM-DD` at the start of `text` is a day of the calendar (no 30 February). */
function realDay(text: string): boolean {
  const [year, month, day] = text.slice(0, 10).split('-').map(Number) as [number, number, number];
  const date = new Date(Date.UTC(2000, month - 1, day));
  date.setUTCFullYear(year);
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/** The milliseconds of an ISO 8601 date-time with its zone; undefined when malformed or not a real day. */
function dateTimeMs(text: string): number | undefined {
  if (!DATE_TIME.test(text) || !realDay(text)) return undefined;
  const ms = new Date(text).getTime();
  return Number.isNaN(ms) ? undefined : ms;
}

/** An ISO 8601 date-time with its zone, as an ISO instant; undefined when malformed, not a real day, or outside years 0001-9999. */
export function instant(value: string): string | undefined {
  const ms = dateTimeMs(value.trim());
  return ms === undefined || ms < FIRST_MS || ms > LAST_MS ? undefined : new Date(ms).toISOString();
}

/**
 * A date filter's bounds [start, end): an ISO 8601 date is its whole UTC day, a date-time that instant; kept
 * within years 0001-9999 (see iso). Undefined when malformed or not a real day.
 */
export function dateBounds(value: string): [string, string] | undefined {
  const text = value.trim();
  if (DATE.test(text)) {
    if (!realDay(text)) return undefined;
    const start = Date.parse(`${text}T00:00:00.000Z`);
    return Number.isNaN(start) ? undefined : [iso(start), iso(start + 86_400_000)];
  }
  const ms = dateTimeMs(text);
  return ms === undefined ? undefined : [iso(ms), iso(ms + 1)];
}
