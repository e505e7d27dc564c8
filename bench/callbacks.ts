/**
 * npm run bench:callbacks [-- --bodies 80 --reports 500 --conversations 2000]
 *
 * A tenant's callback flood against another workspace's reads (issue 54). Workspace A has an MSG91 account and
 * BODIES x REPORTS messages handed to it; workspace B has CONVERSATIONS conversations. Against what `npm start`
 * runs, over HTTP:
 *   1. the baseline: B's `GET /api/conversations`, one request after another, for a few seconds;
 *   2. the flood: A's BODIES delivery reports of REPORTS messages each, all sent at once to its account's
 *      signed-by-token delivery URL (as a tenant chooses), while B's reads go on as before.
 * The goal: B's p99 during the flood within 100 ms of its baseline p99, in the same run. Every body must be
 * answered 200 (or 503 with Retry-After, a turn not had within its wait) and every report applied.
 * SQLite by default (a fresh file under bench/out); DATABASE_URL=postgres://... runs it on PostgreSQL (a new
 * database's tables, dropped first). Writes bench/out/callbacks-<dialect>.md.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { sql } from 'kysely';
import { connect } from '../src/db/connect.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { api, freePort, spawnNpmStart, waitUntilUp } from './server.ts';

const { values: args } = parseArgs({
  options: {
    bodies: { type: 'string', default: '80' },
    reports: { type: 'string', default: '500' },
    conversations: { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '5' },
  },
});
const BODIES = Number(args.bodies);
const REPORTS = Number(args.reports);
const CONVERSATIONS = Number(args.conversations);
const BASELINE_MS = Number(args.seconds) * 1000;
const pgUrl = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const dialect = pgUrl ? 'postgres' : 'sqlite';
const sqliteFile = 'bench/out/callbacks.db';
const databaseUrl = pgUrl ?? `sqlite:${sqliteFile}`;

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;
function summary(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    n: sorted.length,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    max: sorted.at(-1) ?? NaN,
  };
}
const ms = (v: number) => `${v.toFixed(1)} ms`;

/** B's list, one request after another, until `stop()` is true; each request's time. */
/**
 * B's list, one request after another, from a worker thread of its own (so that sending A's flood from this
 * thread never delays them), until `stop` is called: each request's start (epoch ms) and time.
 */
function reader(base: string, token: string) {
  const stopped = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(
    `const { workerData, parentPort } = require('node:worker_threads');
    (async () => {
      const times = [];
      while (Atomics.load(workerData.stopped, 0) === 0) {
        const at = Date.now();
        const t = performance.now();
        const res = await fetch(workerData.url, { headers: { authorization: 'Bearer ' + workerData.token } });
        await res.arrayBuffer();
        if (!res.ok) throw new Error('GET /api/conversations: ' + res.status);
        times.push([at, performance.now() - t]);
      }
      parentPort.postMessage(times);
    })();`,
    { eval: true, workerData: { url: `${base}/api/conversations?per_page=25`, token, stopped } },
  );
  const times = new Promise<Array<[number, number]>>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  return {
    async stop(): Promise<Array<[number, number]>> {
      Atomics.store(stopped, 0, 1);
      const out = await times;
      await worker.terminate();
      return out;
    },
  };
}

async function main() {
  mkdirSync('bench/out', { recursive: true });
  if (!pgUrl) rmSync(sqliteFile, { force: true });
  const setup = connect(databaseUrl);
  if (pgUrl) {
    await sql`DROP SCHEMA public CASCADE`.execute(setup.kysely);
    await sql`CREATE SCHEMA public`.execute(setup.kysely);
  }
  await migrateToLatest(setup);
  await setup.close();

  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const server: ChildProcess = spawnNpmStart({
    PORT: String(port),
    HOST: '127.0.0.1',
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'warn',
    QUIET_HOURS: '',
    APP_KEY: 'b'.repeat(64),
    PUBLIC_BASE_URL: base,
    RATE_LIMIT_AUTHENTICATED_PER_MIN: '1000000',
    RATE_LIMIT_PUBLIC_PER_MIN: '1000000',
    RATE_LIMIT_CALLBACK_PER_MIN: '1000000',
    RATE_LIMIT_AUTH_PER_MIN: '1000',
    RATE_LIMIT_AUTH_IP_PER_MIN: '1000',
  });
  try {
    await waitUntilUp(`${base}/api/readyz`);
    const register = (name: string) =>
      api(`${base}/api`, 'POST', '/auth/register', undefined, {
        name,
        email: `${name.toLowerCase()}-${Date.now()}@example.org`,
        password: 'correct horse battery',
      });
    const a = await register('Flood');
    const b = await register('Reader');
    const account = await api(`${base}/api`, 'POST', '/channel-accounts', a.access_token as string, {
      name: 'MSG91',
      provider: 'msg91',
      settings: { sender: 'CESOFC' },
      credentials: { authkey: 'msg91-authkey-0123456789' },
    });
    const delivery = (account.callback_urls as Record<string, string>).delivery!;
    const accountId = Number(String(account.id).slice(4));
    const workspaceOf = async (token: string) =>
      Number((await api(`${base}/api`, 'GET', '/workspace', token)).id);
    const aId = await workspaceOf(a.access_token as string);
    const bId = await workspaceOf(b.access_token as string);

    // A's messages, sent through the account (request id `req<body>`, one number each); B's conversations.
    const db = connect(databaseUrl);
    const now = new Date().toISOString();
    // One more body's messages (the last), sent first to warm the callback path up (its first run compiles it).
    const total = (BODIES + 1) * REPORTS;
    const rows = Array.from({ length: total }, (_, i) => ({
      workspace_id: aId,
      campaign_id: null,
      channel: 'sms' as const,
      to: `+9193${String(i).padStart(8, '0')}`,
      body: 'Rally at 5',
      subject: null,
      media_url: null,
      template_id: null,
      status: 'sent' as const,
      cost: 0,
      provider: 'msg91',
      provider_message_id: `req${Math.floor(i / REPORTS)}`,
      claimed_by: null,
      lease_until: null,
      attempts: 1,
      next_attempt_at: now,
      error: null,
      error_code: null,
      created_at: now,
      updated_at: now,
      sent_at: now,
      delivered_at: null,
      failed_at: null,
      channel_account_id: accountId,
    }));
    for (let i = 0; i < rows.length; i += 500)
      await db.kysely
        .insertInto('messages')
        .values(rows.slice(i, i + 500))
        .execute();
    const conversations = Array.from({ length: CONVERSATIONS }, (_, i) => ({
      workspace_id: bId,
      channel: 'sms' as const,
      address: `+9194${String(i).padStart(8, '0')}`,
      voter_id: null,
      status: 'open' as const,
      assigned_to: null,
      last_inbound_at: null,
      channel_account_id: null,
      grievance_id: null,
      unread_count: i % 3,
      last_message_at: new Date(Date.now() - i * 1000).toISOString(),
      last_message_preview: `The hand pump in ward ${i % 50} is broken`,
      created_at: now,
      updated_at: now,
    }));
    for (let i = 0; i < conversations.length; i += 500)
      await db.kysely
        .insertInto('conversations')
        .values(conversations.slice(i, i + 500))
        .execute();
    await db.close();

    const readerToken = b.access_token as string;
    const body = (k: number) =>
      JSON.stringify([
        {
          requestId: `req${k}`,
          report: Array.from({ length: REPORTS }, (_, j) => ({
            number: `9193${String(k * REPORTS + j).padStart(8, '0')}`,
            status: '1',
            desc: 'DELIVERED',
          })),
        },
      ]);
    // Built before the flood: the bench's own work must not stall the reads it times.
    const bodies = Array.from({ length: BODIES + 1 }, (_, k) => body(k));
    const post = async (k: number) => {
      const res = await fetch(delivery, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: bodies[k],
      });
      const answer = (await res.json()) as { data?: { applied?: number } };
      return { status: res.status, applied: answer.data?.applied ?? 0 };
    };
    await post(BODIES);
    // One reader from start to end: a second of warm-up, the baseline, then the flood.
    const reads = reader(base, readerToken);
    await new Promise((r) => setTimeout(r, 1000 + BASELINE_MS));
    const floodFrom = Date.now();
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: BODIES }, (_, k) => post(k)));
    const floodTo = Date.now();
    const floodMs = performance.now() - started;
    await new Promise((r) => setTimeout(r, 200));
    const samples = await reads.stop();
    const baselineFrom = floodFrom - BASELINE_MS;
    const baseline = summary(
      samples.filter(([at]) => at >= baselineFrom && at < floodFrom).map(([, ms]) => ms),
    );
    // Every read that overlapped the flood (started during it, or started before and still waiting).
    const flood = summary(
      samples.filter(([at, ms]) => at + ms >= floodFrom && at <= floodTo).map(([, ms]) => ms),
    );
    const statuses = answers.reduce<Record<number, number>>(
      (acc, x) => ({ ...acc, [x.status]: (acc[x.status] ?? 0) + 1 }),
      {},
    );
    const applied = answers.reduce((s, x) => s + x.applied, 0);
    const within = flood.p99 - baseline.p99;
    const lines = [
      `# Callback flood against another workspace's reads (${dialect}), ${new Date().toISOString()}`,
      '',
      `\`npm run bench:callbacks -- --bodies ${BODIES} --reports ${REPORTS}\`${pgUrl ? ' (DATABASE_URL=postgres://...)' : ''}`,
      '',
      '| measure | value |',
      '| --- | --- |',
      `| B's GET /api/conversations, baseline (${baseline.n} requests) | p50 ${ms(baseline.p50)}, p99 ${ms(baseline.p99)}, max ${ms(baseline.max)} |`,
      `| the same during A's ${BODIES} bodies of ${REPORTS} (${flood.n} requests) | p50 ${ms(flood.p50)}, p99 ${ms(flood.p99)}, max ${ms(flood.max)} |`,
      `| p99 during the flood minus baseline p99 (goal <= 100 ms) | **${ms(within)}** ${within <= 100 ? '(met)' : '(MISSED)'} |`,
      `| A's bodies: answers | ${JSON.stringify(statuses)}; ${applied} of ${BODIES * REPORTS} reports applied in ${(floodMs / 1000).toFixed(1)} s |`,
    ];
    const report = lines.join('\n');
    console.log(report);
    writeFileSync(`bench/out/callbacks-${dialect}.md`, `${report}\n`);
  } finally {
    server.kill('SIGTERM');
  }
}

await main();
