/**
 * npm run bench:field [-- --voters 1000000 --batches 20 --marks 500000 --streams 200 --live-marks 100]
 *
 * Field work at scale (issue 55), in this process over HTTP, on SQLite (a new file), or on PostgreSQL with
 * DATABASE_URL=postgres://... (a new database is made beside it and dropped after). `--voters` voters in 1,000
 * parts (one booth each), 30 to a roll page, two to a house, a fifth of them supporters:
 *   - visits: `--batches` batches of 500 visits (half by a volunteer held to their turf of two parts, half by a
 *     manager; each visit sets a tag, half also a support level), each POST /api/visits timed; the goal: p99 at
 *     most 1 s. Reference: the same 500 rows in one plain multi-row INSERT into visits.
 *   - turnout: `--marks` voters marked as voted (as the service keeps them), then GET /api/poll-day/turnout by
 *     booth, 5 times; the goal: at most 200 ms. Reference: the roll's own count by booth (SELECT booth_key,
 *     count(*) ... GROUP BY booth_key).
 *   - live: `--streams` event streams open (the booth board's), then `--live-marks` marks, one every 50 ms; for
 *     each mark and stream, the time from the POST to the event's arrival; the goal: p99 within 2 s. Reference:
 *     the POST's own time.
 * The figures go to bench/results/<date>-field-<dialect>.json and are printed.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import pino from 'pino';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { connect } from '../src/db/connect.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { createProviders } from '../src/providers/registry.ts';
import { percentile } from './reads.ts';
import { keepResults, openStream, scratchDatabase } from './server.ts';

const { values: args } = parseArgs({
  options: {
    voters: { type: 'string', default: '1000000' },
    batches: { type: 'string', default: '20' },
    marks: { type: 'string', default: '500000' },
    streams: { type: 'string', default: '200' },
    'live-marks': { type: 'string', default: '100' },
  },
});
const VOTERS = Number(args.voters);
const BATCHES = Number(args.batches);
const MARKS = Math.min(Number(args.marks), VOTERS);
const STREAMS = Number(args.streams);
const LIVE_MARKS = Number(args['live-marks']);
const pgBase = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const dialect = pgBase ? 'postgres' : 'sqlite';
const log = pino({ level: 'silent' });
const step = (what: string) => console.error(`${new Date().toISOString().slice(11, 19)} ${what}`);

const database = () => scratchDatabase('ces-field-', pgBase);

async function start(url: string) {
  const config = loadConfig({
    DATABASE_URL: url,
    LOG_LEVEL: 'silent',
    QUIET_HOURS: '',
    RATE_LIMIT_AUTHENTICATED_PER_MIN: '10000000',
    RATE_LIMIT_PUBLIC_PER_MIN: '10000000',
    EVENT_STREAMS_PER_USER: '1000',
    DB_STATEMENT_TIMEOUT_MS: '600000',
  });
  const db = connect(config.databaseUrl, config.database);
  await migrateToLatest(db);
  const app = await buildApp({ config, db, providers: createProviders(config, log) });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, db, base: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
}

type Started = Awaited<ReturnType<typeof start>>;

async function call(s: Started, method: string, path: string, token: string | undefined, body?: unknown) {
  const res = await fetch(`${s.base}${path}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as { data: Record<string, unknown> & { id: string } };
}

/** `count` voters: part (i % 1000) + 1 with its booth, serial (i / 1000) + 1, 30 to a page, 2 to a house. */
async function insertVoters(s: Started, ws: number, count: number) {
  const now = new Date().toISOString();
  const k = s.db.kysely;
  const columns = sql`workspace_id, name, name_key, phone, booth, booth_key, part_number, serial_number,
    page_number, house_number, household_key, support_level, created_at, updated_at`;
  // A fifth of the roll are supporters (1 or 2), a fifth unknown.
  if (s.db.dialect === 'postgres')
    await sql`INSERT INTO voters (${columns})
      SELECT ${ws}, 'Voter ' || i, 'voter ' || i, '+9190' || lpad(i::text, 8, '0'), 'Booth ' || (i % 1000),
        'booth ' || (i % 1000), i % 1000 + 1, i / 1000 + 1, (i / 1000) / 30 + 1, ((i / 1000) / 2 + 1)::text,
        'p:' || (i % 1000 + 1) || ':' || ((i / 1000) / 2 + 1), NULLIF(i % 5, 0), ${now}::timestamptz, ${now}::timestamptz
      FROM generate_series(0, ${count - 1}) AS i`.execute(k);
  else
    await sql`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ${count - 1})
      INSERT INTO voters (${columns})
      SELECT ${ws}, 'Voter ' || i, 'voter ' || i, '+9190' || substr('00000000' || i, -8), 'Booth ' || (i % 1000),
        'booth ' || (i % 1000), i % 1000 + 1, i / 1000 + 1, (i / 1000) / 30 + 1, CAST((i / 1000) / 2 + 1 AS text),
        'p:' || (i % 1000 + 1) || ':' || ((i / 1000) / 2 + 1), NULLIF(i % 5, 0), ${now}, ${now}
      FROM n`.execute(k);
  // As autovacuum leaves a loaded table (PostgreSQL's index-only scans need its visibility map).
  await sql`${sql.raw(s.db.dialect === 'postgres' ? 'VACUUM ANALYZE' : 'ANALYZE')}`.execute(k);
}

interface Office {
  token: string;
  ws: number;
  volunteer: string;
}

async function office(s: Started): Promise<Office> {
  const res = await call(s, 'POST', '/api/auth/register', undefined, {
    name: 'Bench Office',
    email: `bench-${randomUUID().slice(0, 8)}@example.org`,
    password: 'correct horse battery staple 7',
    phone: `+9198${String(Math.floor(Math.random() * 1e8)).padStart(8, '0')}`,
  });
  const data = res.data as unknown as { access_token: string; user: { workspace_id: number } };
  const email = `worker-${randomUUID().slice(0, 8)}@example.org`;
  const worker = await call(s, 'POST', '/api/users', data.access_token, {
    name: 'Booth Worker',
    email,
    password: 'correct horse battery staple 7',
    role: 'volunteer',
  });
  const login = await call(s, 'POST', '/api/auth/login', undefined, {
    email,
    password: 'correct horse battery staple 7',
  });
  return {
    token: data.access_token,
    ws: data.user.workspace_id,
    volunteer: (login.data as unknown as { access_token: string }).access_token,
    ...{ workerId: (worker.data as unknown as { id: number }).id },
  } as Office & { workerId: number };
}

/** The ids of a part's voters, in serial order. */
async function partVoters(s: Started, ws: number, part: number): Promise<number[]> {
  const rows = await s.db.kysely
    .selectFrom('voters')
    .select('id')
    .where('workspace_id', '=', ws)
    .where('part_number', '=', part)
    .orderBy('serial_number')
    .execute();
  return rows.map((r) => Number(r.id));
}

async function visits(s: Started, o: Office & { workerId: number }) {
  step('visits: the volunteer turf (parts 1 and 2)');
  await call(s, 'POST', '/api/turfs', o.token, {
    name: 'Part 1',
    filters: { part_number: 1 },
    assigned_to: [o.workerId],
  });
  await call(s, 'POST', '/api/turfs', o.token, {
    name: 'Part 2',
    filters: { part_number: 2 },
    assigned_to: [o.workerId],
  });
  const theirs = [...(await partVoters(s, o.ws, 1)), ...(await partVoters(s, o.ws, 2))];
  const others = await partVoters(s, o.ws, 500);
  const ms: number[] = [];
  for (let b = 0; b < BATCHES; b++) {
    const byVolunteer = b % 2 === 0;
    const pool = byVolunteer ? theirs : others;
    const batch = Array.from({ length: 500 }, (_, i) => ({
      client_id: randomUUID(),
      voter_id: pool[(b * 500 + i) % pool.length]!,
      outcome: i % 4 === 0 ? 'not_home' : 'met',
      tags_add: ['door 2026'],
      ...(byVolunteer || i % 2 ? {} : { support_level: 1 + (i % 5) }),
      visited_at: new Date(Date.now() - 60_000).toISOString(),
    }));
    const t0 = performance.now();
    const res = await call(s, 'POST', '/api/visits', byVolunteer ? o.volunteer : o.token, { visits: batch });
    ms.push(performance.now() - t0);
    const created = (res.data.visits as Array<{ status: string }>).filter(
      (v) => v.status === 'created',
    ).length;
    if (created !== 500) throw new Error(`batch ${b}: ${created} of 500 created`);
  }
  // Reference: the same number of rows, in one plain INSERT.
  const now = new Date().toISOString();
  const rows = Array.from({ length: 500 }, (_, i) => ({
    workspace_id: o.ws,
    client_id: randomUUID(),
    voter_id: others[i % others.length]!,
    user_id: null,
    outcome: 'met',
    visited_at: now,
    created_at: now,
  }));
  const ref: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    await s.db.kysely
      .insertInto('visits')
      .values(rows.map((r) => ({ ...r, client_id: randomUUID() })))
      .execute();
    ref.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  ref.sort((a, b) => a - b);
  return {
    batches: BATCHES,
    p50_ms: Math.round(percentile(ms, 50)),
    p99_ms: Math.round(percentile(ms, 99)),
    max_ms: Math.round(ms[ms.length - 1]!),
    reference_insert_500_median_ms: Math.round(ref[2]!),
  };
}

async function turnout(s: Started, o: Office) {
  step(`turnout: ${MARKS} voters marked`);
  const k = s.db.kysely;
  const ts = s.db.dialect === 'postgres' ? sql`now()` : sql`${new Date().toISOString()}`;
  // As the service keeps each voter's latest mark: every other voter voted, up to MARKS.
  await sql`INSERT INTO poll_voted (voter_id, workspace_id, voted, marked_at, booth_key, part_number, supporter)
    SELECT id, workspace_id, 1, ${ts}, booth_key, part_number, CASE WHEN support_level IN (1, 2) THEN 1 ELSE 0 END
    FROM voters WHERE workspace_id = ${o.ws} AND id % 2 = 0 ORDER BY id LIMIT ${MARKS}
    ON CONFLICT (voter_id) DO NOTHING`.execute(k);
  await sql`${sql.raw(s.db.dialect === 'postgres' ? 'VACUUM ANALYZE' : 'ANALYZE')}`.execute(k);
  const time = async (fn: () => Promise<unknown>) => {
    const ms: number[] = [];
    for (let i = 0; i < 6; i++) {
      const t0 = performance.now();
      await fn();
      if (i > 0) ms.push(performance.now() - t0);
    }
    ms.sort((a, b) => a - b);
    return { median: Math.round(ms[2]!), max: Math.round(ms[4]!) };
  };
  let groups = 0;
  const board = await time(async () => {
    const res = await call(s, 'GET', '/api/poll-day/turnout?group_by=booth', o.token);
    groups = (res.data.data as unknown[]).length;
  });
  if (groups !== Math.min(1000, VOTERS)) throw new Error(`turnout has ${groups} booths`);
  const reference = await time(() =>
    sql`SELECT booth_key, count(*) FROM voters WHERE workspace_id = ${o.ws} GROUP BY booth_key`.execute(k),
  );
  return {
    marks: MARKS,
    median_ms: board.median,
    max_ms: board.max,
    reference_count_by_booth_ms: reference.median,
    ratio: Math.round((board.median / Math.max(1, reference.median)) * 10) / 10,
  };
}

/** A poll_day.marked event's mark id. */
function markOf(block: string): string | undefined {
  return block.includes('event: poll_day.marked') ? /"id":"(mark_\d+)"/.exec(block)?.[1] : undefined;
}

async function live(s: Started, o: Office) {
  step(`live: ${STREAMS} streams, ${LIVE_MARKS} marks`);
  const streams = await Promise.all(
    Array.from({ length: STREAMS }, () => openStream(`${s.base}/api`, o.token, markOf)),
  );
  await new Promise((r) => setTimeout(r, 500));
  const voters = await partVoters(s, o.ws, 700);
  const sent = new Map<string, number>();
  const post: number[] = [];
  for (let i = 0; i < LIVE_MARKS; i++) {
    const t0 = performance.now();
    const res = await call(s, 'POST', '/api/poll-day/marks', o.token, {
      marks: [
        {
          client_id: randomUUID(),
          voter_id: voters[i % voters.length]!,
          voted: true,
          marked_at: new Date().toISOString(),
        },
      ],
    });
    post.push(performance.now() - t0);
    sent.set((res.data.marks as Array<{ id: string }>)[0]!.id, t0);
    await new Promise((r) => setTimeout(r, 50));
  }
  const deadline = performance.now() + 10_000;
  while (performance.now() < deadline && streams.some((st) => st.arrivals.size < sent.size))
    await new Promise((r) => setTimeout(r, 100));
  const delays: number[] = [];
  let missing = 0;
  for (const st of streams)
    for (const [id, at] of sent) {
      const arrived = st.arrivals.get(id);
      if (arrived === undefined) missing++;
      else delays.push(arrived - at);
    }
  for (const st of streams) st.close();
  delays.sort((a, b) => a - b);
  post.sort((a, b) => a - b);
  return {
    streams: STREAMS,
    marks: LIVE_MARKS,
    missing,
    p50_ms: Math.round(percentile(delays, 50)),
    p99_ms: Math.round(percentile(delays, 99)),
    reference_post_p50_ms: Math.round(percentile(post, 50)),
  };
}

async function main() {
  const store = await database();
  const s = await start(store.url);
  try {
    const o = (await office(s)) as Office & { workerId: number };
    step(`${dialect}: ${VOTERS} voters`);
    await insertVoters(s, o.ws, VOTERS);
    const figures = {
      dialect,
      voters: VOTERS,
      visits: await visits(s, o),
      turnout: await turnout(s, o),
      live: STREAMS > 0 ? await live(s, o) : undefined,
    };
    console.log(JSON.stringify(figures, null, 2));
    console.log(`kept in ${keepResults(`-field-${dialect}`, figures)}`);
  } finally {
    await s.app.close();
    await s.db.close();
    await store.drop();
  }
}

await main();
