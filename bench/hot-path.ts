/**
 * npm run bench:hot-path — the cost of the service's hottest request, authenticated `GET /api/voters/{id}`,
 * as a ratio to references measured in the same run on the same machine (these 2 cores are shared: only
 * ratios within one run mean anything):
 *
 * - SQLite (always): the real server (`npm start`'s command, a fresh database file) against a bare Fastify
 *   hello world (`bench/hello-world.ts`, the same Node.js flags), both under autocannon with the same number
 *   of connections (100, no pipelining). Issue 25's goal is the server's CPU time per request (user + system,
 *   from /proc, so time lost to other processes is not counted): at most 2.5x the hello world's. The rate
 *   ratio is reported too, but on two shared cores it measures how much CPU autocannon is left as much as
 *   the server (autocannon with 100 connections takes a core of its own).
 * - PostgreSQL (when DATABASE_URL or TEST_DATABASE_URL is a postgres:// URL): the same against the same hello
 *   world, and against `pgbench` running the same primary-key select of the same voters on as many connections
 *   as the API's pool has (within 2x of pgbench: ratio at least 0.5x). With REDIS_URL set (passed on: rate
 *   limits counted in Redis, token owners invalidated through it, as in a multi-process deployment) the CPU
 *   goal is at most 5x the hello world's.
 *
 * The phases alternate (hello, API, hello, API, ...) HOT_PATH_ROUNDS times and each ratio is the median of
 * the rounds, so that a spell of load from elsewhere does not land on one side only.
 * Settings: HOT_PATH_DURATION_S (10 per phase), HOT_PATH_CONNECTIONS (100), HOT_PATH_ROUNDS (2),
 * HOT_PATH_VOTERS (1000 seeded voters), HOT_PATH_LOG_LEVEL (the service's LOG_LEVEL, default `info` as in
 * production; the log goes to /dev/null), HOT_PATH_PROFILE (a folder for the service's `--cpu-prof` profile).
 * The figures go to stdout, bench/out/hot-path.md and bench/out/hot-path.json (read by `npm run bench`).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { api, ensureBuilt, freePort, importVoters, npmStart, waitUntilUp } from './server.ts';

const duration = Number(process.env.HOT_PATH_DURATION_S ?? 10);
const connections = Number(process.env.HOT_PATH_CONNECTIONS ?? 100);
const rounds = Math.max(1, Number(process.env.HOT_PATH_ROUNDS ?? 2));
const seededVoters = Number(process.env.HOT_PATH_VOTERS ?? 1000);
const logLevel = process.env.HOT_PATH_LOG_LEVEL ?? 'info';
/** A folder: the service runs with `node --cpu-prof` and writes its profile there when it stops. */
const profileDir = process.env.HOT_PATH_PROFILE;
/** The API's PostgreSQL pool (src/db/connect.ts): pgbench gets as many connections. */
const PG_POOL_SIZE = 10;
const pgUrl = [process.env.DATABASE_URL, process.env.TEST_DATABASE_URL].find((u) =>
  /^postgres(ql)?:\/\//.test(u ?? ''),
);

// ---------------------------------------------------------------- autocannon (CommonJS, no bundled types)

interface CannonRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  setupRequest?: (request: CannonRequest) => CannonRequest;
}
interface CannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number };
  errors: number;
  timeouts: number;
  '2xx': number;
  non2xx: number;
}
type Autocannon = (options: {
  url: string;
  connections: number;
  duration: number;
  timeout: number;
  requests: CannonRequest[];
}) => Promise<CannonResult>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

// ---------------------------------------------------------------- processes

const children = new Set<ChildProcess>();

/** `npm start`'s node command with `entry` in place of its entry point (the hello world), or as is. */
function startNode(env: Record<string, string>, entry?: string): ChildProcess {
  if (!entry) ensureBuilt();
  const start = npmStart();
  // The hello world is TypeScript: tsx's loader is the one flag it has beyond the service's.
  const args = entry
    ? ['--import', 'tsx', ...start.args.slice(0, -1), entry]
    : [...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []), ...start.args];
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...start.env, ...env },
    // The service's request log is written (it costs what it costs in production) but not kept.
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.add(child);
  child.once('exit', (code, signal) => {
    if (children.delete(child)) {
      console.error(`a server exited unexpectedly (code ${code}, signal ${signal})`);
      process.exitCode = 1;
    }
  });
  return child;
}

/** SIGTERM, then SIGKILL after 10 s: a server that does not stop must not outlive the run. */
async function stop(child: ChildProcess): Promise<void> {
  if (!children.delete(child)) return;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

// ---------------------------------------------------------------- seeding through the API

async function seed(base: string): Promise<{ token: string; voterIds: number[]; workspaceId: number }> {
  const stamp = `${Date.now()}${process.pid}`;
  const registered = await api(base, 'POST', '/auth/register', undefined, {
    name: 'Hot Path',
    email: `hot.path.${stamp}@example.com`,
    password: 'hot path password 1',
  });
  const token = registered.access_token as string;
  const workspaceId = (registered.user as { workspace_id: number }).workspace_id;
  const lines = ['name,phone,email,constituency,booth,ward,address'];
  for (let i = 0; i < seededVoters; i++) {
    lines.push(
      `Voter ${i},+9191${String(i).padStart(8, '0')},voter${i}@example.com,Constituency ${i % 20},${i % 100},${i % 30},"House ${i}, Main Road"`,
    );
  }
  const voterIds = await importVoters(base, token, lines);
  if (voterIds.length === 0) throw new Error('no voters were seeded');
  return { token, voterIds, workspaceId };
}

// ---------------------------------------------------------------- measuring

interface Figure {
  perSecond: number;
  p50: number;
  p99: number;
  /** Answers that were not 2xx, connection errors and timeouts: any of them voids the figure. */
  failed: number;
  /**
   * The server process's CPU time (user + system) per answered request, in microseconds: steadier than the
   * rate on a shared machine, since time lost to other processes is not counted.
   */
  cpuMicros: number;
}

/** User + system CPU time of a process so far, in microseconds (Linux; 0 elsewhere). */
function cpuTime(pid: number | undefined): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    // utime and stime are fields 14 and 15 of the line, in clock ticks (100 per second on Linux).
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return 0;
  }
}

async function cannon(port: number, request: CannonRequest, pid: number | undefined): Promise<Figure> {
  const cpuBefore = cpuTime(pid);
  const result = await autocannon({
    url: `http://127.0.0.1:${port}`,
    connections,
    duration,
    timeout: 10,
    requests: [request],
  });
  return {
    perSecond: result['2xx'] / duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    failed: result.non2xx + result.errors + result.timeouts,
    cpuMicros: (cpuTime(pid) - cpuBefore) / Math.max(1, result['2xx']),
  };
}

/** pgbench's transactions per second for `script` on `clients` connections (no connection setup counted). */
function pgbench(url: string, script: string, clients: number, mode: 'extended' | 'prepared'): number {
  const out = execFileSync(
    'pgbench',
    ['-n', '-M', mode, '-c', String(clients), '-j', '2', '-T', String(duration), '-f', script, url],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const tps = /tps = ([\d.]+) \(without initial connection time\)/.exec(out)?.[1];
  if (!tps) throw new Error(`pgbench printed no tps:\n${out}`);
  return Number(tps);
}

function hasPgbench(): boolean {
  try {
    execFileSync('pgbench', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const ratio = (n: number) => `${n.toFixed(2)}x`;

interface DialectResult {
  dialect: 'sqlite' | 'postgres';
  redis: boolean;
  hello: Figure[];
  api: Figure[];
  /** Median over the rounds of API / hello world. */
  helloRatio: number;
  /** Median over the rounds of the server's CPU time per request, API / hello world (issue 25's measure). */
  cpuRatio: number;
  pgbench?: { clients: number; prepared: number[]; extended: number[]; ratio: number };
  failed: number;
}

async function runDialect(
  dialect: 'sqlite' | 'postgres',
  databaseUrl: string,
  helloPort: number,
  helloPid: number | undefined,
): Promise<DialectResult> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}/api`;
  const redis = dialect === 'postgres' && Boolean(process.env.REDIS_URL);
  const server = startNode({
    DATABASE_URL: databaseUrl,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: logLevel,
    REDIS_URL: redis ? (process.env.REDIS_URL ?? '') : '',
    REDIS_PREFIX: `ces-hot-path-${process.pid}`,
    // One user from one address: the limits would answer 429 instead.
    RATE_LIMIT_PUBLIC_PER_MIN: '100000000',
    RATE_LIMIT_AUTHENTICATED_PER_MIN: '100000000',
    RATE_LIMIT_AUTH_PER_MIN: '100000',
    RATE_LIMIT_AUTH_IP_PER_MIN: '100000',
    QUIET_HOURS: '',
    APP_KEY: 'c'.repeat(64),
  });
  try {
    await waitUntilUp(`${base}/healthz`);
    const { token, voterIds, workspaceId } = await seed(base);
    const headers = { authorization: `Bearer ${token}` };
    const anyVoter = () => voterIds[Math.floor(Math.random() * voterIds.length)];
    const apiRequest: CannonRequest = {
      method: 'GET',
      headers,
      setupRequest: (r) => ({ ...r, path: `/api/voters/${anyVoter()}` }),
    };
    // The same client work for the reference: a header and a path built per request.
    const helloRequest: CannonRequest = {
      method: 'GET',
      headers,
      setupRequest: (r) => ({ ...r, path: '/' }),
    };
    // Warm-up (JIT, caches, the pool's connections), not counted.
    await autocannon({
      url: `http://127.0.0.1:${port}`,
      connections,
      duration: 2,
      timeout: 10,
      requests: [apiRequest],
    });

    let script: string | undefined;
    if (dialect === 'postgres') {
      script = join(mkdtempSync(join(tmpdir(), 'ces-hot-path-')), 'select.sql');
      const min = Math.min(...voterIds);
      const max = Math.max(...voterIds);
      // What the API runs per request: the token's owner, then the voter by primary key in its workspace.
      // The reference is the voter's select alone (the goal's "same primary-key select").
      writeFileSync(
        script,
        `\\set id random(${min}, ${max})\nselect * from voters where workspace_id = ${workspaceId} and id = :id;\n`,
      );
    }
    const withPgbench = dialect === 'postgres' && hasPgbench();
    if (dialect === 'postgres' && !withPgbench) console.log('pgbench is not installed: no pgbench ratio');

    const hello: Figure[] = [];
    const apiFigures: Figure[] = [];
    const prepared: number[] = [];
    const extended: number[] = [];
    for (let round = 1; round <= rounds; round++) {
      hello.push(await cannon(helloPort, helloRequest, helloPid));
      apiFigures.push(await cannon(port, apiRequest, server.pid));
      if (withPgbench && script && pgUrl) {
        prepared.push(pgbench(pgUrl, script, PG_POOL_SIZE, 'prepared'));
        extended.push(pgbench(pgUrl, script, PG_POOL_SIZE, 'extended'));
      }
      const h = hello.at(-1) as Figure;
      const a = apiFigures.at(-1) as Figure;
      console.log(
        `${dialect} round ${round}: hello ${fmt(h.perSecond)}/s (${fmt(h.cpuMicros)} µs CPU each), ` +
          `API ${fmt(a.perSecond)}/s (${fmt(a.cpuMicros)} µs CPU each), ${ratio(a.perSecond / h.perSecond)}, ` +
          `CPU ${ratio(a.cpuMicros / h.cpuMicros)}` +
          (prepared.length
            ? `, pgbench prepared ${fmt(prepared.at(-1) ?? 0)}/s, extended ${fmt(extended.at(-1) ?? 0)}/s`
            : ''),
      );
    }
    const helloRatio = median(apiFigures.map((a, i) => a.perSecond / (hello[i] as Figure).perSecond));
    const cpuRatio = median(apiFigures.map((a, i) => a.cpuMicros / (hello[i] as Figure).cpuMicros));
    const failed = [...hello, ...apiFigures].reduce((sum, f) => sum + f.failed, 0);
    return {
      dialect,
      redis,
      hello,
      api: apiFigures,
      helloRatio,
      cpuRatio,
      pgbench: withPgbench
        ? {
            clients: PG_POOL_SIZE,
            prepared,
            extended,
            ratio: median(apiFigures.map((a, i) => a.perSecond / (prepared[i] as number))),
          }
        : undefined,
      failed,
    };
  } finally {
    await stop(server);
  }
}

function table(results: DialectResult[]): string {
  const rows: string[] = [
    '| database | API `GET /api/voters/{id}` req/s (p50 / p99 ms) | reference | reference req/s | rate ratio | server CPU per request: API / reference | CPU ratio | CPU goal (issue 25) | met |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const r of results) {
    const apiRate = median(r.api.map((f) => f.perSecond));
    const latency = `${median(r.api.map((f) => f.p50))} / ${median(r.api.map((f) => f.p99))}`;
    const name = r.dialect === 'sqlite' ? 'SQLite' : `PostgreSQL${r.redis ? ' + Redis' : ''}`;
    const goal = r.dialect === 'sqlite' ? 2.5 : 5;
    rows.push(
      `| ${name} | ${fmt(apiRate)} (${latency}) | bare Fastify hello world | ${fmt(median(r.hello.map((f) => f.perSecond)))} | ${ratio(r.helloRatio)} | ${fmt(median(r.api.map((f) => f.cpuMicros)))} / ${fmt(median(r.hello.map((f) => f.cpuMicros)))} µs | ${ratio(r.cpuRatio)} | <= ${goal}x | ${r.cpuRatio <= goal ? 'yes' : 'no'} |`,
    );
    if (r.pgbench) {
      rows.push(
        `| ${name} | ${fmt(apiRate)} | pgbench -M prepared, ${r.pgbench.clients} connections, the same select | ${fmt(median(r.pgbench.prepared))} | ${ratio(r.pgbench.ratio)} (goal >= 0.5x) | | | | ${r.pgbench.ratio >= 0.5 ? 'yes' : 'no'} |`,
      );
      rows.push(
        `| (for the record) | | pgbench -M extended (node-pg's protocol) | ${fmt(median(r.pgbench.extended))} | ${ratio(median(r.api.map((a, i) => a.perSecond / (r.pgbench?.extended[i] as number))))} | | | | |`,
      );
    }
  }
  return rows.join('\n');
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'ces-hot-path-'));
  const helloPort = await freePort();
  const hello = startNode({ PORT: String(helloPort), HOST: '127.0.0.1' }, 'bench/hello-world.ts');
  const results: DialectResult[] = [];
  try {
    await waitUntilUp(`http://127.0.0.1:${helloPort}/`);
    console.log(
      `hot path: ${connections} connections, ${duration} s per phase, ${rounds} rounds, LOG_LEVEL=${logLevel}`,
    );
    results.push(await runDialect('sqlite', `sqlite:${join(work, 'hot-path.db')}`, helloPort, hello.pid));
    if (pgUrl) results.push(await runDialect('postgres', pgUrl, helloPort, hello.pid));
  } finally {
    await stop(hello);
    rmSync(work, { recursive: true, force: true });
  }
  const settings = `${connections} connections, ${duration} s per phase, median of ${rounds} alternating rounds, LOG_LEVEL=${logLevel}`;
  const md = `${table(results)}\n\n${settings}.`;
  console.log(md);
  mkdirSync('bench/out', { recursive: true });
  writeFileSync('bench/out/hot-path.md', `${new Date().toISOString()}\n\n${md}\n`);
  writeFileSync(
    'bench/out/hot-path.json',
    JSON.stringify({ at: new Date().toISOString(), settings, results, table: table(results) }, null, 2),
  );
  if (results.some((r) => r.failed > 0)) {
    console.error('some requests failed (non-2xx, errors or timeouts): the figures are void');
    process.exitCode = 1;
  }
}

main().catch(async (error: unknown) => {
  console.error(error);
  await Promise.all([...children].map(stop));
  process.exit(1);
});
