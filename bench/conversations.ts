/**
 * npm run bench:conversations [-- --conversations 100000 --messages 1000000 --streams 500 --samples 1000]
 *
 * The inbox and the live event stream at the size of a busy office (issue 23): a workspace with 100,000 open
 * conversations, one per voter, assigned by ward to 50 volunteers, and 1,000,000 messages in their threads
 * (half from the voters, half to them). Against what `npm start` runs, over HTTP:
 *   1. the inbox list as a volunteer sees it, with a different filter on every request (status, unread,
 *      channel, ward, booth, search, later pages and their combinations; none repeated): p50/p99, beside
 *      `GET /api` (no database) in the same run as the reference;
 *   2. 500 event streams open on the one API process: the time from an inbound message's POST to its event
 *      arriving on each stream (p50/p99 over every stream and message), beside the POST's own time;
 *   3. the server's resident memory with the streams open, against before: memory per open stream.
 * SQLite by default (a fresh file under bench/out); DATABASE_URL=postgres://... runs it on PostgreSQL (a new
 * workspace, deleted at the end). Writes bench/out/conversations-<dialect>.md.
 * BENCH_TRACE=1 prints each inbox query with its total (to compare the two databases' answers); BENCH_KEEP=1
 * keeps the PostgreSQL workspace for EXPLAIN.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { parseArgs } from 'node:util';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Database } from '../src/db/schema.ts';
import { connect } from '../src/db/connect.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { api, freePort, openStream, spawnNpmStart, type Stream, waitUntilUp } from './server.ts';

const { values: args } = parseArgs({
  options: {
    conversations: { type: 'string', default: '100000' },
    messages: { type: 'string', default: '1000000' },
    streams: { type: 'string', default: '500' },
    samples: { type: 'string', default: '1000' },
    events: { type: 'string', default: '40' },
    port: { type: 'string' },
  },
});
const CONVERSATIONS = Number(args.conversations);
const MESSAGES = Number(args.messages);
const STREAMS = Number(args.streams);
const SAMPLES = Number(args.samples);
const EVENTS = Number(args.events);
const VOLUNTEERS = 50;
const WARDS = 50;
const BOOTHS = 300;
const pgUrl = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const dialect = pgUrl ? 'postgres' : 'sqlite';
const sqliteFile = 'bench/out/conversations.db';
const databaseUrl = pgUrl ?? `sqlite:${sqliteFile}`;

const agent = new Agent({ keepAlive: true, maxSockets: 1 });

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;
}

function summary(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), max: sorted.at(-1) ?? NaN };
}

const ms = (n: number) => `${n.toFixed(1)} ms`;

/** One GET over a kept-alive connection; its time in ms (the body read to the end). */
function timedGet(url: string, token?: string): Promise<{ ms: number; status: number; body: string }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { agent, headers: token ? { authorization: `Bearer ${token}` } : {} },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ ms: performance.now() - started, status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** The server's resident memory in MB (VmRSS). */
function rssMb(server: ChildProcess): number {
  const status = readFileSync(`/proc/${server.pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) / 1024;
}

let server: ChildProcess | undefined;
let port = 0;

async function startServer(): Promise<string> {
  port = args.port ? Number(args.port) : await freePort();
  server = spawnNpmStart({
    DATABASE_URL: databaseUrl,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    APP_KEY: 'c'.repeat(64),
    RATE_LIMIT_AUTHENTICATED_PER_MIN: '100000000',
    RATE_LIMIT_AUTH_PER_MIN: '100000',
    RATE_LIMIT_AUTH_IP_PER_MIN: '100000',
    RATE_LIMIT_PUBLIC_PER_MIN: '100000000',
    // One user holds them all here (the politician sees every event: the widest fan-out).
    EVENT_STREAMS_PER_USER: String(STREAMS),
    // The bench's own messages are never delivered: nothing competes with the requests measured.
    WORKER_IN_PROCESS: 'false',
  });
  server.once('exit', (code, signal) => {
    if (server) console.error(`server exited unexpectedly (code ${code}, signal ${signal})`);
  });
  const base = `http://127.0.0.1:${port}/api`;
  await waitUntilUp(`${base}/healthz`, 900);
  return base;
}

async function stopServer(): Promise<void> {
  const s = server;
  server = undefined;
  if (!s || s.exitCode !== null) return;
  const exited = new Promise((resolve) => s.once('exit', resolve));
  s.kill('SIGTERM');
  await exited;
}

/** The rows of a workspace's inbox, written in bulk (the API's own rows, as its services would leave them). */
async function fill(workspaceId: number, volunteers: number[]): Promise<void> {
  if (pgUrl) {
    // A plain pool: the service's own connections give up on a statement after 10 s, these take minutes.
    const k = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: pgUrl, max: 1 }) }),
    });
    try {
      await sql`SET statement_timeout = 0`.execute(k);
      await fillOn(k, true, workspaceId, volunteers);
    } finally {
      await k.destroy();
    }
    return;
  }
  const db = connect(databaseUrl);
  try {
    await fillOn(db.kysely, false, workspaceId, volunteers);
  } finally {
    await db.close();
  }
}

async function fillOn(k: Kysely<Database>, pg: boolean, workspaceId: number, volunteers: number[]) {
  const series = (n: number) =>
    pg
      ? sql`generate_series(1, ${n}) AS s(i)`
      : sql`(WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < ${n}) SELECT i FROM r) AS s`;
  const pad = (width: number) =>
    pg ? sql`lpad(i::text, ${width}, '0')` : sql`printf('%0${sql.raw(String(width))}d', i)`;
  const at = (expr: ReturnType<typeof sql>) =>
    pg
      ? sql`timestamptz '2026-11-01T00:00:00Z' + (${expr}) * interval '1 second'`
      : sql`strftime('%Y-%m-%dT%H:%M:%fZ', '2026-11-01', '+' || (${expr}) || ' seconds')`;
  const now = new Date().toISOString();
  const names = ['Asha', 'Ravi', 'Sunita', 'Mohan', 'Priya', 'Arjun', 'Kavita', 'Deepak', 'Lakshmi', 'Imran'];
  const nameCase = sql.raw(
    `CASE i % ${names.length} ${names.map((n, j) => `WHEN ${j} THEN '${n}'`).join(' ')} END`,
  );
  const t = performance.now();
  await sql`INSERT INTO voters (workspace_id, name, name_key, phone, constituency, constituency_key, booth, booth_key, ward, ward_key, created_at, updated_at)
      SELECT ${workspaceId}, ${nameCase} || ' Voter ' || i, lower(${nameCase} || ' voter ' || i), '+9193' || ${pad(8)},
             'Varanasi', 'varanasi', cast(i % ${sql.lit(BOOTHS)} AS text), cast(i % ${sql.lit(BOOTHS)} AS text),
             cast(i % ${sql.lit(WARDS)} AS text), cast(i % ${sql.lit(WARDS)} AS text), ${now}, ${now}
        FROM ${series(CONVERSATIONS)}`.execute(k);
  const firstVoter = Number(
    (
      await k
        .selectFrom('voters')
        .select((eb) => eb.fn.min('id').as('id'))
        .where('workspace_id', '=', workspaceId)
        .executeTakeFirstOrThrow()
    ).id,
  );
  // Volunteer j covers ward j: conversation i (voter i, ward i % 50) is theirs.
  const assignee = sql.raw(
    `CASE i % ${WARDS} ${volunteers.map((id, j) => `WHEN ${j} THEN ${id}`).join(' ')} END`,
  );
  const perThread = Math.max(2, Math.round(MESSAGES / CONVERSATIONS));
  await sql`INSERT INTO conversations (workspace_id, channel, address, voter_id, status, assigned_to, unread_count,
             last_message_at, last_message_preview, last_inbound_at, channel_account_id, grievance_id, created_at, updated_at,
             voter_name, voter_ward, voter_booth, voter_constituency_key)
      SELECT ${workspaceId}, CASE WHEN i % 3 = 0 THEN 'whatsapp' ELSE 'sms' END, '+9193' || ${pad(8)},
             ${sql.lit(firstVoter - 1)} + i, 'open', ${assignee}, i % 4, ${at(sql`i * 20`)}, 'The hand pump in ward ' || (i % ${sql.lit(WARDS)}) || ' is broken',
             ${at(sql`i * 20`)}, NULL, NULL, ${now}, ${now},
             ${nameCase} || ' Voter ' || i, cast(i % ${sql.lit(WARDS)} AS text), cast(i % ${sql.lit(BOOTHS)} AS text), 'varanasi'
        FROM ${series(CONVERSATIONS)}`.execute(k);
  const firstConversation = Number(
    (
      await k
        .selectFrom('conversations')
        .select((eb) => eb.fn.min('id').as('id'))
        .where('workspace_id', '=', workspaceId)
        .executeTakeFirstOrThrow()
    ).id,
  );
  // Message i belongs to conversation (i % CONVERSATIONS): each thread gets perThread/2 of each direction.
  const half = Math.round((CONVERSATIONS * perThread) / 2);
  const conv = sql`${sql.lit(firstConversation)} + (i % ${sql.lit(CONVERSATIONS)})`;
  const to = pg
    ? sql`'+9193' || lpad(((i % ${sql.lit(CONVERSATIONS)}) + 1)::text, 8, '0')`
    : sql`'+9193' || printf('%08d', (i % ${sql.lit(CONVERSATIONS)}) + 1)`;
  await sql`INSERT INTO inbound_messages (workspace_id, channel, "from", body, keyword, provider, provider_message_id, conversation_id, created_at)
      SELECT ${workspaceId}, CASE WHEN (i % ${sql.lit(CONVERSATIONS)}) % 3 = 0 THEN 'whatsapp' ELSE 'sms' END, ${to},
             'Reply number ' || i, NULL, 'sandbox', NULL, ${conv}, ${at(sql`i`)}
        FROM ${series(half)}`.execute(k);
  await sql`INSERT INTO messages (workspace_id, campaign_id, channel, "to", body, subject, media_url, template_id, status, cost,
             provider, provider_message_id, claimed_by, lease_until, attempts, next_attempt_at, error, error_code,
             created_at, updated_at, sent_at, delivered_at, failed_at, channel_account_id, conversation_id, sent_by)
      SELECT ${workspaceId}, NULL, CASE WHEN (i % ${sql.lit(CONVERSATIONS)}) % 3 = 0 THEN 'whatsapp' ELSE 'sms' END, ${to},
             'Answer number ' || i, NULL, NULL, NULL, 'delivered', 1, 'sandbox', 'sbx_' || i, NULL, NULL, 1, ${now},
             NULL, NULL, ${at(sql`i`)}, ${now}, ${now}, ${now}, NULL, NULL, ${conv}, NULL
        FROM ${series(half)}`.execute(k);
  // Steady state: what autovacuum leaves (the visibility map set, so index-only scans stay in the index).
  if (pg) await sql`VACUUM ANALYZE`.execute(k);
  else {
    await sql`PRAGMA optimize = 0x10002`.execute(k);
    await sql`PRAGMA wal_checkpoint(TRUNCATE)`.execute(k);
  }
  console.log(
    `set-up: ${CONVERSATIONS.toLocaleString('en')} voters and open conversations, ${(half * 2).toLocaleString('en')} messages in ${((performance.now() - t) / 1000).toFixed(1)} s`,
  );
}

/** The inbox queries a volunteer makes, each different: filters and their combinations, later pages. */
function inboxQueries(
  count: number,
  ward: (v: number) => number,
): Array<{ volunteer: number; query: string }> {
  const words = ['asha', 'ravi', 'sunita', 'mohan', 'priya', 'voter 1', '98', 'pump', 'kavita', 'imran'];
  const seen = new Set<string>();
  const out: Array<{ volunteer: number; query: string }> = [];
  for (let n = 0; out.length < count && n < count * 20; n++) {
    const volunteer = n % VOLUNTEERS;
    const parts: string[] = [];
    const pick = (n * 7919) % 97;
    if (pick % 2 === 0) parts.push('status=open');
    if (pick % 3 === 0) parts.push('unread=true');
    if (pick % 5 === 0) parts.push(`channel=${pick % 10 === 0 ? 'whatsapp' : 'sms'}`);
    if (pick % 7 === 0) parts.push(`ward=${ward(volunteer)}`);
    if (pick % 11 === 0) parts.push(`booth=${(ward(volunteer) + WARDS * (n % 6)) % BOOTHS}`);
    if (pick % 4 === 1) parts.push(`search=${encodeURIComponent(words[n % words.length]!)}`);
    parts.push(`page=${1 + (n % 5)}`);
    const query = parts.join('&');
    if (seen.has(`${volunteer}?${query}`)) continue;
    seen.add(`${volunteer}?${query}`);
    out.push({ volunteer, query });
  }
  return out;
}

async function main(): Promise<void> {
  mkdirSync('bench/out', { recursive: true });
  if (!pgUrl) for (const suffix of ['', '-wal', '-shm']) rmSync(`${sqliteFile}${suffix}`, { force: true });
  const setupDb = connect(databaseUrl);
  await migrateToLatest(setupDb);
  await setupDb.close();

  let base = await startServer();
  const password = 'bench password 1';
  const owner = await api(base, 'POST', '/auth/register', undefined, {
    name: 'Bench Office',
    email: `office.${Date.now()}@example.com`,
    password,
  });
  const ownerToken = String(owner.access_token);
  const workspaceId = Number((owner.user as { workspace_id: number }).workspace_id);
  const volunteerIds: number[] = [];
  const volunteerEmails: string[] = [];
  for (let j = 0; j < VOLUNTEERS; j++) {
    const email = `volunteer.${j}.${Date.now()}@example.com`;
    const user = await api(base, 'POST', '/users', ownerToken, {
      name: `Volunteer ${j}`,
      email,
      password,
      role: 'volunteer',
    });
    await api(base, 'PATCH', `/users/${String(user.id)}`, ownerToken, { coverage: { wards: [String(j)] } });
    volunteerIds.push(Number(user.id));
    volunteerEmails.push(email);
  }
  const tokens: string[] = [];
  for (const email of volunteerEmails)
    tokens.push(
      String((await api(base, 'POST', '/auth/login', undefined, { email, password })).access_token),
    );
  await fill(workspaceId, volunteerIds);
  // A fresh process on the filled database: its planner sees the statistics, and its memory starts clean.
  await stopServer();
  base = await startServer();
  // 1. The inbox, as a volunteer sees it, against GET /api.
  const queries = inboxQueries(SAMPLES, (v) => v);
  for (const q of queries.slice(0, 20))
    await timedGet(`${base}/conversations?${q.query}`, tokens[q.volunteer]);
  const inbox: number[] = [];
  const reference: number[] = [];
  let rows = 0;
  for (const q of queries) {
    const res = await timedGet(`${base}/conversations?${q.query}`, tokens[q.volunteer]);
    if (res.status !== 200) throw new Error(`GET /conversations?${q.query}: ${res.status} ${res.body}`);
    const page = (JSON.parse(res.body) as { data: { data: unknown[]; total: number } }).data;
    rows += page.data.length;
    if (process.env.BENCH_TRACE) console.log(`trace ${q.volunteer} ${q.query} ${page.total}`);
    inbox.push(res.ms);
    reference.push((await timedGet(`${base}`)).ms);
  }
  const staff: number[] = [];
  for (const q of queries.slice(0, Math.min(100, queries.length)))
    staff.push((await timedGet(`${base}/conversations?${q.query}`, ownerToken)).ms);
  const inboxStats = summary(inbox);
  const referenceStats = summary(reference);
  const staffStats = summary(staff);
  console.log(
    `1. volunteer inbox, ${inbox.length} distinct filtered requests (${rows.toLocaleString('en')} rows): p50 ${ms(inboxStats.p50)}, p99 ${ms(inboxStats.p99)}, max ${ms(inboxStats.max)}; GET /api p50 ${ms(referenceStats.p50)}, p99 ${ms(referenceStats.p99)}`,
  );

  // 2 and 3. Streams: memory, then latency.
  await new Promise((r) => setTimeout(r, 1000));
  const before = rssMb(server!);
  const streams: Stream[] = [];
  for (let i = 0; i < STREAMS; i++) streams.push(await openStream(base, ownerToken));
  await new Promise((r) => setTimeout(r, 2000));
  const withStreams = rssMb(server!);
  const perStream = ((withStreams - before) * 1024) / STREAMS;
  console.log(
    `2. ${STREAMS} streams open: server RSS ${before.toFixed(1)} MB before, ${withStreams.toFixed(1)} MB with them: ${perStream.toFixed(1)} KB per stream`,
  );

  const sentAt = new Map<string, number>();
  const posts: number[] = [];
  for (let k = 0; k < EVENTS; k++) {
    const marker = `bench-${k}`;
    const voter = 1 + ((k * 7919) % CONVERSATIONS);
    const t0 = performance.now();
    sentAt.set(marker, t0);
    const res = await fetch(`${base}/inbound`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ownerToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        channel: voter % 3 === 0 ? 'whatsapp' : 'sms',
        from: `+9193${String(voter).padStart(8, '0')}`,
        body: marker,
      }),
    });
    posts.push(performance.now() - t0);
    if (res.status !== 201) throw new Error(`POST /inbound: ${res.status} ${await res.text()}`);
    await new Promise((r) => setTimeout(r, 150 + ((k * 37) % 100)));
  }
  await new Promise((r) => setTimeout(r, 2000));
  const latencies: number[] = [];
  let missing = 0;
  for (const stream of streams)
    for (const [marker, t0] of sentAt) {
      const arrived = stream.arrivals.get(marker);
      if (arrived === undefined) missing++;
      else latencies.push(arrived - t0);
    }
  const afterEvents = rssMb(server!);
  for (const stream of streams) stream.close();
  const latencyStats = summary(latencies);
  const postStats = summary(posts);
  console.log(
    `3. ${EVENTS} inbound messages to ${STREAMS} streams: ${latencies.length.toLocaleString('en')} arrivals, ${missing} missing; POST to arrival p50 ${ms(latencyStats.p50)}, p99 ${ms(latencyStats.p99)}, max ${ms(latencyStats.max)}; the POST alone p50 ${ms(postStats.p50)}, p99 ${ms(postStats.p99)}; RSS after ${afterEvents.toFixed(1)} MB`,
  );

  await stopServer();
  if (pgUrl && !process.env.BENCH_KEEP) {
    const db = connect(pgUrl);
    await db.kysely.deleteFrom('workspaces').where('id', '=', workspaceId).execute();
    await db.close();
  }

  const lines = [
    new Date().toISOString(),
    '',
    `${dialect}: ${CONVERSATIONS.toLocaleString('en')} open conversations, ${MESSAGES.toLocaleString('en')} messages, ${VOLUNTEERS} volunteers, ${STREAMS} streams.`,
    '',
    '| measure | figure | reference (same run) | goal |',
    '| --- | --- | --- | --- |',
    `| volunteer inbox, ${inbox.length} distinct filtered requests | p50 ${ms(inboxStats.p50)}, p99 ${ms(inboxStats.p99)} | \`GET /api\` p50 ${ms(referenceStats.p50)}, p99 ${ms(referenceStats.p99)} | p99 <= 25 ms |`,
    `| staff inbox (every conversation), ${staff.length} requests, for the record | p50 ${ms(staffStats.p50)}, p99 ${ms(staffStats.p99)} | | |`,
    `| inbound message to its event on ${STREAMS} open streams (${latencies.length.toLocaleString('en')} arrivals, ${missing} missing) | p50 ${ms(latencyStats.p50)}, p99 ${ms(latencyStats.p99)} | the POST alone p50 ${ms(postStats.p50)}, p99 ${ms(postStats.p99)} | p99 <= 200 ms |`,
    `| server memory per open stream | ${perStream.toFixed(1)} KB (RSS ${before.toFixed(1)} -> ${withStreams.toFixed(1)} MB) | | stated |`,
  ];
  writeFileSync(`bench/out/conversations-${dialect}.md`, lines.join('\n') + '\n');
  console.log(lines.slice(2).join('\n'));
  if (missing > 0) process.exitCode = 1;
}

main().catch(async (error: unknown) => {
  console.error(error);
  await stopServer();
  process.exit(1);
});
