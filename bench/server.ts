import { randomUUID } from 'node:crypto';
import { cpus, tmpdir, totalmem } from 'node:os';
import { createServer } from 'node:net';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  createReadStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { request as httpRequest } from 'node:http';
import pg from 'pg';

/**
 * The environment the deployment kit gives the service (Dockerfile ENV, the systemd unit's Environment=):
 * glibc reads MALLOC_ARENA_MAX before node starts, so it cannot be set from package.json's scripts (which
 * run `node` directly, so that SIGTERM reaches it and Windows shells run them).
 */
export const deploymentEnv: Record<string, string> = { MALLOC_ARENA_MAX: '2' };

/**
 * What `npm start` runs: its leading NAME=value words, if any, as environment settings (on top of
 * deploymentEnv), and the arguments of its `node` command (its flags and the entry point).
 */
export function npmStart(): { env: Record<string, string>; args: string[] } {
  const start = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: { start: string } }).scripts
    .start;
  const words = start.split(/\s+/);
  const env: Record<string, string> = { ...deploymentEnv };
  while (words[0] && /^[A-Z_][A-Z0-9_]*=/.test(words[0])) {
    const [name, value] = (words.shift() as string).split('=', 2) as [string, string];
    env[name] = value;
  }
  const [command, ...args] = words;
  if (command !== 'node') throw new Error(`npm start is not a plain node command: ${start}`);
  // BENCH_NODE_ARGS: flags for the server's node (e.g. --cpu-prof, which NODE_OPTIONS does not take).
  const extra = process.env.BENCH_NODE_ARGS?.split(/\s+/).filter(Boolean) ?? [];
  return { env, args: [...extra, ...args] };
}

let built = false;
const STAMP = 'dist/.built';
const LOCK = 'dist.building';

/** The newest modification time under src/ and console/ (and of the build's settings), in ms. */
function newestSource(): number {
  let newest = Math.max(statSync('tsconfig.json').mtimeMs, statSync('tsconfig.build.json').mtimeMs);
  for (const dir of ['src', 'console'])
    for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true }))
      if (entry.isFile()) newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
  return newest;
}

/**
 * `npm run build` unless dist/ is newer than every source: `npm start` runs dist/, which must be the sources
 * as they are now. Test files run in parallel, so one builds (holding a lock directory) while the others
 * wait for it and then find dist/ fresh.
 */
export function ensureBuilt(): void {
  if (built) return;
  const deadline = Date.now() + 180_000;
  for (;;) {
    if (existsSync(STAMP) && statSync(STAMP).mtimeMs >= newestSource()) break;
    try {
      mkdirSync(LOCK);
    } catch {
      if (Date.now() > deadline)
        throw new Error(`${LOCK} held for three minutes: remove it if no build runs`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
      continue;
    }
    try {
      const started = Date.now();
      const result = spawnSync(process.execPath, ['scripts/build.mjs'], {
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      if (result.status !== 0) throw new Error('npm run build failed');
      writeFileSync(STAMP, '');
      // The stamp says "built from sources no newer than when the build started".
      utimesSync(STAMP, started / 1000, started / 1000);
    } finally {
      rmSync(LOCK, { recursive: true, force: true });
    }
    break;
  }
  built = true;
}

/**
 * Starts exactly what `npm start` runs (after building dist/) as a child of this process, so a bench can
 * read its memory; `env` goes on top of this process's environment. Its output is this process's, or a pipe.
 */
export function spawnNpmStart(
  env: Record<string, string>,
  stdout: 'inherit' | 'pipe' = 'inherit',
): ChildProcess {
  ensureBuilt();
  const start = npmStart();
  return spawn(process.execPath, start.args, {
    env: { ...process.env, ...start.env, ...env },
    stdio: ['ignore', stdout, 'inherit'],
  });
}

/** The JSON log lines a child process writes to its piped stdout, parsed as they come (other lines skipped). */
export function logLines(child: ChildProcess): Array<Record<string, unknown>> {
  const lines: Array<Record<string, unknown>> = [];
  let buffer = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    buffer += chunk.toString('utf8');
    const parts = buffer.split('\n');
    buffer = parts.pop() ?? '';
    for (const part of parts)
      if (part.startsWith('{')) lines.push(JSON.parse(part) as Record<string, unknown>);
  });
  return lines;
}

/** Resolves once `url` answers 2xx; throws after `tries` attempts 100 ms apart. */
export async function waitUntilUp(url: string, tries = 300): Promise<void> {
  for (let i = 0; i < tries; i++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('server did not start');
}

/** Uploads a voters CSV to `POST <base>/voters/import` as multipart/form-data, streamed from disk. */
export function uploadCsv(
  base: string,
  path: string,
  token: string,
  extraHeaders: Record<string, string> = {},
): Promise<{ status: number; body: string; headers: Record<string, string | string[] | undefined> }> {
  const boundary = `----ces-bench-${Date.now()}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="voters.csv"\r\nContent-Type: text/csv\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return new Promise((resolveUpload, reject) => {
    const req = httpRequest(
      `${base}/voters/import`,
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': `multipart/form-data; boundary=${boundary}`,
          'content-length': head.length + statSync(path).size + tail.length,
          ...extraHeaders,
        },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolveUpload({ status: res.statusCode ?? 0, body, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.write(head);
    const file = createReadStream(path);
    file.pipe(req, { end: false });
    file.on('end', () => req.end(tail));
  });
}

/** A free port on loopback (a fixed default may be taken by someone else's run). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

/** One JSON call to the API under test; its `data`, or an error naming the call. */
export async function api(base: string, method: string, path: string, token?: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const json = (await res.json()) as { data: Record<string, unknown> };
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json.data;
}

/** Imports the CSV `lines` (header first) through the API and reads back the voters' ids, in id order. */
export async function importVoters(base: string, token: string, lines: string[]): Promise<number[]> {
  const form = new FormData();
  form.append('file', new Blob([lines.join('\n')], { type: 'text/csv' }), 'voters.csv');
  const imported = await fetch(`${base}/voters/import`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
    body: form,
  });
  if (!imported.ok) throw new Error(`import: ${imported.status} ${await imported.text()}`);
  const voterIds: number[] = [];
  for (let page = 1; voterIds.length < lines.length - 1; page++) {
    const list = await api(base, 'GET', `/voters?per_page=100&page=${page}`, token);
    const items = list.data as { id: number }[];
    if (items.length === 0) break;
    voterIds.push(...items.map((v) => v.id));
  }
  return voterIds;
}

/** The machine a run was on (bench/results keeps it beside the figures): they mean little without it. */
export function machine(): string {
  const cores = cpus();
  return `${cores.length} × ${cores[0]?.model ?? 'unknown CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node.js ${process.version}`;
}

/**
 * Keeps a run's figures in bench/results/<date><suffix>.json (a second run on one day gets its time too:
 * <date>T<HHMM><suffix>.json); returns the file's path.
 */
export function keepResults(suffix: string, figures: Record<string, unknown>): string {
  mkdirSync('bench/results', { recursive: true });
  const now = new Date().toISOString();
  const daily = `bench/results/${now.slice(0, 10)}${suffix}.json`;
  const file = existsSync(daily) ? `bench/results/${now.slice(0, 16).replace(':', '')}${suffix}.json` : daily;
  writeFileSync(file, JSON.stringify({ at: now, machine: machine(), ...figures }, null, 2) + '\n');
  return file;
}

export interface Stream {
  arrivals: Map<string, number>;
  close: () => void;
}

/** A message.received event's body (`bench-<n>`), the key the conversations and events benchmarks time. */
function receivedMarker(block: string): string | undefined {
  if (!block.includes('event: message.received')) return undefined;
  return /"body":"(bench-\d+)"/.exec(block)?.[1];
}

/**
 * An event stream read by hand: the arrival time of each event `keyOf` names (by default each message.received
 * event, by its body), the first arrival of each key.
 */
export function openStream(
  base: string,
  token: string,
  keyOf: (block: string) => string | undefined = receivedMarker,
): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const arrivals = new Map<string, number>();
    const req = httpRequest(`${base}/events/stream`, {
      headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
      agent: false,
    });
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        reject(new Error(`stream answered ${res.statusCode}`));
        res.resume();
        return;
      }
      res.setEncoding('utf8');
      let buffer = '';
      res.on('data', (chunk: string) => {
        const now = performance.now();
        buffer += chunk;
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const marker = keyOf(block);
          if (marker && !arrivals.has(marker)) arrivals.set(marker, now);
        }
      });
      res.on('error', () => undefined);
      resolve({ arrivals, close: () => req.destroy() });
    });
    req.on('error', (error) => {
      if (!('code' in error && error.code === 'ECONNRESET')) reject(error);
    });
    req.end();
  });
}

/**
 * A database of its own for an in-process benchmark: a new SQLite file in a temporary folder, or, with `pgBase`
 * (a postgres:// URL), a new database beside it, dropped after. `prefix` names the folder.
 */
export async function scratchDatabase(
  prefix: string,
  pgBase: string | undefined,
): Promise<{ url: string; drop: () => Promise<void> }> {
  if (!pgBase) {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    return {
      url: `sqlite:${join(dir, 'bench.db')}`,
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const name = `ces_bench_${randomUUID().slice(0, 8)}`;
  const admin = new pg.Client({ connectionString: pgBase });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(pgBase);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: pgBase });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}
