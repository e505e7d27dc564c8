/**
 * Reads of a voter roll as issue 25 measures them, shared by bench:voters (both databases, a million voters)
 * and bench:state (PostgreSQL, a state): distinct list filters and searches each asked once, and mixed reads
 * (a voter, a list, a search) from many connections. Paths are relative to the API's base (`.../api`).
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { createRequire } from 'node:module';
import { constituencyName } from './generate.ts';

const agent = new Agent({ keepAlive: true, maxSockets: 1 });

export const percentile = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

/** One authenticated GET over a kept-alive connection; its time in ms, or an error naming a status not 200. */
export function timedGet(apiBase: string, path: string, token: string): Promise<number> {
  return new Promise((done, fail) => {
    const started = performance.now();
    httpRequest(`${apiBase}${path}`, { agent, headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      res.on('end', () =>
        res.statusCode === 200
          ? done(performance.now() - started)
          : fail(new Error(`GET ${path}: ${res.statusCode}`)),
      );
    })
      .on('error', fail)
      .end();
  });
}

export interface Latencies {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

/** Each path asked once, in turn: p50, p99 and the worst. */
export async function timeEach(apiBase: string, paths: string[], token: string): Promise<Latencies> {
  const times: number[] = [];
  for (const path of paths) times.push(await timedGet(apiBase, path, token));
  times.sort((a, b) => a - b);
  return { n: times.length, p50: percentile(times, 50), p99: percentile(times, 99), max: times.at(-1) ?? 0 };
}

/**
 * `count` distinct list filters (constituency, booth, ward and their combinations), each kind in turn, the
 * values drawn at random from the generator's shape, never the same twice.
 */
export function listFilters(count: number, constituencies: number): string[] {
  const out = new Set<string>();
  let seed = 25;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const c = () => encodeURIComponent(constituencyName(Math.floor(random() * constituencies)));
  const booth = () => 1 + Math.floor(random() * 300);
  const ward = () => 1 + Math.floor(random() * 60);
  const kinds = [
    () => `constituency=${c()}`,
    () => `booth=${booth()}`,
    () => `ward=${ward()}`,
    () => `constituency=${c()}&ward=${ward()}`,
    () => `constituency=${c()}&ward=${ward()}&booth=${booth()}`,
    () => `ward=${ward()}&booth=${booth()}`,
  ];
  for (let i = 0; out.size < count && i < count * 100; i++)
    out.add((kinds[i % kinds.length] as () => string)());
  return [...out].map((q) => `/voters?${q}`);
}

/**
 * `count` distinct searches read off the generated file's first rows, a third each: name fragments (4-9
 * characters), phone digits (5-7, from anywhere in the number) and email fragments (6-10 characters).
 */
export function searchTerms(csvPath: string, count: number): string[] {
  // The first 4 MB only: a state's file (about 1 GB) is longer than a string can be.
  const head = Buffer.alloc(4_000_000);
  const fd = openSync(csvPath, 'r');
  const length = readSync(fd, head, 0, head.length, 0);
  closeSync(fd);
  const lines = head.subarray(0, length).toString('utf8').split('\n').slice(1, -1);
  const out = new Set<string>();
  for (let i = 0; out.size < count && i < lines.length; i++) {
    const [name = '', phone = '', email = ''] = lines[(i * 7919) % lines.length]!.split(',');
    const kind = i % 3;
    if (kind === 0) out.add(name.slice(0, 4 + (i % 6)).trim());
    else if (kind === 1) out.add(phone.slice(3 + (i % 4), 3 + (i % 4) + 5 + (i % 3)));
    else if (email) out.add(email.slice(0, 6 + (i % 5)));
  }
  return [...out].filter((t) => t.length >= 3).map((t) => `/voters?search=${encodeURIComponent(t)}`);
}

export interface MixedReads {
  connections: number;
  seconds: number;
  per_s: number;
  p50_ms: number;
  p99_ms: number;
  failed: number;
}

/**
 * Mixed reads under load (autocannon): `connections` for `seconds`, each request in turn a voter by id (of
 * the first page), one of `lists` or one of `searches`.
 */
export async function mixedReads(
  apiBase: string,
  token: string,
  lists: string[],
  searches: string[],
  { connections = 50, seconds = 30 } = {},
): Promise<MixedReads> {
  const res = await fetch(`${apiBase}/voters?per_page=100`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const ids = ((await res.json()) as { data: { data: Array<{ id: number }> } }).data.data.map((v) => v.id);
  let n = 0;
  const pick = () => {
    n += 1;
    if (n % 3 === 0) return `/voters/${ids[n % ids.length]}`;
    return n % 3 === 1 ? (lists[n % lists.length] as string) : (searches[n % searches.length] as string);
  };
  const prefix = new URL(apiBase).pathname;
  const autocannon = createRequire(import.meta.url)('autocannon') as (options: object) => Promise<{
    latency: { p50: number; p99: number };
    '2xx': number;
    non2xx: number;
    errors: number;
  }>;
  const result = await autocannon({
    url: apiBase,
    connections,
    duration: seconds,
    requests: [
      {
        method: 'GET',
        headers: { authorization: `Bearer ${token}` },
        setupRequest: (r: object) => ({ ...r, path: `${prefix}${pick()}` }),
      },
    ],
  });
  return {
    connections,
    seconds,
    per_s: Math.round(result['2xx'] / seconds),
    p50_ms: result.latency.p50,
    p99_ms: result.latency.p99,
    failed: result.non2xx + result.errors,
  };
}

/** `fn` asked `times` times in turn: the median and the longest, in ms. `warm`: one asking first, not counted. */
export async function timed(
  fn: () => Promise<unknown>,
  times = 5,
  warm = false,
): Promise<{ median: number; max: number }> {
  if (warm) await fn();
  const ms: number[] = [];
  for (let i = 0; i < times; i++) {
    const t0 = performance.now();
    await fn();
    ms.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  return { median: Math.round(ms[Math.floor(ms.length / 2)]!), max: Math.round(ms.at(-1)!) };
}
