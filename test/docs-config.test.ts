import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { defaultKeyFile, loadConfig } from '../src/config.ts';

/**
 * docs/configuration.md lists exactly the environment variables src/config.ts reads: this test fails when a
 * variable is read but not documented, or documented but not read. Only the page's tables count (its prose
 * may name other variables, such as the test suite's).
 */

const docPath = new URL('../docs/configuration.md', import.meta.url);
const configPath = new URL('../src/config.ts', import.meta.url);

/**
 * Settings the contract names whose code lands on another branch of the same issue set: documented ahead,
 * not read by config.ts yet. Once config.ts reads one, the test below asks for it to be removed from here.
 */
const PENDING = new Set([]);

const envName = /^[A-Z][A-Z0-9_]*$/;

/** Each variable named in the first cell of a table row, with the row's line number (1-based). */
function documentedSettings(markdown: string): Map<string, number[]> {
  const found = new Map<string, number[]>();
  markdown.split('\n').forEach((line, index) => {
    if (!line.startsWith('|')) return;
    const first = line.split('|')[1] ?? '';
    for (const match of first.matchAll(/`([^`]+)`/g)) {
      const name = match[1] as string;
      if (!envName.test(name)) continue;
      found.set(name, [...(found.get(name) ?? []), index + 1]);
    }
  });
  return found;
}

/** Names src/config.ts reads, found in its source: `env.NAME`, `env['NAME']` and `helper(env, 'NAME', ...)`. */
function readInSource(source: string): Set<string> {
  const names = new Set<string>();
  const patterns = [
    /\benv\.([A-Z][A-Z0-9_]*)\b/g,
    /\benv\[\s*'([A-Z][A-Z0-9_]*)'\s*\]/g,
    /\(\s*env\s*,\s*'([A-Z][A-Z0-9_]*)'/g,
  ];
  for (const pattern of patterns) for (const match of source.matchAll(pattern)) names.add(match[1] as string);
  return names;
}

/** Names loadConfig (and defaultKeyFile) actually look up, for the given environment. */
function readAtRunTime(values: Record<string, string>): Set<string> {
  const seen = new Set<string>();
  const env = new Proxy(values, {
    get(target, key) {
      if (typeof key === 'string') seen.add(key);
      return typeof key === 'string' ? target[key] : undefined;
    },
    has(target, key) {
      if (typeof key === 'string') seen.add(key);
      return key in target;
    },
  });
  loadConfig(env, { keyFile: undefined });
  defaultKeyFile(env);
  return seen;
}

/** What is wrong between the page and the code; empty when they agree. */
function drift(documented: Map<string, number[]>, read: Set<string>, pending: Set<string>): string[] {
  const problems: string[] = [];
  for (const name of [...read].sort()) {
    if (!documented.has(name))
      problems.push(`${name} is read by src/config.ts but has no row in docs/configuration.md`);
    if (pending.has(name))
      problems.push(
        `${name} is now read by src/config.ts: remove it from PENDING in test/docs-config.test.ts`,
      );
  }
  for (const [name, lines] of documented) {
    if (!read.has(name) && !pending.has(name))
      problems.push(`${name} (docs/configuration.md line ${lines[0]}) is not read by src/config.ts`);
    if (lines.length > 1)
      problems.push(`${name} has more than one row in docs/configuration.md (lines ${lines.join(', ')})`);
  }
  for (const name of pending) {
    if (!documented.has(name)) problems.push(`${name} is in PENDING but has no row in docs/configuration.md`);
  }
  return problems;
}

/** The default of each row that names one variable: the first backticked value of its second cell. */
function documentedDefaults(markdown: string): Map<string, string> {
  const defaults = new Map<string, string>();
  for (const line of markdown.split('\n')) {
    if (!line.startsWith('|')) continue;
    const [, first = '', second = ''] = line.split('|');
    const names = [...first.matchAll(/`([^`]+)`/g)].map((m) => m[1] as string).filter((n) => envName.test(n));
    const value = /`([^`]*)`/.exec(second)?.[1];
    if (names.length === 1 && value !== undefined) defaults.set(names[0] as string, value);
  }
  return defaults;
}

/**
 * Defaults written as literals in src/config.ts: `int(env, 'NAME', 500)` (or a product such as
 * `100 * 1024 * 1024`), `bool(env, 'NAME', false)`, `retrySchedule(env, 'NAME', [5, 30])` and
 * `env.NAME?.trim() || 'value'`. Computed defaults (such as `EXPORT_THREADS`) are not compared.
 */
function defaultsInSource(source: string): Map<string, string> {
  const defaults = new Map<string, string>();
  const number = (text: string) =>
    String(text.split('*').reduce((product, part) => product * Number(part.replace(/[_\s]/g, '')), 1));
  for (const m of source.matchAll(
    /\bint\(\s*env\s*,\s*'([A-Z][A-Z0-9_]*)'\s*,\s*([\d_]+(?:\s*\*\s*[\d_]+)*)\s*[,)]/g,
  ))
    defaults.set(m[1] as string, number(m[2] as string));
  for (const m of source.matchAll(/\bbool\(\s*env\s*,\s*'([A-Z][A-Z0-9_]*)'\s*,\s*(true|false)\s*\)/g))
    defaults.set(m[1] as string, m[2] as string);
  for (const m of source.matchAll(/\bretrySchedule\(\s*env\s*,\s*'([A-Z][A-Z0-9_]*)'\s*,\s*\[([^\]]*)\]/g))
    defaults.set(m[1] as string, (m[2] as string).replace(/\s/g, ''));
  for (const m of source.matchAll(/\benv\.([A-Z][A-Z0-9_]*)\?\.trim\(\)\s*\|\|\s*'([^']*)'/g))
    defaults.set(m[1] as string, m[2] as string);
  return defaults;
}

function wrongDefaults(documented: Map<string, string>, inSource: Map<string, string>): string[] {
  const problems: string[] = [];
  for (const [name, value] of inSource) {
    const written = documented.get(name);
    if (written !== undefined && written !== value)
      problems.push(
        `${name}: docs/configuration.md says the default is ${written}, src/config.ts says ${value}`,
      );
  }
  return problems;
}

describe('docs/configuration.md and src/config.ts', () => {
  const page = readFileSync(docPath, 'utf8');
  const source = readFileSync(configPath, 'utf8');
  const documented = documentedSettings(page);
  const inSource = readInSource(source);
  const atRunTime = new Set([
    ...readAtRunTime({}),
    // Every optional branch taken: real providers, deprecation, Redis.
    ...readAtRunTime({
      SMS_PROVIDER: 'twilio',
      WHATSAPP_PROVIDER: 'twilio',
      IVR_PROVIDER: 'twilio',
      EMAIL_PROVIDER: 'smtp',
      TWILIO_ACCOUNT_SID: 'AC0',
      TWILIO_AUTH_TOKEN: 'token',
      SMTP_HOST: 'smtp.example.org',
      SMTP_FROM: 'office@example.org',
      API_DEPRECATED_VERSIONS: 'v1',
      REDIS_URL: 'redis://127.0.0.1:6379',
    }),
  ]);
  const read = new Set([...inSource, ...[...atRunTime].filter((name) => envName.test(name))]);

  it('finds the settings on both sides (the scan is not empty)', () => {
    for (const name of [
      'PORT',
      'DATABASE_URL',
      'APP_KEY',
      'TWILIO_AUTH_TOKEN',
      'SMTP_FROM',
      'API_SUNSET_DATE',
    ]) {
      expect(read, name).toContain(name);
      expect(documented.has(name), name).toBe(true);
    }
    for (const name of ['PORT', 'DATABASE_URL', 'SMTP_FROM']) expect(atRunTime, name).toContain(name);
  });

  it('documents every setting config.ts reads, and only those', () => {
    expect(drift(documented, read, PENDING)).toEqual([]);
  });

  it('gives the defaults config.ts has', () => {
    const fromSource = defaultsInSource(source);
    // The comparison covers most settings (a regression in the patterns would shrink it).
    expect(fromSource.size).toBeGreaterThan(40);
    expect(fromSource.get('IMPORT_MAX_BYTES')).toBe('104857600');
    expect(fromSource.get('WEBHOOK_RETRY_SCHEDULE')).toBe('5,300,1800,7200,18000,36000,36000');
    expect(fromSource.get('HOST')).toBe('0.0.0.0');
    expect(wrongDefaults(documentedDefaults(page), fromSource)).toEqual([]);
  });

  it('reports a missing row, an extra row and a duplicate', () => {
    const page = [
      '| variable | default | meaning |',
      '| --- | --- | --- |',
      '| `PORT` | `3000` | port |',
      '| `NOT_READ` | unset | gone |',
      '| `PORT` | `3000` | again |',
    ].join('\n');
    expect(drift(documentedSettings(page), new Set(['PORT', 'HOST']), new Set())).toEqual([
      'HOST is read by src/config.ts but has no row in docs/configuration.md',
      'PORT has more than one row in docs/configuration.md (lines 3, 5)',
      'NOT_READ (docs/configuration.md line 4) is not read by src/config.ts',
    ]);
    expect(drift(documentedSettings(page), new Set(['PORT', 'NOT_READ']), new Set(['NOT_READ']))).toContain(
      'NOT_READ is now read by src/config.ts: remove it from PENDING in test/docs-config.test.ts',
    );
  });

  it('reports a wrong default', () => {
    const page = '| `PORT` | `8080` | port |\n| `TRUST_PROXY` | `false` | proxy |';
    const source = "port: int(env, 'PORT', 3000, 0, 65535), trustProxy: bool(env, 'TRUST_PROXY', false),";
    expect(wrongDefaults(documentedDefaults(page), defaultsInSource(source))).toEqual([
      'PORT: docs/configuration.md says the default is 8080, src/config.ts says 3000',
    ]);
  });
});
