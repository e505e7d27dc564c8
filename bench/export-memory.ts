/**
 * npm run bench:export-memory [-- --rows 150000 --exports 20]
 *
 * What paused exports hold on SQLite: a database file of `rows` voters, the server run as `npm start` runs
 * it (its node flags), `exports` exports (half CSV, half Excel) whose clients read the first bytes and then
 * stop reading, and the server's RSS and process.memoryUsage() before, while paused (as is, and after a
 * full garbage collection: what is live, not garbage) and after the clients have gone. The server is this
 * file run with --serve: the app of src/server.ts, plus an IPC channel to its parent that reports its memory
 * (no endpoint is added to the app).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { type ClientRequest, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { npmStart, uploadCsv } from './server.ts';

interface Memory {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
}

if (process.argv.includes('--serve')) {
  // The server: src/server.ts's app, without its signal handling (the parent kills it).
  const { bootstrap } = await import('../src/bootstrap.ts');
  const { buildApp } = await import('../src/app.ts');
  const { createProviders } = await import('../src/providers/registry.ts');
  const { config, db, log } = await bootstrap();
  const app = await buildApp({ config, db, providers: createProviders(config, log) });
  await app.listen({ port: config.port, host: config.host });
  process.on('message', (message: { gc?: boolean }) => {
    if (message.gc) (globalThis as { gc?: () => void }).gc?.();
    const m = process.memoryUsage();
    process.send?.({
      rss: m.rss,
      heapUsed: m.heapUsed,
      heapTotal: m.heapTotal,
      external: m.external,
      arrayBuffers: m.arrayBuffers,
    } satisfies Memory);
  });
  process.send?.('ready');
} else {
  await main();
}

async function main(): Promise<void> {
  const { values: args } = parseArgs({
    options: {
      rows: { type: 'string', default: '150000' },
      exports: { type: 'string', default: '20' },
      port: { type: 'string', default: '3918' },
    },
  });
  const rows = Number(args.rows);
  const exportCount = Number(args.exports);
  const base = `http://127.0.0.1:${args.port}/api`;
  const work = mkdtempSync(join(tmpdir(), 'ces-export-memory-'));
  const csvPath = resolve(`bench/out/voters-${rows}.csv`);
  if (!existsSync(csvPath)) {
    mkdirSync('bench/out', { recursive: true });
    console.log(`generating ${rows} voters ...`);
    const { generateVotersCsv } = await import('./generate.ts');
    await generateVotersCsv(csvPath, rows);
  }

  // `npm start`'s node flags, and the environment the deployment kit sets (MALLOC_ARENA_MAX=2).
  const { env: startEnv, args: startArgs } = npmStart();
  const nodeFlags = startArgs.filter((w) => w.startsWith('--') && !w.endsWith('.ts'));
  const server: ChildProcess = fork(resolve('bench/export-memory.ts'), ['--serve'], {
    execArgv: [...nodeFlags.filter((f) => f !== '--import'), '--import', 'tsx', '--expose-gc'],
    env: {
      ...process.env,
      ...startEnv,
      DATABASE_URL: `sqlite:${join(work, 'server.db')}`,
      PORT: args.port,
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      RATE_LIMIT_AUTHENTICATED_PER_MIN: '100000000',
      IMPORT_MAX_BYTES: String(2 * 1024 * 1024 * 1024),
      EXPORT_MAX_CONCURRENT: String(exportCount),
      EXPORT_IDLE_TIMEOUT_MS: '600000',
      APP_KEY: 'a'.repeat(64),
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await new Promise<void>((ready, fail) => {
    server.once('message', () => ready());
    server.once('exit', (code) => fail(new Error(`server exited (${code})`)));
  });
  const memory = (gc: boolean) =>
    new Promise<Memory>((answer) => {
      server.once('message', (m) => answer(m as Memory));
      server.send({ gc });
    });

  try {
    const register = await fetch(`${base}/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        name: 'Bench',
        email: `bench-${Date.now()}@example.com`,
        password: 'benchmark pw',
      }),
    });
    const token = ((await register.json()) as { data: { access_token: string } }).data.access_token;
    console.log(`importing ${rows} voters ...`);
    const upload = await uploadCsv(base, csvPath, token);
    if (upload.status !== 200) throw new Error(`import: ${upload.status} ${upload.body.slice(0, 300)}`);

    // Warm: one whole export of each format, so that code and caches are loaded before the first figure.
    const whole: string[] = [];
    for (const format of ['csv', 'excel']) {
      const started = performance.now();
      await download(base, format, token, false);
      whole.push(`${format} ${((performance.now() - started) / 1000).toFixed(2)} s`);
    }
    const before = await memory(false);
    const beforeGc = await memory(true);

    console.log(`${exportCount} exports, their clients paused after the first bytes ...`);
    const paused: ClientRequest[] = [];
    for (let i = 0; i < exportCount; i++) {
      paused.push(await download(base, i % 2 === 0 ? 'csv' : 'excel', token, true));
    }
    await new Promise((r) => setTimeout(r, 3000));
    const during = await memory(false);
    const duringGc = await memory(true);
    for (const req of paused) req.destroy();
    await new Promise((r) => setTimeout(r, 2000));
    const after = await memory(true);

    const mb = (n: number) => (n / 1024 / 1024).toFixed(1);
    const line = (label: string, m: Memory) =>
      `| ${label} | ${mb(m.rss)} | ${mb(m.heapUsed)} | ${mb(m.external)} | ${mb(m.arrayBuffers)} |`;
    console.log(`\n${rows} voters, ${exportCount} paused exports (MB)\n`);
    console.log('| when | RSS | heapUsed | external | arrayBuffers |');
    console.log('|---|---|---|---|---|');
    console.log(line('before', before));
    console.log(line('before, after a GC', beforeGc));
    console.log(line('paused', during));
    console.log(line('paused, after a GC', duringGc));
    console.log(line('clients gone, after a GC', after));
    console.log(`\none whole export, nothing else running: ${whole.join(', ')}`);
    console.log(
      `per paused export: RSS ${mb((during.rss - before.rss) / exportCount)} MB, live (after a GC) heap ` +
        `${mb((duringGc.heapUsed - beforeGc.heapUsed) / exportCount)} MB + external ` +
        `${mb((duringGc.external - beforeGc.external) / exportCount)} MB`,
    );
  } finally {
    server.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * An export: read to the end (pause false), or (pause true) resolved with its request once the first bytes
 * have arrived, after which the client reads nothing more (the socket's buffers fill, the server waits).
 */
function download(base: string, format: string, token: string, pause: boolean): Promise<ClientRequest> {
  return new Promise((done, fail) => {
    const req = httpRequest(
      `${base}/voters/export?format=${format}`,
      { headers: { authorization: `Bearer ${token}` }, agent: false },
      (res) => {
        if (res.statusCode !== 200) fail(new Error(`export ${format}: ${res.statusCode}`));
        if (pause) {
          res.once('data', () => {
            res.pause();
            done(req);
          });
        } else {
          res.resume();
          res.on('end', () => done(req));
        }
      },
    );
    req.on('error', (error) => {
      if (!req.destroyed || !pause) fail(error);
    });
    req.end();
  });
}
