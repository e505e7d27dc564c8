/**
 * npm run bench:messaging — messaging at the scale of a 1,000,000-voter segment:
 *   1. time to the 202 of a broadcast to the segment (recipients counted and credits reserved in the database);
 *   2. time to fill the outbox (the worker's INSERT ... SELECT in id ranges, deduplicating through the unique
 *      index) against one plain INSERT ... SELECT of the same rows into the outbox table (and, for the record,
 *      into a table without indexes), in the same run;
 *   3. sandbox delivery with zero delay: the whole outbox drained (claimed, handed over, marked sent, settled
 *      delivered or failed) by one worker, in messages per second.
 * SQLite by default (a fresh file under bench/out); BENCH_DATABASE_URL=postgres://... runs it on PostgreSQL.
 * BENCH_VOTERS changes the size.
 *
 * `-- --log-compare`: what the channel log costs a drain (issue 54's goal: the drain with the log at least 0.9x
 * of the drain without it, in the same run). The sandbox logs nothing, so a channel account of a provider that
 * is called over HTTP sends here: the Exotel double of test/provider-doubles.ts (Exotel's wire format, on
 * loopback, one request a message: the most log entries a drain can make), called by the real adapter.
 * BENCH_LOG_ROUNDS (3) rounds each drain one broadcast of BENCH_LOG_MESSAGES (5,000) with the log and one
 * without, in alternating order, after a round that warms both up; the medians are compared.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { sql } from 'kysely';
import pino from 'pino';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { connect, type Db } from '../src/db/connect.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { channelLogFor } from '../src/modules/sending/channel-log.ts';
import { channels, type Channel, type MessageProvider } from '../src/providers/provider.ts';
import { SandboxProvider } from '../src/providers/sandbox/index.ts';
import { EXOTEL, fakeExotel } from '../test/provider-doubles.ts';

const VOTERS = Number(process.env.BENCH_VOTERS ?? 1_000_000);
const pgUrl = process.env.BENCH_DATABASE_URL;

/**
 * A fresh database (a file under bench/out on SQLite, or BENCH_DATABASE_URL), the app on it with the sandbox as
 * every channel's deployment provider, and a registered workspace: what both runs of this bench start from.
 */
async function setUp(name: string, env: Record<string, string>) {
  let databaseUrl = pgUrl;
  if (!databaseUrl) {
    mkdirSync('bench/out', { recursive: true });
    for (const suffix of ['', '-wal', '-shm']) rmSync(`bench/out/${name}.db${suffix}`, { force: true });
    databaseUrl = `sqlite:bench/out/${name}.db`;
  }
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'silent',
    // The bench delivers at any hour: quiet hours (on by default) would hold its bulk messages.
    QUIET_HOURS: '',
    RATE_LIMIT_AUTH_PER_MIN: '1000',
    RATE_LIMIT_AUTH_IP_PER_MIN: '1000',
    ...env,
  });
  const db = connect(config.databaseUrl);
  await migrateToLatest(db);
  const log = pino({ level: 'silent' });
  const providers = Object.fromEntries(
    channels.map((c) => [c, new SandboxProvider(c, log, 0)]),
  ) as unknown as Record<Channel, MessageProvider>;
  const app = await buildApp({ config, db, providers, logger: false });
  const inject = async (method: 'GET' | 'POST', url: string, token?: string, body?: unknown) => {
    const res = await app.inject({
      method,
      url,
      headers: token ? { authorization: `Bearer ${token}` } : {},
      ...(body !== undefined ? { payload: body as object } : {}),
    });
    return { status: res.statusCode, body: res.json() as { data: Record<string, unknown> } };
  };
  const reg = await inject('POST', '/api/auth/register', undefined, {
    name: 'Bench',
    email: `bench.${Date.now()}@example.com`,
    password: 'benchmark password',
  });
  const token = String(reg.body.data.access_token);
  const ws = Number((reg.body.data.user as { workspace_id: number }).workspace_id);
  return { db, config, log, providers, app, inject, token, ws };
}

/** `count` voters in constituency Central (300 booths, 50 wards), inserted in one statement. */
async function insertVoters(db: Db, ws: number, count: number) {
  const now = new Date().toISOString();
  const series =
    db.dialect === 'postgres'
      ? sql`generate_series(1, ${count}) as n(i)`
      : sql`(WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${count}) SELECT i FROM s) AS n`;
  const phone =
    db.dialect === 'postgres' ? sql`'+9190' || lpad(i::text, 8, '0')` : sql`'+9190' || printf('%08d', i)`;
  await sql`INSERT INTO voters (workspace_id, name, name_key, phone, constituency, constituency_key, booth, booth_key, ward, ward_key, created_at, updated_at)
    SELECT ${ws}, 'Voter ' || i, 'voter ' || i, ${phone}, 'Central', 'central', cast(i % 300 as text), cast(i % 300 as text), cast(i % 50 as text), cast(i % 50 as text), ${now}, ${now}
    FROM ${series}`.execute(db.kysely);
}

async function main() {
  const { db, config, log, providers, app, inject, token, ws } = await setUp('messaging', {
    SANDBOX_DELIVERY_DELAY_MS: '0',
    WORKER_BATCH_SIZE: process.env.BENCH_BATCH ?? '2000',
  });
  await db.kysely
    .updateTable('credit_balances')
    .set({ balance: VOTERS * 2 })
    .where('workspace_id', '=', ws)
    .execute();

  let t = performance.now();
  const now = new Date().toISOString();
  await insertVoters(db, ws, VOTERS);
  // Steady state: a roll imported long before the broadcast (SQLite: its WAL checkpointed; PostgreSQL: analysed).
  const settle = async () => {
    if (db.dialect === 'postgres') await sql`ANALYZE`.execute(db.kysely);
    else await sql`PRAGMA wal_checkpoint(TRUNCATE)`.execute(db.kysely);
  };
  await settle();
  console.log(
    `set-up: ${VOTERS.toLocaleString('en')} voters inserted in ${((performance.now() - t) / 1000).toFixed(1)} s`,
  );

  const segment = await inject('POST', '/api/segments', token, {
    name: 'Central',
    filters: { constituency: 'Central' },
  });
  const segmentId = segment.body.data.id;

  // 1. Time to the 202.
  t = performance.now();
  const res = await inject('POST', '/api/messages/broadcast', token, {
    channel: 'sms',
    message: 'Polling day is Sunday. Your booth opens at 7.',
    segment_id: segmentId,
  });
  const accepted = performance.now() - t;
  if (res.status !== 202) throw new Error(`broadcast answered ${res.status}: ${JSON.stringify(res.body)}`);
  console.log(
    `1. broadcast to ${String(res.body.data.total_recipients)} recipients: 202 in ${accepted.toFixed(0)} ms`,
  );

  // 2. Filling the outbox vs a plain INSERT ... SELECT of the same rows.
  const worker = new DeliveryWorker({ db, config, providers, log });
  await settle();
  t = performance.now();
  await worker.campaigns.fillNext();
  const fill = performance.now() - t;
  // Reference A: the same rows into the outbox table itself (its indexes included) with one plain
  // INSERT ... SELECT, no ranges and no deduplication, under a second campaign; removed again before the drain.
  const other = await db.kysely
    .insertInto('campaigns')
    .values({
      workspace_id: ws,
      name: 'reference',
      channel: 'sms',
      message: 'Polling day is Sunday. Your booth opens at 7.',
      status: 'cancelled',
      unit_cost: 1,
      total_recipients: 0,
      reserved_credits: 0,
      created_at: now,
      updated_at: now,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  await settle();
  t = performance.now();
  await sql`INSERT INTO messages (workspace_id, campaign_id, channel, "to", body, status, cost, attempts, next_attempt_at, created_at, updated_at)
    SELECT workspace_id, ${other.id}, 'sms', phone, 'Polling day is Sunday. Your booth opens at 7.', 'queued', 1, 0, ${now}, ${now}, ${now}
    FROM voters WHERE workspace_id = ${ws} AND constituency_key = 'central'`.execute(db.kysely);
  const plainOutbox = performance.now() - t;
  await db.kysely.deleteFrom('messages').where('campaign_id', '=', other.id).execute();
  // Reference B, for the record: the same rows into a table without any index.
  await sql`CREATE TABLE bench_plain (workspace_id bigint, campaign_id bigint, channel varchar(20), "to" varchar(254), body text, status varchar(20), cost integer, attempts integer, next_attempt_at text, created_at text, updated_at text)`.execute(
    db.kysely,
  );
  await settle();
  t = performance.now();
  await sql`INSERT INTO bench_plain SELECT workspace_id, 0, 'sms', phone, 'Polling day is Sunday. Your booth opens at 7.', 'queued', 1, 0, ${now}, ${now}, ${now}
    FROM voters WHERE workspace_id = ${ws} AND constituency_key = 'central'`.execute(db.kysely);
  const plain = performance.now() - t;
  await sql`DROP TABLE bench_plain`.execute(db.kysely);
  const outbox = await db.kysely
    .selectFrom('messages')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  console.log(
    `2. outbox filled with ${Number(outbox.n).toLocaleString('en')} rows in ${(fill / 1000).toFixed(2)} s; ` +
      `one plain INSERT ... SELECT of the same rows into the outbox table ${(plainOutbox / 1000).toFixed(2)} s ` +
      `(ratio ${(plainOutbox / fill).toFixed(2)}x); into a table without indexes ${(plain / 1000).toFixed(2)} s ` +
      `(ratio ${(plain / fill).toFixed(2)}x)`,
  );

  await settle();
  // 3. Drain with zero delivery delay.
  t = performance.now();
  await worker.drain();
  const drain = performance.now() - t;
  const byStatus = await db.kysely
    .selectFrom('messages')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
    .groupBy('status')
    .execute();
  const total = byStatus.reduce((a, r) => a + Number(r.n), 0);
  console.log(
    `3. drained ${total.toLocaleString('en')} messages in ${(drain / 1000).toFixed(1)} s: ${Math.round(total / (drain / 1000)).toLocaleString('en')} msg/s ` +
      `(${byStatus.map((r) => `${r.status} ${Number(r.n)}`).join(', ')})`,
  );
  console.log(
    JSON.stringify({
      dialect: db.dialect,
      voters: VOTERS,
      accept_ms: Math.round(accepted),
      fill_s: +(fill / 1000).toFixed(2),
      plain_into_outbox_s: +(plainOutbox / 1000).toFixed(2),
      fill_ratio: +(plainOutbox / fill).toFixed(2),
      plain_unindexed_s: +(plain / 1000).toFixed(2),
      fill_ratio_unindexed: +(plain / fill).toFixed(2),
      drain_s: +(drain / 1000).toFixed(1),
      drain_per_s: Math.round(total / (drain / 1000)),
    }),
  );
  await app.close();
  await db.close();
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function logCompare() {
  const recipients = Number(process.env.BENCH_LOG_MESSAGES ?? 5000);
  const rounds = Number(process.env.BENCH_LOG_ROUNDS ?? 3);
  const exotel = await fakeExotel();
  const { db, config, log, providers, app, inject, token, ws } = await setUp('messaging-log', {
    EXOTEL_BASE_URL: exotel.url,
    WORKER_BATCH_SIZE: '500',
  });
  const call = async (url: string, body: unknown) => {
    const res = await inject('POST', url, token, body);
    if (res.status >= 300) throw new Error(`${url} answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body.data;
  };
  await db.kysely
    .updateTable('credit_balances')
    .set({ balance: recipients * (rounds + 1) * 4 })
    .where('workspace_id', '=', ws)
    .execute();
  await insertVoters(db, ws, recipients);
  const segment = await call('/api/segments', {
    name: 'Central',
    filters: { constituency: 'Central' },
  });
  await call('/api/channel-accounts', {
    name: 'Exotel double',
    provider: 'exotel',
    channels: ['sms'],
    settings: { sid: EXOTEL.sid, sender: 'CESOFC' },
    credentials: { api_key: EXOTEL.apiKey, api_token: EXOTEL.apiToken },
    default_for: ['sms'],
    send_rate_per_second: 100_000,
  });
  const workers = {
    on: new DeliveryWorker({ db, config, providers, log }),
    off: new DeliveryWorker({ db, config, providers, log, channelLog: false }),
  };
  const times: Record<'on' | 'off', number[]> = { on: [], off: [] };
  // Round 0 warms both up (the code's first runs are compiled as they go) and is not counted.
  for (let round = 0; round <= rounds; round += 1) {
    for (const mode of round % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
      await call('/api/messages/broadcast', {
        channel: 'sms',
        message: `Polling day is Sunday (${round}, ${mode}).`,
        segment_id: segment.id,
      });
      await workers[mode].campaigns.fillNext();
      const t = performance.now();
      await workers[mode].drain();
      // The log's writes are the drain's cost too: waited for before the clock stops.
      await channelLogFor(db.kysely).flush();
      if (round > 0) times[mode].push(performance.now() - t);
    }
  }
  const logged = await db.kysely
    .selectFrom('channel_log')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  const rate = (ms: number) => Math.round(recipients / (ms / 1000));
  const ratio = median(times.off) / median(times.on);
  console.log(
    `drain of ${recipients.toLocaleString('en')} messages through the Exotel double, ${rounds} rounds: ` +
      `with the channel log ${rate(median(times.on)).toLocaleString('en')} msg/s (median; ${times.on.map((t) => (t / 1000).toFixed(2)).join(', ')} s), ` +
      `without ${rate(median(times.off)).toLocaleString('en')} msg/s (${times.off.map((t) => (t / 1000).toFixed(2)).join(', ')} s): ` +
      `${ratio.toFixed(2)}x (goal at least 0.9x); ${Number(logged.n).toLocaleString('en')} log rows written (pruned to 1,000 an account)`,
  );
  console.log(
    JSON.stringify({
      dialect: db.dialect,
      recipients,
      rounds,
      log_on_ms: times.on,
      log_off_ms: times.off,
      ratio: +ratio.toFixed(3),
    }),
  );
  await app.close();
  await db.close();
  await exotel.close();
}

(process.argv.includes('--log-compare') ? logCompare() : main()).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
