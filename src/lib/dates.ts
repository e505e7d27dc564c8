const DATE = /^\d{4}-\d{2}-\d{2}$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/;

/** Whether `YYYY-MM-DD` at the start of `text` is a day of the calendar (no 30 February). */
function realDay(text: string): boolean {
  const [year, month, day] = text.slice(0, 10).split('-').map(Number) as [number, number, number];
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/** An ISO 8601 date-time with its zone, as an ISO instant; undefined when malformed or not a real day. */
export function instant(value: string): string | undefined {
  const text = value.trim();
  if (!DATE_TIME.test(text) || !realDay(text)) return undefined;
  const at = new Date(text);
  return Number.isNaN(at.getTime()) ? undefined : at.toISOString();
}

/**
 * A date filter's bounds [start, end): an ISO 8601 date is its whole UTC day, a date-time that instant;
 * undefined when malformed or not a real day.
 */
export function dateBounds(value: string): [string, string] | undefined {
  const text = value.trim();
  if (DATE.test(text)) {
    if (!realDay(text)) return undefined;
    const start = new Date(`${text}T00:00:00.000Z`);
    return [start.toISOString(), new Date(start.getTime() + 86_400_000).toISOString()];
  }
  const at = instant(text);
  return at === undefined ? undefined : [at, new Date(new Date(at).getTime() + 1).toISOString()];
}
