/**
 * Quiet hours: a daily window of local time (in an IANA zone) during which bulk messages are not handed to
 * a provider. TRAI does not allow promotional SMS between 21:00 and 10:00, hence the default.
 */
export interface QuietHours {
  /** Minutes after local midnight when the window opens. */
  readonly startMinute: number;
  /** Minutes after local midnight when it closes (before startMinute: the window spans midnight). */
  readonly endMinute: number;
  readonly timeZone: string;
  /** As configured, e.g. "21:00-10:00", for messages. */
  readonly text: string;
}

const WINDOW = /^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$/;

/** "HH:MM-HH:MM" as minutes, or undefined when malformed or empty (start equal to end). */
export function parseWindow(text: string): { startMinute: number; endMinute: number } | undefined {
  const m = WINDOW.exec(text.trim());
  if (!m) return undefined;
  const startMinute = Number(m[1]) * 60 + Number(m[2]);
  const endMinute = Number(m[3]) * 60 + Number(m[4]);
  return startMinute === endMinute ? undefined : { startMinute, endMinute };
}

/** True when `timeZone` is an IANA zone this runtime knows. */
export function isTimeZone(timeZone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone });
    return true;
  } catch {
    return false;
  }
}

const formatters = new Map<string, Intl.DateTimeFormat>();

/** Local time of day in `timeZone`, in seconds after midnight. */
function localSeconds(at: Date, timeZone: string): number {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formatters.set(timeZone, f);
  }
  let h = 0;
  let m = 0;
  let s = 0;
  for (const part of f.formatToParts(at)) {
    if (part.type === 'hour') h = Number(part.value);
    else if (part.type === 'minute') m = Number(part.value);
    else if (part.type === 'second') s = Number(part.value);
  }
  return h * 3600 + m * 60 + s;
}

/**
 * When `at` falls inside the window: the instant it ends (messages held until then); otherwise undefined.
 * Across a daylight-saving change the end may be off by the change; whoever waits for it checks again.
 */
export function quietUntil(quiet: QuietHours | undefined, at: Date): Date | undefined {
  if (!quiet) return undefined;
  const now = localSeconds(at, quiet.timeZone);
  const start = quiet.startMinute * 60;
  const end = quiet.endMinute * 60;
  const inside = start < end ? now >= start && now < end : now >= start || now < end;
  if (!inside) return undefined;
  const left = (end - now + 86_400) % 86_400;
  return new Date(at.getTime() - at.getMilliseconds() + left * 1000);
}

/** The channels whose bulk messages (broadcasts and campaigns) quiet hours and silence periods rule: not email. */
export const RULED_CHANNELS: ReadonlySet<string> = new Set(['sms', 'whatsapp', 'ivr']);

/** Service and transactional templates are not held by quiet hours. */
export function exemptFromQuietHours(templateCategory: string | undefined): boolean {
  return templateCategory === 'service' || templateCategory === 'transactional';
}
