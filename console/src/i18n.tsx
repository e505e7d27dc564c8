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
    };
  }, [lang, zone]);
  return <Context.Provider value={value}>{children}</Context.Provider>;
}

export function useI18n(): I18n {
  const value = useContext(Context);
  if (!value) throw new Error('useI18n outside I18nProvider');
  return value;
}
