import { createContext, type ReactNode, useContext, useEffect, useMemo, useState } from 'react';
import { type Key, strings } from './strings.ts';

export type Lang = 'en' | 'hi';
const LANG_KEY = 'ces.lang';
const locales: Record<Lang, string> = { en: 'en-IN', hi: 'hi-IN' };

export interface I18n {
  lang: Lang;
  setLang(lang: Lang): void;
  /**
   * The string in the chosen language, with `{name}` placeholders filled. With a numeric `count`, the key's
   * `.one` form is used where the language's plural rules say "one" and the key has one ("1 voter").
   */
  t(key: Key, vars?: Record<string, string | number>): string;
  /** A number with Indian digit grouping (1,00,000). */
  n(value: number): string;
  /** A date and time in the chosen language and the workspace's zone, the zone named (empty for null). */
  d(value: string | null | undefined): string;
  /** The workspace's time zone (GET /api/workspace); until it is known, the browser's. */
  setZone(zone: string | undefined): void;
  /** A message's `error_code` in words (the code itself where the console has no words for it). */
  code(errorCode: string | null | undefined): string;
  /** The zone times are typed and shown in, as people read it (Asia/Kolkata: IST). */
  zoneName: string;
  /**
   * A time typed in a `datetime-local` field (YYYY-MM-DDTHH:mm), read in the workspace's zone (not the
   * device's), as the UTC instant the API takes; '' for an empty or invalid value.
   */
  fromLocal(value: string): string;
}

/** The offset of `zone` from UTC at the instant `at`, in ms (its wall clock minus UTC). */
function offsetAt(zone: string | undefined, at: number): number {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    })
      .formatToParts(new Date(at))
      .map((p) => [p.type, p.value]),
  );
  const wall = Date.UTC(
    +parts.year!,
    +parts.month! - 1,
    +parts.day!,
    +parts.hour!,
    +parts.minute!,
    +parts.second!,
  );
  return wall - Math.floor(at / 1000) * 1000;
}

/** A wall-clock time in `zone` as the UTC instant (two passes settle a change of offset between the guesses). */
export function zonedToUtc(value: string, zone: string | undefined): string {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(value);
  if (!m) return '';
  const wall = Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +(m[6] ?? 0));
  let at = wall - offsetAt(zone, wall);
  at = wall - offsetAt(zone, at);
  return new Date(at).toISOString();
}

const Context = createContext<I18n | null>(null);

function initial(): Lang {
  const saved = localStorage.getItem(LANG_KEY);
  return saved === 'hi' || saved === 'en' ? saved : 'en';
}

export function I18nProvider({ children }: { children: ReactNode }) {
  const [lang, setLangState] = useState<Lang>(initial);
  const [zone, setZone] = useState<string | undefined>(undefined);
  useEffect(() => {
    document.documentElement.lang = lang;
  }, [lang]);
  const value = useMemo<I18n>(() => {
    const numbers = new Intl.NumberFormat(locales[lang]);
    const plurals = new Intl.PluralRules(locales[lang]);
    const table = strings[lang] as Record<string, string>;
    // Every time in the workspace's zone, with the zone named (answers are UTC; the office reads local time).
    const dates = new Intl.DateTimeFormat(locales[lang], {
      year: 'numeric',
      month: 'short',
      day: 'numeric',
      hour: 'numeric',
      minute: '2-digit',
      timeZone: zone,
      timeZoneName: 'short',
    });
    return {
      lang,
      setLang(next) {
        localStorage.setItem(LANG_KEY, next);
        setLangState(next);
      },
      t(key, vars) {
        const count = vars?.count;
        const one =
          typeof count === 'number' && plurals.select(count) === 'one' ? table[`${key}.one`] : undefined;
        const text = one ?? strings[lang][key];
        return vars ? text.replace(/\{(\w+)\}/g, (_, name: string) => String(vars[name] ?? '')) : text;
      },
      n: (value) => numbers.format(value),
      d: (value) => (value ? dates.format(new Date(value)) : ''),
      setZone,
      zoneName:
        new Intl.DateTimeFormat('en-IN', { timeZone: zone, timeZoneName: 'short' })
          .formatToParts(new Date())
          .find((p) => p.type === 'timeZoneName')?.value ??
        (zone || ''),
      fromLocal: (value) => zonedToUtc(value, zone),
      code: (errorCode) =>
        errorCode ? ((strings[lang] as Record<string, string>)[`error.code.${errorCode}`] ?? errorCode) : '',
    };
  }, [lang, zone]);
  return <Context.Provider value={value}>{children}</Context.Provider>;
}

export function useI18n(): I18n {
  const value = useContext(Context);
  if (!value) throw new Error('useI18n outside I18nProvider');
  return value;
}
