/**
 * npm run test:load — mixed reads and writes against the real server (`npm start`'s command, as a child
 * process on loopback) with autocannon: 100 connections for 60 s by default. Fails (exit 1) on any 5xx, any
 * connection error or timeout. npm run test:soak — the same mix for 10 minutes with the server's resident
 * memory sampled every 2 s; fails as well when memory keeps growing (see `flat` below).
 *
 * SQLite by default (a fresh file in a temporary folder); PostgreSQL when DATABASE_URL or TEST_DATABASE_URL
 * is a postgres:// URL (a new workspace in that database; nothing is truncated).
 * Settings: LOAD_DURATION_S (60; soak 600), LOAD_CONNECTIONS (100), LOAD_VOTERS (5000 seeded voters).
 * The figures go to stdout and to bench/out/load-<dialect>-<mode>.md.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { api, freePort, importVoters, spawnNpmStart, waitUntilUp } from './server.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const mode = process.argv.includes('--soak') ? 'soak' : 'load';
const duration = Number(process.env.LOAD_DURATION_S ?? (mode === 'soak' ? 600 : 60));
const connections = Number(process.env.LOAD_CONNECTIONS ?? 100);
const seededVoters = Number(process.env.LOAD_VOTERS ?? 5000);
const givenUrl = [process.env.DATABASE_URL, process.env.TEST_DATABASE_URL].find((u) =>
  /^postgres(ql)?:\/\//.test(u ?? ''),
);
const dialect = givenUrl ? 'postgres' : 'sqlite';

// ---------------------------------------------------------------- autocannon (CommonJS, no bundled types)

interface CannonRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string;
  setupRequest?: (request: CannonRequest) => CannonRequest;
}
interface CannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p90: number; p99: number; max: number };
  errors: number;
  timeouts: number;
  non2xx: number;
  '2xx': number;
  '4xx': number;
  '5xx': number;
  statusCodeStats: Record<string, { count: number }>;
}
type Autocannon = (options: {
  url: string;
  connections: number;
  duration: number;
  timeout: number;
  requests: CannonRequest[];
}) => Promise<CannonResult>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

// ---------------------------------------------------------------- the server under test

let server: ChildProcess | undefined;

async function startServer(databaseUrl: string, port: number): Promise<void> {
  server = spawnNpmStart({
    DATABASE_URL: databaseUrl,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    // The load comes from one address and a handful of users: the limits would answer 429 instead.
    RATE_LIMIT_PUBLIC_PER_MIN: '100000000',
    RATE_LIMIT_AUTHENTICATED_PER_MIN: '100000000',
    RATE_LIMIT_AUTH_PER_MIN: '100000',
    RATE_LIMIT_AUTH_IP_PER_MIN: '100000',
    QUIET_HOURS: '',
    SANDBOX_DELIVERY_DELAY_MS: '0',
    APP_KEY: 'b'.repeat(64),
  });
  server.once('exit', (code, signal) => {
    if (server) {
      console.error(`server exited unexpectedly (code ${code}, signal ${signal})`);
      process.exitCode = 1;
    }
  });
  await waitUntilUp(`http://127.0.0.1:${port}/api/healthz`);
}

/** SIGTERM, then SIGKILL after 10 s: a server that does not stop must not outlive the run. */
async function stopServer(): Promise<void> {
  if (!server) return;
  const running = server;
  server = undefined;
  if (running.exitCode !== null || running.signalCode !== null) return;
  const exited = new Promise((r) => running.once('exit', r));
  running.kill('SIGTERM');
  const timer = setTimeout(() => running.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

function rssMb(): number {
  const status = readFileSync(`/proc/${server?.pid}/status`, 'utf8');
  return Math.round(Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]) / 1024);
}

// ---------------------------------------------------------------- seeding through the API

async function seed(base: string): Promise<{ token: string; voterIds: number[] }> {
  const stamp = `${Date.now()}${process.pid}`;
  const registered = await api(base, 'POST', '/auth/register', undefined, {
    name: 'Load Test',
    email: `load.${stamp}@example.com`,
    password: 'load test password 1',
  });
  const token = registered.access_token as string;
  const lines = ['name,phone,constituency,booth,ward'];
  for (let i = 0; i < seededVoters; i++) {
    lines.push(`Voter ${i},+9191${String(i).padStart(8, '0')},Constituency ${i % 20},${i % 100},${i % 30}`);
  }
  const voterIds = await importVoters(base, token, lines);
  // Enough SMS credits for every send of the run (a payment buys at most 1,000,000).
  const payments = Math.ceil((duration * 400) / 1_000_000);
  for (let i = 0; i < payments; i++) await api(base, 'POST', '/payments', token, { sms_credits: 1_000_000 });
  return { token, voterIds };
}

// ---------------------------------------------------------------- the mix

function mix(token: string, voterIds: number[]): CannonRequest[] {
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const read = { authorization: `Bearer ${token}` };
  let counter = 0;
  const anyVoter = () => voterIds[Math.floor(Math.random() * voterIds.length)];
  const pages = Math.max(1, Math.ceil(voterIds.length / 15));
  const unique = () => `${process.pid}${String(++counter).padStart(7, '0')}`;
  return [
    {
      method: 'GET',
      headers: read,
      setupRequest: (r) => ({ ...r, path: `/api/voters?page=${1 + Math.floor(Math.random() * pages)}` }),
    },
    { method: 'GET', headers: read, setupRequest: (r) => ({ ...r, path: `/api/voters/${anyVoter()}` }) },
    {
      method: 'POST',
      path: '/api/voters',
      headers,
      setupRequest: (r) => {
        const id = unique();
        return { ...r, body: JSON.stringify({ name: `New ${id}`, phone: `+9192${id.slice(-8)}` }) };
      },
    },
    {
      method: 'GET',
      headers: read,
      setupRequest: (r) => ({ ...r, path: `/api/voters?search=Voter%20${Math.floor(Math.random() * 500)}` }),
    },
    {
      method: 'PUT',
      headers,
      setupRequest: (r) => ({
        ...r,
        path: `/api/voters/${anyVoter()}`,
        body: JSON.stringify({ address: `House ${unique()}, Main Road` }),
      }),
    },
    { method: 'GET', path: '/api/grievances', headers: read },
    {
      method: 'POST',
      path: '/api/grievances',
      headers,
      setupRequest: (r) => ({ ...r, body: JSON.stringify({ title: `Water supply ${unique()}` }) }),
    },
    { method: 'GET', path: '/api/messages/history', headers: read },
    {
      method: 'POST',
      path: '/api/messages/send',
      headers,
      setupRequest: (r) => ({
        ...r,
        body: JSON.stringify({
          channel: 'sms',
          to: `+9193${unique().slice(-8)}`,
          message: 'Polling day is Monday.',
        }),
      }),
    },
    { method: 'GET', path: '/api/user', headers: read },
    { method: 'GET', path: '/api/healthz' },
  ];
}

// ---------------------------------------------------------------- run

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'ces-load-'));
  const databaseUrl = givenUrl ?? `sqlite:${join(work, 'load.db')}`;
  const port = await freePort();
  const base = `http://127.0.0.1:${port}/api`;
  const failures: string[] = [];
  try {
    await startServer(databaseUrl, port);
    const { token, voterIds } = await seed(base);
    const samples: Array<[number, number]> = [];
    const startedAt = Date.now();
    const sampler = setInterval(() => {
      if (server) samples.push([Math.round((Date.now() - startedAt) / 1000), rssMb()]);
    }, 2000);
    console.log(
      `${mode}: ${connections} connections for ${duration} s on ${dialect} (${voterIds.length} seeded voters)`,
    );
    const result = await autocannon({
      url: `http://127.0.0.1:${port}`,
      connections,
      duration,
      timeout: 10,
      requests: mix(token, voterIds),
    });
    clearInterval(sampler);
    const health = await fetch(`${base}/healthz`).then((r) => r.status);
    // Each kind of request of the mix alone, after the run (median of 3): which one is slow.
    const alone: string[] = [];
    for (const template of mix(token, voterIds)) {
      const times: number[] = [];
      let request = template;
      for (let i = 0; i < 3; i++) {
        request = template.setupRequest ? template.setupRequest({ ...template }) : template;
        const start = performance.now();
        const res = await fetch(`http://127.0.0.1:${port}${request.path}`, {
          method: request.method,
          headers: request.headers,
          body: request.body,
        });
        await res.arrayBuffer();
        times.push(performance.now() - start);
      }
      alone.push(
        `${request.method} ${(request.path ?? '').replace(/=[^&]*/g, '=')} ${Math.round(median(times))} ms`,
      );
    }

    const statuses = Object.entries(result.statusCodeStats)
      .map(([code, { count }]) => `${code}: ${count}`)
      .join(', ');
    const rss = samples.map(([, mb]) => mb);
    const rows: Array<[string, string]> = [
      ['command', `${mode === 'soak' ? 'npm run test:soak' : 'npm run test:load'} (${dialect})`],
      ['connections, duration', `${connections}, ${duration} s`],
      ['requests', `${result.requests.total} (${Math.round(result.requests.average)} per second)`],
      [
        'latency p50 / p90 / p99 / max',
        `${result.latency.p50} / ${result.latency.p90} / ${result.latency.p99} / ${result.latency.max} ms`,
      ],
      ['status codes', statuses],
      ['5xx, errors, timeouts', `${result['5xx']}, ${result.errors}, ${result.timeouts}`],
      ['health after the run', String(health)],
      ['each request alone after the run (median of 3)', alone.join(', ')],
      [
        'server RSS first / median / max / last',
        `${rss[0] ?? '-'} / ${median(rss)} / ${Math.max(...rss)} / ${rss.at(-1) ?? '-'} MB`,
      ],
    ];
    if (result['5xx'] > 0) failures.push(`${result['5xx']} answers were 5xx`);
    if (result.errors > 0 || result.timeouts > 0)
      failures.push(`${result.errors} connection errors, ${result.timeouts} timeouts`);
    if (health !== 200) failures.push(`healthz answered ${health} after the run`);
    if (mode === 'soak' && rss.length >= 10) {
      // Flat: after a warm-up (the first fifth), the median of the last fifth is within 15% (or 32 MB) of the
      // median of the second fifth.
      const fifth = Math.floor(rss.length / 5);
      const early = median(rss.slice(fifth, 2 * fifth));
      const late = median(rss.slice(-fifth));
      rows.push(['RSS median, second fifth -> last fifth', `${early} -> ${late} MB`]);
      if (late - early > Math.max(32, early * 0.15))
        failures.push(`memory grew from ${early} MB to ${late} MB`);
      rows.push(['RSS samples (s: MB)', samples.map(([s, mb]) => `${s}: ${mb}`).join(', ')]);
    }
    rows.push(['verdict', failures.length === 0 ? 'pass' : `FAIL: ${failures.join('; ')}`]);
    const table = ['| what | figure |', '|---|---|', ...rows.map(([k, v]) => `| ${k} | ${v} |`)].join('\n');
    console.log(table);
    mkdirSync('bench/out', { recursive: true });
    writeFileSync(`bench/out/load-${dialect}-${mode}.md`, `${new Date().toISOString()}\n\n${table}\n`);
  } finally {
    await stopServer();
    rmSync(work, { recursive: true, force: true });
  }
  if (failures.length > 0) process.exitCode = 1;
}

main().catch(async (error: unknown) => {
  console.error(error);
  await stopServer();
  process.exit(1);
});
